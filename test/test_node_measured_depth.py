"""Measured depth in the node (issue 12, RGB-D cameras): with ``use_measured_depth`` a depth image
registered to the colour image, paired by stamp, builds the cloud where it is valid; the prediction
fills its holes and ``~/depth/image`` stays the prediction. Pure rules
(node/frame.registered_depth, ros/stamp_buffer.StampBuffer) and one node across processes."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import Image

from depth3dseg_ros.core.imageops import resize_depth
from depth3dseg_ros.node.frame import Rectifier, plan_input, registered_depth
from depth3dseg_ros.ros.camera_info import Intrinsics
from depth3dseg_ros.ros.image import cv2_to_imgmsg, imgmsg_to_cv2
from depth3dseg_ros.ros.pointcloud2 import read_points_numpy
from depth3dseg_ros.ros.stamp_buffer import StampBuffer
from depth3dseg_ros.core.inference import Segmenter
from nodeutil import camera_image, camera_info_msg, make_tiny_model, stamp_msg
from trainutil import geometry_model_file
from test_node import H, K_CAM, NH, NW, RELIABLE, W, _start


def _msg(t_ns):
    m = Image()
    m.header.stamp = stamp_msg(t_ns)
    return m


def test_stamp_buffer_nearest_within_slop():
    buf = StampBuffer(3)
    for t in (
        1_000_000_000,
        1_033_000_000,
        1_066_000_000,
        1_100_000_000,
    ):  # the first one falls out
        buf.add(_msg(t))
    got = buf.nearest(1_070_000_000, 0.01)
    assert got.header.stamp.nanosec == 66_000_000
    assert buf.nearest(1_000_000_000, 0.01) is None  # dropped (size 3)
    assert buf.nearest(1_200_000_000, 0.05) is None  # too far
    assert buf.nearest(1_100_000_000, 0.0).header.stamp.nanosec == 100_000_000  # exact


def _plan(D=None):
    P = np.hstack([K_CAM, np.zeros((3, 1))])
    intr = Intrinsics(K=K_CAM, width=W, height=H, P=P, D=np.zeros(5) if D is None else D)
    return plan_input(intr, (W, H), 'rectify', Rectifier())


def test_registered_depth_converts_checks_size_and_needs_geometry():
    mm = np.full((H, W), 1500, np.uint16)
    mm[:, :10] = 0  # a hole
    depth, problem = registered_depth(mm, '16UC1', (W, H), _plan())
    assert problem is None and depth.dtype == np.float32 and depth[0, 20] == pytest.approx(1.5)
    assert np.isnan(depth[:, :10]).all()
    depth, problem = registered_depth(np.ones((30, 40), np.float32), '32FC1', (W, H), _plan())
    assert (
        depth is None
        and problem.key == 'depth_size'
        and '40x30' in problem.text
        and '80x60' in problem.text
    )
    depth, problem = registered_depth(mm, 'rgb8', (W, H), _plan())
    assert depth is None and problem.key == 'depth'
    no_geometry = plan_input(None, (W, H), 'rectify', Rectifier())
    assert registered_depth(mm, '16UC1', (W, H), no_geometry) == (None, None)


def test_registered_depth_is_rectified_with_the_colour_image_nearest():
    plan = _plan(D=np.array([-0.2, 0.05, 0.0, 0.0, 0.0]))
    assert plan.maps is not None
    depth = np.random.default_rng(0).uniform(1, 3, (H, W)).astype(np.float32)
    out, problem = registered_depth(depth, '32FC1', (W, H), plan)
    assert problem is None and out.shape == (H, W)
    vals = out[np.isfinite(out)]
    assert vals.size > 0.5 * out.size and np.isin(vals, depth).all()  # copies of input pixels only


@pytest.mark.timeout(300)
def test_node_builds_the_cloud_from_the_measured_depth(ros, tmp_path):
    """... and, with ``geometry_model``, late-fuses a geometry model's 2D labels of that depth
    with the colour model's (core.late_fusion): the label image is the Segmenter's."""
    name = 'd3s_md'
    model = make_tiny_model(tmp_path / 'tiny.pt')
    geo = geometry_model_file(tmp_path / 'geo.pt', (NW // 2, NH // 2), seed=1)
    proc, h = _start(
        tmp_path,
        model,
        name,
        extra_remaps={'depth': f'/{name}_cam/depth'},
        use_measured_depth=True,
        geometry_model=str(geo),
        input_reliability='reliable',
        input_depth=5,
    )
    try:
        # a frame before any depth publisher: the log names the depth topic and the remap
        t0 = 2_049_000_000_000_000_000
        h.pub_info.publish(camera_info_msg(K_CAM, W, H, t0))
        h.pub_img.publish(camera_image(W, H, t0))
        assert h.wait(proc, lambda: t0 in h.got['points'], 60), proc.log()
        want = (
            f'no depth image received on /{name}_cam/depth: no publisher (remap with -r '
            'depth:=TOPIC'
        )
        assert want in proc.log() and 'and no late fusion' in proc.log(), proc.log()
        assert f'measured depth /{name}_cam/depth, ' in proc.log()  # the start-up line
        pub_depth = h.node.create_publisher(Image, f'/{name}_cam/depth', RELIABLE)
        assert h.wait(proc, lambda: pub_depth.get_subscription_count() > 0, 30), proc.log()
        measured = np.full((H, W), 2.5, np.float32)
        measured[:, : W // 2] = np.nan  # left half: no measurement
        t = 2_050_000_000_000_000_000
        dmsg = cv2_to_imgmsg(measured, '32FC1')
        dmsg.header.stamp.sec, dmsg.header.stamp.nanosec = divmod(t, 10**9)
        pub_depth.publish(dmsg)
        h.wait(proc, lambda: False, 0.3)
        h.pub_info.publish(camera_info_msg(K_CAM, W, H, t))
        h.pub_img.publish(camera_image(W, H, t))
        assert h.wait(proc, lambda: t in h.got['points'] and t in h.got['depth'], 60), proc.log()
        xyz = read_points_numpy(h.got['points'][t], ('x', 'y', 'z'), organized=True)
        z = xyz[..., 2]
        net = resize_depth(measured, (NW, NH))
        right = np.isfinite(net)
        assert np.allclose(z[right], 2.5, atol=1e-5)  # measured where valid
        pred = imgmsg_to_cv2(h.got['depth'][t])  # ~/depth/image: the prediction
        assert not np.allclose(pred[right], 2.5)
        left = ~right & np.isfinite(pred)
        assert np.allclose(z[left], pred[left], rtol=1e-5)  # the prediction fills the hole
        assert f'RGB-D late fusion with {geo} (weight 0.5)' in proc.log(), proc.log()
        seg = Segmenter(model, input_size=(NW, NH), num_threads=0, geometry_model=geo)
        rgb = imgmsg_to_cv2(camera_image(W, H, t))
        want = seg.infer(rgb, K_CAM, 'fused', measured).labels
        got = imgmsg_to_cv2(h.got['labels'][t])
        assert (got == want).mean() > 0.99  # the late-fused labels (float order aside)
        plain = Segmenter(model, input_size=(NW, NH), num_threads=0)
        assert (plain.infer(rgb, K_CAM, 'fused', measured).labels != want).any()
        # C20: a depth image of another size is refused for the cloud, the log describing both
        # messages (sizes, encodings, steps); the frame still comes out
        t2 = t + 100_000_000
        small = cv2_to_imgmsg(np.full((H // 2, W // 2), 2.5, np.float32), '32FC1')
        small.header.stamp.sec, small.header.stamp.nanosec = divmod(t2, 10**9)
        pub_depth.publish(small)
        h.wait(proc, lambda: False, 0.3)
        h.pub_info.publish(camera_info_msg(K_CAM, W, H, t2))
        h.pub_img.publish(camera_image(W, H, t2))
        assert h.wait(proc, lambda: t2 in h.got['points'], 60), proc.log()
        want = (
            f'[depth {W // 2}x{H // 2} 32FC1 step={W // 2 * 4} len(data)={W * H}; '
            f'colour {W}x{H} rgb8 step={W * 3}'
        )
        assert 'is not registered to the' in proc.log() and want in proc.log(), proc.log()
        assert 'Traceback' not in proc.log()
    finally:
        h.close(proc)
