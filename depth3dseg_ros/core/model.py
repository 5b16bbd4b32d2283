"""M1 DepthSegNet (shared encoder, depth head in metres, 2D segmentation head) and the combined
M1+M2+M3 model `Depth3DSeg` (RGB -> depth -> organized cloud -> 3D segmentation).

Plain torch (no torchvision/timm). The encoder is MobileNetV2-style (inverted residual blocks,
Sandler et al. 2018, "MobileNetV2: Inverted Residuals and Linear Bottlenecks") with a width
multiplier; the decoder is a light FPN (Lin et al. 2017) top-down path to 1/4 resolution plus a
U-Net skip to 1/2, shared by the two heads; each head is one depthwise-separable block and a 1×1
conv at 1/2 resolution, bilinearly upsampled to the input size.

Depth activation: ``depth = min_depth + (max_depth - min_depth) * sigmoid(x)``. Chosen over
softplus because it makes the configured range a hard guarantee (the depth is always > 0, so every
pixel back-projects to a valid point in M2, and never beyond ``max_depth``, e.g. the 16UC1 sensor
range the labels came from), and its bias can be initialised to a typical indoor depth
(``init_depth``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .arch import DEFAULT_ARCH, check_arch
from .code_stream import CodeStream
from .depth_calibration import focal_depth
from .depth_code import depth_code
from .efficientnet_lite import EfficientNetLite0
from .encoder import _TAPS, Encoder, _cbr, _sep
from .geometry import backproject
from .lowpass import InputLowPass
from .model_tools import count_flops, count_params, fold_batchnorm
from .pointnet import PointSegNet

__all__ = [
    'DepthSegNet',
    'Depth3DSeg',
    'DEFAULT_ARCH',
    'check_arch',
    'focal_depth',
    'fold_batchnorm',
    'count_flops',
    'count_params',
]


def _up(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, size=ref.shape[-2:], mode='bilinear', align_corners=False)


class DepthSegNet(nn.Module):
    """M1: RGB (normalised) -> depth map (metres) and 2D segmentation logits, one shared encoder.

    Args:
        num_classes: C = len(ClassSet); channel i = class id i, void channel included.
        width: encoder width multiplier (MobileNetV2 alpha). depth_mult: repeats multiplier per
            stage.
        dec_ch: FPN channels at 1/4 (half of it at 1/2). head_ch: channels of each head's block.
        min_depth, max_depth: output range in metres (0 < min_depth < max_depth).
        init_depth: depth the untrained head outputs (bias initialisation), metres.
        input_blur: σ px of a fixed Gaussian blur of the colour input (core.lowpass; 0 = none).
        code_input: the encoder also takes the 3-channel geometry code of measured depth
            (core.depth_code; RGB-D input): its stem has 6 input channels instead of 3.
        code_stream: with code_input, the code goes through its own encoder instead, joined to
            the colour encoder at each tap (core.code_stream; the stem keeps 3 channels).
        encoder: 'mobilenet_v2' (core.encoder, sized by width and depth_mult) or
            'efficientnet_lite0' (core.efficientnet_lite, ImageNet-pretrainable; colour only).
    forward(rgb_norm B×3×H×W float, code B×3×H×W float in [0, 1] or None) -> {'depth': B×1×H×W
    metres in (min_depth, max_depth), 'seg2d': B×C×H×W logits}; any H, W >= 2 (outputs have the
    input size). Without a code a code_input net sees zeros (no depth). Raises ValueError for an
    input that is not B×3×H×W floating point, or a code not of the input's shape.
    """

    def __init__(
        self,
        num_classes: int,
        width: float = 1.0,
        depth_mult: float = 1.0,
        dec_ch: int = 64,
        head_ch: int = 32,
        min_depth: float = 0.1,
        max_depth: float = 10.0,
        init_depth: float = 3.0,
        input_blur: float = 0.0,
        code_input: bool = False,
        code_stream: bool = False,
        encoder: str = 'mobilenet_v2',
    ):
        super().__init__()
        if not 0 < min_depth < max_depth:
            raise ValueError(
                f'need 0 < min_depth < max_depth, got min_depth={min_depth} max_depth={max_depth}'
            )
        if not min_depth < init_depth < max_depth:
            raise ValueError(f'init_depth={init_depth} must lie in (min_depth, max_depth)')
        self.num_classes = int(num_classes)
        self.min_depth, self.max_depth = float(min_depth), float(max_depth)
        self.lowpass = InputLowPass(input_blur)
        self.code_input = bool(code_input)
        stem_code = self.code_input and not code_stream  # the code widens the stem
        if encoder == 'efficientnet_lite0':
            if self.code_input:
                raise ValueError('code_input needs the mobilenet_v2 encoder')
            self.encoder = EfficientNetLite0()
            c2, c4, c8, c16, c32 = self.encoder.channels  # its taps' channels
        elif encoder == 'mobilenet_v2':
            self.encoder = Encoder(width, depth_mult, 6 if stem_code else 3)
            c2, c4, c8, c16, c32 = [self.encoder.channels[i] for i in _TAPS]
        else:
            raise ValueError(f'encoder={encoder!r} must be mobilenet_v2 or efficientnet_lite0')
        self.code_stream = (
            CodeStream(Encoder(width, depth_mult, 3), _TAPS)
            if self.code_input and code_stream
            else None
        )
        half = max(8, dec_ch // 2)
        self.lat = nn.ModuleList([_cbr(c, dec_ch) for c in (c4, c8, c16, c32)])
        self.smooth = nn.ModuleList([_sep(dec_ch, dec_ch) for _ in range(3)])
        self.reduce4 = _cbr(dec_ch, half)
        self.lat2 = _cbr(c2, half)
        self.fuse2 = _sep(half, half)
        self.depth_head = nn.Sequential(_sep(half, head_ch), nn.Conv2d(head_ch, 1, 1))
        self.seg_head = nn.Sequential(_sep(half, head_ch), nn.Conv2d(head_ch, num_classes, 1))
        p = (init_depth - min_depth) / (max_depth - min_depth)
        nn.init.zeros_(self.depth_head[-1].weight)
        nn.init.constant_(self.depth_head[-1].bias, math.log(p / (1 - p)))

    def forward(
        self, rgb_norm: torch.Tensor, code: Optional[torch.Tensor] = None
    ) -> Dict[str, torch.Tensor]:
        """M1 on a batch.

        rgb_norm B×3×H×W float (normalised with the model file's mean/std), any H, W >= 2; code
        (code_input nets only; ignored otherwise) B×3×H×W float in [0, 1] or None (zeros) ->
        dict(depth B×1×H×W float m in (min_depth, max_depth), seg2d B×C×H×W float logits), both at
        the input size. Raises ValueError for an input that is not B×3×H×W floating point, or a
        code of another shape.
        """
        if rgb_norm.dim() != 4 or rgb_norm.shape[1] != 3 or not rgb_norm.is_floating_point():
            raise ValueError(
                f'rgb_norm must be a float B×3×H×W tensor, got {tuple(rgb_norm.shape)} '
                f'{rgb_norm.dtype}'
            )
        x = self.lowpass(rgb_norm)
        if self.code_input and code is not None and code.shape != x.shape:
            raise ValueError(
                f'code shape {tuple(code.shape)} != rgb_norm {tuple(x.shape)} (B×3×H×W)'
            )
        if self.code_stream is not None:
            feats = self.code_stream.encode(self.encoder, x, code)
        elif self.code_input:
            code = torch.zeros_like(x) if code is None else code.to(x)
            feats = self.encoder(torch.cat([x, code], dim=1))
        else:
            feats = self.encoder(x)
        f2, f4, f8, f16, f32 = feats
        p = self.lat[3](f32)
        for lat, sm, f in zip(self.lat[2::-1], self.smooth, (f16, f8, f4)):
            p = sm(_up(p, f) + lat(f))
        x = self.fuse2(_up(self.reduce4(p), f2) + self.lat2(f2))
        size = rgb_norm.shape[-2:]
        d = F.interpolate(self.depth_head(x), size=size, mode='bilinear', align_corners=False)
        depth = self.min_depth + (self.max_depth - self.min_depth) * torch.sigmoid(d)
        seg = F.interpolate(self.seg_head(x), size=size, mode='bilinear', align_corners=False)
        return {'depth': depth, 'seg2d': seg}


class Depth3DSeg(nn.Module):
    """M1 + M2 + M3: RGB -> (depth, S2D) -> organized cloud of the PREDICTED depth -> S3D.

    Args: hyper-parameters of `DEFAULT_ARCH` (``p_*`` go to `PointSegNet`); kept as ``self.arch``
    (a plain dict, stored in the model file).
    forward(rgb_norm B×3×H×W float normalised, K B×3×3 of that image at H×W, metres/pixels) ->
    dict(depth B×1×H×W m, seg2d B×C×H×W logits, seg3d B×C×H×W logits, xyz B×3×H×W m float32
    (optical frame, 0 where invalid; back-projected in float32 even for an fp16 model), valid
    B×1×H×W bool). The 3D net sees the metric X, Y, Z of the predicted depth
    (core.geometry.backproject, M2) plus per-pixel colour, so losses on seg3d reach the depth head
    (the coupling of M3). With ``depth_focal`` > 0 the depth head's output is that of a camera of
    normalised focal length fy / H = depth_focal and ``depth`` is scaled to K's camera
    (`focal_depth`) before anything uses it. Raises ValueError for bad shapes (see DepthSegNet,
    backproject).
    """

    def __init__(self, num_classes: int = 14, **kwargs: Any):
        super().__init__()
        self.arch = check_arch(dict(kwargs, num_classes=int(num_classes)))
        a = self.arch
        self.net = DepthSegNet(
            a['num_classes'],
            a['width'],
            a['depth_mult'],
            a['dec_ch'],
            a['head_ch'],
            a['min_depth'],
            a['max_depth'],
            a['init_depth'],
            a['input_blur'],
            a['code_input'],
            a['code_stream'],
            a['encoder'],
        )
        self.pointnet = PointSegNet(
            a['num_classes'],
            in_feats=3,
            k=a['p_k'],
            window=a['p_window'],
            stride=a['p_stride'],
            channels=a['p_channels'],
            head=a['p_head'],
            normals=a['p_normals'],
            colour=a['p_colour'],
        )

    @property
    def num_classes(self) -> int:
        """C, the number of output channels (class ids, void included)."""
        return self.arch['num_classes']

    @classmethod
    def from_arch(cls, arch: Dict[str, Any]) -> 'Depth3DSeg':
        """Build from a stored ``arch`` dict (model file meta)."""
        arch = check_arch(arch)
        return cls(**arch)

    def with_arch(self, **changes: Any) -> 'Depth3DSeg':
        """A copy in eval mode with the same weights and ``changes`` applied to its arch: keys
        that size no tensor (depth_gain, fusion_w3d, depth_focal, the 3D net's sampling, the depth
        range). Raises ValueError for an unknown key or bad value (check_arch), and naming the
        changes and their old values when they would change the shape of a weight."""
        new = Depth3DSeg.from_arch(dict(self.arch, **changes))
        shapes = {k: tuple(v.shape) for k, v in self.state_dict().items()}
        if {k: tuple(v.shape) for k, v in new.state_dict().items()} != shapes:
            was = {k: self.arch.get(k) for k in changes}
            raise ValueError(
                f'{changes} (was {was}): changes the shape of the weights (retrain instead)'
            )
        new.load_state_dict(self.state_dict())
        return new.eval()

    def with_code_input(
        self, stream: bool = False, geometry: Optional['Depth3DSeg'] = None
    ) -> 'Depth3DSeg':
        """A ``code_input`` (RGB-D input) copy of this colour model in eval mode, with the same
        weights, that starts as exactly this model with or without measured depth; a fine-tune
        learns what the code adds (training/checkpoint.load_init_model).

        stream False: the encoder stem widened from 3 to 6 input channels, zero weights on the 3
        code channels. stream True (arch ``code_stream``, core.code_stream): a separate geometry
        encoder joined to the colour one through zero-weight 1×1 convolutions; ``geometry``, a
        model of the same width and depth multiplier whose 2D net was trained on the code as its
        image (scripts/geometry_input.py), gives that encoder its weights (random without it).
        Raises ValueError when the model already has code input, for ``geometry`` without
        ``stream`` or with code input of its own, and naming both archs when ``geometry``'s
        encoder does not fit."""
        if self.arch['code_input']:
            raise ValueError('with_code_input: the model already has arch code_input=true')
        if geometry is not None and not stream:
            raise ValueError('with_code_input: a geometry model needs stream=True (code_stream)')
        if geometry is not None and geometry.arch['code_input']:
            raise ValueError(
                'with_code_input: the geometry model has arch code_input=true; it must be a model '
                'whose 2D net took the code as its (3-channel) image (scripts/geometry_input.py)'
            )
        new = Depth3DSeg.from_arch(dict(self.arch, code_input=True, code_stream=bool(stream)))
        state = dict(new.state_dict(), **self.state_dict())  # the stream's own (zero joins)
        if not stream:
            w = state['net.encoder.stem.0.weight']
            state['net.encoder.stem.0.weight'] = torch.cat([w, torch.zeros_like(w)], dim=1)
        new.load_state_dict(state)
        if geometry is not None:
            try:
                new.net.code_stream.encoder.load_state_dict(geometry.net.encoder.state_dict())
            except RuntimeError:
                keys = ('width', 'depth_mult')
                raise ValueError(
                    "with_code_input: the geometry model's encoder "
                    f'({ {k: geometry.arch[k] for k in keys} }) does not fit this model\'s '
                    f'({ {k: self.arch[k] for k in keys} })'
                ) from None
        return new.eval()

    def forward_2d(
        self,
        rgb_norm: torch.Tensor,
        K: Optional[torch.Tensor] = None,
        measured_depth: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """M1 only: {'depth', 'seg2d'}. With ``depth_focal`` set and K given the depth is that of
        K's camera (`focal_depth`); without K, that of the calibration camera. ``depth_gain``
        applies with or without K. A ``code_input`` model also sees the geometry code
        (core.depth_code) of ``measured_depth`` (B×1×H×W metres, registered; needs K), zeros
        without it; other models ignore ``measured_depth`` here. Raises ValueError for measured
        depth without K on a code_input model."""
        code = None
        if self.arch['code_input'] and measured_depth is not None:
            if K is None:
                raise ValueError('forward_2d: the geometry code of measured_depth needs K')
            code = depth_code(measured_depth.to(rgb_norm.device, torch.float32), K)
        out = self.net(rgb_norm, code)
        a = self.arch
        if (K is not None and a['depth_focal'] > 0) or a['depth_gain'] != 1.0:
            out = dict(out)
            out['depth'] = focal_depth(
                out['depth'], K, a['depth_focal'], a['min_depth'], a['max_depth'], a['depth_gain']
            )
        return out

    def forward(
        self,
        rgb_norm: torch.Tensor,
        K: torch.Tensor,
        measured_depth: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """M1–M3 (see the class docstring). ``measured_depth``: optional B×1×H×W metres from an
        RGB-D sensor, registered to ``rgb_norm`` (NaN, ±inf, 0 and negatives = no data). Where it
        is valid the cloud (and so the 3D net) uses it instead of the prediction; the prediction
        fills its holes and is still returned as ``depth`` (and trained); a ``code_input`` model's
        2D net also sees its geometry code (forward_2d). Adds ``measured`` B×1×H×W bool when
        given."""
        # only an RGB-D input model's 2D net takes the depth (and forward_2d replacements of the
        # evaluation scripts, tta_eval and blur_eval, take (rgb_norm, K))
        if self.arch['code_input'] and measured_depth is not None:
            out = self.forward_2d(rgb_norm, K, measured_depth)
        else:
            out = self.forward_2d(rgb_norm, K)
        depth = out['depth']
        if measured_depth is not None:
            if measured_depth.shape != depth.shape:
                raise ValueError(
                    f'measured_depth shape {tuple(measured_depth.shape)} != depth '
                    f'{tuple(depth.shape)} (B×1×H×W at the network input size)'
                )
            m = measured_depth.to(depth.device, torch.float32)
            measured = torch.isfinite(m) & (m > 0)
            depth = torch.where(measured, m, depth.float())
            out['measured'] = measured
        # M2 in float32 even for an fp16 model/autocast (pixel coordinates up to ~1000 need > 11
        # bits)
        xyz, valid = backproject(depth.float(), K.float())
        out['seg3d'] = self.pointnet(xyz, valid, rgb_norm)
        out['xyz'] = xyz
        out['valid'] = valid
        return out
