"""M2 back-projection and intrinsics bookkeeping (core/geometry.py); cases C09, C17, C18."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from depth3dseg_ros.core.depth import depth_to_meters
from depth3dseg_ros.core.geometry import (
    backproject,
    backproject_np,
    crop_intrinsics,
    pixel_grid,
    resize_intrinsics,
    scale_intrinsics,
)


def K3(fx, fy, cx, cy, s=0.0):
    return np.array([[fx, s, cx], [0, fy, cy], [0, 0, 1]], dtype=np.float64)


# ---------------------------------------------------------------- C09: zero depth is no point
def test_c09_zero_float_depth_is_invalid_not_origin():
    K = K3(500, 500, 0, 0)
    pts = backproject_np(np.array([[0.0, 2.0]], np.float32), K)
    assert pts.dtype == np.float32 and pts.shape == (1, 2, 3)
    assert np.all(np.isnan(pts[0, 0]))  # never (0, 0, 0)
    np.testing.assert_allclose(pts[0, 1], [0.004, 0.0, 2.0], rtol=1e-6)
    # torch: same numbers, invalid pixel flagged (xyz there is 0 only as a gradient-safe filler)
    xyz, valid = backproject(torch.tensor([[[[0.0, 2.0]]]]), torch.tensor(K, dtype=torch.float32))
    assert valid.tolist() == [[[[False, True]]]]
    np.testing.assert_allclose(xyz[0, :, 0, 1].numpy(), [0.004, 0.0, 2.0], rtol=1e-6)


def test_c09_16uc1_millimetres_refused_and_metres_match():
    K = K3(500, 500, 0, 0)
    with pytest.raises(ValueError, match='dtype uint16'):
        backproject_np(np.array([[0, 2000]], np.uint16), K)
    # 16UC1 [0, 2000] mm -> metres (core.depth, 0 = no data) gives the same cloud as the 32FC1 case
    pts = backproject_np(depth_to_meters(np.array([[0, 2000]], np.uint16), '16UC1'), K)
    assert np.all(np.isnan(pts[0, 0]))
    np.testing.assert_allclose(pts[0, 1], [0.004, 0.0, 2.0], rtol=1e-6)


def test_nan_inf_negative_are_invalid():
    d = np.array([[np.nan, np.inf, -1.0, 1.0]], np.float32)
    pts = backproject_np(d, K3(1, 1, 0, 0))
    assert np.isnan(pts[0, :3]).all() and np.isfinite(pts[0, 3]).all()
    _, valid = backproject(torch.from_numpy(d)[None, None], torch.tensor(K3(1, 1, 0, 0)))
    assert valid.flatten().tolist() == [False, False, False, True]


# ---------------------------------------------------------------- C17: P vs K
def test_c17_rectified_uses_P_not_K():
    K = K3(500, 500, 320, 240)
    P = np.array([[450, 0, 310, 0], [0, 450, 235, 0], [0, 0, 1, 0]], np.float64)
    d = np.full((480, 640), np.nan, np.float32)
    d[240, 410] = 2.0
    with_p = backproject_np(d, P)[240, 410]
    np.testing.assert_allclose(with_p, [0.4444, 0.0222, 2.0], atol=1e-4)
    with_k = backproject_np(d, K)[240, 410]
    np.testing.assert_allclose(with_k, [0.36, 0.0, 2.0], atol=1e-6)
    xyz, _ = backproject(torch.from_numpy(d)[None, None], torch.tensor(P)[None])
    np.testing.assert_allclose(xyz[0, :, 240, 410].numpy(), [0.4444, 0.0222, 2.0], atol=1e-4)


def test_c17_all_zero_P_refused_without_inf():
    d = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match='fx'):
        backproject_np(d, np.zeros((3, 4)))
    with pytest.raises(ValueError, match='fx'):
        backproject(torch.ones(1, 1, 2, 2), torch.zeros(1, 3, 4))


# ---------------------------------------------------------------- C18: rescaled intrinsics
def test_c18_resize_intrinsics_and_point():
    K = K3(900, 900, 640, 360)
    K2 = resize_intrinsics(K, (1280, 720), (640, 360))
    np.testing.assert_allclose(K2, K3(450, 450, 320, 180))
    d = np.full((360, 640), np.nan, np.float32)
    d[180, 480] = 3.0
    np.testing.assert_allclose(backproject_np(d, K2)[180, 480], [1.0667, 0.0, 3.0], atol=1e-4)
    # the unscaled K gives the sign error the case describes
    assert backproject_np(d, K)[180, 480, 0] == pytest.approx(-0.5333, abs=1e-4)


def test_c18_P_scales_translation_column():
    P = np.array([[900, 0, 640, -45.0], [0, 900, 360, 9.0], [0, 0, 1, 0]])
    P2 = resize_intrinsics(P, (1280, 720), (640, 180))  # sx = 0.5, sy = 0.25
    np.testing.assert_allclose(P2, [[450, 0, 320, -22.5], [0, 225, 90, 2.25], [0, 0, 1, 0]])


def test_resize_and_crop_round_trips():
    K = K3(525.0, 520.0, 319.5, 239.5, s=0.7)
    back = resize_intrinsics(resize_intrinsics(K, (640, 480), (320, 200)), (320, 200), (640, 480))
    np.testing.assert_allclose(back, K, atol=1e-12)
    np.testing.assert_allclose(crop_intrinsics(crop_intrinsics(K, 13, 7), -13, -7), K, atol=1e-12)
    Kc = crop_intrinsics(K, 10, 20)
    assert Kc[0, 2] == pytest.approx(309.5) and Kc[1, 2] == pytest.approx(219.5)


def test_cropped_and_decimated_clouds_match_full_cloud():
    rng = np.random.default_rng(0)
    d = rng.uniform(0.5, 5.0, (48, 64)).astype(np.float32)
    K = K3(60.0, 58.0, 31.5, 23.5, s=0.3)
    full = backproject_np(d, K)
    crop = backproject_np(d[5:40, 7:50], crop_intrinsics(K, 7, 5))
    np.testing.assert_allclose(crop, full[5:40, 7:50], rtol=1e-5, atol=1e-6)
    # decimation by 2 (pixel u' sits at u = 2u' under the no-half-pixel convention)
    half = backproject_np(d[::2, ::2], resize_intrinsics(K, (64, 48), (32, 24)))
    np.testing.assert_allclose(half, full[::2, ::2], rtol=1e-5, atol=1e-6)


def test_intrinsics_torch_batched_matches_numpy():
    Ks = np.stack([K3(500, 510, 320, 240), K3(300, 300, 160, 120, s=1.0)])
    Kt = torch.tensor(Ks, dtype=torch.float64)
    out = scale_intrinsics(Kt, torch.tensor([0.5, 2.0]), torch.tensor([0.25, 3.0]))
    for i, (sx, sy) in enumerate([(0.5, 0.25), (2.0, 3.0)]):
        np.testing.assert_allclose(out[i].numpy(), scale_intrinsics(Ks[i], sx, sy))
    outc = crop_intrinsics(Kt, 4, 6)
    np.testing.assert_allclose(outc.numpy(), np.stack([crop_intrinsics(k, 4, 6) for k in Ks]))
    np.testing.assert_allclose(
        resize_intrinsics(Kt, (640, 480), (320, 240)).numpy(),
        np.stack([scale_intrinsics(k, 0.5, 0.5) for k in Ks]),
    )
    assert torch.equal(Kt, torch.tensor(Ks))  # input untouched


@pytest.mark.parametrize('bad', [(0, 480), (640.5, 480), (640,)])
def test_resize_intrinsics_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match='src_wh'):
        resize_intrinsics(K3(1, 1, 0, 0), bad, (10, 10))


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match='3x3'):
        scale_intrinsics(np.eye(4), 1, 1)
    with pytest.raises(ValueError, match='sx'):
        scale_intrinsics(np.eye(3), 0, 1)
    with pytest.raises(ValueError, match='B×1×H×W'):
        backproject(torch.ones(1, 2, 3, 3), torch.eye(3))
    with pytest.raises(ValueError, match='batch size'):
        backproject(torch.ones(2, 1, 3, 3), torch.eye(3).repeat(3, 1, 1))
    with pytest.raises(ValueError, match='H×W'):
        backproject_np(np.ones((2, 2, 1), np.float32), np.eye(3))


# ---------------------------------------------------------------- torch vs numpy, gradients
def test_torch_matches_numpy_per_sample_K():
    rng = np.random.default_rng(1)
    d = rng.uniform(0.2, 8.0, (3, 1, 20, 30)).astype(np.float32)
    d[0, 0, 3, 4] = np.nan
    d[1, 0, 0, :] = 0.0
    d[2, 0, 5, 5] = np.inf
    Ks = np.stack([K3(25, 24, 14.5, 9.5), K3(40, 41, 15, 10, s=0.5), K3(18, 18, 3, 17)])
    xyz, valid = backproject(torch.from_numpy(d), torch.tensor(Ks, dtype=torch.float32))
    assert (
        xyz.shape == (3, 3, 20, 30) and valid.shape == (3, 1, 20, 30) and valid.dtype == torch.bool
    )
    for i in range(3):
        ref = backproject_np(d[i, 0], Ks[i])
        vi = valid[i, 0].numpy()
        np.testing.assert_array_equal(vi, np.isfinite(ref[..., 2]))
        np.testing.assert_allclose(
            xyz[i].permute(1, 2, 0).numpy()[vi], ref[vi], rtol=1e-5, atol=1e-6
        )
        assert np.all(xyz[i].permute(1, 2, 0).numpy()[~vi] == 0)


def test_gradient_flows_from_xyz_to_depth():
    d = torch.tensor([[[[1.0, 2.0], [float('nan'), 0.0]]]], requires_grad=True)
    K = torch.tensor([[[2.0, 0, 0.5], [0, 4.0, 0.5], [0, 0, 1]]])
    xyz, valid = backproject(d, K)
    (xyz * valid).sum().backward()
    g = d.grad[0, 0]
    assert torch.isfinite(g).all()
    # d(x+y+z)/dd = (u-cx)/fx + (v-cy)/fy + 1 at valid pixels, 0 at invalid ones
    assert g[0, 0].item() == pytest.approx(-0.25 - 0.125 + 1)
    assert g[0, 1].item() == pytest.approx(0.25 - 0.125 + 1)
    assert g[1, 0].item() == 0 and g[1, 1].item() == 0


def test_pixel_grid_cached_per_size_device_dtype():
    a = pixel_grid(4, 5)
    assert pixel_grid(4, 5) is a
    assert pixel_grid(4, 5, dtype=torch.float64) is not a
    assert a[0][0, 0, 2, 3].item() == 3 and a[1][0, 0, 2, 3].item() == 2  # (u, v) = (col, row)


@settings(max_examples=40, deadline=None)
@given(
    fx=st.floats(50, 2000),
    fy=st.floats(50, 2000),
    cx=st.floats(-50, 700),
    cy=st.floats(-50, 500),
    s=st.floats(-5, 5),
    z=st.floats(0.05, 60),
)
def test_backprojected_points_reproject_to_their_pixels(fx, fy, cx, cy, s, z):
    K = K3(fx, fy, cx, cy, s)
    pts = backproject_np(np.full((5, 7), z, np.float32), K).astype(np.float64)
    uvw = pts.reshape(-1, 3) @ K.T
    u, v = uvw[:, 0] / uvw[:, 2], uvw[:, 1] / uvw[:, 2]
    vv, uu = np.mgrid[0:5, 0:7]
    np.testing.assert_allclose(u, uu.ravel(), atol=1e-3)
    np.testing.assert_allclose(v, vv.ravel(), atol=1e-3)
    np.testing.assert_allclose(pts[..., 2], z, rtol=1e-6)


def test_numpy_callers_start_without_torch():
    """core.geometry imports torch only where a function needs it: the bag tools and the ROS K
    bookkeeping (numpy only) start without paying torch's import (seconds on a loaded machine)."""
    import subprocess
    import sys

    code = (
        'import sys, numpy as np\n'
        'import depth3dseg_ros.bags.extract, depth3dseg_ros.bags.replay\n'
        'from depth3dseg_ros.ros.camera_info import scale_intrinsics\n'
        'K = scale_intrinsics(np.eye(3), 0.5, 0.5)\n'
        'assert K[0, 0] == 0.5, K\n'
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, '-c', code], check=True, timeout=120)
