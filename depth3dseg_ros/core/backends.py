"""Inference backends of core.inference.Segmenter: PyTorch (the model file) or ONNX Runtime (an
exported .onnx, core.onnx_export).

``backend='auto'`` picks ONNX Runtime when ``onnxruntime`` imports and either the model file is a
``.onnx`` or an exported ``<stem>.onnx`` sits beside the ``.pt`` whose ``source_sha256`` metadata
matches the .pt's bytes (a stale export beside a retrained .pt is not used: torch runs it, with a
warning) and whose size fits; torch otherwise (also for ``half=True``: the ONNX graph is float32).
``'torch'`` and ``'onnxruntime'`` force the choice and raise ValueError when it cannot be honoured.

ONNX Runtime execution providers: TensorRT and CUDA when the installed onnxruntime has them (the
``onnxruntime-gpu`` wheel, docs/deployment.md) and the device is not 'cpu'; CPU otherwise. Threads:
like the torch path, ``intra_op_num_threads`` = usable cores minus one by default (``num_threads``;
0 leaves ONNX Runtime's default), one inter-op thread, sequential execution.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    'BACKENDS',
    'BackendChoice',
    'choose_backend',
    'ort_available',
    'ort_providers',
    'select_providers',
    'provider_entry',
    'GPU_PROVIDERS',
    'OrtGraph',
    'SPLIT_MODES',
    'SPLIT_ENV',
    'session_options',
]

BACKENDS = ('auto', 'torch', 'onnxruntime')
_log = logging.getLogger(__name__)


def ort_available() -> bool:
    """True when ``import onnxruntime`` works."""
    try:
        import onnxruntime  # noqa: F401  (availability probe)
    except ImportError:
        return False
    return True


@dataclass
class BackendChoice:
    """kind: 'torch' or 'onnxruntime'; path: the file that backend loads; why: one line for the
    log."""

    kind: str
    path: Path
    why: str


def _fits(meta: Dict[str, Any], input_size: Optional[Tuple[int, int]]) -> bool:
    return (
        input_size is None
        or bool(meta['dynamic_size'])
        or list(input_size) == list(meta['input_size'])
    )


def choose_backend(
    model_file: Union[str, Path],
    backend: str = 'auto',
    half: bool = False,
    input_size: Optional[Tuple[int, int]] = None,
) -> BackendChoice:
    """Decide which backend runs ``model_file`` (module docstring).

    Raises ValueError for an unknown backend, 'torch' with a .onnx file, 'onnxruntime' without
    onnxruntime / without an exported .onnx / with half=True / with an input_size a fixed-size
    graph does not have; FileNotFoundError / ModelFileError from reading the .onnx metadata.
    """
    from .onnx_export import read_onnx_meta, sha256_file

    if backend not in BACKENDS:
        raise ValueError(f'backend={backend!r} must be one of {BACKENDS}')
    path = Path(model_file)
    is_onnx = path.suffix.lower() == '.onnx'
    if is_onnx:
        if backend == 'torch':
            raise ValueError(
                f"backend='torch' cannot run the ONNX file {path}: give the .pt model file"
            )
        if not ort_available():
            raise ValueError(
                f'{path} is an ONNX file but onnxruntime is not installed (pip install '
                'onnxruntime, or onnxruntime-gpu: docs/deployment.md)'
            )
        if half:
            raise ValueError('half=True needs the torch backend (the ONNX graph is float32)')
        meta = read_onnx_meta(path)
        if not _fits(meta, input_size):
            raise ValueError(
                f"input_size={tuple(input_size)} but {path} was exported at fixed "
                f"{tuple(meta['input_size'])} (export with --dynamic)"
            )
        return BackendChoice('onnxruntime', path, 'model file is .onnx')
    if backend == 'torch':
        return BackendChoice('torch', path, "backend='torch'")
    beside = path.with_suffix('.onnx')
    if backend == 'onnxruntime':
        if half:
            raise ValueError('half=True needs the torch backend (the ONNX graph is float32)')
        if not ort_available():
            raise ValueError(
                "backend='onnxruntime' but onnxruntime is not installed (pip install onnxruntime)"
            )
        if not beside.is_file():
            raise ValueError(
                f"backend='onnxruntime' but no exported {beside.name} beside {path} "
                f'(depth3dseg-export {path} -o {beside})'
            )
        meta = read_onnx_meta(beside)
        if not _fits(meta, input_size):
            raise ValueError(
                f"input_size={tuple(input_size)} but {beside} was exported at fixed "
                f"{tuple(meta['input_size'])} (export with --dynamic)"
            )
        if path.is_file() and meta.get('source_sha256') != sha256_file(path):
            _log.warning(
                '%s was exported from another %s (source_sha256 differs): running it anyway '
                "(backend='onnxruntime')",
                beside,
                path.name,
            )
        return BackendChoice('onnxruntime', beside, "backend='onnxruntime'")
    # auto
    if half or not beside.is_file() or not ort_available():
        why = (
            'half=True'
            if half
            else (
                f'no {beside.name} beside it'
                if not beside.is_file()
                else 'onnxruntime not installed'
            )
        )
        return BackendChoice('torch', path, f'auto: {why}')
    try:
        meta = read_onnx_meta(beside)
    except ValueError as exc:
        _log.warning('auto backend: %s not usable (%s): torch runs %s', beside, exc, path.name)
        return BackendChoice('torch', path, f'auto: {beside.name} not usable')
    if path.is_file() and meta.get('source_sha256') != sha256_file(path):
        _log.warning(
            'auto backend: %s was exported from another %s (source_sha256 differs, stale '
            'export?): torch runs it; re-export with depth3dseg-export',
            beside,
            path.name,
        )
        return BackendChoice('torch', path, f'auto: {beside.name} is stale')
    if not _fits(meta, input_size):
        return BackendChoice(
            'torch', path, f'auto: {beside.name} has a fixed size other than input_size'
        )
    return BackendChoice('onnxruntime', beside, f'auto: exported {beside.name} beside it')


#: the GPU execution providers of the onnxruntime-gpu wheel, by short name, in preference order
GPU_PROVIDERS = {'tensorrt': 'TensorrtExecutionProvider', 'cuda': 'CUDAExecutionProvider'}


def provider_entry(
    kind: str, device_id: int = 0, fp16: bool = False, trt_cache: Optional[str] = None
) -> Tuple[str, Dict[str, Any]]:
    """One ``(provider name, provider options)`` entry of an InferenceSession's ``providers`` list.

    kind: 'tensorrt' or 'cuda' (GPU_PROVIDERS). TensorRT: ``device_id``, ``trt_fp16_enable`` (=
    fp16: TensorRT may then run layers in float16; the graph's inputs and outputs stay float32)
    and, with ``trt_cache`` (a directory), ``trt_engine_cache_enable`` + ``trt_engine_cache_path``
    (the engine is built once, minutes, and reloaded). CUDA: ``device_id`` only; the CUDA provider
    has no float16 switch (it runs the graph's float32 kernels), so fp16=True is a ValueError
    there. Raises ValueError for an unknown kind or a negative device_id.
    """
    if kind not in GPU_PROVIDERS:
        raise ValueError(f'provider kind={kind!r} must be one of {sorted(GPU_PROVIDERS)}')
    if int(device_id) < 0:
        raise ValueError(f'device_id={device_id} must be >= 0')
    opts: Dict[str, Any] = {'device_id': int(device_id)}
    if kind == 'cuda':
        if fp16:
            raise ValueError(
                'the CUDA execution provider has no fp16 option (float32 graph): use '
                "kind='tensorrt' with fp16=True"
            )
        return GPU_PROVIDERS['cuda'], opts
    opts['trt_fp16_enable'] = bool(fp16)
    if trt_cache:
        opts['trt_engine_cache_enable'] = True
        opts['trt_engine_cache_path'] = str(trt_cache)
    return GPU_PROVIDERS['tensorrt'], opts


def select_providers(
    available: Sequence[str],
    device: str = 'auto',
    fp16: bool = False,
    trt_cache: Optional[str] = None,
) -> List[Any]:
    """Execution providers for ``device`` given the provider names this onnxruntime has
    (``available``, ort.get_available_providers()); pure, no import of onnxruntime.

    'cpu' -> ['CPUExecutionProvider']; 'auto' -> TensorRT (fp16 per ``fp16``), CUDA (those
    available) then CPU as the fallback for operators they do not take; 'cuda' / 'cuda:N' -> the
    same on device N, ValueError when neither GPU provider is available. Raises ValueError for
    another device string.
    """
    dev = str(device)
    if dev == 'cpu':
        return ['CPUExecutionProvider']
    if dev not in ('auto', 'cuda') and not dev.startswith('cuda:'):
        raise ValueError(f"device={device!r} is not 'auto', 'cpu', 'cuda' or 'cuda:N'")
    try:
        gpu_id = int(dev.split(':', 1)[1]) if dev.startswith('cuda:') else 0
    except ValueError:
        raise ValueError(f"device={device!r} is not 'auto', 'cpu', 'cuda' or 'cuda:N'") from None
    have = set(available)
    out: List[Any] = []
    if GPU_PROVIDERS['tensorrt'] in have:
        out.append(provider_entry('tensorrt', gpu_id, fp16, trt_cache))
    if GPU_PROVIDERS['cuda'] in have:
        out.append(provider_entry('cuda', gpu_id))
    if dev != 'auto' and not out:
        raise ValueError(
            f'device={device!r} but this onnxruntime has no CUDA provider (available: '
            f'{sorted(have)}; install onnxruntime-gpu, docs/deployment.md)'
        )
    return out + ['CPUExecutionProvider']


def ort_providers(device: str = 'auto') -> List[Any]:
    """`select_providers` for the installed onnxruntime (TensorRT in float32)."""
    import onnxruntime as ort

    return select_providers(ort.get_available_providers(), device)


SPLIT_MODES = ('auto', 'split', 'whole')
#: environment variable that replaces split='auto' (e.g. ``whole`` for a node started by a launch
#: file: the node has no parameter for it)
SPLIT_ENV = 'DEPTH3DSEG_ORT_SPLIT'


def session_options(num_threads: Optional[int] = None) -> Any:
    """ONNX Runtime SessionOptions of every depth3dseg session: ``intra_op_num_threads`` =
    ``num_threads`` (None: usable cores minus one, core.runtime.default_num_threads; 0: ONNX
    Runtime's default), one inter-op thread, sequential execution, all graph optimisations, and no
    idle spinning of the intra-op pool (``session.intra_op.allow_spinning`` = 0): on a 2-core
    machine a spinning worker thread takes the core the camera driver / publisher needs (with one
    thread there is no pool and it makes no difference). Raises ValueError for num_threads < 0."""
    import onnxruntime as ort

    from .runtime import default_num_threads

    if num_threads is not None and int(num_threads) < 0:
        raise ValueError(f'num_threads={num_threads} must be >= 0 (0 = ONNX Runtime default)')
    so = ort.SessionOptions()
    so.intra_op_num_threads = default_num_threads() if num_threads is None else int(num_threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry('session.intra_op.allow_spinning', '0')
    so.add_session_config_entry('session.inter_op.allow_spinning', '0')
    return so


class OrtGraph:
    """An ONNX Runtime session over a depth3dseg ONNX file (core.onnx_export).

    Args: path (.onnx); device (see ort_providers); num_threads: intra-op threads (None: usable
    cores minus one; 0: ONNX Runtime's default; session_options); split: 'auto' (default: 'split'
    when only the CPU provider runs, the file carries the 3D net's weights and ``onnx`` imports;
    'whole' otherwise; the environment variable DEPTH3DSEG_ORT_SPLIT, when set, replaces 'auto'),
    'split' (M1 in ONNX Runtime, M2 + M3 in torch: core.ort_split; ValueError
    when the file has no ``pointnet_state`` or a GPU provider was chosen) or 'whole' (the whole
    graph in ONNX Runtime).
    Attributes: meta (read_onnx_meta), session (of the whole graph, or of the 2D+depth subgraph
    when split), providers (those in use), path, mode ('split' | 'whole'), on_gpu, split_model
    (split: the Depth3DSeg whose ``net`` is core.ort_split.OrtNet2D; None for the whole graph).
    ``run(rgb, K, measured_depth)`` takes numpy float32 1×3×H×W, 1×3×3, 1×1×H×W and returns {name:
    ndarray} for core.onnx_graph.OUTPUT_NAMES (either mode); ``forward`` is the Segmenter's call.
    Raises FileNotFoundError, ModelFileError (file without the metadata), ValueError (device,
    split, num_threads), onnxruntime errors.
    """

    def __init__(
        self,
        path: Union[str, Path],
        device: str = 'auto',
        num_threads: Optional[int] = None,
        split: str = 'auto',
    ):
        import onnxruntime as ort

        from .onnx_export import read_onnx_meta
        from .onnx_graph import OUTPUT_NAMES
        from .ort_split import POINTNET_KEY, net2d_onnx, split_model

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f'ONNX model file not found: {self.path}')
        if split == 'auto' and os.environ.get(SPLIT_ENV):
            split = os.environ[SPLIT_ENV]  # deployment override (the node has no parameter for it)
        if split not in SPLIT_MODES:
            raise ValueError(f'split={split!r} must be one of {SPLIT_MODES}')
        so = session_options(num_threads)
        providers = ort_providers(device)
        self.meta = read_onnx_meta(self.path)
        cpu_only = providers == ['CPUExecutionProvider']
        has_3d = POINTNET_KEY in self.meta
        code_input = bool(self.meta.get('arch', {}).get('code_input', False))
        if split == 'split' and code_input:
            raise ValueError(
                f"split='split': {self.path.name} is an RGB-D input model (arch code_input), "
                "whose 2D net takes the measured depth's code; it runs as one whole graph"
            )
        if split == 'split' and not (cpu_only and has_3d):
            raise ValueError(
                f"split='split' needs the CPU provider only (got {providers}) and a file with "
                f"'{POINTNET_KEY}' metadata (re-export {self.path.name} with depth3dseg-export)"
            )
        if split == 'auto':
            split = 'split' if cpu_only and has_3d and not code_input and _has_onnx() else 'whole'
        self.mode = split
        self.split_model = None
        if self.mode == 'split':
            sub, cut = net2d_onnx(self.path)
            self.session = ort.InferenceSession(sub, so, providers=providers)
            self.split_model = split_model(self.session, self.meta, cut)
        else:
            self.session = ort.InferenceSession(str(self.path), so, providers=providers)
        self.providers = self.session.get_providers()
        self.on_gpu = self.providers[0] != 'CPUExecutionProvider'
        self._outputs = list(OUTPUT_NAMES)

    def run(
        self, rgb: np.ndarray, K: np.ndarray, measured_depth: np.ndarray
    ) -> Dict[str, np.ndarray]:
        """Run the graph: rgb 1×3×H×W, K 1×3×3, measured_depth 1×1×H×W (float32 numpy; all-NaN
        measured depth = none) -> {OUTPUT_NAMES name: ndarray} (split mode: the same values from
        the 2D+depth session and the torch 3D net)."""
        if self.mode == 'whole':
            res = self.session.run(
                self._outputs, {'rgb': rgb, 'K': K, 'measured_depth': measured_depth}
            )
            return dict(zip(self._outputs, res))
        import torch

        with torch.inference_mode():
            out = self.split_model(
                torch.from_numpy(rgb), torch.from_numpy(K), torch.from_numpy(measured_depth)
            )
        return {k: out[k].numpy() for k in self._outputs}

    def forward(self, x: Any, Kn: Optional[np.ndarray], measured: Optional[Any]) -> Dict[str, Any]:
        """The Segmenter's call: x 1×3×H×W float32 CPU torch tensor (normalised), Kn 3×3 at H×W or
        None, measured 1×1×H×W float32 torch tensor (m) or None -> the torch model's output dict
        (CPU tensors): depth, seg2d, and with K also seg3d, xyz, valid (+ measured when given).
        Without K only M1 runs in split mode; the whole graph runs with a nominal K and only depth
        and seg2d are kept."""
        import torch

        if self.mode == 'split':
            if Kn is None:
                return self.split_model.forward_2d(x)
            Kt = torch.as_tensor(Kn, dtype=torch.float32).unsqueeze(0)
            return (
                self.split_model(x, Kt) if measured is None else self.split_model(x, Kt, measured)
            )
        h, w = x.shape[-2:]
        # no K: a nominal camera, the depth head's own calibration camera when it has one (so
        # its depth comes out unscaled, as Depth3DSeg.forward_2d gives it)
        from depth3dseg_ros.core.arch import DEFAULT_ARCH

        f = self.meta['arch'].get('depth_focal', DEFAULT_ARCH['depth_focal']) * h or w
        K = Kn if Kn is not None else np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]])
        md = (
            np.full((1, 1, h, w), np.nan, np.float32)
            if measured is None
            else measured.cpu().numpy()
        )
        o = self.run(x.numpy(), np.asarray(K, np.float32)[None], md)
        keep = (
            ('depth', 'seg2d')
            if Kn is None
            else ('depth', 'seg2d', 'seg3d', 'xyz', 'valid')
            + (() if measured is None else ('measured',))
        )
        return {k: torch.from_numpy(o[k]) for k in keep}


def _has_onnx() -> bool:
    try:
        import onnx  # noqa: F401  (the split cuts the 2D+depth subgraph with onnx.utils)
    except ImportError:
        return False
    return True
