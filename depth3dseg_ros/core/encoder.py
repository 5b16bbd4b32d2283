"""M1's encoder: a MobileNetV2-style backbone (Sandler et al., CVPR 2018) and its building
blocks (conv-BN-ReLU6, inverted residuals, depthwise-separable convs), shared by the colour path
(core.model.DepthSegNet) and the geometry code's own encoder (core.code_stream)."""

from __future__ import annotations

import math
from typing import List

import torch
from torch import nn

__all__ = ['Encoder']

# MobileNetV2 stages: (expansion t, channels c, repeats n, stride s). Feature taps after the stages
# ending at strides 2, 4, 8, 16, 32.
_MBV2 = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]
_TAPS = (0, 1, 2, 4, 6)  # stage indices whose outputs feed the decoder (strides 2, 4, 8, 16, 32)


def _div8(c: float) -> int:
    """Round a channel count to a multiple of 8 (MobileNet convention), at least 8."""
    return max(8, int(c + 4) // 8 * 8)


def _cbr(
    cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1, act: bool = True
) -> nn.Sequential:
    layers: List[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1×1 expand (t) -> 3×3 depthwise (stride) -> 1×1 linear projection (+
    skip)."""

    def __init__(self, cin: int, cout: int, stride: int, t: int):
        super().__init__()
        hid = cin * t
        layers: List[nn.Module] = [] if t == 1 else [_cbr(cin, hid)]
        layers += [_cbr(hid, hid, 3, stride, groups=hid), _cbr(hid, cout, act=False)]
        self.body = nn.Sequential(*layers)
        self.skip = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x B×C_in×H×W float -> B×C_out×(H/stride)×(W/stride) float (residual if shapes match)."""
        return x + self.body(x) if self.skip else self.body(x)


def _sep(cin: int, cout: int) -> nn.Sequential:
    """Depthwise-separable 3×3 block (dw 3×3 + pw 1×1, BN, ReLU6)."""
    return nn.Sequential(_cbr(cin, cin, 3, groups=cin), _cbr(cin, cout))


class Encoder(nn.Module):
    """MobileNetV2-style encoder; returns the features at strides 2, 4, 8, 16, 32 (list)."""

    def __init__(self, width: float = 1.0, depth_mult: float = 1.0, in_ch: int = 3):
        super().__init__()
        c0 = _div8(32 * width)
        self.stem = _cbr(in_ch, c0, 3, 2)
        self.stages = nn.ModuleList()
        self.channels: List[int] = []
        cin = c0
        for t, c, n, s in _MBV2:
            cout = _div8(c * width)
            reps = max(1, int(math.ceil(n * depth_mult)))
            blocks = [
                InvertedResidual(cin if i == 0 else cout, cout, s if i == 0 else 1, t)
                for i in range(reps)
            ]
            self.stages.append(nn.Sequential(*blocks))
            self.channels.append(cout)
            cin = cout

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        """x B×in_ch×H×W float (normalised RGB, then the depth code for in_ch 6) -> 5 feature maps
        B×C_s×⌈H/s⌉×⌈W/s⌉, s = 2, 4, 8, 16, 32 (C_s = ``self.channels``)."""
        x = self.stem(x)
        feats = []
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i in _TAPS:
                feats.append(x)
        return feats
