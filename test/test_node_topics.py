"""Topic layout that image_transport and image_pipeline find (issue 14), on a running node.

image_transport (and through it image_proc, depth_image_proc and RViz's Camera display) looks for
an image's CameraInfo at ``<namespace of the image topic>/camera_info``. For every Image topic the
node publishes (read from the ROS graph, not from a list in the test), ``T.rsplit('/', 1)[0] +
'/camera_info'`` must be published by the node as sensor_msgs/CameraInfo, and each frame's pair
must carry the same header stamp and the image's size. The node runs in a subprocess with
test_node's harness (tiny real model, Image + CameraInfo in).
"""

from __future__ import annotations

import pytest
from sensor_msgs.msg import CameraInfo, Image

from depth3dseg_ros.node.node import OUTPUT_TOPICS
from nodeutil import make_tiny_model, stamp_ns
from test_node import RELIABLE, _start

NAME = 'd3s_topics'
IMAGE_TYPE = 'sensor_msgs/msg/Image'
INFO_TYPE = 'sensor_msgs/msg/CameraInfo'


def _published_by_node(h, topic: str) -> bool:
    return any(
        i.node_name == NAME and i.node_namespace == '/'
        for i in h.node.get_publishers_info_by_topic(topic)
    )


def _recorder(into: dict):
    return lambda m: into.__setitem__(stamp_ns(m), m)


@pytest.mark.timeout(300)
def test_every_image_output_has_its_camera_info_beside_it(ros, tmp_path):
    model = make_tiny_model(tmp_path / 'tiny.pt')
    proc, h = _start(tmp_path, model, NAME)
    try:
        expected = {t.replace('~', f'/{NAME}', 1): ty for t, ty in OUTPUT_TOPICS.items()}
        # every output the node declares is advertised (all publish_* default true)
        assert h.wait(proc, lambda: all(_published_by_node(h, t) for t in expected), timeout=30), (
            proc.log()
        )
        graph = {
            topic: types
            for topic, types in h.node.get_topic_names_and_types()
            if topic.startswith(f'/{NAME}/') and _published_by_node(h, topic)
        }
        assert graph == {t: [ty] for t, ty in expected.items()}, graph
        images = sorted(t for t, types in graph.items() if IMAGE_TYPE in types)
        assert images == sorted(
            f'/{NAME}/{n}/image' for n in ('labels', 'overlay', 'mask', 'depth')
        )
        # the old names (before issue 14) are gone: an image topic is never a camera_info's parent
        for old in ('labels', 'overlay', 'depth'):
            assert f'/{NAME}/{old}' not in graph
        pairs = {}
        for image in images:
            info = image.rsplit('/', 1)[0] + '/camera_info'
            assert graph.get(info) == [INFO_TYPE], (image, info, graph)
            pairs[image] = info

        # messages: each image and the camera_info beside it carry the same stamp and size
        got: dict[str, dict[int, object]] = {}
        for topic, cls in [(i, Image) for i in pairs] + [(c, CameraInfo) for c in pairs.values()]:
            got[topic] = {}
            h.node.create_subscription(cls, topic, _recorder(got[topic]), RELIABLE)
        h.wait(proc, lambda: False, 1.0)  # let the new subscriptions match
        t0 = h.prime(proc, 2_050_000_000_000_000_000)
        stamps = []
        t = t0
        for _ in range(4):
            t += 100_000_000
            h.send(t)
            if h.wait(proc, lambda: all(t in got[k] for k in got), 10.0):
                stamps.append(t)
            if len(stamps) >= 2:
                break
        assert stamps, 'no frame came back on every image and camera_info topic:\n' + proc.log()
        for t in stamps:
            for image, info in pairs.items():
                img, ci = got[image][t], got[info][t]
                assert stamp_ns(img) == stamp_ns(ci) == t, image
                assert img.header.frame_id == ci.header.frame_id == 'cam_optical', image
                assert (ci.width, ci.height) == (img.width, img.height), image
    finally:
        assert h.close(proc) == 0, proc.log()
