"""C44 (docs/cases.md): a parameter changed at run time is applied or refused, across real
processes.

The node runs as ``python -m depth3dseg_ros.node.main`` in a subprocess (test_node's harness: tiny
real model, Image + CameraInfo in, every output recorded by stamp); the test side changes its
parameters through the node's parameter services with rclpy's ``AsyncParameterClient`` (``ros2
param set`` does the same). Each change is followed by a frame with a new stamp, whose outputs show
whether it was applied.
"""

from __future__ import annotations


import numpy as np
import pytest
from rcl_interfaces.msg import ParameterType
from rclpy.parameter import Parameter, parameter_value_to_python
from rclpy.parameter_client import AsyncParameterClient

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.node.params import SPEC_BY_NAME, SPECS, STARTUP_ONLY
from depth3dseg_ros.ros.image import imgmsg_to_cv2
from nodeutil import make_tiny_model, spin_until
from test_node import OUT, _start

NAME = 'd3s_p'


@pytest.fixture(scope='module')
def node_p(ros, tmp_path_factory):
    """The node (defaults, except what test_node's _start sets), streaming, and a parameter
    client."""
    tmp = tmp_path_factory.mktemp('p')
    model = make_tiny_model(tmp / 'tiny.pt')
    proc, h = _start(tmp, model, NAME)
    client = AsyncParameterClient(h.node, NAME)
    assert client.wait_for_services(timeout_sec=30), proc.log()
    t = h.prime(proc, 2_100_000_000_000_000_000)
    yield proc, h, client, [t]
    assert h.close(proc) == 0, proc.log()


def _call(proc, h, future, timeout: float = 30.0):
    assert spin_until(h.node, future.done, timeout, proc), (
        'no answer from the parameter service:\n' + proc.log()
    )
    return future.result()


def _set(proc, h, client, name, value):
    """Set one parameter through the node's ~/set_parameters service; returns its
    SetParametersResult."""
    return _call(proc, h, client.set_parameters([Parameter(name, value=value)])).results[0]


def _get(proc, h, client, name):
    return parameter_value_to_python(_call(proc, h, client.get_parameters([name])).values[0])


def _frame(proc, h, stamps, keys=('labels', 'overlay', 'depth'), timeout: float = 30.0) -> int:
    """Send one frame with a new stamp and wait until ``keys`` came back for it; return the
    stamp."""
    t = stamps[-1] + 100_000_000
    stamps.append(t)
    end_keys = tuple(keys)
    for _ in range(3):  # a best-effort frame can be lost on the way: resend with a new stamp
        h.send(t)
        if h.wait(proc, lambda: all(t in h.got[k] for k in end_keys), timeout / 3):
            return t
        t += 1_000_000
        stamps.append(t)
    raise AssertionError(f'no {end_keys} for the frame:\n' + proc.log())


@pytest.mark.timeout(300)
def test_c44_changes_are_applied_from_the_next_frame(node_p):
    """overlay_alpha 1.0: the overlay becomes the label colours; max_depth 1.0: no finite depth
    above 1.0 m (the untrained model says about 3 m: all NaN); publish_points false: frames keep
    their labels but no cloud comes, true again: clouds again; get_parameters reports each value in
    use."""
    proc, h, client, stamps = node_p
    t = _frame(proc, h, stamps, OUT)
    palette = np.asarray(NYU13.colors, np.uint8)
    labels, ov = imgmsg_to_cv2(h.got['labels'][t]), imgmsg_to_cv2(h.got['overlay'][t])
    assert not np.array_equal(ov, palette[labels])  # alpha 0.5: a blend
    depth = imgmsg_to_cv2(h.got['depth'][t])
    assert np.isfinite(depth).any() and np.nanmax(depth) > 1.0

    for name, value in (('overlay_alpha', 1.0), ('max_depth', 1), ('publish_points', False)):
        r = _set(proc, h, client, name, value)
        assert r.successful, r.reason
        assert _get(proc, h, client, name) == value
    t = _frame(proc, h, stamps)
    labels, ov = imgmsg_to_cv2(h.got['labels'][t]), imgmsg_to_cv2(h.got['overlay'][t])
    assert np.array_equal(ov, palette[labels])  # alpha 1.0: label colours only
    assert np.isnan(
        imgmsg_to_cv2(h.got['depth'][t])
    ).all()  # nothing within 1.0 m (an integer: C39)
    h.wait(proc, lambda: False, 1.5)
    assert max(h.got['points']) < t  # no cloud for this frame
    assert (
        "publish_points: True -> False" in proc.log() and "overlay_alpha: 0.5 -> 1.0" in proc.log()
    )

    r = _set(proc, h, client, 'publish_points', True)
    assert r.successful, r.reason
    t = _frame(proc, h, stamps, ('labels', 'points'))
    assert h.got['points'][t].header.frame_id == 'cam_optical'
    assert proc.alive() and 'Traceback' not in proc.log()


@pytest.mark.timeout(300)
def test_c44_publish_mask_switches_the_mask_and_its_camera_info_at_run_time(node_p):
    """publish_mask false: the next frame has its labels but no ~/mask/image and no
    ~/mask/camera_info; true again: both come back (issue 14)."""
    proc, h, client, stamps = node_p
    r = _set(proc, h, client, 'publish_mask', False)
    assert r.successful, r.reason
    t = _frame(proc, h, stamps, ('labels', 'depth/camera_info'))
    h.wait(proc, lambda: False, 1.0)
    assert t not in h.got['mask'] and t not in h.got['mask/camera_info']
    assert 'publish_mask: True -> False' in proc.log()
    r = _set(proc, h, client, 'publish_mask', True)
    assert r.successful, r.reason
    t = _frame(proc, h, stamps, ('labels', 'mask', 'mask/camera_info'))
    assert h.got['mask'][t].encoding == 'rgb8'


@pytest.mark.parametrize(
    'name,value,words',
    [
        ('label_source', 'bogus', ["label_source='bogus' is not one of ['2d', '3d', 'fused']"]),
        ('max_depth', -3.0, ['max_depth=-3.0 must be >= 1e-06']),
        ('max_depth', float('inf'), ['max_depth=inf must be <= 1000.0']),  # every frame failed
        ('cloud_stride', 0, ['cloud_stride=0 must be >= 1']),
        ('overlay_alpha', 'abc', ["overlay_alpha='abc' must be a number"]),
        ('publish_depth', 1, ['publish_depth=1 must be a bool']),
    ],
)
@pytest.mark.timeout(300)
def test_c44_invalid_value_refused_with_the_start_up_message_and_old_value_kept(
    node_p, name, value, words
):
    """The values start-up validation rejects are refused with validate()'s message (not rclpy's
    range or type wording); get_parameters still returns the value in use and the frames still use
    it."""
    proc, h, client, stamps = node_p
    before = _get(proc, h, client, name)
    r = _set(proc, h, client, name, value)
    assert not r.successful
    for w in words:
        assert w in r.reason, r.reason
    assert _get(proc, h, client, name) == before
    t = _frame(proc, h, stamps, ('labels', 'depth'))
    assert proc.alive()
    if name == 'max_depth':  # still the value in use (10.0 or the 1 set above)
        depth = imgmsg_to_cv2(h.got['depth'][t])
        assert not (np.nan_to_num(depth) > float(before)).any()


@pytest.mark.parametrize(
    'name,value',
    [
        ('model_file', '/other/model.pt'),
        ('device', 'cuda'),
        ('half', True),
        ('input_width', 128),
        ('input_reliability', 'reliable'),
        ('use_compressed', True),
        ('torch_threads', 2),
    ],
)
@pytest.mark.timeout(300)
def test_c44_start_up_only_parameter_refused_with_restart_reason(node_p, name, value):
    proc, h, client, stamps = node_p
    before = _get(proc, h, client, name)
    r = _set(proc, h, client, name, value)
    assert not r.successful
    assert r.reason == f'parameter {name} is {STARTUP_ONLY} to change it'
    assert 'read at start-up: restart the node' in r.reason
    assert _get(proc, h, client, name) == before
    # set_parameters_atomically (the other service) refuses the whole batch, the dynamic one
    # included
    res = _call(
        proc,
        h,
        client.set_parameters_atomically(
            [Parameter('overlay_alpha', value=0.25), Parameter(name, value=value)]
        ),
    )
    assert not res.result.successful and STARTUP_ONLY in res.result.reason
    assert _get(proc, h, client, 'overlay_alpha') != 0.25


@pytest.mark.timeout(300)
def test_c44_descriptors_carry_description_range_and_read_only(node_p):
    proc, h, client, stamps = node_p
    names = [s.name for s in SPECS]
    descs = {d.name: d for d in _call(proc, h, client.describe_parameters(names)).descriptors}
    assert sorted(descs) == sorted(names)
    for spec in SPECS:
        d = descs[spec.name]
        assert d.description == spec.doc
        assert d.read_only == (not spec.dynamic), spec.name
        assert ('restart the node' in d.additional_constraints) == (not spec.dynamic)
        for c in spec.choices:
            assert repr(c) in d.additional_constraints
    a = descs['overlay_alpha'].floating_point_range[0]
    assert (a.from_value, a.to_value) == (0.0, 1.0)
    m = descs['max_depth'].floating_point_range[0]
    assert (m.from_value, m.to_value) == (SPEC_BY_NAME['max_depth'].min, 1000.0)  # finite
    i = descs['cloud_stride'].integer_range[0]  # an open end: the int64 limit
    assert i.from_value == 1 and i.to_value == 2**63 - 1
    assert descs['max_depth'].dynamic_typing and descs['max_depth'].type in (
        ParameterType.PARAMETER_DOUBLE,
        ParameterType.PARAMETER_INTEGER,
    )
    s = descs['cloud_stride'].integer_range[0]
    assert (s.from_value, s.step) == (1, 1) and s.to_value == 2**63 - 1
    assert not descs['input_width'].integer_range[0].from_value and descs['input_width'].read_only
    assert descs['label_source'].type == ParameterType.PARAMETER_STRING
