"""The ONNX Runtime backend's split CPU execution (core.ort_split: M1 in ONNX Runtime, M2 + M3 in
torch) against the whole graph and the torch backend, and the 3D weights in the metadata.

Tolerances as test_onnx_export.py: depth / points within 1e-4 m, labels >= 99.9 % equal.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

onnx = pytest.importorskip('onnx')
pytest.importorskip('onnxruntime')

from depth3dseg_ros.core.classes import NYU13  # noqa: E402
from depth3dseg_ros.core.inference import Segmenter  # noqa: E402
from depth3dseg_ros.core.model import Depth3DSeg  # noqa: E402
from depth3dseg_ros.core.modelfile import load_model, save_model  # noqa: E402
from depth3dseg_ros.core.onnx_export import export_onnx, read_onnx_meta  # noqa: E402
from depth3dseg_ros.core.ort_split import (  # noqa: E402
    POINTNET_KEY,
    decode_state,
    encode_state,
)

pytestmark = pytest.mark.slow  # ~13 s of ONNX export and sessions: full tier (test/conftest.py)

TINY = dict(width=0.25, depth_mult=0.5, dec_ch=16, head_ch=8, p_channels=[8, 16], p_head=16)


@pytest.fixture(
    scope='module',
    params=[
        (0.0, 0.0, 1.0, 0.5),
        (1.0, 0.0, 1.0, 0.5),
        (0.0, 1.5, 1.0, 0.5),
        (0.0, 0.0, 1.3, 0.25),
    ],
    ids=['plain', 'depth_focal', 'input_blur', 'depth_gain+fusion_w3d'],
)
def pt_onnx(tmp_path_factory, request):
    """A tiny model file and its export; also with arch depth_focal (depth scaled to K's camera,
    focal_depth: the split must find the heads behind the scaling and redo it in torch) and
    with arch input_blur (core.lowpass: a blur in front of the encoder, inside the ONNX graph) and
    with arch depth_gain (a calibrated depth scale: the same Clip(Mul(...)) behind the heads) and
    fusion_w3d (the fused labels' 3D weight, carried by the ONNX metadata to the Segmenter)."""
    d = tmp_path_factory.mktemp('split')
    torch.manual_seed(1)
    focal, blur, gain, w3d = request.param
    model = Depth3DSeg(
        len(NYU13), **TINY, depth_focal=focal, input_blur=blur, depth_gain=gain, fusion_w3d=w3d
    ).eval()
    with torch.no_grad():
        model.net.depth_head[-1].weight.normal_(0, 0.05)
    pt = d / 'm.pt'
    save_model(pt, model, {'classes': NYU13, 'input_size': [64, 48]})
    export_onnx(pt, pt.with_suffix('.onnx'))
    return pt, pt.with_suffix('.onnx')


def test_state_round_trip_and_refusal():
    net = Depth3DSeg(len(NYU13), **TINY).pointnet
    back = decode_state(encode_state(net))
    assert set(back) == set(net.state_dict())
    for k, v in net.state_dict().items():
        assert torch.equal(back[k], v), k
    with pytest.raises(ValueError, match='not a base64 .npz'):
        decode_state('bm90IGFuIG5weg==')


def test_split_is_the_cpu_default_and_matches_torch(pt_onnx):
    pt, onx = pt_onnx
    assert POINTNET_KEY in read_onnx_meta(onx)
    t = Segmenter(pt, device='cpu', backend='torch', num_threads=1)
    s = Segmenter(onx, device='cpu', num_threads=1)
    w = Segmenter(onx, device='cpu', num_threads=1, ort_split='whole')
    assert (s.backend, s.ort.mode, s.model) == ('onnxruntime', 'split', None)
    assert w.ort.mode == 'whole' and s.ort.providers == ['CPUExecutionProvider']
    assert s.ort.split_model.net.cut is not None  # heads upsampled after ONNX Runtime (cv2)
    want = load_model(pt)[1]['arch']['fusion_w3d']  # the fused labels' rule, from the metadata
    assert t.fusion_w3d == s.fusion_w3d == w.fusion_w3d == want
    rng = np.random.default_rng(4)
    rgb = rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)
    K = np.array([[110.0, 0, 63.5], [0, 110.0, 47.5], [0, 0, 1]])
    depth = rng.uniform(0.5, 4.0, (96, 128)).astype(np.float32)
    depth[:30] = np.nan
    for k, d in ((K, None), (None, None), (K, depth)):
        a, b, c = (x.infer(rgb, k, depth=d) for x in (t, s, w))
        for r in (b, c):
            assert r.label_source == a.label_source
            assert (r.labels == a.labels).mean() >= 0.999
            np.testing.assert_allclose(r.depth, a.depth, atol=1e-4)
            if k is not None:
                np.testing.assert_allclose(r.points, a.points, atol=1e-4)
            if d is not None:
                assert np.array_equal(r.measured, a.measured)
        if k is None:
            assert b.points is None and b.measured is None


def test_run_gives_the_same_outputs_in_both_modes(pt_onnx):
    from depth3dseg_ros.core.backends import OrtGraph

    _, onx = pt_onnx
    s, w = OrtGraph(onx, 'cpu', 1), OrtGraph(onx, 'cpu', 1, split='whole')
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 64)).astype(np.float32)
    K = np.array([[[50.0, 0, 32], [0, 50.0, 24], [0, 0, 1]]], np.float32)
    md = np.full((1, 1, 48, 64), np.nan, np.float32)
    a, b = s.run(x, K, md), w.run(x, K, md)
    assert set(a) == set(b)
    for k in ('depth', 'xyz', 'seg2d'):
        np.testing.assert_allclose(a[k], b[k], atol=1e-4)
    assert np.array_equal(a['valid'], b['valid'])
    assert (np.abs(a['seg3d'] - b['seg3d']).max(1) <= 1e-3).mean() >= 0.999


def test_file_without_3d_weights_runs_whole(pt_onnx, tmp_path):
    _, onx = pt_onnx
    proto = onnx.load(str(onx))
    keep = [(p.key, p.value) for p in proto.metadata_props if p.key != POINTNET_KEY]
    del proto.metadata_props[:]
    for k, v in keep:
        e = proto.metadata_props.add()
        e.key, e.value = k, v
    old = tmp_path / 'old.onnx'
    onnx.save(proto, str(old))
    assert Segmenter(old, device='cpu', num_threads=1).ort.mode == 'whole'
    with pytest.raises(ValueError, match="'pointnet_state'"):
        Segmenter(old, device='cpu', num_threads=1, ort_split='split')
    with pytest.raises(ValueError, match='split='):
        Segmenter(onx, device='cpu', num_threads=1, ort_split='half')
