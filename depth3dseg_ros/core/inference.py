"""M7–M9 inference API: RGB (+ K) -> label image, confidence, depth map, labelled organized cloud.

`Segmenter` loads a model file (core.modelfile), picks the device, and runs batch-of-one inference
at the model's network input size (``meta['input_size']`` or an override):

1. preprocess: check the RGB image (H×W×3 uint8, RGB order), resize to the network size
   (cv2.INTER_AREA when shrinking, INTER_LINEAR otherwise), normalise into a preallocated buffer
   with the model file's mean/std; scale K to the network size (core.geometry.resize_intrinsics,
   case C18);
2. inference (torch.inference_mode): `Depth3DSeg` -> depth, S2D and, when K is known, the cloud of
   the predicted depth (M2) and S3D (M3);
3. postprocess: per-pixel class distribution of the requested source with the void channel
   excluded, its most probable class -> labels, that probability -> confidence (core.fusion, the
   one M7 rule that evaluation uses too); depth with NaN where invalid; points from the model's xyz
   (NaN where invalid).

label_source: '2d' (S2D), '3d' (S3D; pixels without a valid 3D point use S2D), 'fused' ((1 − w)·S2D
+ w·S3D probabilities where the 3D point is valid, w = the model file's arch ``fusion_w3d``; S2D
elsewhere).

Measured depth (RGB-D cameras): ``infer(..., depth=D)`` with a depth image registered to the colour
image builds the cloud (and so S3D and ``points``) from the measured depth where it is valid and
from the prediction in its holes; the returned ``depth`` is still the network's prediction. Without
K the 3D branch cannot run: the labels come from S2D and ``InferenceResult.label_source`` says '2d'
(a warning is logged once).

RGB-D late fusion: with ``geometry_model`` (a model file marked ``input: depth_code``,
core.late_fusion) and measured depth, the 2D distribution is the weighted mean of the colour
model's and the geometry model's (``geometry_weight``) before the M7 rule; frames without depth
are unchanged.

Backends (core.backends): ``backend='torch'`` runs the model file in PyTorch; ``'onnxruntime'``
runs the whole graph exported by depth3dseg-export (core.onnx_export) in ONNX Runtime; ``'auto'``
(default) takes ONNX Runtime when the model file is a ``.onnx``, or an up-to-date export sits
beside the ``.pt``, and onnxruntime imports. Preprocessing and the M7 label rule (core.fusion,
torch on the CPU) are the same for both, so the InferenceResult has the same fields and meaning.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import cv2
import numpy as np
import torch

from .arch import DEFAULT_ARCH
from .backends import BACKENDS, OrtGraph, choose_backend
from .classes import ClassSet
from .colour_balance import check_balance, grey_world_
from .fusion import LABEL_SOURCES, check_w3d, labels_confidence, source_probs
from .geometry import check_intrinsics_np, resize_intrinsics
from .imageops import check_rgb, measured_at
from .late_fusion import GeometryBranch
from .model import Depth3DSeg, fold_batchnorm
from .modelfile import load_model, make_meta
from .runtime import InferenceResult, default_num_threads, resolve_device

__all__ = [
    'Segmenter',
    'InferenceResult',
    'LABEL_SOURCES',
    'BACKENDS',
    'resolve_device',
    'default_num_threads',
]

_log = logging.getLogger(__name__)


class Segmenter:
    """M7–M9: a loaded model ready for per-frame inference (see the module docstring).

    Args:
        model_file: path of a model file (core.modelfile).
        device: 'auto' (cuda when available, else cpu), 'cpu', 'cuda' or 'cuda:N'.
        half: fp16 inference, CUDA only (ValueError on cpu: fp16 convolutions on CPU are slower and
            less exact than fp32).
        input_size: (W, H) network input size; default the model file's ``input_size``.
        num_threads: torch CPU threads (torch.set_num_threads, process-wide), CPU device only. None
            (default): the usable cores minus one (at least 1), leaving a core to the ROS executor,
            image decoding and publishing; on a loaded 2-core machine two OpenMP threads were
            10-50x slower than one (docs/model.md). 0 keeps torch's current setting.
        backend: 'auto', 'torch' or 'onnxruntime' (module docstring, core.backends.choose_backend).
            With ONNX Runtime, ``device`` picks the execution providers
            (core.backends.ort_providers: TensorRT and CUDA when installed and device is not 'cpu',
            CPU otherwise) and ``num_threads`` its intra-op threads (same default; the torch
            threads of the postprocess are set likewise).
        ort_split: ONNX Runtime only: 'auto' (default: on the CPU provider the 2D+depth net runs
            in ONNX Runtime and back-projection + 3D net in torch, core.ort_split, where each is
            faster; the whole graph on a GPU provider or for a file without the 3D weights),
            'split' or 'whole' (core.backends.OrtGraph). ``seg.ort.mode`` says which ran.
        geometry_model: optional geometry model file for the RGB-D late fusion (module docstring;
            torch, on ``device``); geometry_weight: its weight in [0, 1]; geometry_heads: '2d'
            or 'both' (core.late_fusion.GeometryBranch).
    Attributes: geometry (core.late_fusion.GeometryBranch | None), classes (ClassSet),
    input_size (W, H), device (torch.device; 'cpu' for ONNX
    Runtime, whose outputs come back as host arrays), meta (dict), backend ('torch' |
    'onnxruntime'), model_path (the file loaded), model (the Depth3DSeg in eval mode, BatchNorm
    folded into the convolutions, channels-last: inference only; None with ONNX Runtime), ort
    (core.backends.OrtGraph | None). Raises FileNotFoundError / ModelFileError (bad model file; an
    .onnx without depth3dseg metadata, naming the missing key), ValueError (device, half,
    input_size, backend).
    """

    def __init__(
        self,
        model_file: Union[str, Path],
        device: str = 'auto',
        half: bool = False,
        input_size: Optional[Tuple[int, int]] = None,
        num_threads: Optional[int] = None,
        backend: str = 'auto',
        ort_split: str = 'auto',
        geometry_model: Optional[Union[str, Path]] = None,
        geometry_weight: float = 0.5,
        geometry_heads: str = '2d',
    ):
        choice = choose_backend(model_file, backend, half, input_size)
        self.model_path = choice.path
        if choice.kind == 'onnxruntime':
            self._setup_ort(choice.path, device, input_size, num_threads, ort_split)
        else:
            model, meta = load_model(model_file, map_location='cpu')
            self._setup(model, meta, device, half, input_size, num_threads)
        if geometry_model is not None:
            self.geometry = GeometryBranch(
                geometry_model, geometry_weight, self.device, self.classes, geometry_heads
            )
        _log.info('Segmenter: %s backend, %s (%s)', self.backend, self.model_path, choice.why)

    @classmethod
    def from_model(
        cls,
        model: Depth3DSeg,
        meta: Dict[str, Any],
        device: str = 'cpu',
        half: bool = False,
        input_size: Optional[Tuple[int, int]] = None,
        num_threads: Optional[int] = None,
    ) -> 'Segmenter':
        """A Segmenter around a copy of an in-memory model (the caller's model is left untouched);
        `meta` is completed like a saved file's (make_meta)."""
        obj = cls.__new__(cls)
        obj.model_path = None
        meta = make_meta(model, meta)
        obj._setup(copy.deepcopy(model), meta, device, half, input_size, num_threads)
        return obj

    def _setup(
        self,
        model: Depth3DSeg,
        meta: Dict[str, Any],
        device: str,
        half: bool,
        input_size: Optional[Tuple[int, int]],
        num_threads: Optional[int],
    ) -> None:
        self.device = resolve_device(device)
        if half and self.device.type != 'cuda':
            raise ValueError(f'half=True needs a CUDA device, got device={str(self.device)!r}')
        if num_threads is not None and int(num_threads) < 0:
            raise ValueError(
                f'num_threads={num_threads} must be >= 0 (0 = keep the current setting)'
            )
        if self.device.type == 'cpu' and num_threads != 0:
            torch.set_num_threads(int(num_threads) if num_threads else default_num_threads())
        self.backend, self.ort = 'torch', None
        self._setup_meta(meta, input_size)
        self.half = bool(half)
        self.dtype = torch.float16 if half else torch.float32
        # Inference form: BatchNorm folded into the convolutions (eval statistics; same outputs,
        # one pass less per layer) and channels-last memory format (faster depthwise/1x1 convs: 25
        # -> 19 ms for the 2D+depth model at 320x240 on one CPU thread).
        self.model = fold_batchnorm(model.eval()).to(self.device, self.dtype)
        self.model = self.model.to(memory_format=torch.channels_last)
        self._setup_buffers(torch.channels_last)  # normalised input (HWC)

    def _setup_meta(self, meta: Dict[str, Any], input_size: Optional[Tuple[int, int]]) -> None:
        size = meta['input_size'] if input_size is None else input_size
        if len(size) != 2 or any(int(s) != s or s < 8 for s in size):
            raise ValueError(f'input_size={tuple(size)} must be (width, height) integers >= 8')
        self.input_size: Tuple[int, int] = (int(size[0]), int(size[1]))
        if meta.get('input', 'rgb') != 'rgb':
            raise ValueError(
                f"the model's meta input is {meta['input']!r}: a geometry model is not a colour "
                'model; give it as geometry_model beside one'
            )
        self.meta = meta
        self.classes = ClassSet.from_dict(meta['classes'])
        self.geometry: Optional[GeometryBranch] = None
        #: white balance of the input before mean/std (core.colour_balance; older files: none)
        self.balance = check_balance(meta.get('input_balance', 'none'), "meta['input_balance']")
        #: the weight of S3D in the fused labels (arch fusion_w3d; files without it: the mean)
        self.fusion_w3d = check_w3d(
            meta.get('arch', {}).get('fusion_w3d', DEFAULT_ARCH['fusion_w3d'])
        )

    def _setup_buffers(self, memory_format: torch.memory_format) -> None:
        w, h = self.input_size
        std = np.asarray(self.meta['std'], np.float32)
        self._scale = torch.tensor(
            1.0 / (255.0 * std), device=self.device, dtype=torch.float32
        ).view(3, 1, 1)
        self._offset = torch.tensor(
            np.asarray(self.meta['mean'], np.float32) / std,
            device=self.device,
            dtype=torch.float32,
        ).view(3, 1, 1)
        self._buf = torch.empty((1, 3, h, w), device=self.device, dtype=torch.float32).contiguous(
            memory_format=memory_format
        )
        self._warned_no_k = False

    def _setup_ort(
        self,
        path: Path,
        device: str,
        input_size: Optional[Tuple[int, int]],
        num_threads: Optional[int],
        ort_split: str = 'auto',
    ) -> None:
        """ONNX Runtime backend: session(s) (core.backends.OrtGraph: whole graph, or M1 in ONNX
        Runtime and M2 + M3 in torch, core.ort_split), metadata from the file, NCHW input buffer
        shared with the session's input."""
        if num_threads is not None and int(num_threads) < 0:
            raise ValueError(
                f'num_threads={num_threads} must be >= 0 (0 = keep the current setting)'
            )
        self.ort = OrtGraph(path, device=str(device), num_threads=num_threads, split=ort_split)
        self.backend, self.model, self.half, self.dtype = 'onnxruntime', None, False, torch.float32
        self.device = torch.device('cpu')  # postprocess (core.fusion) on the host arrays
        if num_threads != 0:
            torch.set_num_threads(int(num_threads) if num_threads else default_num_threads())
        meta = self.ort.meta
        if (
            input_size is not None
            and not meta['dynamic_size']
            and [int(v) for v in input_size] != list(meta['input_size'])
        ):
            raise ValueError(
                f"input_size={tuple(input_size)} but {path} was exported at fixed "
                f"{tuple(meta['input_size'])} (export with --dynamic)"
            )
        self._setup_meta(meta, input_size)
        self._setup_buffers(torch.contiguous_format)

    def _sync(self) -> None:
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)

    def _preprocess(
        self, rgb: np.ndarray, K: Optional[np.ndarray]
    ) -> Tuple[np.ndarray, Optional[np.ndarray], torch.Tensor]:
        check_rgb(rgb)
        h0, w0 = rgb.shape[:2]
        w, h = self.input_size
        Kn = None
        if K is not None:
            Kn = resize_intrinsics(check_intrinsics_np(K)[:, :3], (w0, h0), (w, h))
        if (w0, h0) != (w, h):
            interp = cv2.INTER_AREA if (w < w0 and h < h0) else cv2.INTER_LINEAR
            rgb = cv2.resize(rgb, (w, h), interpolation=interp)
        else:
            rgb = rgb.copy()  # the result never aliases the caller's buffer
        rgb = np.ascontiguousarray(rgb)
        t = torch.from_numpy(rgb).to(self.device, non_blocking=True).permute(2, 0, 1)
        self._buf[0].copy_(t)
        if self.balance == 'grey_world':  # the model file's input white balance
            grey_world_(self._buf[0], 255.0)
        self._buf[0].mul_(self._scale).sub_(self._offset)
        return rgb, Kn, self._buf if self.dtype == torch.float32 else self._buf.to(self.dtype)

    def _measured(self, depth: np.ndarray, rgb_shape: Tuple[int, ...]) -> torch.Tensor:
        """core.imageops.measured_at (the network size) as a 1×1×h×w tensor on the device."""
        d = measured_at(depth, rgb_shape, self.input_size)
        return torch.from_numpy(d).to(self.device)[None, None]

    def infer(
        self,
        rgb: np.ndarray,
        K: Optional[np.ndarray] = None,
        label_source: str = 'fused',
        depth: Optional[np.ndarray] = None,
    ) -> InferenceResult:
        """Run one frame (M7–M9).

        Args:
            rgb: H×W×3 uint8, RGB order, any size (resized to the network input size).
            K: 3×3 intrinsics (or 3×4 P) of `rgb` at its own size, or None (then no 3D branch, no
                points).
            label_source: '2d', '3d' or 'fused' (see the module docstring).
            depth: optional measured depth, H×W float metres registered to `rgb` (same size; NaN, 0
                or negative = no data); used for the cloud where valid (module docstring). Ignored
                without K.
        Returns: InferenceResult at the network input size.
        Raises: ValueError for a bad image, K (shape, fx/fy <= 0, non-finite), depth (dtype, size)
            or label_source.
        """
        if label_source not in LABEL_SOURCES:
            raise ValueError(f'label_source={label_source!r} must be one of {LABEL_SOURCES}')
        t0 = time.perf_counter()
        measured = (
            self._measured(depth, rgb.shape) if depth is not None and K is not None else None
        )
        rgb_net, Kn, x = self._preprocess(rgb, K)
        self._sync()
        t1 = time.perf_counter()
        with torch.inference_mode():
            Kt = None if Kn is None else torch.as_tensor(Kn, dtype=torch.float32)[None]
            if self.ort is not None:
                out = self.ort.forward(x, Kn, measured)
            elif Kt is None:
                out = self.model.forward_2d(x)
            else:
                Kt = Kt.to(self.device)  # M2 in fp32
                out = self.model(x, Kt) if measured is None else self.model(x, Kt, measured)
            if self.geometry is not None and measured is not None:
                out = self.geometry.fuse(out, measured, Kt, self.classes.void_id)
            self._sync()
            t2 = time.perf_counter()
            source = label_source
            if Kn is None and source != '2d':
                if not self._warned_no_k:
                    _log.warning(
                        'no K given: the 3D branch cannot run, labels come from the 2D head '
                        "(label_source %r -> '2d')",
                        label_source,
                    )
                    self._warned_no_k = True
                source = '2d'
            depth = out['depth'][0, 0].float()
            valid = out['valid'][0, 0] if 'valid' in out else torch.isfinite(depth) & (depth > 0)
            all_valid = bool(valid.all())
            p = source_probs(
                out['seg2d'],
                out.get('seg3d'),
                None if all_valid else valid[None, None],
                source,
                self.classes.void_id,
                inplace=True,
                w3d=self.fusion_w3d,
            )  # M7, the rule core.metrics uses too
            lab, conf = labels_confidence(p, inplace=True)
            lab, conf = lab[0], conf[0]
            nan = float('nan')
            depth_np = (depth if all_valid else depth.masked_fill(~valid, nan)).cpu().numpy()
            points = None
            if 'xyz' in out:
                xyz = out['xyz'][0].float().permute(1, 2, 0)
                if not all_valid:
                    xyz = xyz.masked_fill(~valid.unsqueeze(-1), nan)
                points = xyz.contiguous().cpu().numpy()
            labels = lab.cpu().numpy().astype(self.classes.label_dtype)
            meas_np = out['measured'][0, 0].cpu().numpy() if 'measured' in out else None
            conf_np = conf.cpu().numpy().astype(np.float32, copy=False)
        t3 = time.perf_counter()
        timings = {
            'preprocess': (t1 - t0) * 1e3,
            'inference': (t2 - t1) * 1e3,
            'postprocess': (t3 - t2) * 1e3,
        }
        return InferenceResult(
            labels=labels,
            confidence=conf_np,
            depth=depth_np,
            K=Kn,
            points=points,
            rgb=rgb_net,
            timings=timings,
            label_source=source,
            measured=meas_np,
        )

    def warmup(
        self,
        runs: int = 2,
        with_k: bool = True,
        label_source: str = 'fused',
        image_size: Optional[Tuple[int, int]] = None,
    ) -> None:
        """Run `runs` inferences on a grey frame (allocator, cuDNN autotune, lazy init) before real
        use.

        Args:
            runs: number of inferences.
            with_k: give the frame a K (the 3D branch runs) or not (the 2D-only path runs).
            label_source: as for `infer`.
            image_size: (W, H) of the grey frame (default the network input size); a camera-size
                frame also warms the resize.
        A warm-up without K neither logs the once-only "no K given" warning nor uses it up: the
        first real frame without K still warns (the flag is restored afterwards; do not call this
        while another thread runs `infer`).
        """
        w, h = self.input_size if image_size is None else (int(image_size[0]), int(image_size[1]))
        K = np.array([[w, 0, w / 2], [0, w, h / 2], [0, 0, 1]], np.float64) if with_k else None
        warned = self._warned_no_k
        self._warned_no_k = True  # warm-up frames are not a camera without CameraInfo
        try:
            for _ in range(runs):
                self.infer(np.full((h, w, 3), 128, np.uint8), K, label_source)
        finally:
            self._warned_no_k = warned
