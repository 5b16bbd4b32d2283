"""M7–M9 Segmenter (core/inference.py) on a real NYU frame: shapes, dtypes, K scaling,
depth/points, label sources, void exclusion, errors."""

import cv2
import numpy as np
import pytest
import torch

from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import save_model
from trainutil import real_frames

SMALL = dict(width=0.35, dec_ch=16, head_ch=8, p_channels=[16, 16], p_head=16, p_stride=2)
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


@pytest.fixture(scope='module')
def nyu0001(real_dir):
    name, rgb, depth, labels, K = next(iter(real_frames(real_dir)))
    assert name == 'nyu0001' and rgb.shape == (480, 640, 3)
    return rgb, K


@pytest.fixture(scope='module')
def seg(tmp_path_factory):
    torch.manual_seed(0)
    model = Depth3DSeg(len(NYU13), **SMALL)
    path = save_model(
        tmp_path_factory.mktemp('m') / 'model.pt',
        model,
        {'classes': NYU13.to_dict(), 'input_size': [80, 60], 'mean': MEAN, 'std': STD},
    )
    return Segmenter(path, device='auto')


def test_shapes_dtypes_and_k_scaling(seg, nyu0001):
    rgb, K = nyu0001
    res = seg.infer(rgb, K, 'fused')
    assert seg.input_size == (80, 60) and seg.device.type == (
        'cuda' if torch.cuda.is_available() else 'cpu'
    )
    assert res.labels.shape == (60, 80) and res.labels.dtype == np.uint8
    assert res.confidence.shape == (60, 80) and res.confidence.dtype == np.float32
    assert ((res.confidence > 0) & (res.confidence <= 1)).all()
    assert res.depth.shape == (60, 80) and res.depth.dtype == np.float32
    assert res.rgb.shape == (60, 80, 3) and res.rgb.dtype == np.uint8
    assert res.points.shape == (60, 80, 3) and res.points.dtype == np.float32
    assert set(res.timings) == {'preprocess', 'inference', 'postprocess'}
    assert res.label_source == 'fused'
    # C18: K at the network size, 640x480 -> 80x60 is a factor 1/8 in both directions
    np.testing.assert_allclose(
        res.K,
        [[518.8579 / 8, 0, 325.5824 / 8], [0, 519.4696 / 8, 253.7362 / 8], [0, 0, 1]],
        rtol=1e-6,
    )
    assert ((res.labels >= 1) & (res.labels <= 13)).all()  # void (0) never predicted


def test_depth_nan_only_where_invalid_and_points_are_backprojection(seg, nyu0001):
    rgb, K = nyu0001
    res = seg.infer(rgb, K, '3d')
    # the sigmoid depth head gives a valid depth at every pixel: no NaN at all here
    assert np.isfinite(res.depth).all() and (res.depth > 0).all()
    assert (res.depth <= seg.meta['max_depth']).all()
    np.testing.assert_allclose(res.points, backproject_np(res.depth, res.K), rtol=1e-5, atol=1e-6)


class _HoleyModel(Depth3DSeg):
    """A real Depth3DSeg whose predicted depth is 0 (= no data) in the top-left 10×12 pixels."""

    def _holey(self, rgb_norm):
        out = self.net(rgb_norm)
        out['depth'] = out['depth'].clone()
        out['depth'][..., :10, :12] = 0.0
        return out

    def forward_2d(self, rgb_norm):
        return self._holey(rgb_norm)

    def forward(self, rgb_norm, K):
        from depth3dseg_ros.core.geometry import backproject

        out = self._holey(rgb_norm)
        out['xyz'], out['valid'] = backproject(out['depth'], K)
        out['seg3d'] = self.pointnet(out['xyz'], out['valid'], rgb_norm)
        return out


@pytest.mark.parametrize('with_k', [True, False])
def test_invalid_depth_gives_nan_depth_and_points_exactly_there(nyu0001, with_k):
    rgb, K = nyu0001
    torch.manual_seed(0)
    seg = Segmenter.from_model(
        _HoleyModel(len(NYU13), **SMALL), {'classes': NYU13, 'input_size': [64, 48]}
    )
    res = seg.infer(rgb, K if with_k else None, 'fused')
    hole = np.zeros((48, 64), bool)
    hole[:10, :12] = True
    assert np.array_equal(np.isnan(res.depth), hole)
    if with_k:
        assert np.array_equal(np.isnan(res.points).all(-1), hole)
        assert not np.isnan(res.points[~hole]).any()
        np.testing.assert_allclose(
            res.points, backproject_np(res.depth, res.K), rtol=1e-5, atol=1e-6
        )
        # no 3D point there: the fused labels fall back to the 2D head in the hole
        ref2d = seg.infer(rgb, K, '2d')
        assert np.array_equal(res.labels[hole], ref2d.labels[hole])
    assert (res.labels != 0).all()


def _net_input(rgb, K):
    """The 80×60 network input by hand: (INTER_AREA-resized image, normalised 3×H×W, K / 8)."""
    small = cv2.resize(rgb, (80, 60), interpolation=cv2.INTER_AREA)
    x = (
        torch.from_numpy(small).permute(2, 0, 1).float() / 255 - torch.tensor(MEAN).view(3, 1, 1)
    ) / torch.tensor(STD).view(3, 1, 1)
    Kn = torch.tensor(K, dtype=torch.float32).clone()
    Kn[:2] /= 8
    return small, x, Kn


def test_matches_direct_model_forward(seg, nyu0001):
    """Preprocessing = INTER_AREA resize + (x/255 - mean)/std; labels = argmax without void."""
    rgb, K = nyu0001
    small, x, Kn = _net_input(rgb, K)
    with torch.no_grad():
        out = seg.model.cpu()(x.unsqueeze(0), Kn.unsqueeze(0))
    seg.model.to(seg.device)
    p2 = torch.softmax(out['seg2d'][0, 1:], 0)
    p3 = torch.softmax(out['seg3d'][0, 1:], 0)
    for source, p in (('2d', p2), ('3d', p3), ('fused', (p2 + p3) / 2)):
        res = seg.infer(rgb, K, source)
        conf, lab = p.max(0)
        agree = (res.labels == (lab + 1).numpy()).mean()
        assert agree > 0.99, (source, agree)
        np.testing.assert_allclose(res.confidence, conf.numpy(), atol=1e-4)
    np.testing.assert_allclose(res.depth, out['depth'][0, 0].numpy(), rtol=1e-4)
    assert np.array_equal(res.rgb, small)


def test_without_k_falls_back_to_2d_and_no_points(seg, nyu0001):
    rgb, K = nyu0001
    res = seg.infer(rgb, None, 'fused')
    assert res.label_source == '2d' and res.points is None and res.K is None
    ref = seg.infer(rgb, K, '2d')
    assert np.array_equal(res.labels, ref.labels)
    np.testing.assert_allclose(res.depth, ref.depth, rtol=1e-6)


def test_void_excluded_even_when_its_logit_dominates(nyu0001):
    rgb, K = nyu0001
    torch.manual_seed(1)
    model = Depth3DSeg(len(NYU13), **SMALL)
    with torch.no_grad():
        model.net.seg_head[-1].bias[0] = 1e3
        model.pointnet.out.bias[0] = 1e3
    seg = Segmenter.from_model(model, {'classes': NYU13, 'input_size': [64, 48]})
    for source in ('2d', '3d', 'fused'):
        assert (seg.infer(rgb, K, source).labels != 0).all()


def test_many_classes_give_uint16_labels(nyu0001):
    rgb, K = nyu0001
    n = 300
    classes = ClassSet(['void'] + [f'c{i}' for i in range(1, n)], np.zeros((n, 3), np.uint8))
    model = Depth3DSeg(n, width=0.35, dec_ch=16, head_ch=8, p_channels=[8], p_head=8)
    res = Segmenter.from_model(
        model, {'classes': classes.to_dict(), 'input_size': [32, 24]}
    ).infer(rgb, K)
    assert res.labels.dtype == np.uint16 and res.labels.shape == (24, 32)


def test_bad_inputs_raise(seg, nyu0001):
    rgb, K = nyu0001
    with pytest.raises(ValueError, match='rgb'):
        seg.infer(rgb.astype(np.float32), K)
    with pytest.raises(ValueError, match='rgb'):
        seg.infer(np.zeros((48, 64, 4), np.uint8), K)
    with pytest.raises(ValueError, match='label_source'):
        seg.infer(rgb, K, 'both')
    with pytest.raises(ValueError, match='fx'):
        seg.infer(rgb, np.zeros((3, 4)))
    model = Depth3DSeg(len(NYU13), **SMALL)
    with pytest.raises(ValueError, match='half'):
        Segmenter.from_model(model, {'classes': NYU13}, device='cpu', half=True)
    with pytest.raises(ValueError, match='input_size'):
        Segmenter.from_model(model, {'classes': NYU13}, input_size=(64,))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match='CUDA'):
            Segmenter.from_model(model, {'classes': NYU13}, device='cuda')
    with pytest.raises(ValueError, match='device'):
        Segmenter.from_model(model, {'classes': NYU13}, device='tpu9')


def test_input_size_override_and_same_size_input(seg, nyu0001, tmp_path):
    rgb, K = nyu0001
    torch.manual_seed(0)
    path = save_model(tmp_path / 'm.pt', Depth3DSeg(len(NYU13), **SMALL), {'classes': NYU13})
    s = Segmenter(path, device='cpu', input_size=(64, 48))
    small = cv2.resize(rgb, (64, 48), interpolation=cv2.INTER_AREA)
    res = s.infer(small, K / 10 * np.array([[1], [1], [10]]), 'fused')  # K of the 64x48 image
    assert res.labels.shape == (48, 64) and np.array_equal(res.rgb, small) and res.rgb is not small
    np.testing.assert_allclose(res.K[0, 0], 51.88579, rtol=1e-6)


@pytest.mark.parametrize('void_id', [0, 2, 4])
def test_labels_map_back_to_class_ids_for_any_void_id(nyu0001, void_id):
    rgb, K = nyu0001
    torch.manual_seed(3)
    classes = ClassSet([f'c{i}' for i in range(5)], np.zeros((5, 3), np.uint8), void_id=void_id)
    model = Depth3DSeg(5, **SMALL).eval()
    seg = Segmenter.from_model(model, {'classes': classes.to_dict(), 'input_size': [32, 24]})
    small = cv2.resize(rgb, (32, 24), interpolation=cv2.INTER_AREA)
    x = (
        torch.from_numpy(small).permute(2, 0, 1).float() / 255 - torch.tensor(MEAN).view(3, 1, 1)
    ) / torch.tensor(STD).view(3, 1, 1)
    with torch.no_grad():
        logits = model.forward_2d(x.unsqueeze(0))['seg2d'][0]
    logits[void_id] = float('-inf')
    p = torch.softmax(logits, 0)
    res = seg.infer(small, None, '2d')
    assert (res.labels != void_id).all()
    assert np.array_equal(res.labels, p.argmax(0).numpy().astype(np.uint8))
    np.testing.assert_allclose(res.confidence, p.max(0).values.numpy(), atol=1e-5)


def test_from_model_leaves_the_callers_model_untouched():
    model = Depth3DSeg(len(NYU13), **SMALL).train()
    seg = Segmenter.from_model(model, {'classes': NYU13, 'input_size': [32, 24]})
    assert model.training and any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert not seg.model.training and not any(
        isinstance(m, torch.nn.BatchNorm2d) for m in seg.model.modules()
    )


def test_cpu_thread_setting():
    from depth3dseg_ros.core.inference import default_num_threads

    before = torch.get_num_threads()
    model = Depth3DSeg(len(NYU13), **SMALL).eval()
    try:
        torch.set_num_threads(2)
        Segmenter.from_model(model, {'classes': NYU13}, device='cpu', num_threads=0)
        assert torch.get_num_threads() == 2  # 0 = keep
        Segmenter.from_model(model, {'classes': NYU13}, device='cpu')
        assert torch.get_num_threads() == default_num_threads() >= 1
        Segmenter.from_model(model, {'classes': NYU13}, device='cpu', num_threads=1)
        assert torch.get_num_threads() == 1
        with pytest.raises(ValueError, match='num_threads'):
            Segmenter.from_model(model, {'classes': NYU13}, device='cpu', num_threads=-1)
    finally:
        torch.set_num_threads(before)


def test_warmup_without_k_neither_logs_nor_uses_up_the_no_k_warning(nyu0001, caplog):
    """The node warms up without K at start-up; that must not print the once-only "no K given"
    warning nor spend it: the first real frame without K warns, exactly once."""
    rgb, K = nyu0001
    model = Depth3DSeg(len(NYU13), **SMALL).eval()
    seg = Segmenter.from_model(
        model, {'classes': NYU13, 'input_size': [32, 24]}, device='cpu', num_threads=0
    )

    def no_k():
        return [r for r in caplog.records if 'no K given' in r.getMessage()]

    with caplog.at_level('WARNING', logger='depth3dseg_ros.core.inference'):
        seg.warmup(runs=1, with_k=False)
        seg.warmup(runs=1, with_k=False, label_source='3d', image_size=(64, 48))
        seg.warmup(runs=1, with_k=True)
        assert no_k() == []
        assert seg.infer(rgb, None, 'fused').label_source == '2d'
        assert len(no_k()) == 1 and "label_source 'fused' -> '2d'" in no_k()[0].getMessage()
        seg.warmup(runs=1, with_k=False)  # after the real warning: still warned, nothing new
        seg.infer(rgb, None, '3d')
        assert len(no_k()) == 1


def test_measured_depth_builds_the_cloud_where_valid_and_prediction_fills_holes(seg, real_dir):
    name, rgb, depth, labels, K = next(iter(real_frames(real_dir)))  # NYU 0001, filled depth (m)
    meas = depth.copy()
    meas[:, :320] = np.nan  # left half: a hole
    base = seg.infer(rgb, K, 'fused')
    res = seg.infer(rgb, K, 'fused', depth=meas)
    np.testing.assert_array_equal(res.depth, base.depth)  # the published depth: predicted
    assert (
        res.measured.shape == (60, 80)
        and res.measured[:, 40:].all()
        and not res.measured[:, :40].any()
    )
    net_meas = cv2.resize(meas, (80, 60), interpolation=cv2.INTER_NEAREST)
    z = res.points[..., 2]
    np.testing.assert_allclose(z[:, 40:], net_meas[:, 40:], rtol=1e-6)  # measured where valid
    np.testing.assert_allclose(
        z[:, :40], base.points[:, :40, 2], rtol=1e-6
    )  # prediction in the hole
    np.testing.assert_allclose(
        res.points,
        backproject_np(np.where(res.measured, net_meas, res.depth), res.K),
        rtol=1e-5,
        atol=1e-6,
    )
    assert seg.infer(rgb, None, '2d', depth=meas).measured is None  # no K: no cloud, depth ignored
    assert base.measured is None


def test_measured_depth_bad_inputs_raise(seg, nyu0001):
    rgb, K = nyu0001
    with pytest.raises(ValueError, match='registered'):
        seg.infer(rgb, K, depth=np.ones((240, 320), np.float32))
    with pytest.raises(ValueError, match='16UC1'):
        seg.infer(rgb, K, depth=np.ones((480, 640), np.uint16))


def test_an_rgbd_input_model_sees_the_measured_depths_code(real_dir):
    """A model with arch code_input (core.depth_code): the Segmenter's 2D output with a depth image
    is the model's on that depth (nearest-resized to the input size), and without one the model's
    with an all-zero code."""
    name, rgb, depth, labels, K = next(iter(real_frames(real_dir)))
    torch.manual_seed(0)
    model = Depth3DSeg(len(NYU13), code_input=True, **SMALL).eval()
    with torch.no_grad():  # an untrained head is near-uniform: make its output spread
        model.net.seg_head[-1].weight.normal_(0, 2.0)
    seg = Segmenter.from_model(
        model, {'classes': NYU13.to_dict(), 'input_size': [80, 60], 'mean': MEAN, 'std': STD}
    )
    small, x, Kn = _net_input(rgb, K)
    net_meas = cv2.resize(depth.astype(np.float32), (80, 60), interpolation=cv2.INTER_NEAREST)
    with torch.no_grad():
        plain = torch.softmax(model(x[None], Kn[None])['seg2d'][0, 1:], 0).max(0)[0]
        rgbd = model(x[None], Kn[None], torch.from_numpy(net_meas)[None, None])
    rgbd = torch.softmax(rgbd['seg2d'][0, 1:], 0).max(0)[0]
    assert (plain - rgbd).abs().max() > 1e-3  # the code changes the 2D output
    got_plain = seg.infer(rgb, K, '2d').confidence
    got_rgbd = seg.infer(rgb, K, '2d', depth=depth).confidence
    np.testing.assert_allclose(got_plain, plain.numpy(), atol=1e-4)
    np.testing.assert_allclose(got_rgbd, rgbd.numpy(), atol=1e-4)
