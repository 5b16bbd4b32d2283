"""Issue 14, the outputs of a running node: the class palette / grouping file (labels, overlay,
mask, cloud label and colour, ~/classes), ``cloud_rgb`` and the compressed outputs.

In-process (real rclpy node in the run-wide context of conftest's ``ros``, real Segmenter with
the tiny model, wrapped to keep the model's labels of each frame; the node's ``_publish``
records what each frame would publish, as test_node_rules does), plus one across-process test:
a subscriber in another process receives the three compressed topics and the grouped ~/classes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import CompressedImage

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.palette import load_palette
from depth3dseg_ros.node.node import COMPRESSED_TOPICS, Depth3DSegNode, default_segmenter
from depth3dseg_ros.ros.compressed import decode_compressed, decode_compressed_depth
from depth3dseg_ros.ros.image import imgmsg_to_cv2
from depth3dseg_ros.ros.pointcloud2 import read_points, unpack_rgb
from depth3dseg_ros.ros.sync import MATCHED, Pair
from nodeutil import camera_image, camera_info_msg, make_tiny_model, stamp_ns, tiny_node_params

REPO = Path(__file__).resolve().parents[1]
NAV = REPO / 'config' / 'palette_navigation.yaml'
K = np.array([[70.0, 0, 39.5], [0, 72.0, 29.5], [0, 0, 1]])


class Recording:
    """The real Segmenter; keeps the last result (the model's own label ids)."""

    def __init__(self, seg):
        self.seg, self.classes, self.last = seg, seg.classes, None

    def warmup(self, *a, **kw):
        return self.seg.warmup(*a, **kw)

    def infer(self, *a, **kw):
        self.last = self.seg.infer(*a, **kw)
        return self.last


class ClassesStub:
    def __init__(self):
        self.sent = []

    def publish(self, msg):
        self.sent.append(json.loads(msg.data))


def _overrides(model, **extra):
    # in-process: no subscriber, so lazy outputs would build nothing; every output is recorded
    values = tiny_node_params(model, lazy_outputs=False, **extra)
    return [Parameter(k, value=v) for k, v in values.items()]


@pytest.fixture(scope='module')
def model(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp('m') / 'tiny.pt')


@pytest.fixture(scope='module')
def node(model, ros):
    rec = {}

    def factory(p, model_file):
        return rec.setdefault('seg', Recording(default_segmenter(p, model_file)))

    n = Depth3DSegNode(
        segmenter_factory=factory,
        node_name='d3s_outputs',
        parameter_overrides=_overrides(
            model,
            class_palette_file=str(NAV),
            cloud_rgb='class',
            overlay_alpha=1.0,
            publish_labels_compressed=True,
            publish_overlay_compressed=True,
            publish_depth_compressed=True,
        ),
    )
    n.published = []
    n._publish = lambda name, msg: n.published.append((name, msg))
    n.rec = rec['seg']
    yield n
    n.destroy_node()


def run(node, t=10**18):
    node.published.clear()
    node._process(Pair(camera_image(80, 60, t), camera_info_msg(K, 80, 60, t), MATCHED))
    return dict(node.published)


def cloud(msg):
    """The organized cloud as an H×W structured array."""
    return read_points(msg).reshape(msg.height, msg.width)


def set_ok(node, **values):
    res = node.set_parameters([Parameter(k, value=v) for k, v in values.items()])
    assert all(r.successful for r in res), [r.reason for r in res]


@pytest.mark.timeout(180)
def test_grouping_file_applies_to_labels_overlay_mask_cloud_and_classes(node):
    nav = load_palette(NAV, NYU13)
    got = run(node)
    model_labels = node.rec.last.labels
    expect = nav.lut[model_labels]
    labels = imgmsg_to_cv2(got['labels'])
    assert got['labels'].encoding == 'mono8' and np.array_equal(labels, expect)
    assert set(np.unique(labels)) <= {1, 2, 3, 4}  # groups only (void excluded)
    colours = nav.colors[labels]
    assert np.array_equal(imgmsg_to_cv2(got['mask']), colours)  # one colour per group
    assert np.array_equal(imgmsg_to_cv2(got['overlay']), colours)  # alpha 1: labels only
    pts = cloud(got['points'])
    assert pts.shape == labels.shape  # organized, stride 1
    assert np.array_equal(pts['label'], labels)  # the cloud carries the group ids too
    assert np.array_equal(unpack_rgb(pts['rgb']), colours)  # cloud_rgb: class
    d = node.palette.to_dict()
    assert [c['name'] for c in d['classes']] == [
        'void',
        'floor',
        'structure',
        'furniture',
        'objects',
    ]
    assert d['classes'][2]['model_classes'] == ['wall', 'ceiling', 'window']


@pytest.mark.timeout(180)
def test_compressed_outputs_decode_back_to_the_raw_outputs(node):
    set_ok(node, depth_encoding='32FC1')
    got = run(node, 10**18 + 10**8)
    for key in ('labels/compressed', 'overlay/compressed', 'depth/compressedDepth'):
        assert isinstance(got[key], CompressedImage), key
        assert stamp_ns(got[key]) == 10**18 + 10**8 and got[key].header.frame_id == 'cam_optical'
    labels = imgmsg_to_cv2(got['labels'])
    arr, enc = decode_compressed(got['labels/compressed'])
    assert got['labels/compressed'].format == 'mono8; png compressed mono8'
    assert enc == 'mono8' and np.array_equal(arr, labels)  # PNG: lossless
    ov = imgmsg_to_cv2(got['overlay'])
    arr, enc = decode_compressed(got['overlay/compressed'])
    assert got['overlay/compressed'].format == 'rgb8; jpeg compressed bgr8'
    assert enc == 'rgb8' and np.abs(arr.astype(int) - ov.astype(int)).mean() < 6  # JPEG 95
    depth = imgmsg_to_cv2(got['depth'])
    back = decode_compressed_depth(got['depth/compressedDepth'])
    assert got['depth/compressedDepth'].format == '32FC1; compressedDepth png'
    ok = np.isfinite(depth) & (depth < 10.0)
    assert ok.any() and np.array_equal(np.isfinite(back), ok)
    assert (np.abs(back[ok] - depth[ok]) <= depth[ok] ** 2 / (2 * 10100) * 1.01 + 1e-5).all()
    # 16UC1: the millimetres unchanged; a lower JPEG quality: a smaller overlay
    size95 = len(got['overlay/compressed'].data)
    set_ok(node, depth_encoding='16UC1', jpeg_quality=20)
    got = run(node, 10**18 + 2 * 10**8)
    assert got['depth/compressedDepth'].format == '16UC1; compressedDepth png'
    mm = imgmsg_to_cv2(got['depth'])
    assert np.array_equal(decode_compressed_depth(got['depth/compressedDepth']), mm)
    assert len(got['overlay/compressed'].data) < size95
    # the compressed form alone: its camera_info still goes out, the raw image does not
    set_ok(node, publish_overlay=False, depth_encoding='32FC1', jpeg_quality=95)
    got = run(node, 10**18 + 3 * 10**8)
    assert 'overlay' not in got and 'overlay/compressed' in got and 'overlay/camera_info' in got
    set_ok(node, publish_overlay=True)


@pytest.mark.timeout(180)
def test_runtime_palette_and_cloud_rgb_changes(node, tmp_path):
    stub = node._classes_pub = ClassesStub()
    # refused, with the file, field and value named; the current palette stays
    bad = tmp_path / 'bad_palette.yaml'
    bad.write_text('groups:\n  - {name: seats, classes: [chair, sofaa]}\n')
    res = node.set_parameters([Parameter('class_palette_file', value=str(bad))])[0]
    assert not res.successful
    assert f"{bad}: groups[0].classes[1]='sofaa' is not a model class" in res.reason
    res = node.set_parameters([Parameter('class_palette_file', value='/nope.yaml')])[0]
    assert not res.successful and "class_palette_file='/nope.yaml': no such file" in res.reason
    assert node.get_parameter('class_palette_file').value == str(NAV) and stub.sent == []
    # back to the model's classes: ~/classes published again, labels are the model's ids
    set_ok(node, class_palette_file='', cloud_rgb='camera')
    assert stub.sent == [NYU13.to_dict()]
    got = run(node, 10**18 + 5 * 10**8)
    labels = imgmsg_to_cv2(got['labels'])
    assert np.array_equal(labels, node.rec.last.labels)
    pts = cloud(got['points'])
    assert np.array_equal(pts['label'], labels)
    # cloud_rgb: camera = the image the labels belong to (network size)
    assert np.array_equal(unpack_rgb(pts['rgb']), node.rec.last.rgb)
    assert np.array_equal(imgmsg_to_cv2(got['mask']), NYU13.colors[labels])
    set_ok(node, cloud_rgb='class')
    got = run(node, 10**18 + 6 * 10**8)
    labels = imgmsg_to_cv2(got['labels'])
    assert np.array_equal(unpack_rgb(cloud(got['points'])['rgb']), NYU13.colors[labels])
    res = node.set_parameters([Parameter('cloud_rgb', value='label')])[0]
    assert (
        not res.successful and "cloud_rgb='label' is not one of ['camera', 'class']" in res.reason
    )


@pytest.mark.timeout(120)
def test_bad_palette_file_stops_start_up_naming_it(model, tmp_path, ros):
    bad = tmp_path / 'p.yaml'
    bad.write_text('colors: {wall: [300, 0, 0]}\n')
    with pytest.raises(ValueError, match=r'colors.wall=\[300, 0, 0\] must be \[r, g, b\]'):
        Depth3DSegNode(
            node_name='d3s_bad_palette',
            parameter_overrides=_overrides(model, class_palette_file=str(bad)),
        )


@pytest.mark.timeout(300)
def test_subscriber_in_another_process_receives_compressed_outputs_and_grouped_classes(
    model, tmp_path, ros
):
    from test_node import RELIABLE, _start

    name = 'd3s_compressed'
    proc, h = _start(
        tmp_path,
        model,
        name,
        class_palette_file=str(NAV),
        publish_labels_compressed=True,
        publish_overlay_compressed=True,
        publish_depth_compressed=True,
    )
    try:
        got: dict[str, dict[int, CompressedImage]] = {}
        for topic, ty in COMPRESSED_TOPICS.items():
            assert ty == 'sensor_msgs/msg/CompressedImage'
            full = topic.replace('~', f'/{name}', 1)
            got[full] = {}
            h.node.create_subscription(
                CompressedImage,
                full,
                lambda m, d=got[full]: d.__setitem__(stamp_ns(m), m),
                RELIABLE,
            )
        assert sorted(got) == [
            f'/{name}/depth/image/compressedDepth',
            f'/{name}/labels/image/compressed',
            f'/{name}/overlay/image/compressed',
        ]
        h.wait(proc, lambda: False, 1.0)  # let the new subscriptions match
        t0 = h.prime(proc, 2_100_000_000_000_000_000)
        t = t0
        for _ in range(6):
            t += 100_000_000
            h.send(t)
            if h.wait(proc, lambda: all(t in d for d in got.values()), 10.0):
                break
        assert all(t in d for d in got.values()), proc.log()
        labels = imgmsg_to_cv2(h.got['labels'][t]) if t in h.got['labels'] else None
        arr, enc = decode_compressed(got[f'/{name}/labels/image/compressed'][t])
        assert enc == 'mono8' and set(np.unique(arr)) <= {1, 2, 3, 4}
        if labels is not None:
            assert np.array_equal(arr, labels)
        ov, enc = decode_compressed(got[f'/{name}/overlay/image/compressed'][t])
        assert enc == 'rgb8' and ov.shape == (48, 64, 3)
        depth = decode_compressed_depth(got[f'/{name}/depth/image/compressedDepth'][t])
        assert depth.dtype == np.float32 and depth.shape == (48, 64)
        assert np.isfinite(depth).any()
        classes = json.loads(h.classes[-1].data)
        assert [c['name'] for c in classes['classes']] == [
            'void',
            'floor',
            'structure',
            'furniture',
            'objects',
        ]
        assert classes['palette_file'] == str(NAV)
    finally:
        assert h.close(proc) == 0, proc.log()
