"""Order-preserving int32 keys of non-negative floats: value and position in one vectorised
reduction.

Used where the CPU's index-returning reductions are the bottleneck: the k nearest neighbours of M3
(core.pointnet), its 3D-aware upsampling, and the labels of M7 (core.fusion). On this 2-core CPU,
``amin``/``amax`` over int32 are vectorised while ``topk``, ``min(dim)``/``max(dim)`` with indices
and ``argmax`` are 4-20x slower (docs/model.md).
"""

from __future__ import annotations

import torch

__all__ = ['key_bits', 'float_keys', 'INF_KEY']

INF_KEY = (
    0x7F800000  # bit pattern of float32 +inf: key < INF_KEY (after any position bits) iff finite
)


def key_bits(n: int) -> int:
    """Low mantissa bits that hold a position 0..n-1 in a `float_keys` key (at least 1)."""
    return max(1, (int(n) - 1).bit_length())


def float_keys(x: torch.Tensor, dim: int, descending: bool = False) -> torch.Tensor:
    """int32 keys of non-negative float32 values (+inf allowed) along ``dim`` (size n), **in
    place** on x.

    A non-negative IEEE float's bit pattern read as int32 orders like the float; the low
    ``key_bits(n)`` mantissa bits are replaced by the position along ``dim`` (by ``n-1-position``
    when ``descending``), so keys are unique and ``amin``/``amax`` of the keys give the extreme
    value and its position in one vectorised reduction (CPU argmin/argmax/topk are 4-20x slower
    here). Values equal to within 2^-(23-bits) relative (4e-6 for 25 positions) tie, and the lower
    position wins.
    Args: x float32 (a view reinterprets its memory; pass a copy if x must be kept). Returns int32,
    x's shape. Raises ValueError if x is not float32.
    """
    if x.dtype != torch.float32:
        raise ValueError(f'float_keys needs float32 values, got {x.dtype}')
    n = x.shape[dim]
    shape = [1] * x.dim()
    shape[dim] = n
    pos = torch.arange(n, dtype=torch.int32, device=x.device)
    if descending:
        pos = (n - 1) - pos
    return x.view(torch.int32).bitwise_and_(-(1 << key_bits(n))).bitwise_or_(pos.view(shape))
