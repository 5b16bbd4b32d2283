"""M7 label fusion (core/fusion.py) and the int32 sort keys behind it (core/keys.py): one rule for
the node (Segmenter.infer) and for evaluation (SegDepthEvaluator, depth3dseg-eval) — a parity test
on the fused labels of a model with holes in its depth."""

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.fusion import (
    all_source_labels,
    class_probs,
    labels_confidence,
    source_labels,
    source_probs,
)
from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.keys import INF_KEY, float_keys
from depth3dseg_ros.core.metrics import SegDepthEvaluator
from test_core_inference import SMALL, _HoleyModel, nyu0001  # noqa: F401 (fixture)


def test_float_keys_order_like_the_floats_and_carry_the_position():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(5, 25, 40, generator=g) * torch.logspace(-6, 3, 40)  # spans many exponents
    x[0, 3, 0] = float('inf')
    keys = float_keys(x.clone(), 1)
    kmin = keys.amin(1)
    assert torch.equal(kmin & 31, x.argmin(1).int())  # position of the minimum
    assert torch.equal(
        keys.argsort(1), x.argsort(dim=1, stable=True)
    )  # same order (no near-ties here)
    assert ((keys >= INF_KEY) == torch.isinf(x)).all()
    kd = float_keys(x.clone(), 1, descending=True).amax(1)
    assert torch.equal(24 - (kd & 31), x.argmax(1).int())
    # an exact tie goes to the lower position, in both directions
    t = torch.tensor([[2.0, 1.0, 1.0, 3.0, 3.0]])
    assert (float_keys(t.clone(), 1).amin(1) & 7).item() == 1
    assert 4 - (float_keys(t.clone(), 1, descending=True).amax(1) & 7).item() == 3
    with pytest.raises(ValueError, match='float32'):
        float_keys(torch.ones(3, dtype=torch.float64), 0)


def test_class_probs_exclude_void_and_leave_the_input_alone():
    logits = torch.tensor([[9.0, 0.0, 1.0]]).view(1, 3, 1, 1)
    keep = logits.clone()
    p = class_probs(logits, void_id=0)
    assert torch.equal(logits, keep)  # not in place by default
    e = np.exp([0.0, 1.0])
    np.testing.assert_allclose(p.flatten().numpy(), [0.0, *(e / e.sum())], rtol=1e-6)
    np.testing.assert_allclose(
        class_probs(logits, None).flatten().numpy(),
        np.exp([9.0, 0, 1]) / np.exp([9.0, 0, 1]).sum(),
        rtol=1e-6,
    )
    # channels-last input (the Segmenter's 2D head): same values, contiguous NCHW output
    cl = torch.randn(2, 5, 4, 6).contiguous(memory_format=torch.channels_last)
    out = class_probs(cl, 2)
    assert out.is_contiguous()
    torch.testing.assert_close(out, class_probs(cl.contiguous(), 2))


def test_sources_and_the_2d_fallback_where_no_3d_point():
    """Hand-computed 2-class example (void 0 + classes 1, 2) at two pixels, the second without a 3D
    point."""
    s2 = torch.tensor([[0.0, 2.0, 0.0], [0.0, 2.0, 0.0]]).T.reshape(
        1, 3, 1, 2
    )  # 2D prefers class 1
    s3 = torch.tensor([[0.0, 0.0, 3.0], [0.0, 0.0, 3.0]]).T.reshape(
        1, 3, 1, 2
    )  # 3D prefers class 2
    valid = torch.tensor([[[[True, False]]]])
    a, b = 1 / (1 + np.exp(-2)), 1 / (1 + np.exp(-3))  # P(1) in 2D, P(2) in 3D
    fused = source_probs(s2, s3, valid, 'fused')
    np.testing.assert_allclose(
        fused[0, :, 0, 0].numpy(), [0, (a + 1 - b) / 2, (1 - a + b) / 2], rtol=1e-6
    )
    np.testing.assert_allclose(fused[0, :, 0, 1].numpy(), [0, a, 1 - a], rtol=1e-6)
    lab, conf = labels_confidence(fused)
    assert lab.tolist() == [[[2, 1]]]  # (1-a+b)/2 > 1/2
    np.testing.assert_allclose(conf.flatten().numpy(), [(1 - a + b) / 2, a], rtol=1e-6)
    assert source_labels(s2, s3, valid, '2d').tolist() == [[[1, 1]]]
    assert source_labels(s2, s3, valid, '3d').tolist() == [[[2, 1]]]
    assert source_labels(s2, None, None, 'fused').tolist() == [[[1, 1]]]  # no S3D: S2D
    # a weight on the 3D branch (arch fusion_w3d): (1 - w) p2D + w p3D, S2D where no 3D point
    for inplace in (False, True):
        f25 = source_probs(s2.clone(), s3.clone(), valid, 'fused', inplace=inplace, w3d=0.25)
        want = [0, 0.75 * a + 0.25 * (1 - b), 0.75 * (1 - a) + 0.25 * b]
        np.testing.assert_allclose(f25[0, :, 0, 0].numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(f25[0, :, 0, 1].numpy(), [0, a, 1 - a], rtol=1e-6)
    assert source_labels(s2, s3, valid, 'fused', w3d=0.25).tolist() == [[[1, 1]]]  # 2D wins
    assert torch.equal(
        source_probs(s2, s3, valid, 'fused', w3d=1.0), source_probs(s2, s3, valid, '3d')
    )
    for bad in (0.0, -0.1, 1.5, float('nan')):
        with pytest.raises(ValueError, match=r'w3d=.* must be in \(0, 1\] \(arch fusion_w3d\)'):
            source_probs(s2, s3, valid, 'fused', w3d=bad)
    with pytest.raises(ValueError, match='label source'):
        source_probs(s2, s3, valid, 'both')
    with pytest.raises(ValueError, match='logits3d shape'):
        source_probs(s2, s3[:, :2], valid, 'fused')


def test_the_weight_leaves_the_callers_logits_and_half_is_the_plain_mean():
    """At w3d != 0.5 without ``inplace`` the caller's logits are untouched; at 0.5 the rule is
    the mean (p2 + p3) / 2 exactly, as before the weight existed, on any layout and mask."""
    g = torch.Generator().manual_seed(3)
    s2, s3 = torch.randn(2, 14, 6, 9, generator=g), torch.randn(2, 14, 6, 9, generator=g)
    valid = torch.rand(2, 1, 6, 9, generator=g) > 0.3
    k2, k3 = s2.clone(), s3.clone()
    source_probs(s2, s3, valid, 'fused', w3d=0.25)
    all_source_labels(s2, s3, valid, w3d=0.25)
    assert torch.equal(s2, k2) and torch.equal(s3, k3)
    p2, p3 = class_probs(s2), class_probs(s3)
    mean = torch.where(valid, (p3 + p2) * 0.5, p2)
    for a in (s2, s2.to(memory_format=torch.channels_last)):
        assert torch.equal(source_probs(a, s3, valid, 'fused'), mean)
    assert torch.equal(all_source_labels(s2, s3, valid)['fused'], labels_confidence(mean)[0])


def test_labels_confidence_matches_argmax_and_never_picks_void():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 14, 30, 40, generator=g) * 4
    logits[:, 0] += 50.0  # void logit dominates
    p = class_probs(logits, 0)
    lab, conf = labels_confidence(p)
    conf_ref, lab_ref = p.max(1)
    assert torch.equal(lab, lab_ref) and (lab != 0).all()
    torch.testing.assert_close(conf, conf_ref)


@pytest.mark.parametrize(
    'source,w3d', [('2d', 0.5), ('3d', 0.5), ('fused', 0.5), ('fused', 0.25), ('3d', 0.25)]
)
def test_node_and_evaluation_labels_are_the_same(nyu0001, source, w3d):  # noqa: F811
    """Parity: Segmenter.infer (the node's labels) == SegDepthEvaluator's labels for the same
    outputs, on a model whose depth has a hole (no 3D point there: the 2D fallback), with the
    model's own fusion weight (arch fusion_w3d) on both sides."""
    rgb, K = nyu0001
    torch.manual_seed(0)
    model = _HoleyModel(len(NYU13), **SMALL, fusion_w3d=w3d).eval()
    seg = Segmenter.from_model(model, {'classes': NYU13, 'input_size': [64, 48]}, device='cpu')
    assert seg.fusion_w3d == w3d
    res = seg.infer(rgb, K, source)
    x = seg._preprocess(rgb, K)[2]
    Kt = torch.as_tensor(res.K, dtype=torch.float32)[None]
    with torch.no_grad():
        out = seg.model(x, Kt)  # the Segmenter's own network
    assert not out['valid'].all()
    v = out['valid']
    ev_labels = source_labels(out['seg2d'], out['seg3d'], v, source, NYU13.void_id, w3d=w3d)
    assert np.array_equal(res.labels, ev_labels[0].numpy())
    conf = labels_confidence(source_probs(out['seg2d'], out['seg3d'], v, source, w3d=w3d))[1]
    conf = conf[0].numpy()
    np.testing.assert_array_equal(res.confidence, conf)
    hole = ~out['valid'][0, 0].numpy()
    ref2d = source_labels(out['seg2d'], None, None, '2d', NYU13.void_id)[0].numpy()
    assert np.array_equal(res.labels[hole], ref2d[hole])  # 2D fallback without a 3D point
    # and the evaluator scores exactly those labels
    ev = SegDepthEvaluator(len(NYU13), NYU13.void_id, fusion_w3d=w3d)
    ev.update(out, torch.from_numpy(res.labels.astype(np.int64))[None])
    key = {'2d': 'miou_2d', '3d': 'miou_3d', 'fused': 'miou_fused'}[source]
    assert ev.summary()[key] == pytest.approx(1.0)
