"""RGB-D late fusion: a colour model's 2D labels averaged with a geometry model's (docs/method.md
M7 extended for RGB-D cameras; docs/levers.md, "Geometry as the 2D network's input", lever 64).

A *geometry model* is a model file (core.modelfile) whose 2D network was trained on the geometry
code of depth images (core.depth_code: log depth, the normal's downward and sideways components; an
HHA-like code, Gupta et al. ECCV 2014) in place of colour images; its metadata says so with
``input: depth_code`` (``scripts/set_arch.py --input depth_code``). With a frame's measured depth
(RGB-D camera) the fused 2D class distribution is

    p(c) = (1 − w) · softmax(colour S2D)(c) + w · softmax(geometry S2D)(c),

void excluded from both (core.fusion.class_probs), returned as log-probabilities so that the M7
rule (core.fusion.source_probs: S2D with S3D where the 3D point is valid) runs on it unchanged.
Frames without any valid measured depth keep the colour model's S2D as it was. The two networks
never train together: late fusion of an RGB and an HHA network, as Long et al. (FCN, CVPR 2015)
did on NYUDv2 by summing the two nets' scores, here as a weighted mean of their softmaxes.

Pure torch, no ROS. Used by core.inference.Segmenter (``geometry_model``), depth3dseg-eval
(``--geometry-model``) and the node (``geometry_model`` parameter).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, Optional, Union

import torch
import torch.nn.functional as F

from .classes import ClassSet
from .depth_code import depth_code
from .fusion import class_probs
from .geometry import scale_intrinsics
from .model import fold_batchnorm
from .modelfile import load_model

__all__ = ['HEADS', 'check_weight', 'fuse_2d', 'GeometryBranch', 'forward_rgbd']

#: which heads the late fusion averages: the 2D distributions only, or the 3D ones too
HEADS = ('2d', 'both')


def check_weight(value: object, where: str = 'geometry_weight') -> float:
    """The geometry model's weight ``w`` as a float in [0, 1]; ValueError naming ``where`` for a
    non-number, NaN, ±inf or a value outside [0, 1]."""
    try:
        w = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f'{where}={value!r} must be a number in [0, 1]') from None
    if isinstance(value, bool) or not math.isfinite(w) or not 0.0 <= w <= 1.0:
        raise ValueError(f'{where}={value!r} must be a number in [0, 1]')
    return w


def fuse_2d(
    seg2d: torch.Tensor,
    geo2d: torch.Tensor,
    w: float,
    void_id: Optional[int],
    has_depth: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The late-fused 2D log-probabilities (module docstring).

    Args:
        seg2d, geo2d: B×C×H×W float logits of the colour and the geometry model, same shape.
        w: the geometry model's weight in [0, 1] (check_weight).
        void_id: the void class (excluded from both softmaxes), or None.
        has_depth: optional B bool, the frames that have measured depth; the others keep ``seg2d``.
    Returns B×C×H×W float32: log p, clamped at log 1e-12 (finite; the void channel too).
    Raises ValueError for different shapes or a bad ``w``.
    """
    w = check_weight(w, 'w')
    if seg2d.shape != geo2d.shape:
        raise ValueError(
            f'geometry logits {tuple(geo2d.shape)} != colour logits {tuple(seg2d.shape)}'
        )
    p = class_probs(seg2d, void_id).mul_(1.0 - w)  # softmax's fresh tensors: in place
    fused = p.add_(class_probs(geo2d, void_id), alpha=w).clamp_min_(1e-12).log_()
    if has_depth is None or bool(has_depth.all()):
        return fused
    keep = has_depth.to(fused.device).view(-1, 1, 1, 1)
    return torch.where(keep, fused, seg2d.float())


class GeometryBranch:
    """A loaded geometry model, ready to fuse its 2D labels into a colour model's (module
    docstring).

    Args:
        model_file: a model file with ``meta['input'] == 'depth_code'``.
        weight: its weight w in the fused 2D distribution, [0, 1] (0.5: the plain mean).
        device: torch device of its forward pass (the colour model's).
        classes: the colour model's ClassSet; the geometry model must have the same class names.
        heads: '2d' (the 2D distributions are fused; the colour model's 3D net alone gives S3D)
            or 'both' (S3D too: the geometry model's 3D net runs on the measured cloud as well).
    Attributes: model (Depth3DSeg in eval mode, BatchNorm folded), meta, input_size (W, H), weight,
    path, heads. Raises FileNotFoundError / core.modelfile.ModelFileError for a bad file,
    ValueError for a file that is not a geometry model (naming its ``input``), other classes, a bad
    weight or heads.
    """

    def __init__(
        self,
        model_file: Union[str, Path],
        weight: float = 0.5,
        device: Union[str, torch.device] = 'cpu',
        classes: Optional[ClassSet] = None,
        heads: str = '2d',
    ):
        self.path = Path(model_file)
        self.weight = check_weight(weight)
        if heads not in HEADS:
            raise ValueError(f'geometry_heads={heads!r} must be one of {HEADS}')
        self.heads = heads
        if self.path.is_dir():  # FileNotFoundError: the file asked for is not there
            raise FileNotFoundError(
                f'geometry model {self.path} is a directory: give the model file in it (e.g. '
                f"{self.path / 'model.pt'})"
            )
        try:
            model, meta = load_model(self.path, map_location='cpu')
        except FileNotFoundError:
            raise FileNotFoundError(f'geometry model {self.path}: no such file') from None
        kind = meta.get('input', 'rgb')
        if kind != 'depth_code':
            raise ValueError(
                f"geometry model {self.path}: meta['input'] is {kind!r}, so it is not a geometry "
                "model: one is trained on scripts/geometry_input.py's code images with --set "
                'model.input=depth_code (docs/node.md, "RGB-D late fusion")'
            )
        names = ClassSet.from_dict(meta['classes']).names
        if classes is not None and names != classes.names:
            raise ValueError(
                f'geometry model {self.path}: classes {names} differ from the colour model\'s '
                f'{classes.names}'
            )
        self.meta = meta
        self.input_size = (int(meta['input_size'][0]), int(meta['input_size'][1]))
        self.device = torch.device(device)
        # inference form, as the Segmenter's: BatchNorm folded, channels-last (9 against 16 ms
        # for a 160x120 2D net on 2 CPU threads)
        self.model = fold_batchnorm(model.eval()).to(self.device)
        self.model = self.model.to(memory_format=torch.channels_last)
        self._mean = torch.tensor(meta['mean'], dtype=torch.float32, device=self.device)
        self._std = torch.tensor(meta['std'], dtype=torch.float32, device=self.device)

    @torch.no_grad()
    def logits(self, measured: torch.Tensor, K: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The geometry model's logits of measured depth.

        Args:
            measured: B×1×H×W float metres, registered to the colour network's input (0, NaN,
                ±inf = no data).
            K: B×3×3 (or 3×3) intrinsics at H×W, pixels.
        Returns {'seg2d': B×C×H×W float32 logits at H×W} and, with ``heads == 'both'``, 'seg3d'
        likewise (its 3D net on the cloud of the measured depth at its own size, its predicted
        depth in the holes). The code (core.depth_code, its box side for W) is quantised to 8
        bits, as the code images it trained on were stored, area-resized to the model's input
        size, normalised with its mean/std; the logits are resized back bilinearly. Raises
        ValueError from core.depth_code for bad shapes or K.
        """
        h, w = measured.shape[-2:]
        # no-data pixels (0, NaN, ±inf, < 0) need no cleaning: depth_code and the 3D net's
        # cloud (Depth3DSeg.forward) both take them as holes
        m = measured.to(self.device, torch.float32)
        K = K.to(self.device, torch.float32).expand(m.shape[0], 3, 3)
        code = torch.round(depth_code(m, K) * 255.0) / 255.0
        gw, gh = self.input_size
        if (h, w) != (gh, gw):
            mode = 'area' if (gh < h and gw < w) else 'bilinear'
            extra = {} if mode == 'area' else {'align_corners': False}
            code = F.interpolate(code, size=(gh, gw), mode=mode, **extra)
        x = (code - self._mean.view(1, 3, 1, 1)) / self._std.view(1, 3, 1, 1)
        x = x.contiguous(memory_format=torch.channels_last)
        if self.heads == 'both':
            mg = F.interpolate(m, size=(gh, gw), mode='nearest') if (h, w) != (gh, gw) else m
            out = self.model(x, scale_intrinsics(K, gw / w, gh / h), mg)
        else:
            out = self.model.forward_2d(x)
        res = {}
        for key in ('seg2d', 'seg3d'):
            if key in out:
                v = out[key].float()
                if v.shape[-2:] != (h, w):
                    v = F.interpolate(v, size=(h, w), mode='bilinear', align_corners=False)
                res[key] = v
        return res

    def fuse(
        self,
        out: Dict[str, torch.Tensor],
        measured: torch.Tensor,
        K: torch.Tensor,
        void_id: Optional[int],
    ) -> Dict[str, torch.Tensor]:
        """The colour model's outputs ``out`` (``seg2d`` and, from its 3D net, ``seg3d``: B×C×H×W
        logits) with ``seg2d`` (and with ``heads == 'both'`` ``seg3d``) late-fused with the
        geometry model's (fuse_2d) for the frames of ``measured`` (B×1×H×W m) that have valid
        depth. Returns a new dict (``out`` itself when nothing is fused); other keys unchanged."""
        valid = (torch.isfinite(measured) & (measured > 0)).flatten(1).any(1)
        if self.weight == 0.0 or not bool(valid.any()):
            return out
        geo = self.logits(measured, K)
        fused = dict(out)
        for key, g in geo.items():
            if key in out:
                fused[key] = fuse_2d(out[key], g.to(out[key].device), self.weight, void_id, valid)
        return fused


def forward_rgbd(
    model: torch.nn.Module,
    rgb_norm: torch.Tensor,
    K: torch.Tensor,
    measured: Optional[torch.Tensor] = None,
    geometry: Optional[GeometryBranch] = None,
    void_id: Optional[int] = 0,
) -> dict:
    """A colour model's M1–M3 forward pass (``model(rgb_norm, K, measured)``) with, when both
    ``measured`` (B×1×H×W m) and ``geometry`` are given, its outputs late-fused with the geometry
    model's (GeometryBranch.fuse): the batch path of depth3dseg-eval and its grids, as the
    Segmenter does per frame. Returns the model's output dict (a new dict when fused)."""
    out = model(rgb_norm, K, measured)
    if geometry is not None and measured is not None:
        out = geometry.fuse(out, measured, K, void_id)
    return out
