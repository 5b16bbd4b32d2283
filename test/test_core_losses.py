"""M4 consistency variants, M5 supervised losses, weighting (core/losses.py)."""

import math

import pytest
import torch

from depth3dseg_ros.core.losses import (
    CONSISTENCY_KINDS,
    Term,
    UncertaintyWeighting,
    consistency,
    depth_loss,
    pixel_consistency,
    seg_ce,
    weighted_total,
)


def logits_of(*probs):
    """B=1, C=len(p), H=1, W=len(probs) logits whose softmax is each given distribution."""
    t = torch.tensor([[math.log(x) for x in p] for p in probs], dtype=torch.float64)  # W×C
    return t.T.reshape(1, len(probs[0]), 1, len(probs))


# ---------------------------------------------------------------- M4 consistency
P, Q = (0.5, 0.5), (0.9, 0.1)
KL_PQ = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)  # 0.510826
KL_QP = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)  # 0.368064
M = (0.7, 0.3)
JS = 0.5 * (0.5 * math.log(0.5 / 0.7) + 0.5 * math.log(0.5 / 0.3)) + 0.5 * (
    0.9 * math.log(0.9 / 0.7) + 0.1 * math.log(0.1 / 0.3)
)  # 0.101749
HAND = {'sym_kl': 0.5 * (KL_PQ + KL_QP), 'kl': KL_PQ, 'js': JS, 'mse': 0.4**2 + 0.4**2}


@pytest.mark.parametrize('kind', CONSISTENCY_KINDS)
def test_consistency_hand_values_two_classes(kind):
    assert HAND['sym_kl'] == pytest.approx(0.439445, abs=1e-6) and JS == pytest.approx(
        0.101749, abs=1e-6
    )
    v = pixel_consistency(logits_of(P), logits_of(Q), kind)
    assert v.shape == (1, 1, 1)
    assert v.item() == pytest.approx(HAND[kind], rel=1e-9)


@pytest.mark.parametrize('kind', CONSISTENCY_KINDS)
def test_consistency_zero_iff_identical(kind):
    torch.manual_seed(0)
    a = torch.randn(2, 5, 4, 3) * 4
    assert torch.all(pixel_consistency(a, a.clone(), kind) == 0)  # exactly 0
    b = a.clone()
    b[:, 1] += 0.5  # every pixel differs
    assert torch.all(pixel_consistency(a, b, kind) > 0)
    # a shift of all logits by a constant is the same distribution
    assert pixel_consistency(a, a + 3.0, kind).abs().max() < 1e-5


def test_consistency_symmetry():
    p, q = logits_of(P), logits_of(Q)
    for kind in ('sym_kl', 'js', 'mse'):
        assert pixel_consistency(p, q, kind).item() == pytest.approx(
            pixel_consistency(q, p, kind).item()
        )
    assert pixel_consistency(q, p, 'kl').item() == pytest.approx(KL_QP)
    assert pixel_consistency(p, q, 'kl').item() != pytest.approx(KL_QP)


def test_js_bounded_and_finite_for_extreme_logits():
    a = torch.tensor([[[[200.0]], [[-200.0]]]])
    b = torch.tensor([[[[-200.0]], [[200.0]]]])
    v = pixel_consistency(a, b, 'js').item()
    assert math.isfinite(v) and v == pytest.approx(math.log(2), rel=1e-4)


def test_kl_detaches_2d_target_sym_kl_does_not():
    a = torch.randn(1, 3, 2, 2, requires_grad=True)
    b = torch.randn(1, 3, 2, 2, requires_grad=True)
    pixel_consistency(a, b, 'kl').sum().backward()
    assert a.grad is None and b.grad.abs().sum() > 0
    a.grad = b.grad = None
    pixel_consistency(a, b, 'sym_kl').sum().backward()
    assert a.grad.abs().sum() > 0 and b.grad.abs().sum() > 0


def test_consistency_mean_over_valid_points_and_empty():
    p = logits_of(P, P)
    q = logits_of(Q, P)
    t = consistency(p, q, torch.tensor([[[[True, True]]]]), 'mse')
    assert t.count == 2 and t.value.item() == pytest.approx(0.32 / 2)
    t = consistency(p, q, torch.tensor([[[[True, False]]]]), 'mse')
    assert t.count == 1 and t.value.item() == pytest.approx(0.32)
    pr = p.clone().requires_grad_()
    t = consistency(pr, q, torch.zeros(1, 1, 1, 2, dtype=torch.bool), 'sym_kl')
    assert t.count == 0 and not t.present and t.value.item() == 0
    t.value.backward()
    assert torch.all(pr.grad == 0)


def test_unknown_kinds_raise():
    with pytest.raises(ValueError, match="kind='cos'"):
        pixel_consistency(torch.zeros(1, 2, 1, 1), torch.zeros(1, 2, 1, 1), 'cos')
    with pytest.raises(ValueError, match="kind='l2'"):
        depth_loss(torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1), 'l2')


# ---------------------------------------------------------------- M5 cross-entropy
def test_seg_ce_hand_value_ignores_void_and_unlabelled_samples():
    logits = torch.zeros(2, 3, 1, 2)
    logits[0, 2, 0, 1] = math.log(2.0)  # pixel (0,1): probs (1/4, 1/4, 1/2)
    labels = torch.tensor([[[1, 2]], [[1, 1]]])
    t = seg_ce(logits, labels, ignore_index=0, has_labels=torch.tensor([True, False]))
    assert t.count == 2
    assert t.value.item() == pytest.approx((math.log(3) + math.log(2)) / 2, rel=1e-6)
    labels[0, 0, 0] = 0  # void pixel -> ignored
    t = seg_ce(logits, labels, 0, torch.tensor([True, False]))
    assert t.count == 1 and t.value.item() == pytest.approx(math.log(2), rel=1e-6)
    # 3D: only pixels with a valid point count
    t = seg_ce(
        logits, labels, 0, None, point_valid=torch.tensor([[[[True, False]]], [[[False, True]]]])
    )
    assert t.count == 1 and t.value.item() == pytest.approx(math.log(3), rel=1e-6)


def test_seg_ce_empty_is_zero_with_finite_grad_and_bad_label_raises():
    logits = torch.randn(1, 3, 2, 2, requires_grad=True)
    t = seg_ce(logits, torch.zeros(1, 2, 2, dtype=torch.long), 0)
    assert t.count == 0 and t.value.item() == 0
    t.value.backward()
    assert torch.all(logits.grad == 0)
    with pytest.raises(ValueError, match='max=3'):
        seg_ce(logits, torch.full((1, 2, 2), 3), 0)
    with pytest.raises(ValueError, match='labels shape'):
        seg_ce(logits, torch.zeros(1, 2, 3, dtype=torch.long), 0)


# ---------------------------------------------------------------- M5 depth
def test_silog_hand_value_and_scale_invariance():
    pred = torch.tensor([[[[2.0, 4.0, 7.0]]]])
    tgt = torch.tensor([[[[1.0, 1.0, float('nan')]]]])
    g = [math.log(2), math.log(4)]
    hand = (g[0] ** 2 + g[1] ** 2) / 2 - 0.5 * ((g[0] + g[1]) / 2) ** 2  # 0.66062
    t = depth_loss(pred, tgt, 'silog')
    assert t.count == 2 and t.value.item() == pytest.approx(hand, rel=1e-6)
    scaled = torch.tensor([[[[2.0, 6.0]]]])
    assert depth_loss(
        scaled, torch.tensor([[[[1.0, 3.0]]]]), 'silog', silog_lambda=1.0
    ).value.item() == pytest.approx(0.0, abs=1e-7)
    assert depth_loss(scaled, torch.tensor([[[[1.0, 3.0]]]]), 'silog').value.item() > 0


def test_silog_is_mean_over_images():
    pred = torch.tensor([[[[2.0, 2.0]]], [[[1.0, 1.0]]]])
    tgt = torch.tensor([[[[1.0, float('nan')]]], [[[1.0, 1.0]]]])
    per0 = math.log(2) ** 2 * 0.5  # image 0, 1 pixel
    assert depth_loss(pred, tgt, 'silog').value.item() == pytest.approx(per0 / 2, rel=1e-6)


def test_l1_and_berhu_hand_values():
    pred = torch.tensor([[[[1.1, 3.0, 5.0]]]])
    tgt = torch.tensor([[[[1.0, 2.0, 0.0]]]])  # 0 = no depth
    assert depth_loss(pred, tgt, 'l1').value.item() == pytest.approx((0.1 + 1.0) / 2, rel=1e-6)
    # c = 0.2 * 1.0; |0.1| <= c -> 0.1; 1.0 -> (1 + 0.04) / 0.4 = 2.6
    assert depth_loss(pred, tgt, 'berhu').value.item() == pytest.approx((0.1 + 2.6) / 2, rel=1e-5)


@pytest.mark.parametrize('kind', ['silog', 'l1', 'berhu'])
def test_depth_loss_empty_masks_no_nan(kind):
    pred = torch.full((2, 1, 2, 2), 2.0, requires_grad=True)
    tgt = torch.ones(2, 1, 2, 2)
    tgt[0] = float('nan')
    t = depth_loss(pred, tgt, kind, has_depth=torch.tensor([True, False]))
    assert t.count == 0 and t.value.item() == 0
    t.value.backward()
    assert torch.all(pred.grad == 0)
    t = depth_loss(pred, tgt, kind, has_depth=torch.tensor([False, True]))
    assert t.count == 4 and t.value.item() > 0


# ---------------------------------------------------------------- weighting
def test_weighted_total_skips_absent_terms():
    x = torch.tensor(2.0, requires_grad=True)
    terms = {'seg2d': Term(x * 1.5, 10), 'depth': Term(x * 0, 0), 'consistency': Term(x, 3)}
    tot = weighted_total(terms, {'seg2d': 1.0, 'depth': 5.0, 'consistency': 0.1})
    assert tot.item() == pytest.approx(3.0 + 0.2)
    empty = weighted_total({'depth': Term(x * 0, 0)}, {'depth': 1.0})
    assert empty.item() == 0 and empty.requires_grad


def test_uncertainty_weighting_kendall_form_and_grads():
    uw = UncertaintyWeighting(['seg2d', 'depth', 'consistency'])
    ls, ld = torch.tensor(2.0), torch.tensor(0.4)
    terms = {'seg2d': Term(ls, 5), 'depth': Term(ld, 5), 'consistency': Term(torch.tensor(9.0), 0)}
    tot = uw(terms)
    assert tot.item() == pytest.approx(2.0 + 0.5 * 0.4)  # s = 0: classification L, regression L/2
    tot.backward()
    # d/ds [k e^-s L + s/2] at s=0 = -k L + 1/2; absent consistency gets no gradient
    assert uw.log_vars.grad.tolist() == pytest.approx([-2.0 + 0.5, -0.2 + 0.5, 0.0])
    with torch.no_grad():
        uw.log_vars[0] = math.log(4.0)
    assert uw(terms).item() == pytest.approx(2.0 / 4 + 0.5 * math.log(4.0) + 0.2)
    assert uw.weights()['seg2d'] == pytest.approx(0.25)
    with pytest.raises(ValueError, match='unique'):
        UncertaintyWeighting(['a', 'a'])
