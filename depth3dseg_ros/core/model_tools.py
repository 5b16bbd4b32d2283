"""Tools over any torch module of the model: BatchNorm folding for inference, parameter and FLOP
counts (re-exported by core.model, where they lived first)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ['fold_batchnorm', 'count_params', 'count_flops']


@torch.no_grad()
def fold_batchnorm(module: nn.Module) -> nn.Module:
    """Fold every BatchNorm2d that directly follows a Conv2d in an nn.Sequential into that conv
    (inference only: uses the running statistics), in place; returns `module`. Same outputs in eval
    mode up to float rounding, one memory pass less per layer. Do not train the folded model.
    The folded conv keeps the class of the conv (a Conv2d subclass such as
    core.efficientnet_lite.Conv2dSame keeps its padding rule)."""
    for seq in [m for m in module.modules() if isinstance(m, nn.Sequential)]:
        for i in range(len(seq) - 1):
            conv, bn = seq[i], seq[i + 1]
            if not (isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)):
                continue
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            fused = type(conv)(  # the conv's own class (EfficientNet-Lite's pads TF-style)
                conv.in_channels,
                conv.out_channels,
                conv.kernel_size,
                conv.stride,
                conv.padding,
                conv.dilation,
                conv.groups,
                bias=True,
            ).to(conv.weight)
            fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
            bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
            fused.bias.copy_(bn.bias + (bias - bn.running_mean) * scale)
            seq[i], seq[i + 1] = fused, nn.Identity()
    return module


def count_params(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def count_flops(fn, *args: Any) -> int:
    """FLOPs of one call ``fn(*args)`` by torch.utils.flop_counter.FlopCounterMode (2 per MAC;
    convolutions and matmuls only, element-wise ops are not counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        fn(*args)
    return int(fc.get_total_flops())
