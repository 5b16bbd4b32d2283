"""The loss settings of M6 as plain data (the training config's ``loss`` section): which terms, at
what weights, and how each is computed (docs/method.md, "Loss settings"; core.train_step uses
them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

from .losses import CONSISTENCY_KINDS, DEPTH_LOSSES, UncertaintyWeighting

__all__ = ['CLASS_WEIGHT_PRESETS', 'LossConfig', 'TERMS', 'make_weighting']

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
    w_distill_depth: weight of the depth distillation term (core.distill.depth_distillation: mean
        |log d_student − log d_teacher| on every frame), added to the total like w_distill; > 0
        needs a teacher too. 0 (default) = off.
    w_normal: weight of the surface-normal term on the depth (core.normals.normal_loss: 1 − cos
        between the normals of the predicted and the label depth, on the frames with depth),
        added to the total like the distillation term (and, unlike it, kept in the validation
        loss: it scores the task's depth). 0 (default) = off.
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
    w_distill_depth: float = 0.0
    w_normal: float = 0.0

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
        for name in ('w_distill_depth', 'w_normal'):
            w = getattr(self, name)
            if not _number(w) or not 0 <= w < float('inf'):
                raise ValueError(f'LossConfig.{name}={w!r} must be a finite number >= 0')

    def needs_teacher(self) -> bool:
        """True when a distillation term is on (w_distill or w_distill_depth > 0): the training
        run then needs a teacher model (config model.teacher)."""
        return self.w_distill > 0 or self.w_distill_depth > 0

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
