"""A fixed Gaussian low-pass of the network input (``arch['input_blur']``, METHOD M1 input).

Rendered rooms carry almost no fine texture; real photographs carry plenty (floor tiles, wood
grain, sensor noise), and a depth head trained on renders follows it. A fixed blur in front of
the encoder removes that texture from every frame, rendered or real, at training and at
inference alike (docs/levers.md, "A low-pass of the input image"). It is part of the network
(``DepthSegNet``), so every backend (torch, ONNX export, the split ONNX Runtime graph) applies it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ['gaussian_kernel1d', 'gaussian_blur', 'InputLowPass']


def gaussian_kernel1d(sigma: float) -> torch.Tensor:
    """1-D Gaussian of standard deviation ``sigma`` px, radius ceil(3σ) (at least 1), summing to
    1: float32 tensor of 2r + 1 taps. Raises ValueError for sigma <= 0 or not finite."""
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f'sigma={sigma!r} must be a finite number > 0 (px)')
    r = max(1, math.ceil(3 * sigma))
    t = torch.arange(-r, r + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    return k / k.sum()


def gaussian_blur(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """B×C×H×W float ``x`` filtered by the separable 1-D ``kernel`` along W then H, borders
    reflected without repeating the edge (cv2.BORDER_REFLECT_101, cv2.GaussianBlur's default):
    B×C×H×W of x's dtype. Raises ValueError when H or W is not larger than the kernel radius."""
    r = kernel.numel() // 2
    if x.shape[-1] <= r or x.shape[-2] <= r:
        raise ValueError(
            f'input {tuple(x.shape)}: H and W must exceed the blur radius {r} px (reflect padding)'
        )
    C = x.shape[1]
    k = kernel.to(device=x.device, dtype=x.dtype)
    y = F.pad(x, (r, r, 0, 0), mode='reflect')
    y = F.conv2d(y, k.view(1, 1, 1, -1).expand(C, 1, 1, -1), groups=C)
    y = F.pad(y, (0, 0, r, r), mode='reflect')
    return F.conv2d(y, k.view(1, 1, -1, 1).expand(C, 1, -1, 1), groups=C)


class InputLowPass(nn.Module):
    """Gaussian blur of σ = ``sigma`` px at the network input size; ``sigma`` 0 is the identity.

    forward(x B×C×H×W float) -> B×C×H×W float. The kernel is a non-persistent buffer, so state
    dicts are the same with and without the blur (a model fine-tunes from one without it). The
    blur is linear with weights summing to 1, so it commutes with the per-channel mean/std
    normalisation of the input. Raises ValueError for a negative or non-finite sigma.
    """

    def __init__(self, sigma: float = 0.0):
        super().__init__()
        if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma >= 0):
            raise ValueError(f'input_blur={sigma!r} must be a finite number >= 0 (px)')
        self.sigma = float(sigma)
        k = gaussian_kernel1d(self.sigma) if self.sigma > 0 else torch.ones(1)
        self.register_buffer('kernel', k, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """See the class docstring."""
        return x if self.sigma == 0 else gaussian_blur(x, self.kernel)

    def extra_repr(self) -> str:
        """'sigma=…' in the module's repr."""
        return f'sigma={self.sigma:g}'
