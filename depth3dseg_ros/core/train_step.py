"""M6 one training step: a batch -> the model's forward pass -> the dict of loss terms and their
total.

The total is back-propagated by the trainer (training/train.py) into all parameters: depth head, 2D
head and 3D network. The 3D cross-entropy and the consistency term reach the depth head *through
the back-projection* (core.geometry.backproject of the predicted depth, M2/M3): depth is not
detached before back-projection. ``LossConfig.detach_depth_for_3d`` exists only for the ablation
and the test that shows the coupling (test/test_core_train_step.py).

Batch (docs/ARCHITECTURE.md): ``rgb`` B×3×H×W float normalised, ``K`` B×3×3 at H×W; optional
``depth`` B×1×H×W metres (NaN/0 = no data), ``labels`` B×H×W long (void = ignore), ``labels3d``
B×H×W long (3D labels; default: each point takes its pixel's label), ``has_labels`` / ``has_depth``
B bool (default: True for every sample when the key is present, False when absent),
``has_geometry`` B bool (default True; False for an image that shows no real 3D scene, e.g. one
painted over a label layout, whose cloud from predicted depth means nothing: it trains neither the
3D term nor the consistency term, M5).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch
from torch import nn

from .depth_code import smooth_px_for
from .distill import batchnorm_modes, depth_distillation, distillation, teacher_outputs
from .geometry import backproject
from .loss_config import CLASS_WEIGHT_PRESETS, TERMS, LossConfig, make_weighting
from .losses import (
    Term,
    UncertaintyWeighting,
    consistency,
    depth_loss,
    seg_ce,
    weighted_total,
)
from .normals import normal_loss

# LossConfig, TERMS, make_weighting and CLASS_WEIGHT_PRESETS live in core.loss_config and are
# re-exported here, where the training code has always imported them
__all__ = [
    'CLASS_WEIGHT_PRESETS',
    'LOSS_KEYS',
    'LossConfig',
    'TERMS',
    'compute_losses',
    'losses_from_outputs',
    'forward_model',
    'make_weighting',
]

#: the loss values compute_losses can report (0-d tensors; a term without its inputs or weight is
#: absent), in the order the training log and progress bar show them
LOSS_KEYS = (
    'total',
    'seg2d',
    'seg3d',
    'depth',
    'consistency',
    'distill',
    'distill_depth',
    'normal',
)


def forward_model(
    model: nn.Module,
    rgb: torch.Tensor,
    K: torch.Tensor,
    detach_depth_for_3d: bool = False,
    measured: Optional[torch.Tensor] = None,
) -> Dict[str, torch.Tensor]:
    """The model's forward pass, ``model(rgb, K) -> dict(depth, seg2d, seg3d, xyz, valid)``; with
    ``measured`` (B×1×H×W metres, NaN = none) the cloud uses it where valid (Depth3DSeg.forward).

    With ``detach_depth_for_3d`` (ablation only) the same pipeline is run from its parts —
    ``model.forward_2d(rgb, K)`` (M1), `backproject` of the *detached* depth (M2) and
    ``model.pointnet(xyz, valid, rgb)`` (M3) — as in core.model.Depth3DSeg.forward; a test checks
    that both paths give the same outputs. Raises ValueError for the detached path on a
    (Distributed) DataParallel wrapper.
    """
    if not detach_depth_for_3d:
        return model(rgb, K) if measured is None else model(rgb, K, measured)
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        raise ValueError(
            'LossConfig.detach_depth_for_3d=True (ablation) needs the bare model: it runs '
            'the model in parts, which (Distributed)DataParallel cannot synchronise; '
            'train it in one process'
        )
    out = dict(model.forward_2d(rgb, K, measured))
    depth = out['depth'].detach()
    if measured is not None:
        m = measured.to(depth)
        depth = torch.where(torch.isfinite(m) & (m > 0), m, depth)
    xyz, valid = backproject(depth, K)
    out['seg3d'] = model.pointnet(xyz, valid, rgb)
    out['xyz'], out['valid'] = xyz, valid
    return out


def _mask(batch: Mapping[str, Any], key: str, present: bool, b: int, device) -> torch.Tensor:
    m = batch.get(key)
    if m is None:
        return torch.full((b,), present, dtype=torch.bool, device=device)
    m = torch.as_tensor(m, device=device).reshape(-1).bool()
    if m.numel() != b:
        raise ValueError(f'batch[{key!r}] has {m.numel()} entries, expected B={b}')
    return m


def losses_from_outputs(
    out: Mapping[str, torch.Tensor],
    batch: Mapping[str, Any],
    cfg: LossConfig,
    weighting: Optional[UncertaintyWeighting] = None,
    teacher_out: Optional[Mapping[str, torch.Tensor]] = None,
) -> Dict[str, torch.Tensor]:
    """Loss terms from model outputs ``out`` and a batch (keys in the module docstring).

    Returns {'seg2d', 'seg3d', 'depth', 'consistency', 'total'} as 0-d tensors (an absent term is
    0) and {'n_seg2d', 'n_seg3d', 'n_depth', 'n_consistency'}: 0-d int64 element counts (0 =
    absent: no labels / no valid depth / no valid point in this batch). Unlabelled frames
    (has_labels False) give only depth + consistency; frames without depth only the segmentation
    and consistency terms; frames with ``has_geometry`` False only the 2D segmentation term.
    The reported 'consistency' is the mean over every frame's valid pixels also when
    ``cfg.w_consistency_unlabelled`` splits it by labelled / unlabelled frames for the total.
    With ``teacher_out`` (a frozen teacher's outputs on the same input) and ``cfg.w_distill`` > 0
    the distillation term (core.distill) is added to the total and reported as 'distill' /
    'n_distill'; with ``cfg.w_distill_depth`` > 0 the depth one likewise ('distill_depth' /
    'n_distill_depth'); without ``teacher_out`` both are absent (the validation loss scores the
    task).
    With ``cfg.w_normal`` > 0 and depth labels, the normal term (core.normals; needs
    ``batch['K']``) is added to the total and reported as 'normal' / 'n_normal'.
    Raises ValueError when uncertainty weighting is on but ``weighting`` is None, or on bad
    shapes.
    """
    # Losses in float32 even when the forward pass ran under autocast (fp16/bf16 outputs).
    seg2d, seg3d, valid = out['seg2d'].float(), out['seg3d'].float(), out['valid']
    depth = out['depth'].float()
    b, device = seg2d.shape[0], seg2d.device
    labels = batch.get('labels')
    labels3d = batch.get('labels3d', labels)
    has_labels = _mask(batch, 'has_labels', labels is not None, b, device)
    has_labels3d = (
        _mask(batch, 'has_labels3d', labels3d is not None, b, device)
        if 'labels3d' in batch
        else has_labels
    )
    has_geometry = _mask(batch, 'has_geometry', True, b, device)
    has_labels3d = has_labels3d & has_geometry
    if isinstance(cfg.class_weights, str):
        raise ValueError(
            f'LossConfig.class_weights={cfg.class_weights!r} is resolved from the training labels '
            'by the training run (training.class_weights.resolve_class_weights) before losses '
            'are computed'
        )
    cw = None if cfg.class_weights is None else torch.tensor(cfg.class_weights, device=device)
    terms: Dict[str, Term] = {}
    if labels is not None:
        terms['seg2d'] = seg_ce(
            seg2d, labels.to(device), cfg.void_id, has_labels, class_weights=cw
        )
    else:
        terms['seg2d'] = Term(seg2d.sum() * 0, 0)
    if labels3d is not None:
        terms['seg3d'] = seg_ce(
            seg3d,
            labels3d.to(device),
            cfg.void_id,
            has_labels3d,
            point_valid=valid,
            class_weights=cw,
        )
    else:
        terms['seg3d'] = Term(seg3d.sum() * 0, 0)
    depth_gt = batch.get('depth')
    if depth_gt is not None:
        depth_gt = depth_gt.to(device=device, dtype=torch.float32)
        has_depth = _mask(batch, 'has_depth', True, b, device)
        terms['depth'] = depth_loss(
            depth,
            depth_gt,
            cfg.depth_loss,
            has_depth,
            cfg.silog_lambda,
            cfg.berhu_c,
        )
    else:
        terms['depth'] = Term(depth.sum() * 0, 0)
    split: Dict[str, Term] = {}
    if cfg.w_consistency_unlabelled is None:
        terms['consistency'] = consistency(seg2d, seg3d, valid, cfg.consistency, has_geometry)
    else:  # xMUDA's λ_s / λ_t: one consistency mean per domain, each with its own weight
        for key, frames in (('cons_labelled', has_labels), ('cons_unlabelled', ~has_labels)):
            split[key] = consistency(seg2d, seg3d, valid, cfg.consistency, has_geometry & frames)
        lab, unl = split['cons_labelled'], split['cons_unlabelled']
        n = lab.count + unl.count  # the two masks partition has_geometry: the all-frame mean
        both = (lab.value * lab.count + unl.value * unl.count) / n if n else lab.value
        terms['consistency'] = Term(both, n)
    weights = cfg.weights()
    if cfg.uncertainty_weighting:
        if weighting is None:
            raise ValueError(
                'LossConfig.uncertainty_weighting=True needs the weighting module: '
                'pass weighting=make_weighting(cfg)'
            )
        total = weighting({k: t for k, t in terms.items() if weights[k] > 0}, weights)
    elif not split:
        total = weighted_total(terms, weights)
    else:
        split.update((k, t) for k, t in terms.items() if k != 'consistency')
        weights = dict(
            weights,
            cons_labelled=weights['consistency'],
            cons_unlabelled=float(cfg.w_consistency_unlabelled),
        )
        total = weighted_total(split, weights)
    result: Dict[str, torch.Tensor] = {k: terms[k].value for k in TERMS}
    for k in TERMS:
        result[f'n_{k}'] = torch.tensor(terms[k].count, dtype=torch.int64)
    if cfg.w_normal > 0 and depth_gt is not None:
        K = torch.as_tensor(batch['K']).to(device=device, dtype=torch.float32)
        nt = normal_loss(depth, depth_gt, K, has_depth, smooth_px_for(depth.shape[-1]))
        total = total + cfg.w_normal * nt.value
        result['normal'], result['n_normal'] = nt.value, torch.tensor(nt.count)
    if cfg.w_distill > 0 and teacher_out is not None:
        kd = distillation(out, teacher_out, cfg.distill_temperature)
        total = total + cfg.w_distill * kd.value
        result['distill'], result['n_distill'] = kd.value, torch.tensor(kd.count)
    if cfg.w_distill_depth > 0 and teacher_out is not None:
        kdd = depth_distillation(depth, teacher_out['depth'])
        total = total + cfg.w_distill_depth * kdd.value
        result['distill_depth'] = kdd.value
        result['n_distill_depth'] = torch.tensor(kdd.count)
    result['total'] = total
    return result


def compute_losses(
    model: nn.Module,
    batch: Mapping[str, Any],
    cfg: LossConfig,
    weighting: Optional[UncertaintyWeighting] = None,
    teacher: Optional[nn.Module] = None,
) -> Dict[str, torch.Tensor]:
    """M6: forward ``batch['rgb'], batch['K']`` through ``model`` and return `losses_from_outputs`.

    ``batch['K']`` is cast to the RGB tensor's device and dtype. Keys: seg2d, seg3d, depth,
    consistency, total (+ n_* counts). Call ``result['total'].backward()`` to train all three
    networks. ``teacher``: the frozen model that ``cfg.w_distill`` or ``cfg.w_distill_depth``
    > 0 distils from (run on the same input, with the same measured depth and BatchNorm mode as
    ``model``; core.distill); ValueError when such a weight is set without one.
    """
    if cfg.needs_teacher() and teacher is None:
        raise ValueError(
            f'LossConfig.w_distill={cfg.w_distill} / w_distill_depth={cfg.w_distill_depth} '
            'needs a teacher model (training config model.teacher: a model file)'
        )
    rgb = batch['rgb']
    if rgb.dim() != 4 or rgb.shape[1] != 3:
        raise ValueError(f"batch['rgb'] must be B×3×H×W, got {tuple(rgb.shape)}")
    K = torch.as_tensor(batch['K']).to(device=rgb.device, dtype=rgb.dtype)
    measured = None
    if (
        cfg.measured_depth_for_3d > 0
        and batch.get('depth') is not None
        and float(torch.rand(())) < cfg.measured_depth_for_3d
    ):
        measured = torch.as_tensor(batch['depth']).to(device=rgb.device, dtype=torch.float32)
    out = forward_model(model, rgb, K, cfg.detach_depth_for_3d, measured)
    t_out = None
    if cfg.needs_teacher():
        t_out = teacher_outputs(teacher, rgb, K, measured, batchnorm_modes(model))
    return losses_from_outputs(out, batch, cfg, weighting, t_out)
