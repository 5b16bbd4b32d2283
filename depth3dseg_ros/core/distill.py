"""Distillation from a frozen teacher ("learning without forgetting", Li & Hoiem, TPAMI 2018):
a fine-tune keeps the segmentation a model already has while it learns something else (e.g. the
real RGB-D frames' depth, issue 12).

The term is Hinton et al.'s (2015) knowledge-distillation loss, T²·KL(softmax(t/T) ‖ softmax(s/T)),
on the 2D logits of every pixel and on the 3D logits of every point valid in both clouds (the
clouds are organized, one point per pixel, so the teacher's and the student's point at a pixel
pair up although their depths differ). It needs no labels, so it applies to every frame. It is
not one of the method's four terms (M5); core.train_step adds it to their total with weight
``LossConfig.w_distill``. `depth_distillation` does the same for the depth head (weight
``LossConfig.w_distill_depth``): the teacher's depth as a second target beside the labels, so that
a fine-tune keeps the depth the teacher has on frames the labels do not cover.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from .losses import Term

__all__ = [
    'batchnorm_modes',
    'depth_distillation',
    'distillation',
    'kd_term',
    'match_batchnorm_modes',
    'teacher_outputs',
]


def kd_term(
    student: torch.Tensor,
    teacher: torch.Tensor,
    temperature: float,
    keep: Optional[torch.Tensor] = None,
) -> Term:
    """Mean over kept pixels of T²·KL(softmax(teacher/T) ‖ softmax(student/T)) (Hinton et al.
    2015; T² keeps the gradient's scale independent of T).

    Args:
        student: B×C×H×W logits (gradients flow into them).
        teacher: B×C×H×W logits (detached here).
        temperature: T > 0.
        keep: optional B×H×W bool, the pixels that count (default: all).
    Returns the Term (0-d value >= 0, kept-pixel count; 0 when no pixel is kept). Each pixel's
    KL is clamped at 0 (float32 rounding gives about -1e-8 where the distributions agree).
    Raises ValueError for shapes that differ or T <= 0.
    """
    if student.shape != teacher.shape or student.dim() != 4:
        raise ValueError(
            f'distillation: student logits {tuple(student.shape)} and teacher logits '
            f'{tuple(teacher.shape)} must both be B×C×H×W of one shape (the same classes and '
            'input size)'
        )
    if not temperature > 0:
        raise ValueError(f'distillation temperature={temperature!r} must be > 0')
    t = float(temperature)
    log_p_s = F.log_softmax(student.float() / t, dim=1)
    log_p_t = F.log_softmax(teacher.detach().float() / t, dim=1)
    # B×H×W; KL >= 0, but float32 rounding gives about -1e-8 where the two agree (an unmoved
    # student): clamped per pixel, where the gradient is ~0 anyway
    kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(dim=1).clamp_min(0) * (t * t)
    if keep is None:
        keep = torch.ones_like(kl, dtype=torch.bool)
    n = int(keep.sum())
    if n == 0:
        return Term(kl.sum() * 0, 0)
    return Term(torch.where(keep, kl, torch.zeros_like(kl)).sum() / n, n)


def distillation(
    out: Mapping[str, torch.Tensor], teacher_out: Mapping[str, torch.Tensor], temperature: float
) -> Term:
    """The distillation term of a batch: the 2D pixel mean plus the 3D point mean of `kd_term`.

    ``out`` / ``teacher_out``: Depth3DSeg outputs (seg2d, seg3d B×C×H×W logits; valid B×1×H×W
    bool) of the student and the teacher on the same input. The 3D mean runs over pixels whose
    point is valid in both clouds. Count: the 2D pixels. Raises ValueError as `kd_term`.
    """
    d2 = kd_term(out['seg2d'], teacher_out['seg2d'], temperature)
    b, _, h, w = out['seg3d'].shape
    both = out['valid'].reshape(b, h, w).bool() & teacher_out['valid'].reshape(b, h, w).bool()
    d3 = kd_term(out['seg3d'], teacher_out['seg3d'], temperature, both)
    return Term(d2.value + d3.value, d2.count)


def depth_distillation(student: torch.Tensor, teacher: torch.Tensor) -> Term:
    """Mean over pixels of |log d_s − log d_t|: the student's depth held to a frozen teacher's
    (learning without forgetting, Li & Hoiem 2018, applied to the depth head; a log-space L1, so
    a 10 % error costs the same near and far).

    Args:
        student: B×1×H×W predicted depth in metres (gradients flow into it).
        teacher: B×1×H×W the teacher's depth in metres on the same input (detached here).
    Returns the Term (0-d value >= 0, count of pixels where both depths are finite and > 0; value
    0 when there is none). Raises ValueError for shapes that differ or are not B×1×H×W.
    """
    if student.shape != teacher.shape or student.dim() != 4 or student.shape[1] != 1:
        raise ValueError(
            f'depth distillation: student depth {tuple(student.shape)} and teacher depth '
            f'{tuple(teacher.shape)} must both be B×1×H×W of one shape'
        )
    s, t = student.float(), teacher.detach().float()
    keep = torch.isfinite(s) & torch.isfinite(t) & (s > 0) & (t > 0)
    n = int(keep.sum())
    if n == 0:
        return Term(s.nan_to_num(0.0).sum() * 0, 0)
    one = torch.ones_like(s)
    diff = (torch.where(keep, s, one).log() - torch.where(keep, t, one).log()).abs()
    return Term(diff.sum() / n, n)


def batchnorm_modes(model: nn.Module) -> Dict[str, bool]:
    """{name: training} of every BatchNorm layer of ``model``: True = it normalises with the
    batch's statistics, False = with its running ones (eval mode, train.freeze_bn, or a layer that
    train.trainable freezes). DDP's ``module.`` prefix is dropped from the names."""
    return {
        name.removeprefix('module.'): m.training
        for name, m in model.named_modules()
        if isinstance(m, _BatchNorm)
    }


def match_batchnorm_modes(teacher: nn.Module, modes: Mapping[str, bool]) -> None:
    """Put each BatchNorm layer of ``teacher`` in the student's mode ``modes`` (`batchnorm_modes`):
    layer by layer when the teacher has the same layers, or all alike when the student's layers
    share one mode (a teacher of another arch). Layers that normalise with batch statistics get
    momentum 0, so the teacher's running statistics never change.

    Raises ValueError when the teacher's layers differ from the student's and the student's modes
    are mixed (e.g. train.trainable with a teacher of another arch): no layer-by-layer match.
    """
    layers = {n: m for n, m in teacher.named_modules() if isinstance(m, _BatchNorm)}
    if set(layers) != set(modes):
        kinds = set(modes.values())
        if len(kinds) > 1:
            raise ValueError(
                'distillation: the student mixes BatchNorm layers in training and eval mode '
                '(train.trainable freezes some) and the teacher has other BatchNorm layers, so '
                'no layer-by-layer mode can be matched: use a teacher of the same arch, or '
                'train.freeze_bn=true'
            )
        modes = dict.fromkeys(layers, kinds.pop() if kinds else False)
    teacher.eval()
    for name, m in layers.items():
        if modes[name]:
            m.momentum = 0.0  # running = (1 - 0)·running + 0·batch: unchanged
            m.train()


@torch.no_grad()
def teacher_outputs(
    teacher: nn.Module,
    rgb: torch.Tensor,
    K: torch.Tensor,
    measured: Optional[torch.Tensor] = None,
    modes: Optional[Mapping[str, bool]] = None,
) -> dict:
    """The frozen teacher's outputs on the student's input, without gradients. Same arguments as
    Depth3DSeg.forward: rgb B×3×H×W normalised, K B×3×3 at H×W, measured B×1×H×W metres or None.

    ``modes``: the student's `batchnorm_modes`; each teacher BatchNorm layer then normalises as
    the student's does (`match_batchnorm_modes`: batch statistics where the student uses them,
    running statistics elsewhere), so the term is 0 before the student has moved from the
    teacher's weights. None: eval mode throughout. The teacher is left in eval mode; its running
    statistics never change. Raises ValueError as `match_batchnorm_modes`.

    Only the student's training-mode outputs are held to the teacher's: its running statistics,
    which its eval-mode (shipped) outputs use, follow the data as usual.
    """
    match_batchnorm_modes(teacher, modes or {})
    try:
        return teacher(rgb, K) if measured is None else teacher(rgb, K, measured)
    finally:
        teacher.eval()
