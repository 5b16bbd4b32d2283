"""core.depth (16UC1 mm <-> 32FC1 m) and core.imageops (nearest resize, colour maps, overlay).

Cases C08, C10, C22 (docs/cases.md); the C09 resize rule; C20's separate-scale resample.
"""

import cv2
import numpy as np
import pytest

from depth3dseg_ros.core.depth import (
    convert_depth,
    depth_to_meters,
    meters_to_16uc1,
    meters_to_32fc1,
)
from depth3dseg_ros.core.imageops import (
    check_same_hw,
    colorize_depth,
    colorize_labels,
    colormap_lut,
    depth_to_u8,
    label_image,
    overlay,
    resize_depth,
    resize_labels,
    resize_nearest,
)


# ---------------------------------------------------------------- C08 units and uint16 overflow
def test_c08_mm_and_m_mean_the_same_depth():
    a = depth_to_meters(np.array([[1500]], np.uint16), '16UC1')
    b = depth_to_meters(np.array([[1.5]], np.float32), '32FC1')
    assert a.dtype == b.dtype == np.float32
    assert a[0, 0] == pytest.approx(1.5) and b[0, 0] == pytest.approx(1.5)
    assert depth_to_meters(np.array([[1500]], np.uint16), 'mono16')[0, 0] == pytest.approx(1.5)


def test_c08_rounding_like_depth_image_proc():
    assert meters_to_16uc1(np.array([[1.2345]], np.float32))[0, 0] == 1235
    got = meters_to_16uc1(np.array([0.0004, 0.0005, 1.0, 65.535, 65.5354], np.float32))
    assert got.tolist() == [0, 1, 1000, 65535, 65535]
    # every x.xxx5 m from 0 to 65.535 m as depth_image_proc's float32 `d * 1000.0f + 0.5f` (a
    # float64 product gave 2000 for 2.0005 m, where depth_image_proc gives 2001)
    d = ((np.arange(65535, dtype=np.float64) + 0.5) / 1000).astype(np.float32)
    ref = np.trunc(d * np.float32(1000.0) + np.float32(0.5))
    assert meters_to_16uc1(d).tolist() == ref.astype(np.int64).tolist()
    assert meters_to_16uc1(np.array([2.0005, 3.0005, 10.0005], np.float32)).tolist() == [
        2001,
        3001,
        10001,
    ]


def test_c08_out_of_range_nan_negative_become_zero_never_wrap():
    got = meters_to_16uc1(np.array([[70.0, np.nan, -0.3, np.inf, -np.inf, 65.5356]], np.float32))
    assert got.dtype == np.uint16
    assert got.tolist() == [[0, 0, 0, 0, 0, 0]]
    assert 70000 - 65536 == 4464 and 4464 not in got  # the wrapped value a plain cast gives


def test_c08_32fc1_keeps_metres_and_writes_nan():
    got = meters_to_32fc1(np.array([1.25, 0.0, -1.0, np.inf, np.nan], np.float64))
    assert got.dtype == np.float32
    assert got[0] == np.float32(1.25) and np.isnan(got[1:]).all()


def test_depth_conversions_round_trip_and_scale():
    mm = np.array([[0, 1, 999, 65535]], np.uint16)
    assert np.array_equal(convert_depth(convert_depth(mm, '16UC1', '32FC1'), '32FC1', '16UC1'), mm)
    tum = depth_to_meters(np.array([[5000, 0]], np.uint16), '16UC1', depth_scale=1 / 5000)
    assert tum[0, 0] == pytest.approx(1.0) and np.isnan(tum[0, 1])


def test_depth_errors_name_the_encoding():
    with pytest.raises(ValueError, match="'8UC3'"):
        depth_to_meters(np.zeros((1, 1), np.uint8), '8UC3')
    with pytest.raises(ValueError, match='uint16'):
        depth_to_meters(np.zeros((1, 1), np.float32), '16UC1')
    with pytest.raises(ValueError, match='depth_scale'):
        depth_to_meters(np.zeros((1, 1), np.uint16), '16UC1', depth_scale=-1)
    with pytest.raises(ValueError, match='rgb8'):
        convert_depth(np.zeros((1, 1), np.uint16), '16UC1', 'rgb8')


# ---------------------------------------------------------------- C09 resize never invents depth
def test_c09_resize_depth_never_blends_valid_and_invalid():
    d = np.array([[np.nan, 2.0], [0.5, np.nan]], np.float32)
    up = resize_depth(d, (5, 3))
    vals = set(np.unique(up[np.isfinite(up)]).tolist())
    assert vals <= {0.5, 2.0}
    assert np.isnan(up).sum() > 0
    mm = np.array([[0, 2000]], np.uint16)
    assert set(resize_depth(mm, (7, 3)).ravel().tolist()) <= {0, 2000}


# ---------------------------------------------------------------- C10 finite-only depth colour map
def test_c10_colorize_range_over_finite_values_only():
    d = np.array([[np.nan, 1.0], [3.0, np.inf]], np.float32)
    u8, valid = depth_to_u8(d)
    assert valid.tolist() == [[False, True], [True, False]]
    assert u8[0, 1] == 0 and u8[1, 0] == 255
    img = colorize_depth(d)
    lut = colormap_lut()
    assert img.shape == (2, 2, 3) and img.dtype == np.uint8
    assert img[0, 1].tolist() == lut[0].tolist() and img[1, 0].tolist() == lut[255].tolist()
    assert img[0, 0].tolist() == [0, 0, 0] and img[1, 1].tolist() == [0, 0, 0]
    assert lut[0].tolist() != [0, 0, 0]  # the near colour is not the no-data colour
    assert np.isnan(np.min(d))  # a naive np.min over all pixels is NaN: the fault C10 reports


def test_colorize_depth_fixed_range_and_no_data_frames():
    d = np.array([[1.0, 2.0, 5.0]], np.float32)
    u8, _ = depth_to_u8(d, vmin=1.0, vmax=3.0)
    assert u8.tolist() == [[0, 128, 255]]
    assert colorize_depth(np.full((2, 2), np.nan, np.float32)).sum() == 0
    assert (colorize_depth(np.ones((2, 2), np.float32)) == colormap_lut()[0]).all()


def test_colormap_lut_is_rgb_order_of_opencv_map():
    bgr = cv2.applyColorMap(np.array([[200]], np.uint8), cv2.COLORMAP_TURBO)[0, 0]
    assert colormap_lut()[200].tolist() == bgr[::-1].tolist()


# ---------------------------------------------------------------- C22 nearest label resize
def test_c22_labels_resized_nearest_dtype_kept():
    lab = np.array([[0, 5], [5, 0]], np.uint8)
    up = resize_labels(lab, (4, 4))
    assert up.dtype == np.uint8
    assert up.tolist() == [[0, 0, 5, 5], [0, 0, 5, 5], [5, 5, 0, 0], [5, 5, 0, 0]]
    assert set(np.unique(up).tolist()) <= {0, 5}
    bilinear = cv2.resize(lab, (4, 4), interpolation=cv2.INTER_LINEAR)
    assert set(np.unique(bilinear).tolist()) - {0, 5}  # the fault: invented ids


def test_c22_ids_up_to_300_stay_16bit():
    lab = label_image(np.array([[0, 300], [299, 12]], np.int64))
    assert lab.dtype == np.uint16
    up = resize_labels(lab, (4, 4))
    assert up.dtype == np.uint16 and up.max() == 300 and 44 not in up
    assert label_image(np.array([[0, 255]], np.int64)).dtype == np.uint8
    with pytest.raises(ValueError, match='65536'):
        label_image(np.array([[0, 65536]], np.int64))
    with pytest.raises(ValueError, match='integer'):
        resize_labels(np.zeros((2, 2), np.float32), (4, 4))


def test_c22_palette_lookup_after_nearest_resize():
    palette = np.array([[0, 0, 0], [10, 20, 30], [200, 100, 50]], np.uint8)
    lab = np.array([[1, 2]], np.uint8)
    col = colorize_labels(resize_labels(lab, (4, 2)), palette)
    assert col.shape == (2, 4, 3)
    assert col[:, :2].reshape(-1, 3).tolist() == [[10, 20, 30]] * 4
    assert col[:, 2:].reshape(-1, 3).tolist() == [[200, 100, 50]] * 4
    with pytest.raises(ValueError, match='label id 3 outside palette of 3'):
        colorize_labels(np.array([[3]], np.uint8), palette)


def test_resize_nearest_convention_matches_opencv_inter_nearest():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (37, 53, 3), dtype=np.uint8)
    for size in [(106, 74), (20, 11), (53, 90), (7, 37)]:
        assert np.array_equal(
            resize_nearest(img, size), cv2.resize(img, size, interpolation=cv2.INTER_NEAREST)
        )


def test_c20_separate_scale_resample_and_size_check():
    rgb = np.zeros((720, 1280, 3), np.uint8)
    rgb[150, 200] = (1, 2, 3)
    small = resize_nearest(rgb, (640, 480))
    assert small[100, 100].tolist() == [1, 2, 3]  # sx = 2.0, sy = 1.5
    with pytest.raises(ValueError) as err:
        check_same_hw(depth=np.zeros((480, 640), np.float32), rgb=rgb)
    assert '640x480' in str(err.value) and '1280x720' in str(err.value)
    assert check_same_hw(depth=np.zeros((480, 640)), labels=np.zeros((480, 640)), rgb=None) == (
        480,
        640,
    )


def test_overlay_alpha_blend_and_skip_id():
    rgb = np.full((1, 3, 3), 100, np.uint8)
    palette = np.array([[0, 0, 0], [255, 0, 0]], np.uint8)
    lab = np.array([[0, 1, 1]], np.uint8)
    out = overlay(rgb, lab, palette, alpha=0.5, skip_id=0)
    assert out[0, 0].tolist() == [100, 100, 100]
    assert out[0, 1].tolist() == [178, 50, 50]  # rint(0.5*100 + 0.5*255) = rint(177.5) = 178
    assert overlay(rgb, lab, palette, alpha=0.0).tolist() == rgb.tolist()
    assert overlay(rgb, lab, palette, alpha=1.0)[0, 1].tolist() == [255, 0, 0]
    with pytest.raises(ValueError, match='alpha'):
        overlay(rgb, lab, palette, alpha=1.5)
    with pytest.raises(ValueError, match='size mismatch'):
        overlay(rgb, np.zeros((2, 3), np.uint8), palette)
