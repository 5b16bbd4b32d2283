"""node/frame.py, the per-frame rules of depth3dseg_node as pure functions (issues 16 and 14),
without ROS.

Input rules (plan_input): no CameraInfo, degenerate intrinsics, image size != CameraInfo size, lens
distortion (rectify / refuse_cloud / ignore, maps cached per camera model). Output rules
(frame_outputs): max_depth cut, resize to the camera size, the camera model of the outputs (K
scaled once), the cloud from the model's points or from the published depth and K. What a frame
publishes (node/outputs.py, issue 14): publishers per switch, the messages per key (raw and
compressed), the cloud's colour.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from depth3dseg_ros.core.geometry import backproject_np, resize_intrinsics
from depth3dseg_ros.node.frame import (
    Rectifier,
    frame_outputs,
    has_distortion,
    intrinsics_problem,
    output_camera,
    plan_input,
    rectified_intrinsics,
)
from depth3dseg_ros.ros.camera_info import Intrinsics

W, H = 80, 60
K = np.array([[70.0, 0, 39.5], [0, 72.0, 29.5], [0, 0, 1]])


def intr(K=K, w=W, h=H, D=(), model='plumb_bob', P=None):
    P = np.concatenate([K, np.zeros((3, 1))], axis=1) if P is None else np.asarray(P, float)
    return Intrinsics(
        K=np.asarray(K, float),
        width=w,
        height=h,
        P=P,
        D=np.asarray(D, float),
        distortion_model=model,
    )


def rgb_image(w=W, h=H):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 3 % 256, yy * 4 % 256, (xx + yy) % 256], -1).astype(np.uint8)


# -- degenerate intrinsics ------------------------------------------------------------------------
@pytest.mark.parametrize(
    'row,col,value,words',
    [
        (
            0,
            0,
            5e-324,
            'CameraInfo.k fx=5e-324 is not a plausible focal length for a 80x60 image (0.08 .. '
            '80000 px)',
        ),
        (1, 1, 1e308, 'CameraInfo.k fy=1e+308 is not a plausible focal length'),
        (
            0,
            2,
            1e308,
            'CameraInfo.k cx=1e+308 is not plausible for a 80x60 image (|cx| > 80000 px)',
        ),
        (0, 1, -1e9, 'CameraInfo.k skew=-1000000000.0 is not plausible'),
        (1, 2, np.inf, 'CameraInfo.k has non-finite entries'),
    ],
)
def test_degenerate_intrinsics_named_and_frame_keeps_labels(row, col, value, words):
    bad = K.copy()
    bad[row, col] = value
    assert words in intrinsics_problem(bad, W, H)
    plan = plan_input(intr(bad), (W, H))
    assert plan.K is None and plan.camera is None and not plan.cloud and plan.maps is None
    assert [p.key for p in plan.problems] == ['intrinsics'] and words in plan.problems[0].text
    assert 'publishing labels (2D head), overlay, mask and depth' in plan.problems[0].text


def test_plausible_intrinsics_pass_and_limits_are_inclusive():
    assert intrinsics_problem(K, W, H) is None
    edge = K.copy()
    edge[0, 0], edge[1, 1] = 0.08, 80000.0  # 1e-3 and 1e3 x max(80, 60)
    assert intrinsics_problem(edge, W, H) is None
    edge[0, 0] = 0.0799
    assert 'fx=0.0799' in intrinsics_problem(edge, W, H)


def test_no_camera_info_plan_has_no_geometry_and_no_problem():
    plan = plan_input(None, (W, H))
    assert plan.K is None and plan.camera is None and not plan.cloud and plan.problems == []


# -- image size vs CameraInfo size ---------------------------------------------------------------
def test_size_mismatch_publishes_without_geometry_naming_both_sizes():
    plan = plan_input(intr(w=640, h=480), (W, H))
    assert plan.K is None and plan.camera is None and not plan.cloud
    assert [p.key for p in plan.problems] == ['size']
    assert (
        'image is 80x60 but its CameraInfo describes 640x480 (after binning and ROI): K not '
        'rescaled' in plan.problems[0].text
    )


def test_binning_and_roi_are_applied_before_the_size_rule():
    from sensor_msgs.msg import CameraInfo, RegionOfInterest
    from depth3dseg_ros.ros.camera_info import intrinsics_from_camera_info

    msg = CameraInfo(
        width=160, height=120, k=(K * [[2], [2], [1]]).ravel().tolist(), binning_x=2, binning_y=2
    )
    i = intrinsics_from_camera_info(msg)
    assert (i.width, i.height) == (W, H)
    plan = plan_input(i, (W, H))
    assert plan.problems == [] and np.allclose(plan.K, K)
    roi = CameraInfo(
        width=160,
        height=120,
        k=K.ravel().tolist(),
        roi=RegionOfInterest(x_offset=10, y_offset=20, width=40, height=30),
    )
    plan = plan_input(intrinsics_from_camera_info(roi), (W, H))
    assert 'describes 40x30' in plan.problems[0].text
    with pytest.raises(
        ValueError, match=r'binning_x=4294967295 binning_y=1 leaves a 0x120 image of 160x120'
    ):
        intrinsics_from_camera_info(
            CameraInfo(width=160, height=120, k=K.ravel().tolist(), binning_x=2**32 - 1)
        )


# -- distortion ----------------------------------------------------------------------------------
D5 = (-0.28, 0.07, 0.001, -0.002, 0.0)


def test_rectify_plumb_bob_matches_cv2_undistort_and_outputs_have_zero_d():
    cam = intr(D=D5)
    assert has_distortion(cam)
    rect = Rectifier()
    plan = plan_input(cam, (W, H), 'rectify', rect)
    assert plan.problems == [] and plan.cloud and plan.maps is not None
    assert np.array_equal(plan.K, K) and np.array_equal(plan.camera.K, K)
    assert (
        list(plan.camera.D) == [0.0] * 5
        and plan.camera.distortion_model == 'plumb_bob'
        and plan.camera.rectified
    )
    img = rgb_image()
    expect = cv2.undistort(img, K, np.array(D5), None, K)
    got = plan.prepare(img)
    assert got.shape == img.shape and got.dtype == np.uint8
    assert np.abs(got.astype(int) - expect.astype(int)).max() <= 1  # same maps, fixed-point remap
    assert not np.array_equal(got, img)


def test_rectify_uses_p_as_the_new_camera_and_caches_maps_per_camera_info():
    P = np.array([[60.0, 0, 40, 0], [0, 61.0, 30, 0], [0, 0, 1, 0]])
    rect = Rectifier()
    plan = plan_input(intr(D=D5, P=P), (W, H), 'rectify', rect)
    assert np.array_equal(plan.K, P[:, :3]) and np.array_equal(plan.camera.P, P)
    m1, m2 = cv2.initUndistortRectifyMap(
        K, np.array(D5), np.eye(3), P[:, :3], (W, H), cv2.CV_32FC1
    )
    assert np.array_equal(plan.maps[0], m1) and np.array_equal(plan.maps[1], m2)
    for _ in range(3):
        plan_input(intr(D=D5, P=P), (W, H), 'rectify', rect)
    assert rect.built == 1  # cached: one build for one CameraInfo
    plan_input(intr(D=(-0.1, 0, 0, 0, 0), P=P), (W, H), 'rectify', rect)
    assert rect.built == 2


def test_rectify_rational_polynomial_and_equidistant():
    D8 = (-0.3, 0.1, 0.001, 0.001, 0.01, 0.02, -0.01, 0.005)
    plan = plan_input(intr(D=D8, model='rational_polynomial'), (W, H), 'rectify')
    m = cv2.initUndistortRectifyMap(K, np.array(D8), np.eye(3), K, (W, H), cv2.CV_32FC1)
    assert np.array_equal(plan.maps[0], m[0]) and plan.problems == []
    D4 = (0.05, -0.01, 0.002, -0.001)
    plan = plan_input(intr(D=D4, model='equidistant'), (W, H), 'rectify')
    m = cv2.fisheye.initUndistortRectifyMap(K, np.array(D4), np.eye(3), K, (W, H), cv2.CV_32FC1)
    assert np.array_equal(plan.maps[0], m[0]) and np.array_equal(plan.maps[1], m[1]) and plan.cloud


def test_unrectifiable_model_refuses_the_cloud_with_the_reason():
    plan = plan_input(intr(D=(0.1, 0.2, 0.3), model='kannala_brandt'), (W, H), 'rectify')
    assert plan.K is None and not plan.cloud and plan.camera is not None
    assert [p.key for p in plan.problems] == ['distortion']
    text = plan.problems[0].text
    assert (
        "CameraInfo.d=[0.1, 0.2, 0.3] (kannala_brandt) is not zero and cannot be rectified" in text
    )
    assert "distortion_model='kannala_brandt' cannot be rectified" in text


def test_refuse_cloud_and_ignore():
    cam = intr(D=D5)
    plan = plan_input(cam, (W, H), 'refuse_cloud')
    assert plan.K is None and not plan.cloud and plan.maps is None
    assert plan.camera is cam  # camera_info still describes the image, D kept
    assert (
        'CameraInfo.d=[-0.28, 0.07, 0.001, -0.002, 0.0] (plumb_bob) is not zero (distortion: '
        'refuse_cloud)' in plan.problems[0].text
    )
    plan = plan_input(cam, (W, H), 'ignore')  # the behaviour before issue 14
    assert np.array_equal(plan.K, K) and plan.cloud and plan.camera is cam and plan.problems == []
    with pytest.raises(ValueError, match="distortion='undistort' is not one of"):
        plan_input(cam, (W, H), 'undistort')


def test_zero_d_and_rectified_input_need_no_rectification():
    plan = plan_input(intr(D=(0, 0, 0, 0, 0)), (W, H))
    assert plan.maps is None and plan.cloud and plan.problems == []
    # use_rectified: K came from P; a stereo camera's CameraInfo has R != I
    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    rectified = replace(intr(D=D5), rectified=True, R=rot)
    plan = plan_input(rectified, (W, H))
    assert plan.maps is None and plan.cloud and list(plan.camera.D) == [0.0] * 5
    assert np.array_equal(plan.camera.R, np.eye(3))  # as a rectified output describes itself


def test_rectified_intrinsics():
    P = np.array([[60.0, 0, 40, -3.0], [0, 61.0, 30, 0], [0, 0, 1, 0]])
    r = rectified_intrinsics(intr(D=D5, P=P))
    assert (
        np.array_equal(r.K, P[:, :3]) and np.array_equal(r.P, P) and np.array_equal(r.R, np.eye(3))
    )
    assert list(r.D) == [0.0] * 5 and r.rectified


# -- output rules --------------------------------------------------------------------------------
NW, NH = 64, 48


def result(with_k=True, points=True):
    rng = np.random.default_rng(0)
    depth = rng.uniform(0.5, 4.0, (NH, NW)).astype(np.float32)
    depth[0, 0] = np.nan
    Kn = resize_intrinsics(K, (W, H), (NW, NH)) if with_k else None
    pts = backproject_np(depth, Kn) if (with_k and points) else None
    return SimpleNamespace(
        labels=rng.integers(1, 13, (NH, NW)).astype(np.uint8),
        depth=depth,
        confidence=rng.uniform(0, 1, (NH, NW)).astype(np.float32),
        K=Kn,
        points=pts,
        rgb=np.zeros((NH, NW, 3), np.uint8),
    )


def test_network_resolution_outputs_use_the_networks_k_and_points_with_max_depth_cut():
    res, img = result(), rgb_image()
    out = frame_outputs(res, plan_input(intr(), (W, H)), img, max_depth=3.0)
    assert out.labels.shape == (NH, NW) and out.rgb is res.rgb
    assert np.isnan(out.depth[~(res.depth <= 3.0)]).all() and np.array_equal(
        out.depth[res.depth <= 3.0], res.depth[res.depth <= 3.0]
    )
    assert np.isnan(res.depth[0, 0]) and np.isfinite(res.depth[1:, 1:]).all()  # input left alone
    assert out.camera.K is res.K and (out.camera.width, out.camera.height) == (NW, NH)
    assert np.allclose(out.camera.P[:, :3], res.K)
    assert np.allclose(out.xyz, backproject_np(out.depth, out.camera.K), equal_nan=True, atol=1e-6)


@pytest.mark.parametrize('resolution', ['network', 'camera'])
def test_c09_published_32fc1_depth_is_nan_where_not_positive(resolution):
    """A result whose depth holds 0, a negative value or inf (a backend, a custom model) is
    published as NaN there, like the cloud: never 0.0, which depth_image_proc would take as a
    point at the optical centre."""
    res = result()
    res.depth[1, 1:4] = [0.0, -0.3, np.inf]
    out = frame_outputs(res, plan_input(intr(), (W, H)), rgb_image(), 10.0, resolution)
    assert (
        np.isfinite(out.depth[np.isfinite(out.depth)]).all()
        and (out.depth[np.isfinite(out.depth)] > 0).all()
    )
    if resolution == 'network':
        assert np.isnan(out.depth[1, 1:4]).all() and np.isnan(out.xyz[1, 1:4]).all()


def test_camera_resolution_outputs_are_resized_and_described_by_the_camera_k_unscaled():
    res, img = result(), rgb_image()
    plan = plan_input(intr(), (W, H))
    out = frame_outputs(res, plan, img, max_depth=10.0, output_resolution='camera')
    assert out.labels.shape == out.depth.shape == out.confidence.shape == (H, W) and out.rgb is img
    assert out.camera is plan.camera and np.array_equal(
        out.camera.K, K
    )  # no rescaling back and forth
    assert np.array_equal(out.xyz, backproject_np(out.depth, K), equal_nan=True)
    assert set(np.unique(out.labels)) <= set(np.unique(res.labels))


def test_no_cloud_without_geometry_or_when_not_wanted():
    res, img = result(with_k=False), rgb_image()
    for plan in (plan_input(None, (W, H)), plan_input(intr(w=640, h=480), (W, H))):
        out = frame_outputs(res, plan, img, 10.0)
        assert out.xyz is None and out.camera is None and out.labels.shape == (NH, NW)
    out = frame_outputs(result(), plan_input(intr(), (W, H)), img, 10.0, cloud=False)
    assert out.xyz is None and out.camera is not None


def test_refused_cloud_still_describes_outputs_with_k_scaled_once_and_d_kept():
    cam = intr(D=D5)
    out = frame_outputs(
        result(with_k=False), plan_input(cam, (W, H), 'refuse_cloud'), rgb_image(), 10.0
    )
    assert out.xyz is None
    assert np.array_equal(out.camera.K, resize_intrinsics(K, (W, H), (NW, NH))) and list(
        out.camera.D
    ) == list(D5)
    assert output_camera(plan_input(None, (W, H)), None, (NW, NH)) is None


def test_rules_module_imports_no_ros_client_library():
    import subprocess
    import sys

    code = (
        'import sys, depth3dseg_ros.node.frame; '
        'print([m for m in sys.modules if m.split(".")[0] in ("rclpy", "rosbags")])'
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == '[]'


# -- node/outputs.py: what a frame publishes (issue 14: palette, cloud_rgb, compressed) ------
def _params(**changes):
    from depth3dseg_ros.node.params import validate

    return validate(changes)


def test_publisher_specs_follow_the_switches_and_name_the_topics():
    from depth3dseg_ros.node.outputs import publisher_specs
    from depth3dseg_ros.node.wiring import COMPRESSED_TOPICS, OUTPUT_TOPICS, key_topic

    default = dict(publisher_specs(_params()))
    assert not any('compress' in k for k in default)  # compressed outputs are off by default
    assert {key_topic(k): t for k, t in default.items()} == {
        t: ty for t, ty in OUTPUT_TOPICS.items() if t != '~/classes'
    }
    every = dict(
        publisher_specs(
            _params(
                publish_labels_compressed=True,
                publish_overlay_compressed=True,
                publish_depth_compressed=True,
            )
        )
    )
    assert {key_topic(k): t for k, t in every.items()} == {
        **{t: ty for t, ty in OUTPUT_TOPICS.items() if t != '~/classes'},
        **COMPRESSED_TOPICS,
    }
    assert key_topic('depth/compressedDepth') == '~/depth/image/compressedDepth'
    # the compressed form alone still advertises its camera_info, not the raw image
    only = dict(publisher_specs(_params(publish_overlay=False, publish_overlay_compressed=True)))
    assert 'overlay' not in only and {'overlay/compressed', 'overlay/camera_info'} <= set(only)
    none = dict(publisher_specs(_params(publish_mask=False, publish_points=False)))
    assert not any(k.startswith('mask') for k in none) and 'points' not in none
    with pytest.raises(ValueError, match="publisher key='mask/compressed' names no output topic"):
        key_topic('mask/compressed')


def test_image_messages_keys_order_palette_and_have_filter():
    from depth3dseg_ros.core.classes import NYU13
    from depth3dseg_ros.core.palette import load_palette
    from depth3dseg_ros.node.outputs import image_messages, publisher_specs
    from depth3dseg_ros.ros.compressed import decode_compressed, decode_compressed_depth
    from depth3dseg_ros.ros.image import imgmsg_to_cv2

    pal = load_palette('', NYU13)
    labels = (np.arange(12, dtype=np.uint8).reshape(3, 4) % 13) + 1
    depth = np.linspace(0.5, 12.0, 12, dtype=np.float32).reshape(3, 4)
    depth[0, 0] = np.nan
    rgb = np.full((3, 4, 3), 100, np.uint8)
    info = object()
    p = _params(
        publish_labels_compressed=True,
        publish_depth_compressed=True,
        overlay_alpha=1.0,
        depth_encoding='16UC1',
    )
    have = dict(publisher_specs(p))
    got = image_messages(p, None, labels, depth, rgb, info, pal, have)
    keys = [k for k, _ in got]
    assert keys == [
        'labels',
        'labels/compressed',
        'labels/camera_info',
        'overlay',
        'overlay/camera_info',
        'mask',
        'mask/camera_info',
        'depth',
        'depth/compressedDepth',
        'depth/camera_info',
    ]
    m = dict(got)
    assert all(m[k] is info for k in keys if k.endswith('camera_info'))
    assert np.array_equal(imgmsg_to_cv2(m['overlay']), NYU13.colors[labels])  # alpha 1
    assert np.array_equal(decode_compressed(m['labels/compressed'])[0], labels)
    mm = imgmsg_to_cv2(m['depth'])
    assert m['depth'].encoding == '16UC1' and mm[0, 0] == 0
    assert np.array_equal(decode_compressed_depth(m['depth/compressedDepth']), mm)
    # publishers missing (not created yet) -> skipped; no CameraInfo -> no camera_info entries
    got = image_messages(p, None, labels, depth, rgb, None, pal, {'labels', 'mask'})
    assert [k for k, _ in got] == ['labels', 'mask']


def test_cloud_colors_camera_or_class():
    from depth3dseg_ros.node.outputs import cloud_colors

    rgb = np.zeros((2, 2, 3), np.uint8)
    cls = np.full((2, 2, 3), 7, np.uint8)
    assert cloud_colors(_params(), rgb, lambda: cls) is rgb  # default: camera colour
    assert cloud_colors(_params(cloud_rgb='class'), rgb, lambda: cls) is cls
