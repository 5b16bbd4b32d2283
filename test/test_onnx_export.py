"""ONNX export (core.onnx_graph, core.onnx_export, depth3dseg-export) and the ONNX Runtime backend
of Segmenter (core.backends): round trips on a tiny model and on the shipped model, parity with the
torch backend on the real frames, the refusal of .onnx files without depth3dseg metadata, the
backend choice.

Tolerances: depth and points (float32 metres) within 1e-4 m (measured: <= 1e-5); labels >= 99.9 %
equal (the 3D net's neighbour choice and upsampling may differ on near-ties, core.onnx_graph;
per frame 99 % on predicted depth, 99.9 % when both backends get identical depth);
logits within 1e-3 on >= 99.9 % of the pixels. No timing is asserted (bench/bench_core.py measures
speed).
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

onnx = pytest.importorskip('onnx')
ort = pytest.importorskip('onnxruntime')

from depth3dseg_ros.core.backends import choose_backend  # noqa: E402
from depth3dseg_ros.core.classes import NYU13  # noqa: E402
from depth3dseg_ros.core.geometry import resize_intrinsics  # noqa: E402
from depth3dseg_ros.core.inference import Segmenter  # noqa: E402
from depth3dseg_ros.core.model import Depth3DSeg, fold_batchnorm  # noqa: E402
from depth3dseg_ros.core.modelfile import ModelFileError, save_model  # noqa: E402
from depth3dseg_ros.core.onnx_export import (  # noqa: E402
    REQUIRED_KEYS,
    export_onnx,
    read_onnx_meta,
)
from depth3dseg_ros.core.onnx_graph import InferenceGraph  # noqa: E402
from depth3dseg_ros.export import main as export_main  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from trainutil import real_frames  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / 'models' / 'depth3dseg_nyu13.pt'
TINY = dict(width=0.25, depth_mult=0.5, dec_ch=16, head_ch=8, p_channels=[8, 16], p_head=16)


def _tiny_model(
    depth_focal: float = 0.0,
    p_colour: bool = True,
    input_blur: float = 0.0,
    depth_gain: float = 1.0,
    code_input: bool = False,
    code_stream: bool = False,
) -> Depth3DSeg:
    torch.manual_seed(0)
    model = Depth3DSeg(
        len(NYU13),
        **TINY,
        code_input=code_input,
        code_stream=code_stream,
        depth_focal=depth_focal,
        p_colour=p_colour,
        input_blur=input_blur,
        depth_gain=depth_gain,
    )
    with torch.no_grad():  # non-trivial BatchNorm statistics, so folding matters
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
        model.net.depth_head[-1].weight.normal_(0, 0.05)
        if code_stream:  # trained joins (they start at zero)
            for j in model.net.code_stream.joins:
                j.weight.normal_(0, 0.2)
    return model.eval()


@pytest.fixture(scope='module')
def tiny_pt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp('tiny') / 'tiny.pt'
    save_model(path, _tiny_model(), {'classes': NYU13, 'input_size': [64, 48]})
    return path


@pytest.fixture(scope='module')
def tiny_onnx(tiny_pt, tmp_path_factory) -> Path:
    """The tiny model exported once (fixed 64×48) for the tests that only read it."""
    out = tmp_path_factory.mktemp('tiny_onnx') / 'tiny.onnx'
    export_onnx(tiny_pt, out)
    return out


@pytest.fixture(scope='module')
def shipped_onnx(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp('shipped') / 'depth3dseg_nyu13.onnx'
    export_onnx(SHIPPED, out)
    return out


def _inputs(w: int, h: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 3, h, w, generator=g)
    K = torch.tensor([[[0.9 * w, 0.0, w / 2 - 0.3], [0.0, 0.9 * w, h / 2 + 0.2], [0.0, 0.0, 1.0]]])
    return x, K


def _close_frac(a: np.ndarray, b: np.ndarray, tol: float) -> float:
    """Fraction of pixels whose largest |a - b| over channels is <= tol (a, b: 1×C×H×W)."""
    return float((np.abs(a - b).max(1) <= tol).mean())


def _ort(path: Path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=['CPUExecutionProvider'])


@pytest.mark.parametrize(
    'depth_focal,p_colour,input_blur,depth_gain',
    [
        (0.0, True, 0.0, 1.0),
        (1.1, True, 0.0, 1.0),
        (0.0, False, 0.0, 1.0),
        (0.0, True, 1.5, 1.0),
        (0.0, True, 0.0, 1.3),
        (1.1, True, 0.0, 0.8),
    ],
)
def test_graph_module_equals_depth3dseg(depth_focal, p_colour, input_blur, depth_gain):
    """InferenceGraph (exportable ops) computes Depth3DSeg.forward, with and without measured
    depth, with the depth scaled to K's camera (arch depth_focal), with a geometry-only 3D net
    (arch p_colour false), with a low-pass of the input (arch input_blur) and with a calibrated
    depth scale (arch depth_gain, alone and with depth_focal)."""
    model = fold_batchnorm(_tiny_model(depth_focal, p_colour, input_blur, depth_gain))
    graph = InferenceGraph(model).eval()
    x, K = _inputs(96, 72)
    with torch.no_grad():
        ref = model(x, K)
        got = dict(
            zip(
                ('depth', 'seg2d', 'seg3d', 'xyz', 'valid', 'measured'),
                graph(x, K, torch.full((1, 1, 72, 96), float('nan'))),
            )
        )
        md = ref['depth'] * 1.2
        md[..., :20, :] = float('nan')
        md[..., 30:40, 10:30] = 0.0
        ref_m = model(x, K, md)
        got_m = dict(zip(('depth', 'seg2d', 'seg3d', 'xyz', 'valid', 'measured'), graph(x, K, md)))
    for name in ('depth', 'seg2d', 'xyz', 'valid'):
        assert torch.equal(got[name], ref[name]), name
    assert _close_frac(got['seg3d'].numpy(), ref['seg3d'].numpy(), 1e-4) >= 0.999
    assert not got['measured'].any()
    for name in ('depth', 'seg2d', 'xyz', 'valid', 'measured'):
        assert torch.equal(got_m[name], ref_m[name]), name
    assert _close_frac(got_m['seg3d'].numpy(), ref_m['seg3d'].numpy(), 1e-4) >= 0.999


@pytest.mark.parametrize('code_stream', [False, True])
def test_rgbd_input_model_exports_its_depth_code_and_runs_whole(tmp_path, capsys, code_stream):
    """An RGB-D input model (arch code_input; with code_stream, the code through its own encoder,
    core.code_stream): the graph computes the measured depth's geometry code (core.depth_code) as
    Depth3DSeg does, ONNX Runtime equals torch with and without measured depth, and the CPU
    backend runs it as one whole graph ('split' is refused, naming why)."""
    from depth3dseg_ros.core.backends import OrtGraph

    model = fold_batchnorm(_tiny_model(code_input=True, code_stream=code_stream))
    pt, out = tmp_path / 'rgbd.pt', tmp_path / 'rgbd.onnx'
    save_model(
        pt,
        _tiny_model(code_input=True, code_stream=code_stream),
        {'classes': NYU13, 'input_size': [64, 48]},
    )
    export_onnx(pt, out)
    x, K = _inputs(64, 48, seed=5)
    md = torch.linspace(0.8, 4.0, 64).expand(1, 1, 48, 64).clone()
    md[..., :10, :] = float('nan')
    sess = _ort(out)
    for measured in (None, md):
        with torch.no_grad():
            ref = model(x, K, measured)
        feed = np.full((1, 1, 48, 64), np.nan, np.float32) if measured is None else md.numpy()
        o = dict(
            zip(
                [o.name for o in sess.get_outputs()],
                sess.run(None, {'rgb': x.numpy(), 'K': K.numpy(), 'measured_depth': feed}),
            )
        )
        np.testing.assert_allclose(o['seg2d'], ref['seg2d'].numpy(), atol=1e-3)
        np.testing.assert_allclose(o['depth'], ref['depth'].numpy(), atol=1e-4)
    with torch.no_grad():
        assert not torch.allclose(model(x, K)['seg2d'], model(x, K, md)['seg2d'])
    assert OrtGraph(out, device='cpu').mode == 'whole'
    # depth3dseg-export --verify compares the geometry code's path too
    assert export_main([str(pt), '-o', str(tmp_path / 'v.onnx'), '--verify']) == 0
    text = capsys.readouterr().out
    assert 'max |diff| depth' in text and 'max |diff| with measured depth' in text
    assert text.rstrip().endswith(': OK')
    with pytest.raises(ValueError, match='code_input'):
        OrtGraph(out, device='cpu', split='split')


@pytest.mark.parametrize('dynamic', [False, True])
def test_tiny_round_trip(tiny_pt, tmp_path, dynamic):
    """.pt -> .onnx (checker passes, metadata complete) -> ONNX Runtime equals the torch model."""
    out = tmp_path / 'tiny.onnx'
    export_onnx(tiny_pt, out, dynamic=dynamic)
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto, full_check=True)
    props = {p.key: p.value for p in proto.metadata_props}
    for key in REQUIRED_KEYS + ('source_sha256', 'opset'):
        assert key in props, key
    assert json.loads(props['classes']) == NYU13.to_dict()
    assert json.loads(props['input_size']) == [64, 48]
    assert json.loads(props['arch'])['width'] == 0.25
    assert json.loads(props['dynamic_size']) is dynamic
    meta = read_onnx_meta(out)
    assert meta['mean'] == pytest.approx([0.485, 0.456, 0.406]) and meta['max_depth'] == 10.0
    model = fold_batchnorm(_tiny_model())
    sess = _ort(out)
    sizes = [(64, 48)] + ([(88, 56)] if dynamic else [])
    for w, h in sizes:
        x, K = _inputs(w, h, seed=w)
        with torch.no_grad():
            ref = model(x, K)
        o = dict(
            zip(
                [o.name for o in sess.get_outputs()],
                sess.run(
                    None,
                    {
                        'rgb': x.numpy(),
                        'K': K.numpy(),
                        'measured_depth': np.full((1, 1, h, w), np.nan, np.float32),
                    },
                ),
            )
        )
        assert o['depth'].shape == (1, 1, h, w)
        np.testing.assert_allclose(o['depth'], ref['depth'].numpy(), atol=1e-4)
        np.testing.assert_allclose(o['xyz'], ref['xyz'].numpy(), atol=1e-4)
        np.testing.assert_allclose(o['seg2d'], ref['seg2d'].numpy(), atol=1e-3)
        assert np.array_equal(o['valid'], ref['valid'].numpy())
        assert _close_frac(o['seg3d'], ref['seg3d'].numpy(), 1e-3) >= 0.999
    if not dynamic:  # a fixed-size graph refuses another size
        with pytest.raises(Exception):
            sess.run(
                None,
                {
                    'rgb': np.zeros((1, 3, 56, 88), np.float32),
                    'K': K.numpy(),
                    'measured_depth': np.zeros((1, 1, 56, 88), np.float32),
                },
            )


def test_cli_export_and_errors(tiny_pt, tmp_path, capsys):
    out = tmp_path / 'cli.onnx'
    assert export_main([str(tiny_pt), '-o', str(out), '--dynamic', '--verify']) == 0
    text = capsys.readouterr().out
    assert 'onnx.checker passed' in text and 'ONNX Runtime vs PyTorch' in text
    assert text.rstrip().endswith(': OK') and 'labels differ at 0 (2D)' in text
    assert read_onnx_meta(out)['dynamic_size'] is True
    assert export_main([str(tmp_path / 'missing.pt'), '-o', str(tmp_path / 'x.onnx')]) == 2
    bad = tmp_path / 'bad.pt'
    bad.write_bytes(b'not a model')
    assert export_main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'bad.pt' in err and len(err.strip().splitlines()) == 2
    assert not (tmp_path / 'bad.onnx').exists()


def test_cli_verify_fails_with_exit_1_outside_its_tolerances(
    tiny_pt, tmp_path, capsys, monkeypatch
):
    import depth3dseg_ros.export as export_mod

    monkeypatch.setattr(export_mod, 'VERIFY_DEPTH_M', -1.0)  # no difference can be that small
    assert export_main([str(tiny_pt), '-o', str(tmp_path / 'v.onnx'), '--verify']) == 1
    assert ': FAILED (tolerances: depth -1.0 m' in capsys.readouterr().out


def _strip(src: Path, dst: Path, drop: tuple) -> Path:
    proto = onnx.load(str(src))
    keep = [(p.key, p.value) for p in proto.metadata_props if p.key not in drop]
    del proto.metadata_props[:]
    for k, v in keep:
        e = proto.metadata_props.add()
        e.key, e.value = k, v
    onnx.save(proto, str(dst))
    return dst


@pytest.mark.parametrize('key', ['classes', 'input_size', 'mean', 'arch', 'format'])
def test_onnx_without_metadata_is_refused(tiny_onnx, tmp_path, key):
    bad = _strip(tiny_onnx, tmp_path / 'bad.onnx', (key,))
    with pytest.raises(ModelFileError, match=f"missing '{key}'"):
        Segmenter(bad, device='cpu', num_threads=1)
    with pytest.raises(ModelFileError, match=f"missing '{key}'"):
        read_onnx_meta(bad)


def test_foreign_onnx_is_refused(tmp_path):
    """An ONNX file from elsewhere (no metadata at all) and a file that is not ONNX."""
    lin = torch.nn.Linear(3, 2)
    path = tmp_path / 'foreign.onnx'
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the TorchScript exporter's deprecation notice
        torch.onnx.export(lin, (torch.zeros(1, 3),), str(path), dynamo=False, opset_version=17)
    with pytest.raises(ModelFileError, match="missing 'format'.*depth3dseg-export"):
        Segmenter(path, device='cpu', num_threads=1)
    junk = tmp_path / 'junk.onnx'
    junk.write_bytes(b'\x00\x01 not onnx')
    with pytest.raises(ModelFileError, match='junk.onnx'):
        Segmenter(junk, device='cpu', num_threads=1)


def test_dynamic_graph_serves_another_input_size(tiny_pt, tmp_path):
    """A --dynamic export runs at an input_size other than the exported one, like torch does."""
    out = tmp_path / 'dyn.onnx'
    export_onnx(tiny_pt, out, dynamic=True)
    o = Segmenter(out, device='cpu', num_threads=1, input_size=(96, 72))
    t = Segmenter(tiny_pt, device='cpu', backend='torch', num_threads=1, input_size=(96, 72))
    rgb = np.random.default_rng(3).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    K = np.array([[150.0, 0, 80], [0, 150.0, 60], [0, 0, 1]])
    a, b = t.infer(rgb, K), o.infer(rgb, K)
    assert b.labels.shape == (72, 96) and (a.labels == b.labels).mean() >= 0.999
    np.testing.assert_allclose(a.points, b.points, atol=1e-4)


def test_backend_choice(tiny_pt, tmp_path):
    pt = tmp_path / 'm.pt'
    shutil.copy(tiny_pt, pt)
    assert choose_backend(pt, 'auto').kind == 'torch'  # nothing beside it
    with pytest.raises(ValueError, match='no exported m.onnx'):
        choose_backend(pt, 'onnxruntime')
    export_onnx(pt, pt.with_suffix('.onnx'))
    c = choose_backend(pt, 'auto')
    assert c.kind == 'onnxruntime' and c.path == pt.with_suffix('.onnx')
    assert choose_backend(pt, 'torch').kind == 'torch'
    assert choose_backend(pt, 'auto', half=True).kind == 'torch'  # the graph is float32
    assert choose_backend(pt, 'auto', input_size=(96, 72)).kind == 'torch'  # fixed 64×48 graph
    with pytest.raises(ValueError, match='fixed'):
        choose_backend(pt, 'onnxruntime', input_size=(96, 72))
    with pytest.raises(ValueError, match="backend='torch' cannot run"):
        choose_backend(pt.with_suffix('.onnx'), 'torch')
    with pytest.raises(ValueError, match='must be one of'):
        choose_backend(pt, 'tensorrt')
    seg = Segmenter(pt, device='cpu', num_threads=1)
    assert seg.backend == 'onnxruntime' and seg.model is None and seg.input_size == (64, 48)
    assert seg.classes.names == NYU13.names
    # a retrained .pt beside a stale export: auto runs torch
    save_model(
        pt, Depth3DSeg(len(NYU13), **TINY).eval(), {'classes': NYU13, 'input_size': [64, 48]}
    )
    assert choose_backend(pt, 'auto').kind == 'torch'
    assert Segmenter(pt, device='cpu', num_threads=1).backend == 'torch'


def test_shipped_model_export(shipped_onnx):
    meta = read_onnx_meta(shipped_onnx)
    assert meta['input_size'] == [320, 240] and meta['classes'] == NYU13.to_dict()
    assert meta['dynamic_size'] is False and meta['source_file'] == SHIPPED.name
    onnx.checker.check_model(onnx.load(str(shipped_onnx)), full_check=True)


@pytest.mark.parametrize('split', ['split', 'whole'])
def test_shipped_model_backend_parity_on_real_frames(shipped_onnx, real_dir, split):
    """Segmenter torch vs onnxruntime (the CPU default 'split': M1 in ONNX Runtime, M2 + M3 in
    torch; and the whole graph) on the 10 real frames: labels (fused, with K; 2D without K; with
    the measured depth where the frame has one), depth, confidence, points, measured mask."""
    t = Segmenter(SHIPPED, device='cpu', backend='torch', num_threads=1)
    o = Segmenter(shipped_onnx, device='cpu', num_threads=1, ort_split=split)
    assert o.backend == 'onnxruntime' and t.backend == 'torch' and o.ort.mode == split
    equal, total, n_meas = 0, 0, 0
    for name, rgb, depth, _, K in real_frames(real_dir):
        runs = [(K, None), (None, None)] + ([(K, depth)] if depth is not None else [])
        for k, d in runs:
            a, b = t.infer(rgb, k, depth=d), o.infer(rgb, k, depth=d)
            assert a.label_source == b.label_source
            equal += int((a.labels == b.labels).sum())
            total += a.labels.size
            # per frame 0.99: the point net's kNN (M3) picks neighbours by 3D distance, and a depth
            # difference of 1e-5 m between the backends can reorder two near-equal distances and
            # flip a few points (25 pixels each at stride 5): measured 0.9935 on one frame with the
            # model shipped 2026-12-05, every depth within 1.1e-5 m; over all frames 0.999 holds.
            # On identical depth the labels agree on every pixel of every frame (next test, 99.9 %)
            assert (a.labels == b.labels).mean() >= 0.99, (name, k is None, d is None)
            assert a.labels.dtype == b.labels.dtype and a.confidence.dtype == b.confidence.dtype
            np.testing.assert_allclose(a.depth, b.depth, atol=1e-4, err_msg=name)
            if k is None:
                assert b.points is None and b.measured is None
                np.testing.assert_allclose(a.confidence, b.confidence, atol=1e-4)
                continue
            assert np.array_equal(np.isnan(a.points), np.isnan(b.points))
            np.testing.assert_allclose(a.points, b.points, atol=1e-4, err_msg=name)
            if d is None:
                assert b.measured is None
            else:
                n_meas += 1
                assert np.array_equal(a.measured, b.measured) and b.measured.any()
    assert n_meas >= 3
    assert equal / total >= 0.999


@pytest.mark.parametrize('split', ['split', 'whole'])
def test_shipped_model_3d_stage_parity_on_identical_depth(shipped_onnx, real_dir, split):
    """The 3D stage (M2 back-projection, M3 point net, M4 fusion) of both backends on identical
    geometry: each real frame at the network input size, with torch's predicted depth supplied as
    measured depth everywhere, so both build the same cloud and the kNN cannot reorder near-equal
    distances. Labels must then agree on >= 99.9 % of every frame (the per-frame bar of the
    predicted-depth test above is 99 % for that reason only)."""
    t = Segmenter(SHIPPED, device='cpu', backend='torch', num_threads=1)
    o = Segmenter(shipped_onnx, device='cpu', num_threads=1, ort_split=split)
    w, h = t.input_size
    n = 0
    for name, rgb, _, _, K in real_frames(real_dir):
        K_net = resize_intrinsics(K, (rgb.shape[1], rgb.shape[0]), (w, h))
        rgb_net = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)
        depth = t.infer(rgb_net, K_net).depth
        assert depth.shape == (h, w) and np.isfinite(depth).all() and (depth > 0).all(), name
        a, b = t.infer(rgb_net, K_net, depth=depth), o.infer(rgb_net, K_net, depth=depth)
        assert a.measured.all() and b.measured.all(), name
        assert np.array_equal(a.points, b.points), name
        assert (a.labels == b.labels).mean() >= 0.999, name
        n += 1
    assert n >= 10
