"""Distillation from a frozen teacher (core.distill; LossConfig.w_distill, "learning without
forgetting")."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from depth3dseg_ros.core.distill import (
    batchnorm_modes,
    depth_distillation,
    distillation,
    kd_term,
    match_batchnorm_modes,
    teacher_outputs,
)
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.train_step import LossConfig, compute_losses
from trainutil import tiny_model


def _model() -> Depth3DSeg:
    return tiny_model()


def _batch(b: int = 2) -> dict:
    g = torch.Generator().manual_seed(1)
    K = torch.tensor([[50.0, 0, 32], [0, 50.0, 24], [0, 0, 1]]).expand(b, 3, 3)
    return {
        'rgb': torch.randn(b, 3, 48, 64, generator=g),
        'K': K,
        'labels': torch.randint(0, 4, (b, 48, 64), generator=g),
        'depth': 1 + 3 * torch.rand(b, 1, 48, 64, generator=g),
    }


def test_kd_term_is_hintons_loss_zero_at_the_teacher_and_trains_the_student_only():
    g = torch.Generator().manual_seed(0)
    t = torch.randn(2, 4, 3, 5, generator=g, requires_grad=True)
    assert float(kd_term(t.detach().clone(), t, 2.0).value) == pytest.approx(0.0, abs=1e-6)
    s = torch.randn(2, 4, 3, 5, generator=g, requires_grad=True)
    term = kd_term(s, t, 3.0)
    # by hand at one pixel: T^2 * sum p_t (log p_t - log p_s) at temperature T
    with torch.no_grad():
        p_t = torch.softmax(t[0, :, 1, 2] / 3, 0)
        by_hand = 9 * float((p_t * (p_t.log() - torch.log_softmax(s[0, :, 1, 2] / 3, 0))).sum())
    keep = torch.zeros(2, 3, 5, dtype=torch.bool)
    keep[0, 1, 2] = True
    assert float(kd_term(s, t, 3.0, keep).value.detach()) == pytest.approx(by_hand, rel=1e-5)
    assert term.count == 30 and float(term.value.detach()) > 0
    term.value.backward()
    assert t.grad is None and s.grad is not None and float(s.grad.abs().sum()) > 0
    empty = kd_term(s, t, 3.0, torch.zeros(2, 3, 5, dtype=torch.bool))
    assert empty.count == 0 and float(empty.value.detach()) == 0.0
    with pytest.raises(ValueError, match='temperature=0'):
        kd_term(s, t, 0)
    with pytest.raises(ValueError, match=r'\(2, 4, 3, 5\).*\(2, 5, 3, 5\)'):
        kd_term(s, torch.zeros(2, 5, 3, 5), 2.0)


def test_kd_term_is_never_negative_where_student_and_teacher_nearly_agree():
    """KL >= 0, but float32 rounding of the per-pixel sums gives about -1e-8 for logits 1e-6 apart
    (seeds 0, 2, 3, 6 ... before the per-pixel clamp; a logged term of -7e-9 at a fine-tune's first
    step): the term is clamped per pixel, so it is >= 0 and still ~0 there."""
    for seed in range(8):
        g = torch.Generator().manual_seed(seed)
        teacher = 3 * torch.randn(2, 14, 48, 64, generator=g)
        student = teacher + 1e-6 * torch.randn(teacher.shape, generator=g)
        v = float(kd_term(student, teacher, 2.0).value)
        assert 0 <= v <= 1e-6, (seed, v)


def test_a_gradient_step_on_the_term_moves_the_student_towards_the_teacher():
    g = torch.Generator().manual_seed(2)
    t = torch.randn(1, 5, 4, 4, generator=g)
    s = torch.randn(1, 5, 4, 4, generator=g, requires_grad=True)
    before = float(kd_term(s, t, 2.0).value.detach())
    kd_term(s, t, 2.0).value.backward()
    with torch.no_grad():
        s -= 0.5 * s.grad
    assert float(kd_term(s, t, 2.0).value.detach()) < before


@pytest.mark.parametrize(
    'weight, term, head',
    [('w_distill', 'distill', 'seg_head'), ('w_distill_depth', 'distill_depth', 'depth_head')],
)
def test_a_copy_of_the_model_as_teacher_gives_zero_and_the_total_adds_the_weighted_term(
    weight, term, head
):
    """Each distillation term (segmentation; depth) is 0 for a copy of the student, positive for
    a teacher whose head differs, and enters the total with its weight, alone."""
    model = _model().eval()
    teacher = copy.deepcopy(model)
    batch = _batch()
    cfg = LossConfig(**{weight: 2.5})
    r = compute_losses(model, batch, cfg, teacher=teacher)
    assert float(r[term].detach()) == pytest.approx(0.0, abs=1e-5)
    assert int(r[f'n_{term}']) == 2 * 48 * 64
    assert {'distill', 'distill_depth'} & set(r) == {term}
    with torch.no_grad():  # another teacher: a positive term, added to the total with its weight
        for p in getattr(teacher.net, head).parameters():
            p.add_(0.3 * torch.randn_like(p))
    r = compute_losses(model, batch, cfg, teacher=teacher)
    plain = compute_losses(model, batch, LossConfig())
    assert float(r[term].detach()) > 0
    assert float(r['total'].detach()) == pytest.approx(
        float(plain['total']) + 2.5 * float(r[term].detach()), rel=1e-5
    )
    assert term not in plain and not teacher.training


def test_the_term_covers_the_3d_logits_of_points_valid_in_both_clouds():
    model = _model().eval()
    batch = _batch()
    out = model(batch['rgb'], batch['K'])
    t_out = {k: v.clone() for k, v in out.items()}
    t_out['seg3d'] = t_out['seg3d'] + torch.randn_like(t_out['seg3d'])
    d3 = distillation(out, t_out, 2.0)
    assert float(d3.value) > 0  # the 2D logits agree: the 3D ones alone make the term
    t_out['valid'] = torch.zeros_like(out['valid'])  # no point valid in the teacher's cloud
    assert float(distillation(out, t_out, 2.0).value) == pytest.approx(0.0, abs=1e-6)


def test_config_errors_name_the_field():
    for bad in (-1.0, True, math.inf, 'x'):
        with pytest.raises(ValueError, match='LossConfig.w_distill='):
            LossConfig(w_distill=bad)
    for bad in (0, -2.0, math.inf):
        with pytest.raises(ValueError, match='LossConfig.distill_temperature='):
            LossConfig(distill_temperature=bad)
    with pytest.raises(ValueError, match=r'w_distill=1.0 / w_distill_depth=0.0 needs a teacher'):
        compute_losses(_model(), _batch(), LossConfig(w_distill=1.0))
    for bad in (-1.0, True, math.inf, 'x'):
        with pytest.raises(ValueError, match='LossConfig.w_distill_depth='):
            LossConfig(w_distill_depth=bad)
    with pytest.raises(ValueError, match=r'w_distill=0.0 / w_distill_depth=0.5 needs a teacher'):
        compute_losses(_model(), _batch(), LossConfig(w_distill_depth=0.5))


def test_depth_distillation_is_the_mean_log_ratio_and_trains_the_student_only():
    """|log d_s − log d_t| averaged over pixels where both depths are finite and > 0; zero at
    the teacher; gradients reach the student only; shapes are checked."""
    t = torch.full((1, 1, 2, 2), 2.0, requires_grad=True)
    s = torch.tensor([[[[2.0, 4.0], [1.0, float('nan')]]]], requires_grad=True)
    term = depth_distillation(s, t)
    assert term.count == 3
    assert float(term.value) == pytest.approx((0 + math.log(2) + math.log(2)) / 3, rel=1e-6)
    term.value.backward()
    assert t.grad is None and s.grad is not None
    assert bool(torch.isfinite(s.grad).all()) and float(s.grad[0, 0, 0, 1]) > 0
    assert float(depth_distillation(t.detach(), t).value) == 0.0
    none = depth_distillation(torch.zeros(1, 1, 2, 2), t)
    assert none.count == 0 and float(none.value) == 0.0
    with pytest.raises(ValueError, match=r'\(1, 1, 2, 2\).*\(1, 1, 2, 3\)'):
        depth_distillation(s, torch.ones(1, 1, 2, 3))
    with pytest.raises(ValueError, match='B×1×H×W'):
        depth_distillation(torch.ones(1, 2, 2, 2), torch.ones(1, 2, 2, 2))


def test_a_training_student_and_its_unmoved_teacher_give_zero_and_the_teacher_keeps_its_stats():
    """The teacher normalises as the student does: in training mode (BatchNorm batch statistics)
    a student that has not moved from the teacher's weights has a term of 0 (found: a teacher in
    eval mode gave 0.3–1.1 from the BatchNorm mode alone), and the teacher's running statistics do
    not change."""
    model = _model()
    for m in model.modules():  # running statistics unlike any one batch's
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.add_(0.5)
            m.running_var.mul_(3.0)
    teacher = copy.deepcopy(model).eval()
    stats = {k: v.clone() for k, v in teacher.state_dict().items()}
    model.train()
    r = compute_losses(model, _batch(), LossConfig(w_distill=1.0), teacher=teacher)
    assert float(r['distill'].detach()) == pytest.approx(0.0, abs=1e-5)
    moved = {k for k, v in stats.items() if not torch.equal(teacher.state_dict()[k], v)}
    assert {k.rsplit('.', 1)[-1] for k in moved} <= {'num_batches_tracked'}  # a counter only
    assert not teacher.training
    eval_teacher = teacher_outputs(teacher, _batch()['rgb'], _batch()['K'])
    out = model(_batch()['rgb'], _batch()['K'])
    assert float(distillation(out, eval_teacher, 2.0).value.detach()) > 0.01


def test_a_student_with_frozen_layers_gets_a_teacher_normalising_layer_by_layer():
    """train.trainable freezes the BatchNorm layers outside the trained prefixes (found by
    review: a teacher all in batch statistics gave 0.043 for an unmoved student); each teacher
    layer takes its student layer's mode, and a teacher of another arch is refused while the
    modes are mixed."""
    from depth3dseg_ros.training.trainable import freeze_frozen_batchnorm, select_trainable

    model = _model()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.add_(0.5)
            m.running_var.mul_(3.0)
    teacher = copy.deepcopy(model).eval()
    select_trainable(model, ['net.depth_head'])
    model.train()
    assert freeze_frozen_batchnorm(model) > 0
    r = compute_losses(model, _batch(), LossConfig(w_distill=1.0), teacher=teacher)
    assert float(r['distill'].detach()) == pytest.approx(0.0, abs=1e-5)
    modes = batchnorm_modes(model)
    assert set(modes.values()) == {True, False}
    other = Depth3DSeg(4, width=0.25, dec_ch=8, head_ch=8, p_channels=[8], p_head=8)
    other.net.extra_bn = torch.nn.BatchNorm2d(3)  # one layer the student does not have
    with pytest.raises(ValueError, match='mixes BatchNorm layers'):
        match_batchnorm_modes(other, modes)
    match_batchnorm_modes(other, dict.fromkeys(modes, True))  # one mode: applied to all
    assert all(m.training for m in other.modules() if isinstance(m, torch.nn.BatchNorm2d))


def test_the_teacher_builds_its_cloud_from_the_measured_depth_the_student_gets():
    """With measured_depth_for_3d the teacher sees the same sensor depth as the student: an
    unmoved student still scores 0 although the two clouds come from measured depth."""
    model = _model().eval()
    teacher = copy.deepcopy(model)
    cfg = LossConfig(w_distill=1.0, measured_depth_for_3d=1.0)
    r = compute_losses(model, _batch(), cfg, teacher=teacher)
    assert float(r['distill'].detach()) == pytest.approx(0.0, abs=1e-5)
    out = model(_batch()['rgb'], _batch()['K'])  # the prediction's cloud: other 3D logits
    t_meas = teacher_outputs(teacher, _batch()['rgb'], _batch()['K'], _batch()['depth'])
    assert float(distillation(out, t_meas, 2.0).value.detach()) > 1e-4
