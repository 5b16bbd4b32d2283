"""M6 training step (core/train_step.py): loss dict, missing labels, and the M3 gradient coupling
(3D losses reach the depth head through the back-projection of the predicted depth)."""

import math

import pytest
import torch

from depth3dseg_ros.core.losses import UncertaintyWeighting
from depth3dseg_ros.core.train_step import (
    TERMS,
    LossConfig,
    compute_losses,
    forward_model,
    make_weighting,
)
from trainutil import tiny_model

C, H, W = 4, 16, 20


def small_model(seed=0):
    """The real M1+M2+M3 model (core.model.Depth3DSeg), small enough for CPU tests."""
    return tiny_model(C, seed, p_stride=2)


def make_batch(b=2, h=H, w=W, seed=0):
    g = torch.Generator().manual_seed(seed)
    K = torch.tensor([[20.0, 0, w / 2], [0, 20.0, h / 2], [0, 0, 1]]).repeat(b, 1, 1)
    depth = torch.rand(b, 1, h, w, generator=g) * 3 + 0.5
    depth[:, :, 0, :] = float('nan')
    return {
        'rgb': torch.randn(b, 3, h, w, generator=g),
        'K': K,
        'depth': depth,
        'labels': torch.randint(0, C, (b, h, w), generator=g),
        'has_labels': torch.ones(b, dtype=torch.bool),
        'has_depth': torch.ones(b, dtype=torch.bool),
    }


def only(term, **kw):
    w = {f'w_{t}': 0.0 for t in TERMS}
    w[f'w_{term}'] = 1.0
    return LossConfig(**w, **kw)


def grad_norm(params):
    return sum(float(p.grad.abs().sum()) for p in params if p.grad is not None)


def test_keys_finite_and_total_is_weighted_sum():
    model = small_model(0)
    cfg = LossConfig()
    out = compute_losses(model, make_batch(), cfg)
    assert set(TERMS) | {'total'} <= set(out)
    assert all(torch.isfinite(out[k]) and out[k].item() > 0 for k in TERMS)
    expected = sum(cfg.weights()[t] * out[t] for t in TERMS)
    assert out['total'].item() == pytest.approx(expected.item(), rel=1e-6)
    assert out['n_depth'].item() == 2 * (H - 1) * W  # the NaN row is not counted
    out['total'].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize(
    'term,kw',
    [
        ('seg3d', {}),
        ('consistency', {}),
        ('consistency', {'consistency': 'kl'}),
        ('consistency', {'consistency': 'js'}),
    ],
)
def test_3d_terms_reach_depth_head_unless_detached(term, kw):
    model = small_model(1)
    batch = make_batch()
    compute_losses(model, batch, only(term, **kw))['total'].backward()
    assert grad_norm(model.net.depth_head.parameters()) > 0  # through backproject (M2/M3 coupling)
    model.zero_grad(set_to_none=True)
    compute_losses(model, batch, only(term, detach_depth_for_3d=True, **kw))['total'].backward()
    assert grad_norm(model.net.depth_head.parameters()) == 0
    assert grad_norm(model.pointnet.parameters()) > 0  # the 3D net still trains


def test_seg2d_alone_does_not_reach_depth_head():
    model = small_model()
    compute_losses(model, make_batch(), only('seg2d'))['total'].backward()
    assert (
        grad_norm(model.net.depth_head.parameters()) == 0
        and grad_norm(model.net.seg_head.parameters()) > 0
    )


def test_detached_path_gives_same_outputs():
    model = small_model(2)
    b = make_batch()
    a = forward_model(model, b['rgb'], b['K'])
    d = forward_model(model, b['rgb'], b['K'], detach_depth_for_3d=True)
    for k in ('depth', 'seg2d', 'seg3d', 'xyz', 'valid'):
        assert torch.equal(a[k], d[k]), k


def test_unlabelled_frames_train_on_depth_and_consistency():
    model = small_model()
    b = make_batch()
    b['has_labels'] = torch.tensor([False, False])
    out = compute_losses(model, b, LossConfig())
    assert out['seg2d'].item() == 0 and out['seg3d'].item() == 0
    assert out['n_seg2d'].item() == 0 and out['n_seg3d'].item() == 0
    assert out['total'].item() == pytest.approx(
        out['depth'].item() + 0.1 * out['consistency'].item(), rel=1e-6
    )
    # keys missing entirely: only consistency remains, no NaN
    out = compute_losses(model, {'rgb': b['rgb'], 'K': b['K']}, LossConfig())
    assert out['n_depth'].item() == 0 and out['n_seg2d'].item() == 0
    assert out['total'].item() == pytest.approx(0.1 * out['consistency'].item(), rel=1e-6)
    out['total'].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_mixed_batch_masks_per_sample():
    model = small_model()
    b = make_batch()
    full = compute_losses(model, b, LossConfig())
    b['has_labels'] = torch.tensor([True, False])
    b['has_depth'] = torch.tensor([False, True])
    half = compute_losses(model, b, LossConfig())
    assert half['n_seg2d'].item() == int((b['labels'][0] != 0).sum())
    assert half['n_depth'].item() == full['n_depth'].item() // 2
    assert half['consistency'].item() == pytest.approx(full['consistency'].item())


def test_frames_without_geometry_train_only_the_2d_term():
    """``has_geometry`` False (an image painted over a label layout): the sample keeps its 2D
    term and gives the 3D term and the consistency term nothing; the other sample is untouched."""
    model = small_model().eval()  # running BatchNorm statistics: samples independent
    b = make_batch()
    b['has_depth'] = torch.tensor([True, False])
    ref = compute_losses(model, b, LossConfig())
    b['has_geometry'] = torch.tensor([True, False])
    out = compute_losses(model, b, LossConfig())
    assert out['n_seg2d'].item() == ref['n_seg2d'].item()
    assert out['seg2d'].item() == pytest.approx(ref['seg2d'].item())
    alone = {k: v[:1] for k, v in b.items()}
    first = compute_losses(model, alone, LossConfig())
    for term in ('seg3d', 'consistency'):
        assert 0 < out[f'n_{term}'].item() == first[f'n_{term}'].item() < ref[f'n_{term}'].item()
    b['has_geometry'] = torch.tensor([False, False])
    none = compute_losses(model, b, LossConfig())
    assert none['n_seg3d'].item() == none['n_consistency'].item() == 0
    assert none['total'].item() == pytest.approx(none['seg2d'].item() + none['depth'].item())
    none['total'].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_separate_3d_labels_change_only_seg3d():
    model = small_model(3)
    b = make_batch()
    base = compute_losses(model, b, LossConfig())
    b['labels3d'] = (b['labels'] % (C - 1)) + 1
    sep = compute_losses(model, b, LossConfig())
    assert sep['seg2d'].item() == base['seg2d'].item()
    assert sep['seg3d'].item() != pytest.approx(base['seg3d'].item())


def test_uncertainty_weighting_needs_module_and_learns():
    model = small_model()
    cfg = LossConfig(uncertainty_weighting=True)
    with pytest.raises(ValueError, match='weighting'):
        compute_losses(model, make_batch(), cfg)
    uw = make_weighting(cfg)
    assert isinstance(uw, UncertaintyWeighting) and uw.names == list(TERMS)
    out = compute_losses(model, make_batch(), cfg, uw)
    hand = out['seg2d'] + out['seg3d'] + 0.5 * out['depth'] + 0.1 * out['consistency']  # s = 0
    assert out['total'].item() == pytest.approx(hand.item(), rel=1e-6)
    out['total'].backward()
    assert torch.all(uw.log_vars.grad != 0)
    assert make_weighting(LossConfig()) is None
    assert make_weighting(LossConfig(uncertainty_weighting=True, w_seg3d=0)).names == [
        'seg2d',
        'depth',
        'consistency',
    ]


def test_loss_config_plain_data_and_errors():
    cfg = LossConfig.from_dict({'depth_loss': 'berhu', 'w_consistency': 0.5})
    assert LossConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match='unknown keys'):
        LossConfig.from_dict({'w_foo': 1})
    with pytest.raises(ValueError, match='depth_loss'):
        LossConfig(depth_loss='l2')
    with pytest.raises(ValueError, match='consistency'):
        LossConfig(consistency='cos')
    with pytest.raises(ValueError, match='w_depth'):
        LossConfig(w_depth=-1)
    assert math.isclose(LossConfig().weights()['consistency'], 0.1)


def test_detached_ablation_refuses_data_parallel_wrapper():
    model = torch.nn.DataParallel(small_model())
    b = make_batch()
    with pytest.raises(ValueError, match='detach_depth_for_3d'):
        compute_losses(model, b, LossConfig(detach_depth_for_3d=True))


def test_losses_in_float32_under_bf16_autocast():
    model = small_model()
    b = make_batch()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = compute_losses(model, b, LossConfig())
    assert all(
        out[k].dtype == torch.float32 and torch.isfinite(out[k]) for k in TERMS + ('total',)
    )
    out['total'].backward()
    assert grad_norm(model.net.depth_head.parameters()) > 0


@pytest.mark.parametrize('detach', [False, True])
def test_measured_depth_builds_the_training_cloud_where_valid(detach):
    model = small_model(2)
    batch = make_batch()
    out = forward_model(model, batch['rgb'], batch['K'], detach, batch['depth'])
    z = out['xyz'][:, 2:3]
    ok = torch.isfinite(batch['depth'])
    assert torch.allclose(z[ok], batch['depth'][ok])  # the sensor depth where valid
    pred = out['depth'].detach()
    assert torch.allclose(z[~ok], pred[~ok])  # the prediction in its holes


def test_measured_depth_for_3d_probability_switches_the_cloud_and_is_checked():
    batch = make_batch()
    never = compute_losses(small_model(3), batch, only('seg3d'))
    always = compute_losses(small_model(3), batch, only('seg3d', measured_depth_for_3d=1.0))
    assert never['seg3d'].item() != pytest.approx(always['seg3d'].item())
    torch.manual_seed(5)
    a = compute_losses(small_model(3), batch, only('seg3d', measured_depth_for_3d=0.5))
    torch.manual_seed(5)
    b = compute_losses(small_model(3), batch, only('seg3d', measured_depth_for_3d=0.5))
    assert a['seg3d'].item() == b['seg3d'].item()  # drawn from torch's RNG
    with pytest.raises(ValueError, match='measured_depth_for_3d=1.5'):
        LossConfig(measured_depth_for_3d=1.5)


def test_unlabelled_consistency_weight_splits_the_term_by_frame():
    """``w_consistency_unlabelled`` (xMUDA's target weight): the total holds one consistency mean
    over the labelled frames × w_consistency and one over the unlabelled frames × its own weight;
    the reported term stays the mean over every frame."""
    model = small_model(3).eval()  # running BN statistics: a frame's outputs are batch-independent
    b = make_batch(b=3)
    b['has_labels'] = torch.tensor([True, False, True])
    cons_only = {'w_seg2d': 0.0, 'w_seg3d': 0.0, 'w_depth': 0.0, 'w_consistency': 0.2}
    base = compute_losses(model, b, LossConfig(**cons_only))
    each = [
        compute_losses(model, {k: v[i : i + 1] for k, v in b.items()}, LossConfig(**cons_only))
        for i in range(3)
    ]
    out = compute_losses(model, b, LossConfig(**cons_only, w_consistency_unlabelled=1.5))
    assert out['consistency'].item() == pytest.approx(base['consistency'].item())
    n = [e['n_consistency'].item() for e in each]
    c = [e['consistency'].item() for e in each]
    labelled = (c[0] * n[0] + c[2] * n[2]) / (n[0] + n[2])
    assert out['total'].item() == pytest.approx(0.2 * labelled + 1.5 * c[1], rel=1e-5)
    # weight 0 on the unlabelled frames leaves them no consistency gradient
    model.zero_grad(set_to_none=True)
    b2 = {k: v[1:2] for k, v in b.items()}
    out = compute_losses(model, b2, LossConfig(**cons_only, w_consistency_unlabelled=0.0))
    assert out['total'].item() == 0 and out['consistency'].item() > 0
    with pytest.raises(ValueError, match='w_consistency_unlabelled'):
        LossConfig(w_consistency_unlabelled=-1)
    with pytest.raises(ValueError, match='uncertainty_weighting'):
        LossConfig(w_consistency_unlabelled=1.0, uncertainty_weighting=True)
