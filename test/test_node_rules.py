"""Issue 14 rules inside a real node, in-process (real rclpy node in the run-wide context, real
Segmenter with the tiny model; the node's ``_publish`` records what each frame would publish, as
test_node_snapshot does):
a raw Image over ``max_image_pixels`` is refused and counted, the limit and ``distortion`` change
at run time, and a rectified frame's cloud is the back-projection of its published depth with its
published K.
"""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.parameter import Parameter

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.node.node import Depth3DSegNode
from depth3dseg_ros.ros.image import imgmsg_to_cv2
from depth3dseg_ros.ros.pointcloud2 import read_points
from depth3dseg_ros.ros.sync import MATCHED, Pair
from nodeutil import camera_image, camera_info_msg, make_tiny_model

K = np.array([[70.0, 0, 39.5], [0, 72.0, 29.5], [0, 0, 1]])
D5 = [-0.28, 0.07, 0.001, -0.002, 0.0]


def _in_process_node(name: str, model, **params) -> Depth3DSegNode:
    """An in-process node on CPU, one torch thread, a 64×48 network input, plus ``params``."""
    base = dict(model_file=str(model), device='cpu', input_width=64, input_height=48)
    values = dict(base, torch_threads=1, **params)
    overrides = [Parameter(k, value=v) for k, v in values.items()]
    return Depth3DSegNode(node_name=name, parameter_overrides=overrides)


@pytest.fixture(scope='module')
def node(tmp_path_factory, ros):
    model = make_tiny_model(tmp_path_factory.mktemp('m') / 'tiny.pt')
    # lazy_outputs off: no subscriber here, publish every output
    n = _in_process_node('d3s_rules', model, max_image_pixels=80 * 60 - 1, lazy_outputs=False)
    n.published = []
    n._publish = lambda name, msg: n.published.append((name, msg))
    yield n
    n.destroy_node()


def run(node, info, t=10**18):
    node.published.clear()
    node._process(Pair(camera_image(80, 60, t), info, MATCHED))
    return {k: v for k, v in node.published if v is not None}


@pytest.mark.timeout(120)
def test_raw_image_over_the_limit_is_refused_and_counted_then_the_limit_changes(node):
    assert run(node, camera_info_msg(K, 80, 60, 0)) == {} and node.stats.refused == 1
    assert node.stats.skipped == 0 and node.stats.processed == 0
    assert node.set_parameters([Parameter('max_image_pixels', value=80 * 60)])[0].successful
    got = run(node, camera_info_msg(K, 80, 60, 0))
    assert {'labels', 'overlay', 'mask', 'depth', 'points', 'depth/camera_info'} <= set(got)
    assert node.stats.refused == 1 and node.stats.summary()['refused'] == 1


@pytest.mark.timeout(120)
def test_distortion_modes_at_run_time(node):
    node.set_parameters([Parameter('max_image_pixels', value=10**8)])
    info = camera_info_msg(K, 80, 60, 0)
    info.d = D5
    got = run(node, info)  # rectify (default)
    ci = got['depth/camera_info']
    assert list(ci.d) == [0.0] * 5 and node.rectifier.built == 1
    depth, Kout = imgmsg_to_cv2(got['depth']), np.reshape(ci.k, (3, 3))
    pts = read_points(got['points'], organized=True)
    xyz = np.stack([pts['x'], pts['y'], pts['z']], -1)
    assert np.allclose(xyz, backproject_np(depth, Kout), equal_nan=True, atol=1e-5)
    run(node, info)
    assert node.rectifier.built == 1  # maps cached for this CameraInfo
    assert node.set_parameters([Parameter('distortion', value='refuse_cloud')])[0].successful
    got = run(node, info)
    assert 'points' not in got and list(got['depth/camera_info'].d) == D5 and 'labels' in got
    assert node.set_parameters([Parameter('distortion', value='ignore')])[0].successful
    got = run(node, info)
    assert 'points' in got and list(got['depth/camera_info'].d) == D5
    res = node.set_parameters([Parameter('distortion', value='undistort')])[0]
    assert not res.successful
    assert (
        "distortion='undistort' is not one of ['rectify', 'refuse_cloud', 'ignore']" in res.reason
    )


@pytest.mark.timeout(120)
def test_lazy_outputs_at_run_time_nothing_built_without_subscribers(node):
    """``lazy_outputs`` changes at run time (C44): on, with no subscriber in this process, a frame
    publishes nothing (the model still runs: the frame is counted); off again, everything."""
    info = camera_info_msg(K, 80, 60, 0)
    node.set_parameters([Parameter('max_image_pixels', value=10**8)])
    processed = node.stats.processed
    assert node.set_parameters([Parameter('lazy_outputs', value=True)])[0].successful
    assert node.p.lazy_outputs and run(node, info) == {}
    assert node.last_outputs == frozenset() and node.stats.processed == processed + 1
    assert node.set_parameters([Parameter('lazy_outputs', value=False)])[0].successful
    got = run(node, info)
    assert {'labels', 'overlay', 'mask', 'depth', 'points', 'depth/camera_info'} <= set(got)
    assert node.last_outputs == frozenset(got)


@pytest.mark.timeout(120)
def test_the_ready_line_names_a_calibrated_depth_gain(node, tmp_path):
    """A model file calibrated by depth3dseg-calibrate (arch depth_gain), with a fusion weight
    other than the mean (arch fusion_w3d) or a white balance of its input (input_balance) says so
    in the node's start-up line, and an RGB-D input model (arch code_input) whether it gets a depth
    image; a plain one mentions none of them."""

    from depth3dseg_ros.core.modelfile import load_model, save_model

    line = node._ready_line('x.pt')
    assert 'depth_gain' not in line and 'fusion_w3d' not in line
    model, meta = load_model(make_tiny_model(tmp_path / 'tiny.pt'))
    path = tmp_path / 'calibrated.pt'
    model = model.with_arch(depth_gain=1.25, fusion_w3d=0.25)
    save_model(path, model, {k: v for k, v in meta.items() if k != 'arch'})
    n = _in_process_node('d3s_rules_gain', path)
    try:
        assert 'classes, depth_gain 1.25, fusion_w3d 0.25, warm-up' in n._ready_line(str(path))
    finally:
        n.destroy_node()
    balanced = tmp_path / 'balanced.pt'  # a grey-world input model says so too
    keep = {k: v for k, v in meta.items() if k != 'arch'}
    save_model(balanced, model, dict(keep, input_balance='grey_world'))
    n = _in_process_node('d3s_rules_balance', balanced)
    try:
        assert 'fusion_w3d 0.25, input_balance grey_world, warm-up' in n._ready_line(str(balanced))
    finally:
        n.destroy_node()
    assert 'RGB-D' not in line and 'input_balance' not in line
    rgbd = tmp_path / 'rgbd.pt'  # an RGB-D input model (arch code_input): does it get depth?
    save_model(rgbd, model.with_code_input(), {k: v for k, v in meta.items() if k != 'arch'})
    for use, expect in (
        (False, 'RGB-D input, no depth: colour only, warm-up'),
        (True, 'RGB-D input, warm-up'),
    ):
        n = _in_process_node(f'd3s_rules_rgbd{int(use)}', rgbd, use_measured_depth=use)
        try:
            assert expect in n._ready_line(str(rgbd))
        finally:
            n.destroy_node()
