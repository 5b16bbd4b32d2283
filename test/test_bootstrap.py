"""Frame bootstrap intervals (core.bootstrap): the pooled convention of core.metrics, resampled
frames, paired differences; and the per-frame counts of SegDepthEvaluator they are made from."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depth3dseg_ros.core import bootstrap
from depth3dseg_ros.core.metrics import ConfusionMatrix, SegDepthEvaluator

C = 5  # void + 4 classes


def _frames(rng, n, acc=0.7, pixels=400):
    """n per-frame confusion matrices: each frame shows 1-3 random classes, predicted right with
    probability ``acc`` and otherwise as a random class."""
    out = np.zeros((n, C, C), np.int64)
    for f in range(n):
        present = rng.choice(np.arange(1, C), size=rng.integers(1, 4), replace=False)
        gt = rng.choice(present, size=pixels)
        pred = np.where(rng.random(pixels) < acc, gt, rng.integers(1, C, size=pixels))
        cm = ConfusionMatrix(C, 0)
        cm.update(pred, gt)
        out[f] = cm.mat
    return out


def test_miou_of_matches_the_confusion_matrix_convention():
    rng = np.random.default_rng(0)
    frames = _frames(rng, 6)
    for m in list(frames) + [frames.sum(0)]:
        cm = ConfusionMatrix(C, 0)
        cm.mat[:] = m
        assert bootstrap.miou_of(m) == pytest.approx(cm.miou())
    # classes in neither ground truth nor prediction are left out; predicted-only count as 0
    m = np.zeros((C, C), np.int64)
    m[1, 1], m[2, 3] = 10, 5
    assert bootstrap.miou_of(m) == pytest.approx((1.0 + 0.0 + 0.0) / 3)
    assert np.isnan(bootstrap.miou_of(np.zeros((C, C))))
    np.testing.assert_allclose(bootstrap.miou_of(frames), [bootstrap.miou_of(f) for f in frames])
    with pytest.raises(ValueError, match=r'\(\.\.\., C, C\)'):
        bootstrap.miou_of(np.zeros((3, 4)))


def test_interval_brackets_the_pooled_value_and_is_reproducible():
    frames = _frames(np.random.default_rng(1), 11)
    a = bootstrap.bootstrap_miou(frames, resamples=500, seed=3)
    assert a.value == pytest.approx(bootstrap.miou_of(frames.sum(0)))
    assert a.lo < a.value < a.hi and a.frames == 11 and a.resamples == 500
    assert bootstrap.bootstrap_miou(frames, resamples=500, seed=3) == a
    assert bootstrap.bootstrap_miou(frames, resamples=500, seed=4) != a
    # the same frame repeated: every resample pools the same proportions, a zero-width interval
    same = np.repeat(frames[:1], 8, axis=0)
    b = bootstrap.bootstrap_miou(same, resamples=200)
    assert b.lo == pytest.approx(b.value) and b.hi == pytest.approx(b.value)


def test_more_frames_give_a_narrower_interval():
    rng = np.random.default_rng(2)
    few = bootstrap.bootstrap_miou(_frames(rng, 10, acc=0.6), resamples=1000)
    many = bootstrap.bootstrap_miou(_frames(rng, 160, acc=0.6), resamples=1000)
    assert (many.hi - many.lo) < 0.5 * (few.hi - few.lo)


def test_frames_without_labels_are_not_resampled():
    frames = _frames(np.random.default_rng(3), 5)
    padded = np.concatenate([frames, np.zeros((4, C, C), np.int64)])
    padded[5, 0, 2] = 99  # void ground truth only: no counted pixel either
    a = bootstrap.bootstrap_miou(frames, resamples=300)
    b = bootstrap.bootstrap_miou(padded, resamples=300)
    assert b.frames == 5 and (b.value, b.lo, b.hi) == (a.value, a.lo, a.hi)
    none = bootstrap.bootstrap_miou(np.zeros((3, C, C), np.int64))
    assert none.frames == 0 and none.value is None and none.lo is None


def test_absrel_interval_pools_sums_over_pixels():
    sums = np.array([10.0, 30.0, 0.0, 5.0])
    pix = np.array([100, 100, 0, 50])
    a = bootstrap.bootstrap_absrel(sums, pix, resamples=400)
    assert a.value == pytest.approx(45.0 / 250) and a.frames == 3
    assert 0.1 - 1e-12 <= a.lo <= a.value <= a.hi <= 0.3 + 1e-12  # within the frames' extremes
    with pytest.raises(ValueError, match='absrel_sums has 2 frames, depth_pixels 3'):
        bootstrap.bootstrap_absrel([1.0, 2.0], [1, 2, 3])


def test_paired_difference_of_a_model_with_itself_is_zero():
    frames = _frames(np.random.default_rng(4), 9)
    d = bootstrap.paired_miou(frames, frames, resamples=300)
    assert d.value == 0 and d.lo == 0 and d.hi == 0 and d.p_not_better == 1.0
    s, n = np.arange(1.0, 10.0), np.full(9, 10)
    r = bootstrap.paired_absrel(s, n, s, n, resamples=300)
    assert r.value == 0 and r.p_not_better == 1.0


def _corrected(frames, share):
    """``frames`` with ``share`` of each row's errors moved onto the diagonal."""
    out = frames.copy()
    for f in range(len(out)):
        off = out[f] - np.diag(np.diag(out[f]))
        moved = (off * share).astype(np.int64)
        out[f] -= moved
        out[f][np.diag_indices(C)] += moved.sum(1)
    return out


def test_paired_difference_of_a_better_model_on_every_frame():
    rng = np.random.default_rng(5)
    base = _frames(rng, 11, acc=0.5)
    d = bootstrap.paired_miou(base, _corrected(base, 0.4), resamples=500)
    assert d.value > 0 and d.lo > 0 and d.p_not_better == 0.0
    # lower AbsRel is better: a new model with 20 % smaller errors everywhere
    s, n = rng.random(11) * 30 + 5, np.full(11, 100)
    r = bootstrap.paired_absrel(s, n, 0.8 * s, n, resamples=500)
    assert r.value < 0 and r.hi < 0 and r.p_not_better == 0.0
    worse = bootstrap.paired_absrel(0.8 * s, n, s, n, resamples=500)
    assert worse.lo > 0 and worse.p_not_better == 1.0


def test_paired_interval_is_narrower_than_the_unpaired_one():
    """Both models err on the same hard frames: pairing removes the frames' common part."""
    rng = np.random.default_rng(6)
    base = np.concatenate([_frames(rng, 1, acc=a) for a in np.linspace(0.1, 0.9, 11)])
    d = bootstrap.paired_miou(base, _corrected(base, 0.05), resamples=1000)
    a = bootstrap.bootstrap_miou(base, resamples=1000)
    assert (d.hi - d.lo) < 0.5 * (a.hi - a.lo)


@pytest.mark.parametrize(
    'call, match',
    [
        (lambda: bootstrap.bootstrap_miou(np.zeros((2, 3, 4))), 'F×C×C'),
        (lambda: bootstrap.bootstrap_miou(np.zeros((2, 3, 3)), level=1.5), 'level=1.5'),
        (lambda: bootstrap.bootstrap_miou(np.zeros((2, 3, 3)), resamples=0), 'resamples=0'),
        (lambda: bootstrap.paired_miou(np.zeros((2, 3, 3)), np.zeros((3, 3, 3))), 'differ'),
        (lambda: bootstrap.paired_absrel([1], [1], [1, 2], [1, 2]), 'differ in length'),
        (lambda: bootstrap.frame_weights(0, 10), 'frames=0'),
    ],
)
def test_bad_inputs_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _batch(rng, b=3, h=4, w=5, k=C):
    out = {
        'seg2d': torch.tensor(rng.normal(size=(b, k, h, w)), dtype=torch.float32),
        'seg3d': torch.tensor(rng.normal(size=(b, k, h, w)), dtype=torch.float32),
        'depth': torch.tensor(rng.uniform(0.5, 4, size=(b, 1, h, w)), dtype=torch.float32),
        'valid': torch.tensor(rng.random((b, 1, h, w)) < 0.7),
    }
    labels = torch.tensor(rng.integers(0, k, size=(b, h, w)))
    gt = torch.tensor(rng.uniform(0.5, 4, size=(b, 1, h, w)), dtype=torch.float32)
    gt[1] = float('nan')  # a frame without depth
    return out, labels, gt


def test_evaluator_per_frame_counts_add_up_to_the_pooled_ones():
    rng = np.random.default_rng(7)
    ev = SegDepthEvaluator(C, 0, per_frame=True, fusion_w3d=0.25)
    for _ in range(2):
        ev.update(*_batch(rng))
    fr = ev.frames()
    assert fr['conf_fused'].shape == (6, C, C) and fr['depth_pixels'].shape == (6,)
    for k in ('2d', '3d', 'fused'):
        np.testing.assert_array_equal(fr[f'conf_{k}'].sum(0), ev.cm[k].mat)
    assert fr['depth_pixels'].sum() == ev.depth.n and fr['depth_pixels'][1] == 0
    assert fr['absrel_sum'].sum() == pytest.approx(ev.depth.sum_absrel)
    with pytest.raises(RuntimeError, match='per_frame=False'):
        SegDepthEvaluator(C, 0).frames()


def test_per_frame_counts_do_not_change_the_pooled_figures():
    rng = np.random.default_rng(8)
    batches = [_batch(rng) for _ in range(2)]
    a, b = SegDepthEvaluator(C, 0), SegDepthEvaluator(C, 0, per_frame=True)
    for x in batches:
        a.update(*x)
        b.update(*x)
    assert a.summary() == b.summary()
