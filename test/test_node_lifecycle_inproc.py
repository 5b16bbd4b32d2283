"""The managed node in process (quick tier: one DDS participant, no node process; the
subprocess tests are test_node_lifecycle.py).

- lifecycle publishers enabled only while active (also one switched on at run time), the plain
  parameter rules once configured, an exception inside activate through on_error back to
  unconfigured with everything released;
- configure and activate with ``use_measured_depth`` and a ``geometry_model``: the ready line
  names the depth topic and the fusion before any subscription exists (a configure that read the
  subscriptions' attributes failed every time once; only the full tier caught it).
"""

from __future__ import annotations

import pytest

from nodeutil import make_tiny_model


@pytest.fixture(scope='module')
def tiny_model(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp('lifecycle_inproc') / 'tiny.pt')


def _overrides(model, **extra):
    from rclpy.parameter import Parameter

    base = dict(
        model_file=str(model), device='cpu', torch_threads=1, input_width=64, input_height=48
    )
    return [Parameter(k, value=v) for k, v in dict(base, **extra).items()]


@pytest.mark.timeout(180)
def test_lifecycle_publishers_follow_the_state_in_process(tiny_model, ros):
    """In-process: the outputs are lifecycle publishers, enabled only while active; one switched
    on at run time while active is enabled at once, while inactive on the next activate; the
    plain parameter rules apply once configured; on_error releases everything."""
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    from depth3dseg_ros.node.lifecycle import Depth3DSegLifecycleNode

    overrides = _overrides(tiny_model)
    node = Depth3DSegLifecycleNode(node_name='lc_inproc', parameter_overrides=overrides)
    try:
        ok = TransitionCallbackReturn.SUCCESS
        loose = node.describe_parameters(['max_depth'])[0]
        assert loose.dynamic_typing and not loose.floating_point_range  # any type until configure
        assert node.trigger_configure() == ok and node.state_label() == 'inactive'
        md, mf = node.describe_parameters(['max_depth', 'model_file'])
        assert md.type == 3 and md.floating_point_range[0].from_value == 1e-6  # as the plain node
        assert not mf.read_only and 'read at configure' in mf.additional_constraints
        assert node.pubs and not any(p.is_activated for p in node.pubs.values())
        assert node.trigger_activate() == ok
        assert all(p.is_activated for p in node.pubs.values()) and node.worker is not None
        assert node.set_parameters([Parameter('publish_labels_compressed', value=True)])[
            0
        ].successful
        assert node.pubs['labels/compressed'].is_activated
        bad = node.set_parameters([Parameter('overlay_alpha', value=2.0)])[0]
        assert not bad.successful and 'overlay_alpha' in bad.reason
        assert node.trigger_deactivate() == ok and not node._subs
        assert not any(p.is_activated for p in node.pubs.values())
        assert node.set_parameters([Parameter('publish_overlay_compressed', value=True)])[
            0
        ].successful
        assert not node.pubs['overlay/compressed'].is_activated
        assert node.trigger_activate() == ok
        assert node.pubs['overlay/compressed'].is_activated
        assert node.trigger_deactivate() == ok
        assert node.trigger_cleanup() == ok  # unconfigured: the loose descriptors again
        assert not node.describe_parameters(['max_depth'])[0].floating_point_range
        assert node.trigger_configure() == ok

        def broken() -> None:
            raise RuntimeError('no inputs today')

        node._start_inputs = broken  # an exception inside activate: on_error, then unconfigured
        assert node.trigger_activate() == TransitionCallbackReturn.ERROR
        assert node.state_label() == 'unconfigured'
        assert node.p is None and node.seg is None and not node.pubs and not node._subs
    finally:
        node.destroy_node()


@pytest.mark.timeout(180)
def test_lifecycle_configures_with_measured_depth_and_a_geometry_model(tiny_model, ros, tmp_path):
    """use_measured_depth + geometry_model: configure and activate succeed; the ready line, made
    at configure before any subscription exists, names the remapped depth topic and the geometry
    model's file and weight; the active node subscribes to that topic; cleanup releases it."""
    from rclpy.lifecycle import TransitionCallbackReturn

    from depth3dseg_ros.node.lifecycle import Depth3DSegLifecycleNode
    from trainutil import geometry_model_file

    geo = geometry_model_file(tmp_path / 'geo.pt')
    overrides = _overrides(
        tiny_model, use_measured_depth=True, geometry_model=str(geo), geometry_weight=0.4
    )
    remap = ['--ros-args', '-r', 'depth:=/cam/aligned_depth_to_color/image_raw']
    node = Depth3DSegLifecycleNode(
        node_name='lc_inproc_md', parameter_overrides=overrides, cli_args=remap
    )
    ok = TransitionCallbackReturn.SUCCESS
    try:
        assert node.trigger_configure() == ok and node.state_label() == 'inactive'
        line = node._ready_line(str(tiny_model))
        assert 'measured depth /cam/aligned_depth_to_color/image_raw' in line, line
        assert 'geo.pt' in line and '0.4' in line, line
        assert node.trigger_activate() == ok
        topics = {s.topic_name for s in node._subs}
        assert '/cam/aligned_depth_to_color/image_raw' in topics, topics
        assert node.trigger_deactivate() == ok and node.trigger_cleanup() == ok
        assert node.state_label() == 'unconfigured' and node.seg is None
    finally:
        node.destroy_node()
