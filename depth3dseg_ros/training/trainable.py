"""Which parameters a training run updates (training config ``train.trainable``).

A robot team with RGB-D frames of its own camera but no labels can re-fit the depth head to that
camera (M5's depth term) without moving the segmentation (M1's 2D head, M3's point network):
``--set "train.trainable=[net.depth_head]"``. Names are prefixes of the model's parameter names
(``Depth3DSeg.named_parameters()``: ``net.encoder…``, ``net.lat…``, ``net.depth_head…``,
``net.seg_head…``, ``pointnet…``), matched at a dot boundary.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from torch import nn


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + '.')


def select_trainable(model: nn.Module, prefixes: Optional[Sequence[str]]) -> List[nn.Parameter]:
    """Set ``requires_grad`` on ``model``'s parameters: True for names under one of ``prefixes``
    (all of them when ``prefixes`` is None), False otherwise; return the trainable ones in
    ``named_parameters`` order (the optimiser's parameter list).

    Raises ValueError naming a prefix that matches no parameter (with the model's top-level
    parameter groups), and for an empty list.
    """
    named = list(model.named_parameters())
    if prefixes is None:
        for _, p in named:
            p.requires_grad_(True)
        return [p for _, p in named]
    if len(prefixes) == 0:
        raise ValueError('config train.trainable=[] trains nothing: null trains every parameter')
    groups = sorted({'.'.join(n.split('.')[:2]) for n, _ in named})
    for prefix in prefixes:
        if not any(_matches(n, prefix) for n, _ in named):
            raise ValueError(
                f'config train.trainable: {prefix!r} names no parameter of the model; '
                f'parameter groups: {groups}'
            )
    keep = []
    for n, p in named:
        on = any(_matches(n, prefix) for prefix in prefixes)
        p.requires_grad_(on)
        if on:
            keep.append(p)
    return keep


def freeze_frozen_batchnorm(model: nn.Module) -> int:
    """Put every BatchNorm layer without a trainable parameter in eval mode, so that its running
    statistics (which the frozen layers' outputs depend on) stay as loaded. Call after
    ``model.train()``. Returns how many layers it froze."""
    n = 0
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            params = list(m.parameters(recurse=False))
            if params and not any(p.requires_grad for p in params):
                m.eval()
                n += 1
    return n
