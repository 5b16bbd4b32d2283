"""training.camera_aug: camera-true photometric / depth-sensor augmentation (issue: perceive real
rooms).

Labels and K exactly as without it (photometric ops never touch them, the geometric draw is
unchanged), same seed -> same bytes, each op changes the image within its stated bounds, uint8 RGB
/ float32 depth kept, default off (no draw, byte-identical items), config checked.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depth3dseg_ros.training import camera_aug as ca
from depth3dseg_ros.training.config import DEFAULTS, load_config
from depth3dseg_ros.training.dataset import FrameDataset
from trainutil import make_dataset_dir

ALL_ON = {'preset': 'real_camera', **{op: {'p': 1.0} for op in ca.OPS}}


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('cam') / 'd', size=(80, 60))


@pytest.fixture(scope='module')
def img():
    """A smooth 120x160 uint8 RGB test image with a mid-grey range (no clipping at either end)."""
    v, u = np.mgrid[0:120, 0:160].astype(np.float32)
    x = np.stack([40 + u, 60 + v, 200 - u * 0.8], -1)
    x += 20 * np.sin(u / 5.0)[..., None] * np.cos(v / 7.0)[..., None]
    return np.clip(x, 0, 255).astype(np.uint8)


def _only(op: str, **fields) -> dict:
    return ca.resolve_camera({op: dict({'p': 1.0}, **fields)})


# ----------------------------------------------------------------------------- config
def test_default_off_and_preset_all_on():
    assert DEFAULTS['augment']['camera'] is None
    assert ca.resolve_camera(None) is None and ca.resolve_camera('none') is None
    t = ca.resolve_camera('real_camera')
    assert set(t) == set(ca.OPS) and all(t[op]['p'] > 0 for op in ca.OPS)
    t2 = ca.resolve_camera({'preset': 'real_camera', 'jpeg': {'p': 0.0, 'quality': [50, 60]}})
    assert t2['jpeg'] == {'p': 0.0, 'quality': [50, 60]} and t2['noise'] == t['noise']
    assert ca.resolve_camera({'jpeg': {'p': 0.5}}) == dict(
        {op: dict(f) for op, f in ca.OP_DEFAULTS.items()}, jpeg={'p': 0.5, 'quality': [30, 90]}
    )
    cfg = load_config(None, ['augment.camera=real_camera'])
    assert cfg['augment']['camera'] == 'real_camera'


@pytest.mark.parametrize(
    'spec, match',
    [
        ('bogus', r"augment.camera.preset='bogus' is unknown"),
        ({'blur': {'p': 1}}, r'augment.camera.blur is unknown'),
        ({'jpeg': {'q': 1}}, r'augment.camera.jpeg.q is unknown'),
        ({'jpeg': {'p': 1.5}}, r'augment.camera.jpeg.p=1.5 must be a number in \[0.0, 1.0\]'),
        (
            {'jpeg': {'quality': [90, 30]}},
            r'augment.camera.jpeg.quality=\[90, 30\] must be \[min, max\]',
        ),
        (
            {'motion_blur': {'max_len': 2}},
            r'augment.camera.motion_blur.max_len=2 must be an integer',
        ),
        (3, r'augment.camera=3 must be null'),
    ],
)
def test_bad_config_refused(spec, match):
    with pytest.raises(ValueError, match=match):
        ca.resolve_camera(spec)
    with pytest.raises(ValueError, match=match):
        load_config(
            None,
            [
                f'augment.camera={spec!r}'
                if not isinstance(spec, str)
                else f'augment.camera={spec}'
            ],
        )


# ----------------------------------------------------------------------------- the pipeline
def test_same_seed_same_bytes_dtype_and_shape(img):
    cfg = ca.resolve_camera(ALL_ON)
    a = ca.augment_rgb(img, np.random.default_rng([7, 1, 3]), cfg)
    b = ca.augment_rgb(img, np.random.default_rng([7, 1, 3]), cfg)
    c = ca.augment_rgb(img, np.random.default_rng([7, 1, 4]), cfg)
    assert a.dtype == np.uint8 and a.shape == img.shape and a.flags['C_CONTIGUOUS']
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()
    d = np.random.default_rng(0).uniform(0.5, 6.0, (60, 80)).astype(np.float32)
    d[:5] = np.nan
    z1 = ca.augment_depth(d, np.random.default_rng(5), cfg)
    z2 = ca.augment_depth(d, np.random.default_rng(5), cfg)
    assert z1.dtype == np.float32 and z1.shape == d.shape and z1.tobytes() == z2.tobytes()


def test_off_draws_nothing(img):
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    assert ca.augment_rgb(img, rng, None) is img
    assert ca.augment_rgb(img, rng, ca.resolve_camera({'jpeg': {'p': 0.0}})) is img
    assert rng.bit_generator.state == state


def test_identity_parameters_are_exact(img):
    lin = ca.decode(img)
    assert np.array_equal(ca.encode(lin), img)  # gamma 2.2 round trip is lossless on uint8
    assert np.array_equal(ca.encode(ca.vignetting(lin, 0.0, (80, 60))), img)
    assert np.array_equal(ca.encode(ca.colour_cast(lin, np.zeros(3), 30.0)), img)
    assert np.array_equal(ca.encode(ca.sensor_noise(lin, 0.0, 0.0, np.ones_like(lin))), img)


# -------------------------------------------------------------------------- each op, within bounds
def test_white_balance_gains_within_bounds(img):
    out = ca.augment_rgb(img, np.random.default_rng(2), _only('white_balance', gain=0.2))
    assert not np.array_equal(out, img)
    lin_in, lin_out = ca.decode(img).astype(np.float64), ca.decode(out).astype(np.float64)
    ok = (img > 30) & (out < 250)
    ratio = lin_out[ok] / lin_in[ok]
    for c in range(3):  # one gain per channel, within [0.8, 1.2] up to 8-bit rounding
        r = (lin_out[..., c] / lin_in[..., c])[ok[..., c]]
        assert 0.8 - 0.03 < np.median(r) < 1.2 + 0.03 and r.std() < 0.03
    assert ratio.size > 0.5 * img.size


def test_exposure_and_gamma_change_brightness_monotonically(img):
    cfg = _only('exposure', ev=1.5, gamma=[1.8, 2.6])
    means = []
    for s in range(6):
        out = ca.augment_rgb(img, np.random.default_rng(s), cfg)
        # a global tone change: each output value is one non-decreasing function of the input value
        for c in range(3):
            table = np.full(256, -1)
            table[img[..., c]] = out[..., c]
            assert np.array_equal(table[img[..., c]], out[..., c])  # a function of the input value
            used = table[table >= 0]
            assert (np.diff(used) >= 0).all()  # monotone
        means.append(out.mean())
    assert max(means) - min(means) > 20


def test_vignetting_darkens_corners_not_centre(img):
    out = ca.augment_rgb(img, np.random.default_rng(3), _only('vignetting', strength=0.8))
    assert (out.astype(int) <= img.astype(int)).all()  # only darkens
    lin = ca.decode(img)
    v = ca.vignetting(lin, 0.5, (80, 60))
    # r = 1 at the corner (80, 60 px from the centre of a 160x120 image): factor 1 - 0.5
    assert np.allclose(v[60, 80], lin[60, 80]) and np.allclose(v[0, 0], lin[0, 0] * 0.5, rtol=1e-5)
    assert (ca.decode(out)[0, 0] <= lin[0, 0]).all() and not np.array_equal(out, img)


def test_sensor_noise_in_linear_light_scales_with_signal():
    flat = np.zeros((200, 200, 3), np.uint8)
    flat[:, :100] = 40
    flat[:, 100:] = 220
    lin = ca.decode(flat)
    noisy = ca.sensor_noise(
        lin, 0.004, 0.002, np.random.default_rng(0).standard_normal(lin.shape, dtype=np.float32)
    )
    for sl, x in ((np.s_[:, :100], lin[0, 0, 0]), (np.s_[:, 100:], lin[0, 150, 0])):
        sd = (noisy[sl] - lin[sl]).std()
        assert abs(sd - np.sqrt(0.004 * x + 0.002**2)) < 0.05 * sd  # shot + read in linear light
    out = ca.augment_rgb(flat, np.random.default_rng(4), _only('noise', shot=0.004, read=0.004))
    diff = out.astype(int) - flat
    assert diff.std() > 0.5 and abs(diff.mean()) < 1.5 and np.abs(diff).max() < 60


def test_motion_blur_is_a_convex_line_kernel(img):
    out = ca.augment_rgb(img, np.random.default_rng(5), _only('motion_blur', max_len=9))
    assert not np.array_equal(out, img)
    assert out.min() >= img.min() - 1 and out.max() <= img.max() + 1
    assert abs(float(out.mean()) - float(img.mean())) < 3
    step = np.zeros((40, 40), np.float32)
    step[:, 20:] = 1
    b = ca.motion_blur(step[..., None].repeat(3, -1), 7, 0.0)[
        ..., 0
    ]  # horizontal: edge spread ±3 px
    assert np.allclose(b[:, :16], 0) and np.allclose(b[:, 24:], 1) and 0 < b[20, 20] < 1
    assert np.allclose(
        ca.motion_blur(step[..., None].repeat(3, -1), 7, 90.0)[..., 0], step, atol=1e-6
    )


def test_jpeg_quality_bounds(img):
    out = ca.augment_rgb(img, np.random.default_rng(6), _only('jpeg', quality=[30, 30]))
    assert not np.array_equal(out, img)
    err = np.abs(out.astype(int) - img).mean()
    assert 0.2 < err < 8
    assert np.abs(ca.jpeg(img, 90).astype(int) - img).mean() < err


def test_colour_cast_gains_within_bounds(img):
    lin = ca.decode(img)
    out = ca.colour_cast(lin, np.array([0.15, -0.15, 0.0]), 0.0)
    r = out / np.maximum(lin, 1e-6)
    assert np.allclose(r[:, 0], 1) and np.allclose(r[:, -1], [1.15, 0.85, 1.0], atol=1e-5)
    assert (r >= 0.85 - 1e-5).all() and (r <= 1.15 + 1e-5).all()
    assert not np.array_equal(
        ca.augment_rgb(img, np.random.default_rng(7), _only('colour_cast')), img
    )


def test_depth_noise_and_holes_bounded():
    v = np.mgrid[0:120, 0:160][1]
    d = np.where(v < 80, 2.0, 4.0).astype(np.float32)
    d[:3] = np.nan
    out = ca.augment_depth(d, np.random.default_rng(8), _only('depth', sigma=0.01, holes=0.05))
    assert out.dtype == np.float32 and np.isnan(out[:3]).all()
    ok = np.isfinite(out)
    holes = np.isfinite(d) & ~ok
    assert 0 < holes.mean() < 0.12
    assert holes[:, 76:84].mean() > holes[:, :60].mean()  # the band at the depth jump
    rel = np.abs(out[ok] - d[ok]) / d[ok]
    assert (
        rel.max() < 6 * 0.01 * 4.0 and rel.mean() > 0
    )  # sigma k*z <= 0.04 at 4 m, Gaussian tails
    assert ca.augment_depth(None, np.random.default_rng(8), _only('depth')) is None


# ----------------------------------------------------------------------------- in the dataset
def test_dataset_labels_K_and_geometry_unchanged(ds_dir):
    base = dict(DEFAULTS['augment'], hflip=0.5, scale=[1.1, 1.5])
    plain = FrameDataset([ds_dir], (64, 48), augment=base, seed=3)
    cam = FrameDataset([ds_dir], (64, 48), augment=dict(base, camera=ALL_ON), seed=3)
    off = FrameDataset([ds_dir], (64, 48), augment=dict(base, camera={'preset': None}), seed=3)
    assert cam.camera is not None and off.camera is None
    changed = 0
    for epoch in (0, 1):
        for ds in (plain, cam, off):
            ds.set_epoch(epoch)
        for i in range(len(plain)):
            a, b, c = plain[i], cam[i], off[i]
            for k in ('K', 'labels', 'has_depth', 'has_labels', 'index'):
                assert torch.equal(a[k], b[k]), k  # photometric: labels and K exactly as without
                assert torch.equal(a[k], c[k]), k
            assert torch.equal(a['rgb'], c['rgb'])  # off: byte-identical, no extra draw
            assert torch.equal(
                a['depth'].isnan() & ~b['depth'].isnan(),
                torch.zeros_like(a['depth'], dtype=torch.bool),
            )
            assert b['rgb'].dtype == torch.float32 and b['rgb'].shape == a['rgb'].shape
            changed += not torch.equal(a['rgb'], b['rgb'])
    assert changed == 2 * len(plain)
    b1, b2 = cam[0], cam[0]
    assert all(
        torch.equal(
            b1[k],
            b2[k],
        )
        if k != 'depth'
        else torch.equal(b1[k].nan_to_num(-1), b2[k].nan_to_num(-1))
        for k in b1
    )  # same seed, epoch, index -> same bytes
