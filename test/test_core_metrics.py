"""Dataset-accumulated segmentation and depth metrics (core/metrics.py)."""

import json
import math

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.metrics import (
    ConfusionMatrix,
    DepthMetrics,
    SegDepthEvaluator,
    fuse_probs,
    predict_labels,
)

GT = np.array([1, 1, 2, 2, 0, 3])
PRED = np.array([1, 2, 2, 2, 1, 1])  # the void-GT pixel (index 4) is not counted


def test_confusion_matrix_hand_computed():
    cm = ConfusionMatrix(4, void_id=0)
    cm.update(PRED, GT)
    expected = np.zeros((4, 4), np.int64)
    expected[1, 1], expected[1, 2], expected[2, 2], expected[3, 1] = 1, 1, 2, 1
    np.testing.assert_array_equal(cm.mat, expected)
    iou = cm.iou()
    assert np.isnan(iou[0])  # void
    np.testing.assert_allclose(iou[1:], [1 / 3, 2 / 3, 0.0])  # TP/(TP+FP+FN)
    assert cm.miou() == pytest.approx(1 / 3)
    assert cm.pixel_accuracy() == pytest.approx(3 / 5)
    assert cm.total == 5


def test_miou_excludes_classes_in_neither_but_counts_pred_only():
    cm = ConfusionMatrix(6, void_id=0)  # classes 4, 5 never appear
    cm.update(PRED, GT)
    assert cm.miou() == pytest.approx(1 / 3)
    s = cm.summary(['void', 'a', 'b', 'c', 'd', 'e'])
    assert s['iou']['d'] is None and 'void' not in s['iou']
    cm2 = ConfusionMatrix(4, void_id=0)
    cm2.update(np.array([2]), np.array([1]))  # class 2 only predicted: IoU 0 and counted
    assert cm2.iou()[1:3].tolist() == [0.0, 0.0] and cm2.miou() == 0.0


def test_miou_gt_counts_only_ground_truth_classes_and_summary_has_the_matrix():
    cm = ConfusionMatrix(5, void_id=0)
    cm.update(np.array([1, 2, 2, 4, 1]), np.array([1, 1, 2, 2, 0]))  # 4 only predicted
    iou = cm.iou()
    np.testing.assert_allclose(iou[1:3], [1 / 2, 1 / 3])
    assert iou[4] == 0.0 and np.isnan(iou[3])
    assert cm.miou() == pytest.approx((1 / 2 + 1 / 3 + 0.0) / 3)  # predicted-only class counts
    assert cm.miou_gt() == pytest.approx((1 / 2 + 1 / 3) / 2)  # ... not here
    s = json.loads(json.dumps(cm.summary()))
    assert s['miou_gt'] == pytest.approx(cm.miou_gt())
    assert s['confusion'] == cm.mat.tolist() and s['confusion'][2][4] == 1  # row gt, col pred
    assert math.isnan(ConfusionMatrix(3).miou_gt())


def test_torch_and_numpy_counts_agree_and_valid_mask():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 5, (2, 7, 9))
    p = rng.integers(0, 5, (2, 7, 9))
    v = rng.random((2, 7, 9)) > 0.3
    a, b = ConfusionMatrix(5), ConfusionMatrix(5)
    a.update(p, g, v)
    b.update(torch.from_numpy(p), torch.from_numpy(g), torch.from_numpy(v))
    np.testing.assert_array_equal(a.mat, b.mat)
    assert a.total == int(((g != 0) & v).sum())
    v_before = v.copy()
    ConfusionMatrix(5).update(p, g, v)
    np.testing.assert_array_equal(v, v_before)  # caller's mask not modified


def test_confusion_matrix_errors():
    cm = ConfusionMatrix(3)
    with pytest.raises(ValueError, match='max=3'):
        cm.update(np.array([3]), np.array([1]))
    with pytest.raises(ValueError, match='shape'):
        cm.update(np.array([1, 2]), np.array([1]))
    cm.update(np.array([7]), np.array([0]))  # void GT: not checked, not counted
    assert cm.total == 0 and math.isnan(cm.miou())


def test_accumulated_differs_from_mean_of_frames():
    frames = [
        (np.array([1, 1, 1, 1]), np.array([1, 1, 1, 1])),  # frame mIoU 1 (class 2 absent)
        (np.array([1]), np.array([2])),
    ]  # frame mIoU 0
    per_frame = []
    acc = ConfusionMatrix(3)
    for p, g in frames:
        one = ConfusionMatrix(3)
        one.update(p, g)
        per_frame.append(one.miou())
        acc.update(p, g)
    assert np.mean(per_frame) == pytest.approx(0.5)
    # summed matrix: IoU1 = 4/5, IoU2 = 0 -> 0.4
    assert acc.miou() == pytest.approx(0.4)
    # depth: AbsRel/RMSE over all pixels, not mean of per-frame values
    dm, per = DepthMetrics(), []
    for d, g in [([2.0], [1.0]), ([1.0, 3.0], [1.0, 3.0])]:
        one = DepthMetrics()
        one.update(np.array(d), np.array(g))
        per.append(one.summary())
        dm.update(np.array(d), np.array(g))
    s = dm.summary()
    assert np.mean([x['absrel'] for x in per]) == pytest.approx(0.5)
    assert s['absrel'] == pytest.approx(1 / 3)
    assert np.mean([x['rmse'] for x in per]) == pytest.approx(0.5)
    assert s['rmse'] == pytest.approx(math.sqrt(1 / 3))


def test_depth_metrics_hand_values():
    dm = DepthMetrics()
    pred = torch.tensor([1.0, 1.2, 3.0, 5.0, 7.0])
    gt = torch.tensor([1.0, 1.0, 2.0, float('nan'), 0.0])  # last two: no ground truth
    dm.update(pred, gt)
    s = dm.summary()
    assert s['pixels'] == 3
    assert s['absrel'] == pytest.approx((0 + 0.2 + 0.5) / 3)
    assert s['rmse'] == pytest.approx(math.sqrt((0 + 0.04 + 1.0) / 3))
    assert (s['delta1'], s['delta2'], s['delta3']) == pytest.approx((2 / 3, 1.0, 1.0))
    # a NaN prediction at a valid pixel is an error, not skipped
    bad = DepthMetrics()
    bad.update(np.array([np.nan]), np.array([2.0]))
    assert bad.summary()['delta3'] == 0.0 and bad.summary()['absrel'] == pytest.approx(5.0)
    assert DepthMetrics().summary()['absrel'] is None


def logits(*probs):
    t = torch.tensor([[math.log(x) for x in p] for p in probs])
    return t.T.reshape(1, len(probs[0]), 1, len(probs))


def test_fused_labels_and_void_excluded():
    s2 = logits((0.1, 0.6, 0.3), (0.9, 0.05, 0.05))
    s3 = logits((0.1, 0.1, 0.8), (0.9, 0.04, 0.06))
    fused = fuse_probs(s2, s3)
    # void excluded before averaging (as at inference): (0, 6/9, 3/9) and (0, 1/9, 8/9) -> mean
    torch.testing.assert_close(fused[0, :, 0, 0], torch.tensor([0.0, 7 / 18, 11 / 18]))
    torch.testing.assert_close(
        fuse_probs(s2, s3, void_id=None)[0, :, 0, 0], torch.tensor([0.1, 0.35, 0.55])
    )
    # where void dominates one head, renormalising decides: 2D (0.8, 0.15, 0.05) says class 1 with
    # 0.75 of the non-void mass; 3D (0.02, 0.40, 0.58) says 2 -> fused over non-void: (0.5791,
    # 0.4209)
    a, b = logits((0.8, 0.15, 0.05)), logits((0.02, 0.40, 0.58))
    assert predict_labels(fuse_probs(a, b)).item() == 1
    assert predict_labels(fuse_probs(a, b, void_id=None)).item() == 2
    assert predict_labels(s2).tolist() == [[[1, 1]]]  # void (0) never predicted
    assert predict_labels(s3).tolist() == [[[2, 2]]]
    assert predict_labels(fused).tolist() == [[[2, 2]]]
    # without a 3D point the fused distribution is the 2D one
    valid = torch.tensor([[[[False, True]]]])
    assert predict_labels(fuse_probs(s2, s3, valid)).tolist() == [[[1, 2]]]


def test_evaluator_summary_json_and_3d_valid_only():
    ev = SegDepthEvaluator(3, 0, names=['void', 'a', 'b'])
    out = {
        'seg2d': logits((0.1, 0.6, 0.3), (0.1, 0.6, 0.3)),
        'seg3d': logits((0.1, 0.1, 0.8), (0.1, 0.1, 0.8)),
        'depth': torch.tensor([[[[2.0, 1.0]]]]),
        'valid': torch.tensor([[[[True, False]]]]),
    }
    ev.update(out, torch.tensor([[[2, 2]]]), torch.tensor([[[[2.0, float('nan')]]]]))
    s = ev.summary()
    json.dumps(s, allow_nan=False)
    assert s['seg2d']['pixels'] == 2 and s['seg3d']['pixels'] == 1 and s['fused']['pixels'] == 2
    assert s['miou_2d'] == 0.0 and s['miou_3d'] == 1.0
    assert s['fused']['pixel_acc'] == pytest.approx(0.5)  # pixel 1 has no point: 2D label
    assert s['absrel'] == 0.0 and s['delta1'] == 1.0 and s['depth']['pixels'] == 1


def test_depth_range_p95_per_frame():
    """The range figures: each frame's 95th percentile of predicted and true depth over its valid
    pixels, and the median over frames of their ratio (a head stopping at 3 m in a 6 m room:
    0.5)."""
    from depth3dseg_ros.core.metrics import DepthMetrics

    g = np.linspace(1.0, 6.0, 2000, dtype=np.float32).reshape(1, 1, 40, 50)
    gt = np.concatenate([g, g / 2])  # two frames, true p95 5.75 m and 2.875 m
    pred = np.minimum(gt, 3.0)  # a head that stops at 3 m
    pred[1, 0, 0, :20] = np.nan  # counted as max-depth errors, not dropped (1 %)
    gt[0, 0, 0, :10] = 0.0  # no data: not counted
    dm = DepthMetrics()
    dm.update(pred, gt)
    s = dm.summary()
    assert len(dm.p95) == 2
    assert dm.p95[0][0] == pytest.approx(3.0) and dm.p95[0][1] == pytest.approx(5.75, abs=0.01)
    assert s['p95_ratio'] == pytest.approx(np.median([a / b for a, b in dm.p95]))
    assert dm.p95[1][0] == pytest.approx(2.875, abs=0.05)  # frame 2 within 3 m: ratio ~1
    assert s['p95_ratio'] == pytest.approx((3.0 / 5.75 + 1.0) / 2, abs=0.02)
    empty = DepthMetrics().summary()
    assert empty['p95_ratio'] is None and empty['p95_pred'] is None
