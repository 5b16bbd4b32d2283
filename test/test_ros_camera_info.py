"""ros.camera_info: CameraInfo -> intrinsics (K or P, binning, ROI, C17), rescaling and output
CameraInfo (C18).

Back-projection numbers go through core.geometry.backproject_np (the package's one M2
implementation).
"""

import logging
import types

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import CameraInfo, RegionOfInterest

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.ros import camera_info as ci
from depth3dseg_ros.ros.camera_info import (
    Intrinsics,
    camera_info_for_output,
    intrinsics_from_camera_info,
    make_camera_info,
)

TS = get_typestore(Stores.ROS2_KILTED)
RB_INFO = TS.types['sensor_msgs/msg/CameraInfo']


def info(K, P=None, width=640, height=480, D=None, **kw):
    msg = CameraInfo(width=width, height=height, distortion_model='plumb_bob')
    msg.k = np.asarray(K, np.float64).reshape(-1)
    msg.p = np.zeros(12) if P is None else np.asarray(P, np.float64).reshape(-1)
    msg.d = [0.0] * 5 if D is None else list(D)
    msg.r = np.eye(3).reshape(-1)
    for k, v in kw.items():
        setattr(msg, k, v)
    return msg


def point_at(K, width, height, u, v, z):
    depth = np.full((height, width), np.nan, np.float32)
    depth[v, u] = z
    return backproject_np(depth, K)[v, u]


K17 = [[500, 0, 320], [0, 500, 240], [0, 0, 1]]
P17 = [[450, 0, 310, 0], [0, 450, 235, 0], [0, 0, 1, 0]]


# ---------------------------------------------------------------- C17 K vs P, P all zero
def test_c17_rectified_uses_p():
    msg = info(K17, P17)
    rect = intrinsics_from_camera_info(msg, use_rectified=True)
    assert rect.rectified and rect.K.tolist() == [[450, 0, 310], [0, 450, 235], [0, 0, 1]]
    x, y, z = point_at(rect.K, 640, 480, 410, 240, 2.0)
    assert (x, y, z) == pytest.approx((0.4444, 0.0222, 2.0), abs=1e-4)
    raw = intrinsics_from_camera_info(msg, use_rectified=False)
    assert not raw.rectified
    assert tuple(point_at(raw.K, 640, 480, 410, 240, 2.0)) == pytest.approx(
        (0.36, 0.0, 2.0), abs=1e-6
    )


def _forget_p_zero_warnings():
    for key in [k for k in ci._warned if k.startswith('p_zero')]:
        ci._warned.discard(key)


def test_c17_all_zero_p_falls_back_to_k_with_one_warning(caplog):
    _forget_p_zero_warnings()
    msg = info(K17, np.zeros((3, 4)))
    with caplog.at_level(logging.WARNING, logger=ci.__name__):
        first = intrinsics_from_camera_info(msg, use_rectified=True)
        second = intrinsics_from_camera_info(msg, use_rectified=True)
    warnings = [r for r in caplog.records if 'all-zero P' in r.getMessage()]
    assert len(warnings) == 1
    assert not first.rectified and np.array_equal(first.K, np.asarray(K17, float))
    assert np.array_equal(second.K, first.K)
    p = point_at(first.K, 640, 480, 410, 240, 2.0)
    assert np.isfinite(p).all() and tuple(p) == pytest.approx((0.36, 0.0, 2.0))


def test_c17_all_zero_p_on_a_rectified_image_with_d_never_undistorts_it_again(caplog):
    """use_rectified with P all zero and D not zero: K is used and D dropped (the image is
    undistorted already), so the node's plan builds no remap; each camera's D gets its warning."""
    from depth3dseg_ros.node.frame import plan_input

    _forget_p_zero_warnings()
    d1, d2 = [0.1, -0.05, 0, 0, 0], [0.2, 0.0, 0, 0, 0]
    with caplog.at_level(logging.WARNING, logger=ci.__name__):
        intr = intrinsics_from_camera_info(info(K17, np.zeros((3, 4)), D=d1), use_rectified=True)
        intrinsics_from_camera_info(info(K17, np.zeros((3, 4)), D=d2), use_rectified=True)
    warned = [r.getMessage() for r in caplog.records if 'all-zero P' in r.getMessage()]
    assert len(warned) == 2 and 'is not zero' in warned[0] and 'not applied again' in warned[0]
    assert np.array_equal(intr.K, np.asarray(K17, float)) and not np.any(intr.D)
    plan = plan_input(intr, (640, 480), distortion='rectify')
    assert plan.maps is None and plan.cloud and plan.problems == []
    raw = intrinsics_from_camera_info(info(K17, np.zeros((3, 4)), D=d1), use_rectified=False)
    assert raw.D.tolist() == d1  # a raw image keeps its D: the node undistorts it once


def test_roi_outside_the_image_is_refused_naming_it():
    roi = RegionOfInterest(x_offset=600, y_offset=400, width=320, height=240)
    with pytest.raises(
        ValueError, match=r'CameraInfo\.roi x_offset=600 .* not inside the 640x480'
    ):
        intrinsics_from_camera_info(info(K17, P17, roi=roi))


def test_c17_zero_k_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r'CameraInfo\.k\[0,0\] \(fx\)=0\.0'):
        intrinsics_from_camera_info(info(np.zeros((3, 3))))
    short_k = types.SimpleNamespace(k=[1.0] * 4, p=[0.0] * 12, width=1, height=1)
    with pytest.raises(ValueError, match='9 and 12'):
        intrinsics_from_camera_info(short_k)
    ros1 = types.SimpleNamespace(
        K=[500.0, 0, 320, 0, 500, 240, 0, 0, 1],
        P=[0.0] * 12,
        D=[],
        R=[0.0] * 9,
        width=640,
        height=480,
        binning_x=0,
        binning_y=0,
        roi=None,
    )
    assert intrinsics_from_camera_info(ros1).K[0].tolist() == [
        500,
        0,
        320,
    ]  # ROS 1 upper-case fields


# ---------------------------------------------------------------- C18 rescale to the network size
def test_c18_intrinsics_rescaled_to_network_size():
    cam = info(
        [[900, 0, 640], [0, 900, 360], [0, 0, 1]],
        [[900, 0, 640, -90], [0, 900, 360, 0], [0, 0, 1, 0]],
        width=1280,
        height=720,
    )
    net = intrinsics_from_camera_info(cam).resized(640, 360)
    assert net.K.tolist() == [[450, 0, 320], [0, 450, 180], [0, 0, 1]]
    assert net.P[0, 3] == -45.0 and (net.width, net.height) == (640, 360)
    x, y, z = point_at(net.K, 640, 360, 480, 180, 3.0)
    assert (x, y, z) == pytest.approx((1.0667, 0.0, 3.0), abs=1e-4)
    unscaled = intrinsics_from_camera_info(cam).K
    assert point_at(unscaled, 640, 360, 480, 180, 3.0)[0] == pytest.approx(
        -0.5333, abs=1e-4
    )  # the fault
    cam.header.frame_id, cam.header.stamp.sec = 'cam_optical', 77
    out = camera_info_for_output(intrinsics_from_camera_info(cam), 640, 360, header=cam.header)
    assert (out.width, out.height) == (640, 360)
    assert np.asarray(out.k).reshape(3, 3).tolist() == [[450, 0, 320], [0, 450, 180], [0, 0, 1]]
    assert np.asarray(out.p).reshape(3, 4)[0].tolist() == [450, 0, 320, -45]
    assert np.asarray(out.r).reshape(3, 3).tolist() == np.eye(3).tolist()
    assert list(out.d) == [0.0] * 5 and out.distortion_model == 'plumb_bob'
    assert (out.header.frame_id, out.header.stamp.sec) == ('cam_optical', 77)


def test_c18_aspect_change_uses_separate_factors_and_crop_shifts_principal_point():
    intr = Intrinsics(
        K=np.array([[600.0, 0, 320], [0, 610, 240], [0, 0, 1]]), width=640, height=480
    )
    r = intr.resized(320, 360)
    assert r.K[0].tolist() == [300, 0, 160] and r.K[1].tolist() == [0, 457.5, 180]
    c = intr.cropped(80, 60, 480, 360)
    assert (
        c.K[0, 2] == 240
        and c.K[1, 2] == 180
        and c.K[0, 0] == 600
        and (c.width, c.height) == (480, 360)
    )
    with pytest.raises(ValueError, match='outside the 640x480'):
        intr.cropped(200, 0, 480, 480)


def test_binning_and_roi():
    msg = info(
        [[1000, 0, 1000], [0, 1000, 600], [0, 0, 1]],
        width=2048,
        height=1536,
        binning_x=2,
        binning_y=2,
        roi=RegionOfInterest(
            x_offset=200, y_offset=100, width=1600, height=1200, do_rectify=False
        ),
    )
    intr = intrinsics_from_camera_info(msg)
    assert (intr.width, intr.height) == (800, 600)
    assert intr.K.tolist() == [[500, 0, 400], [0, 500, 250], [0, 0, 1]]
    no_roi = intrinsics_from_camera_info(
        info(
            [[1000, 0, 1000], [0, 1000, 600], [0, 0, 1]],
            width=2048,
            height=1536,
            binning_x=0,
            binning_y=4,
        )
    )
    assert (no_roi.width, no_roi.height) == (2048, 384)
    assert no_roi.K[0].tolist() == [1000, 0, 1000] and no_roi.K[1].tolist() == [0, 250, 150]


def test_distortion_and_rotation_are_copied_to_output_info():
    msg = info(K17, P17, D=[0.1, -0.2, 0.001, 0.002, 0.05])
    msg.r = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]], float).reshape(-1)
    intr = intrinsics_from_camera_info(msg)
    out = camera_info_for_output(intr, 320, 240)
    assert list(out.d) == [0.1, -0.2, 0.001, 0.002, 0.05]
    assert np.asarray(out.r).reshape(3, 3).tolist() == [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    assert np.asarray(out.k).reshape(3, 3)[0].tolist() == [250, 0, 160]
    assert np.asarray(out.p).reshape(3, 4)[0].tolist() == [225, 0, 155, 0]


# ---------------------------------------------------------------- serialized round trips
def test_rclpy_serialized_round_trip():
    msg = make_camera_info(np.array([[525.0, 0, 319.5], [0, 526, 239.5], [0, 0, 1]]), 640, 480)
    back = deserialize_message(serialize_message(msg), CameraInfo)
    intr = intrinsics_from_camera_info(back)
    assert intr.K.tolist() == [[525, 0, 319.5], [0, 526, 239.5], [0, 0, 1]]
    assert (intr.width, intr.height) == (640, 480)
    assert np.asarray(back.p).reshape(3, 4)[:, :3].tolist() == intr.K.tolist()
    assert intrinsics_from_camera_info(back, use_rectified=True).rectified
    with pytest.raises(ValueError, match='3x3'):
        make_camera_info(np.zeros((3, 4)) + np.eye(3, 4), 10, 10)
    with pytest.raises(ValueError, match='width=0'):
        make_camera_info(np.eye(3), 0, 10)


def test_rosbags_deserialized_camera_info():
    hdr = TS.types['std_msgs/msg/Header'](
        stamp=TS.types['builtin_interfaces/msg/Time'](sec=3, nanosec=4), frame_id='cam'
    )
    msg = make_camera_info(
        np.array([[520.9, 0, 325.1], [0, 521.0, 249.7], [0, 0, 1]]),
        640,
        480,
        header=hdr,
        msg_cls=RB_INFO,
        P=np.array([[500.0, 0, 320, 0], [0, 500, 240, 0], [0, 0, 1, 0]]),
    )
    assert isinstance(msg, RB_INFO)
    t = RB_INFO.__msgtype__
    back = TS.deserialize_cdr(TS.serialize_cdr(msg, t), t)
    assert intrinsics_from_camera_info(back).K[0].tolist() == [520.9, 0, 325.1]
    assert intrinsics_from_camera_info(back, use_rectified=True).K[0].tolist() == [500, 0, 320]
    assert back.header.frame_id == 'cam'
    same = deserialize_message(bytes(TS.serialize_cdr(back, t)), CameraInfo)
    assert intrinsics_from_camera_info(same).K[1].tolist() == [0, 521.0, 249.7]
