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

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

import torch
from torch import nn

from .distill import batchnorm_modes, distillation, teacher_outputs
from .geometry import backproject
from .losses import (
    CONSISTENCY_KINDS,
    DEPTH_LOSSES,
    Term,
    UncertaintyWeighting,
    consistency,
    depth_loss,
    seg_ce,
    weighted_total,
)

__all__ = [
    'LossConfig',
    'TERMS',
    'compute_losses',
    'losses_from_outputs',
    'forward_model',
    'make_weighting',
]

#: Loss term names, in the order they are reported.
TERMS = ('seg2d', 'seg3d', 'depth', 'consistency')

#: Named class weightings of LossConfig.class_weights (resolved by training.class_weights).
CLASS_WEIGHT_PRESETS = ('median_freq',)


def _number(v: Any) -> bool:
    """True for an int or float that is not a bool (YAML's true/false are not weights)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass
class LossConfig:
    """Loss settings as plain data (training config section ``loss``; docs/method.md explains
    them).

    w_seg2d, w_seg3d, w_depth, w_consistency: fixed weights (>= 0; 0 switches a term off).
        Defaults 1, 1, 1, 0.1: the consistency term is a regulariser that needs no labels and can
        be lowered by both heads agreeing on a wrong answer, so it stays below the supervised
        terms.
    depth_loss: 'silog' (default, Eigen et al. 2014), 'l1' or 'berhu' (core.losses.depth_loss).
    silog_lambda: λ of the scale-invariant log loss (0.5, Eigen's training value). berhu_c: c /
    max|r|.
    consistency: 'sym_kl' (default, M4), 'kl' (2D target detached, xMUDA), 'js', 'mse'.
    uncertainty_weighting: learn the weights (Kendall et al. 2018;
        core.losses.UncertaintyWeighting, created by `make_weighting`); the fixed weights then
        still switch terms on/off and scale them.
    void_id: label id ignored by the cross-entropies.
    detach_depth_for_3d: ablation only — stop the 3D/consistency gradients at the predicted depth.
    class_weights: per-class weights of both cross-entropies (core.losses.seg_ce): None (default,
        unweighted), a list of C numbers >= 0, or 'median_freq' — median-frequency balancing
        (Eigen & Fergus 2015), which the training run resolves into the list from its training
        labels before the first step (training.class_weights) and stores in its config.yaml.
    measured_depth_for_3d: probability (per batch, drawn from torch's RNG, so resumes repeat it)
        that the cloud is built from the batch's sensor depth where valid, the prediction filling
        its holes (Depth3DSeg.forward measured_depth): the 3D net then also learns on sensor
        clouds, as it sees them behind an RGB-D camera (issue 12); a ``code_input`` model's 2D net
        then sees the depth's geometry code (core.depth_code), zeros otherwise. 0 (default) =
        always the predicted depth (M2, M3).
    w_consistency_unlabelled: weight of the consistency term on frames without labels
        (has_labels False: the real RGB-D frames), which then forms its own pixel mean beside
        the labelled frames' one (weighted by w_consistency), as xMUDA weights its cross-modal
        loss separately on the source and target domains (Jaritz et al., CVPR 2020, λ_s and
        λ_t). None (default) = one term over every frame, weighted by w_consistency. Not with
        uncertainty_weighting.
    w_distill: weight of the distillation term (core.distill: a frozen teacher's 2D and 3D
        segmentation on every frame, Li & Hoiem's "learning without forgetting"), added to the
        total of the four terms; > 0 needs a teacher (`compute_losses` ``teacher``; the training
        config's ``model.teacher``). 0 (default) = off.
    distill_temperature: its softmax temperature T (> 0; Hinton et al. 2015 use 2–20; 2 here).
    Raises ValueError naming the field for a bad value.
    """

    w_seg2d: float = 1.0
    w_seg3d: float = 1.0
    w_depth: float = 1.0
    w_consistency: float = 0.1
    depth_loss: str = 'silog'
    silog_lambda: float = 0.5
    berhu_c: float = 0.2
    consistency: str = 'sym_kl'
    uncertainty_weighting: bool = False
    void_id: int = 0
    detach_depth_for_3d: bool = False
    measured_depth_for_3d: float = 0.0
    class_weights: Optional[Union[str, List[float]]] = None
    w_consistency_unlabelled: Optional[float] = None
    w_distill: float = 0.0
    distill_temperature: float = 2.0

    def __post_init__(self) -> None:
        for t in TERMS:
            w = getattr(self, f'w_{t}')
            if not _number(w) or not w >= 0:
                raise ValueError(f'LossConfig.w_{t}={w!r} must be a number >= 0')
        if self.depth_loss not in DEPTH_LOSSES:
            raise ValueError(f'LossConfig.depth_loss={self.depth_loss!r} not in {DEPTH_LOSSES}')
        if self.consistency not in CONSISTENCY_KINDS:
            raise ValueError(
                f'LossConfig.consistency={self.consistency!r} not in {CONSISTENCY_KINDS}'
            )
        if not 0.0 <= self.silog_lambda <= 1.0:
            raise ValueError(f'LossConfig.silog_lambda={self.silog_lambda} must be in [0, 1]')
        if not 0.0 < self.berhu_c <= 1.0:
            raise ValueError(f'LossConfig.berhu_c={self.berhu_c} must be in (0, 1]')
        cw = self.class_weights
        if isinstance(cw, str):
            if cw not in CLASS_WEIGHT_PRESETS:
                raise ValueError(
                    f'LossConfig.class_weights={cw!r}: a list of numbers or one of '
                    f'{CLASS_WEIGHT_PRESETS}'
                )
        elif cw is not None:
            ok = isinstance(cw, (list, tuple)) and len(cw) > 0
            ok = ok and all(_number(v) and 0 <= v < float('inf') for v in cw)
            if not ok or not any(v > 0 for v in cw):
                raise ValueError(
                    f'LossConfig.class_weights={cw!r} must be a non-empty list of finite numbers '
                    '>= 0 (not all 0), one per class'
                )
        p = self.measured_depth_for_3d
        if not _number(p) or not 0.0 <= p <= 1.0:
            raise ValueError(
                f'LossConfig.measured_depth_for_3d={p!r} must be a probability in [0, 1]'
            )
        wu = self.w_consistency_unlabelled
        if wu is not None:
            if not _number(wu) or not 0 <= wu < float('inf'):
                raise ValueError(
                    f'LossConfig.w_consistency_unlabelled={wu!r} must be null or a number >= 0'
                )
            if self.uncertainty_weighting:
                raise ValueError(
                    'LossConfig.w_consistency_unlabelled is a fixed weight: set it to null when '
                    'uncertainty_weighting is true'
                )
        wd, temp = self.w_distill, self.distill_temperature
        if not _number(wd) or not 0 <= wd < float('inf'):
            raise ValueError(f'LossConfig.w_distill={wd!r} must be a finite number >= 0')
        if not _number(temp) or not 0 < temp < float('inf'):
            raise ValueError(
                f'LossConfig.distill_temperature={temp!r} must be a finite number > 0'
            )

    def weights(self) -> Dict[str, float]:
        """{'seg2d': w, 'seg3d': w, 'depth': w, 'consistency': w}."""
        return {t: float(getattr(self, f'w_{t}')) for t in TERMS}

    def to_dict(self) -> Dict[str, Any]:
        """The fields as a plain dict (JSON/YAML-ready; ``from_dict`` reads it back)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> 'LossConfig':
        """Build from a mapping of field names (the training config's ``loss`` section)."""
        data = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f'loss config has unknown keys {unknown}; known: {sorted(known)}')
        return cls(**data)


def make_weighting(cfg: LossConfig) -> Optional[UncertaintyWeighting]:
    """The learned weighting module for ``cfg`` (over the terms with weight > 0), or None when
    ``cfg.uncertainty_weighting`` is off. Its parameters must go to the optimiser."""
    if not cfg.uncertainty_weighting:
        return None
    return UncertaintyWeighting([t for t, w in cfg.weights().items() if w > 0])


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
    'n_distill'; without ``teacher_out`` it is absent (the validation loss scores the task).
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
        has_depth = _mask(batch, 'has_depth', True, b, device)
        terms['depth'] = depth_loss(
            depth,
            depth_gt.to(device=device, dtype=torch.float32),
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
    if cfg.w_distill > 0 and teacher_out is not None:
        kd = distillation(out, teacher_out, cfg.distill_temperature)
        total = total + cfg.w_distill * kd.value
        result['distill'], result['n_distill'] = kd.value, torch.tensor(kd.count)
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
    networks. ``teacher``: the frozen model that ``cfg.w_distill`` > 0 distils from (run on the
    same input, with the same measured depth and BatchNorm mode as ``model``; core.distill);
    ValueError when that weight is set without one.
    """
    if cfg.w_distill > 0 and teacher is None:
        raise ValueError(
            f'LossConfig.w_distill={cfg.w_distill} needs a teacher model (training config '
            'model.teacher: a model file)'
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
    if cfg.w_distill > 0:
        t_out = teacher_outputs(teacher, rgb, K, measured, batchnorm_modes(model))
    return losses_from_outputs(out, batch, cfg, weighting, t_out)
