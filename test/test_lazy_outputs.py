"""Lazy outputs (node/outputs.py ``wanted_outputs``, ``lazy_outputs``), without ROS: which keys a
frame builds and publishes from the switches and the subscriber counts (image_transport's rule:
a transport publishes only when it has subscribers), and ``image_messages`` building nothing
that is not wanted. The across-process check is test_node_lazy.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.palette import load_palette
from depth3dseg_ros.node.outputs import image_messages, publisher_specs, wanted_outputs
from depth3dseg_ros.node.params import validate
from depth3dseg_ros.node.worker import outputs_text


def _params(**changes):
    return validate(changes)


def _have(p):
    return {k for k, _ in publisher_specs(p)}


def test_nobody_subscribed_nothing_is_built():
    p = _params()
    assert wanted_outputs(p, {}, _have(p)) == frozenset()
    assert wanted_outputs(p, {k: 0 for k in _have(p)}, _have(p)) == frozenset()


def test_lazy_off_publishes_every_switched_on_output_with_a_publisher():
    p = _params(lazy_outputs=False, publish_mask=False)
    assert wanted_outputs(p, {}, _have(p)) == frozenset(_have(p))
    assert 'mask' not in _have(p) and 'mask/camera_info' not in _have(p)
    # a publisher not created yet is never wanted, lazy or not
    assert wanted_outputs(p, {}, {'labels', 'points'}) == {'labels', 'points'}


def test_only_points_subscribed_builds_only_the_cloud():
    p = _params()
    assert wanted_outputs(p, {'points': 1}, _have(p)) == {'points'}


def test_image_subscribed_brings_its_camera_info_and_nothing_else():
    p = _params()
    got = wanted_outputs(p, {'overlay': 2, 'points': 1}, _have(p))
    assert got == {'overlay', 'overlay/camera_info', 'points'}


def test_camera_info_alone_is_published_when_subscribed():
    p = _params()
    assert wanted_outputs(p, {'depth/camera_info': 1}, _have(p)) == {'depth/camera_info'}


def test_compressed_form_alone_wants_the_compressed_key_and_the_camera_info():
    p = _params(publish_overlay_compressed=True, publish_depth_compressed=True)
    subs = {'overlay/compressed': 1, 'depth/compressedDepth': 1}
    got = wanted_outputs(p, subs, _have(p))
    assert got == {
        'overlay/compressed',
        'overlay/camera_info',
        'depth/compressedDepth',
        'depth/camera_info',
    }


@pytest.mark.parametrize('switch', ['publish_mask', 'publish_points'])
def test_switched_off_output_stays_off_whatever_its_subscribers(switch):
    on = _params()
    off = _params(**{switch: False})
    subs = {k: 1 for k in _have(on)}  # the publisher of an output switched off later remains
    got = wanted_outputs(off, subs, _have(on))
    key = 'mask' if switch == 'publish_mask' else 'points'
    assert key not in got and f'{key}/camera_info' not in got
    assert got == wanted_outputs(on, subs, _have(on)) - {key, f'{key}/camera_info'}


def test_image_messages_build_only_the_wanted_keys():
    p = _params(publish_labels_compressed=True)
    pal = load_palette('', NYU13)
    labels = (np.arange(12, dtype=np.uint8).reshape(3, 4) % 13) + 1
    depth = np.full((3, 4), 1.5, np.float32)
    rgb = np.full((3, 4, 3), 100, np.uint8)

    def no_mask():
        raise AssertionError('mask built although not wanted')

    info = object()
    wanted = wanted_outputs(p, {'labels/compressed': 1, 'mask/camera_info': 1}, _have(p))
    got = image_messages(p, None, labels, depth, rgb, info, pal, wanted, no_mask)
    assert [k for k, _ in got] == ['labels/compressed', 'labels/camera_info', 'mask/camera_info']
    assert all(m is info for k, m in got if k.endswith('camera_info'))


def test_outputs_text_for_diagnostics():
    assert outputs_text(None) == '-'
    assert outputs_text(frozenset()) == 'none'
    assert outputs_text({'points', 'labels/camera_info', 'labels'}) == (
        'labels,labels/camera_info,points'
    )
