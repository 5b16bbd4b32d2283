"""depth3dseg_node in a separate process, driven by a test node over real DDS (rclpy, FastDDS
LARGE_DATA).

Node A (defaults: network resolution, 32FC1, organized cloud + confidence): outputs, headers,
camera_info scaling, cloud = back-projection of the published depth with the published K, C24 QoS,
C04 malformed input. Node B (output_resolution=camera, 16UC1, stride 2, unorganized): no CameraInfo
first (labels/overlay/depth but no cloud), then with CameraInfo.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, PointCloud2
from std_msgs.msg import Header, String

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.core.depth import depth_to_meters
from depth3dseg_ros.ros.image import imgmsg_to_cv2
from depth3dseg_ros.ros.pointcloud2 import read_points, unpack_rgb
from nodeutil import (
    NodeProcess,
    camera_image,
    camera_info_msg,
    make_tiny_model,
    spin_until,
    stamp_msg,
    stamp_ns,
    tiny_node_params,
)

W, H = 80, 60  # camera image
NW, NH = 64, 48  # network input
K_CAM = np.array([[70.0, 0, 39.5], [0, 72.0, 29.5], [0, 0, 1]])
RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
BEST_EFFORT = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
OUT = (
    'labels',
    'labels/camera_info',
    'overlay',
    'overlay/camera_info',
    'mask',
    'mask/camera_info',
    'depth',
    'depth/camera_info',
    'points',
)
IMAGE_KEYS = ('labels', 'overlay', 'mask', 'depth')


def out_topic(name: str, key: str) -> str:
    """The topic of harness key ``key`` of node ``name``: image outputs are ``<key>/image``
    (image_transport layout, issue 14), the rest ``<key>`` (``labels/camera_info``, ``points``)."""
    return f'/{name}/{key}/image' if key in IMAGE_KEYS else f'/{name}/{key}'


class Harness:
    """Publishes image + camera_info; records every output of node ``name`` by stamp."""

    def __init__(
        self, name: str, image_topic: str, info_topic: str, with_info: bool = True
    ) -> None:
        self.node = rclpy.create_node(f'harness_{name}')
        self.pub_img = self.node.create_publisher(Image, image_topic, RELIABLE)
        self.info_topic = info_topic
        self.pub_info = (
            self.node.create_publisher(CameraInfo, info_topic, RELIABLE) if with_info else None
        )
        self.got: dict[str, dict[int, object]] = {k: {} for k in OUT + ('points_be',)}
        self.classes: list = []
        self.diag: list = []
        types = {'points': PointCloud2}
        for k in OUT:
            cls = types.get(k, CameraInfo if k.endswith('camera_info') else Image)
            self.node.create_subscription(cls, out_topic(name, k), self._rec(k), RELIABLE)
        self.node.create_subscription(
            PointCloud2, f'/{name}/points', self._rec('points_be'), BEST_EFFORT
        )
        self.node.create_subscription(String, f'/{name}/classes', self.classes.append, LATCHED)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self.diag.append, 10)

    def _rec(self, key):
        return lambda m: self.got[key].__setitem__(stamp_ns(m), m)

    def send(
        self,
        t_ns: int,
        info: bool = True,
        frame_id: str = 'cam_optical',
        seed: int = 0,
        size: tuple[int, int] = (W, H),
    ) -> None:
        K = K_CAM.copy()
        K[0] *= size[0] / W
        K[1] *= size[1] / H
        if info:
            self.pub_info.publish(camera_info_msg(K, size[0], size[1], t_ns, frame_id))
        self.pub_img.publish(camera_image(size[0], size[1], t_ns, frame_id, seed))

    def prime(
        self, proc, t_start: int, timeout: float = 60.0, size: tuple[int, int] = (W, H)
    ) -> int:
        """Stream frames (image + CameraInfo, 10 Hz) until one comes back with a cloud; return its
        stamp.

        DDS data starts flowing a moment after discovery (LARGE_DATA opens its channels), and the
        very first CameraInfo may race its image; a camera is streaming anyway.
        """
        t = t_start
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            t += 100_000_000
            self.send(t, size=size)
            if self.wait(proc, lambda: any(k >= t_start for k in self.got['points']), 0.1):
                return max(self.got['points'])
        raise AssertionError('no cloud came back while streaming:\n' + proc.log())

    def wait(self, proc, cond, timeout=30.0) -> bool:
        return spin_until(self.node, cond, timeout, proc)

    def close(self, proc, quiet_s: float = 1.0, timeout: float = 20.0) -> int:
        """Let the node finish the frames still in flight (no output for ``quiet_s``, at most
        ``timeout`` s), stop the node process, then destroy the harness node; return the node's
        exit code.

        Order matters (docs/pip_ros_stack.md §1): FastDDS 3.2's TCP transport (LARGE_DATA) can
        deadlock when a participant is deleted while a TCP peer is alive but silent — the channel's
        disconnect waits for a read that never completes (eProsima/Fast-DDS PR 6066), inside a
        call that keeps the GIL. Destroying the harness node deletes the participant when it is
        the last node of its context; with the node process stopped first, its sockets are closed
        and the harness's reads end.
        """
        count = lambda: sum(map(len, self.got.values()))  # noqa: E731
        seen, quiet_since, end = count(), time.monotonic(), time.monotonic() + timeout
        while time.monotonic() < end and proc.alive():
            rclpy.spin_once(self.node, timeout_sec=0.05)
            if count() != seen:
                seen, quiet_since = count(), time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                break
        rc = proc.stop()
        self.node.destroy_node()
        return rc


@pytest.fixture(scope='module')
def model_file(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp('model') / 'tiny.pt')


def _start(tmp, model_file, name, with_info=True, extra_remaps=None, **params):
    """Start node ``name`` and a harness; ready when the harness has the node's ~/classes and both
    sides' topics are matched. FastDDS discovery between two fresh processes occasionally never
    completes (docs/pip_ros_stack.md §1: 1 in ~40 runs), so a node that is not
    discovered within 40 s is restarted once (a new participant); a second failure fails the
    test."""
    base = tiny_node_params(model_file, input_width=NW, input_height=NH)
    h = Harness(name, f'/{name}_cam/image', f'/{name}_cam/camera_info', with_info)
    for attempt in range(2):
        proc = NodeProcess(
            tmp / f'{name}_{attempt}.log',
            dict(base, **params),
            name=name,
            remaps={
                'image': f'/{name}_cam/image',
                'camera_info': f'/{name}_cam/camera_info',
                **(extra_remaps or {}),
            },
        )
        if h.wait(proc, lambda: bool(h.classes), timeout=40 if attempt == 0 else 90):
            break
        log = proc.log()
        proc.stop()
        assert attempt == 0, 'node not discovered twice:\n' + log
    assert h.wait(
        proc,
        lambda: (
            h.pub_img.get_subscription_count()
            and (not with_info or h.pub_info.get_subscription_count())
            and h.node.count_publishers(f'/{name}/points')
        ),
        timeout=30,
    ), proc.log()
    h.wait(proc, lambda: False, 0.5)  # let the matches settle both ways
    return proc, h


@pytest.fixture(scope='module')
def node_a(ros, model_file, tmp_path_factory):
    proc, h = _start(tmp_path_factory.mktemp('a'), model_file, 'd3s_a', cloud_confidence=True)
    t0 = h.prime(proc, 1_700_000_000_000_000_000) + 1_000_000_000
    stamps = [t0 + k * 100_000_000 for k in range(4)]
    for k, t in enumerate(stamps):  # one at a time: each frame's outputs arrive before the next
        h.send(t, seed=k)
        assert h.wait(proc, lambda: all(t in h.got[key] for key in OUT + ('points_be',))), (
            proc.log()
        )
    yield proc, h, stamps
    assert h.close(proc) == 0, proc.log()


@pytest.mark.timeout(240)
def test_outputs_encodings_sizes_and_headers(node_a):
    proc, h, stamps = node_a
    for t in stamps:
        lab, ov, dep = h.got['labels'][t], h.got['overlay'][t], h.got['depth'][t]
        mask = h.got['mask'][t]
        assert (lab.encoding, ov.encoding, dep.encoding) == ('mono8', 'rgb8', '32FC1')
        assert mask.encoding == 'rgb8'
        for m in (lab, ov, mask, dep, h.got['points'][t]) + tuple(
            h.got[k][t] for k in OUT if 'camera_info' in k
        ):
            assert stamp_ns(m) == t and m.header.frame_id == 'cam_optical'
            if not isinstance(m, PointCloud2):
                assert (m.width, m.height) == (NW, NH)
        labels = imgmsg_to_cv2(lab)
        assert labels.max() < len(NYU13) and labels.min() >= 1  # void channel excluded
        # ~/mask/image: each pixel exactly its label's class colour, no blending
        palette = np.asarray(NYU13.colors, np.uint8)
        assert np.array_equal(imgmsg_to_cv2(mask), palette[labels])
        depth = imgmsg_to_cv2(dep)
        assert depth.dtype == np.float32 and np.isfinite(depth).any()
    assert json.loads(h.classes[0].data) == NYU13.to_dict()


@pytest.mark.timeout(240)
def test_camera_info_scaled_to_network_size(node_a):
    proc, h, stamps = node_a
    sx, sy = NW / W, NH / H
    expect = np.array([[70 * sx, 0, 39.5 * sx], [0, 72 * sy, 29.5 * sy], [0, 0, 1]])
    for key in (
        'labels/camera_info',
        'overlay/camera_info',
        'mask/camera_info',
        'depth/camera_info',
    ):
        ci = h.got[key][stamps[-1]]
        assert np.allclose(np.reshape(ci.k, (3, 3)), expect, atol=1e-9), key
        assert np.allclose(np.reshape(ci.p, (3, 4))[:, :3], expect, atol=1e-9)


@pytest.mark.timeout(240)
def test_cloud_backprojects_published_depth_with_published_k(node_a):
    proc, h, stamps = node_a
    for t in stamps:
        cloud = h.got['points'][t]
        assert (cloud.height, cloud.width) == (NH, NW) and not cloud.is_bigendian
        names = [(f.name, f.offset, f.datatype) for f in cloud.fields]
        assert names == [
            ('x', 0, 7),
            ('y', 4, 7),
            ('z', 8, 7),
            ('rgb', 12, 7),
            ('label', 16, 6),
            ('confidence', 20, 7),
        ]
        assert cloud.point_step == 24 and cloud.row_step == 24 * NW
        pts = read_points(cloud, organized=True)
        depth = imgmsg_to_cv2(h.got['depth'][t])
        K = np.reshape(h.got['depth/camera_info'][t].k, (3, 3))
        xyz = backproject_np(depth, K)
        got = np.stack([pts['x'], pts['y'], pts['z']], axis=-1)
        assert np.array_equal(np.isnan(got), np.isnan(xyz))
        assert np.allclose(got, xyz, equal_nan=True, atol=1e-5)
        assert np.array_equal(pts['label'], imgmsg_to_cv2(h.got['labels'][t]))
        # the cloud colour is the network-size image, the overlay is that image blended with labels
        assert unpack_rgb(pts['rgb']).shape == (NH, NW, 3)
        assert np.all((pts['confidence'] >= 0) & (pts['confidence'] <= 1))


@pytest.mark.timeout(240)
def test_c24_reliable_and_best_effort_subscribers_both_receive_cloud(node_a):
    """Publisher RELIABLE by default: both a RELIABLE and a BEST_EFFORT subscriber got every
    cloud."""
    proc, h, stamps = node_a
    assert set(stamps) <= set(h.got['points']) and set(stamps) <= set(h.got['points_be'])
    info = h.node.get_publishers_info_by_topic('/d3s_a/points')
    assert [i.qos_profile.reliability for i in info] == [ReliabilityPolicy.RELIABLE]
    subs = h.node.get_subscriptions_info_by_topic('/d3s_a_cam/image')
    assert [i.qos_profile.reliability for i in subs] == [ReliabilityPolicy.BEST_EFFORT]


@pytest.mark.timeout(240)
def test_c04_malformed_images_survived_and_node_keeps_publishing(node_a):
    proc, h, stamps = node_a
    t = stamps[-1] + 1_000_000_000
    bad = [
        Image(
            header=Header(stamp=stamp_msg(t), frame_id='cam_optical'),
            height=480,
            width=640,
            encoding='rgb8',
            step=1920,
            data=bytes(110592),
        ),
        Image(
            header=Header(stamp=stamp_msg(t + 1), frame_id='cam_optical'),
            height=720,
            width=1280,
            encoding='16UC1',
            step=1280,
            data=bytes(1280 * 720),
        ),
        Image(
            header=Header(stamp=stamp_msg(t + 2), frame_id='cam_optical'),
            height=0,
            width=0,
            encoding='rgb8',
            step=0,
            data=b'',
        ),
    ]
    for k, msg in enumerate(bad):
        h.pub_info.publish(camera_info_msg(K_CAM, W, H, t + k))
        h.pub_img.publish(msg)
        assert h.wait(
            proc, lambda: ('len(data)=110592', 'step=1280', 'empty image')[k] in proc.log(), 20
        ), proc.log()
    # (a) and (b) each named their field once (throttled per kind of fault), (c) was a warning
    log = proc.log()
    assert 'len(data)=110592 != height*step=921600' in log and 'step=1280 < width*bpp=2560' in log
    good = t + 100_000_000
    h.send(good)
    assert h.wait(proc, lambda: good in h.got['points'] and good in h.got['labels']), proc.log()
    assert proc.alive()
    for k in range(3):
        assert all(t + k not in h.got[key] for key in OUT)  # nothing published for them
    assert 'Traceback' not in proc.log()
    h.wait(
        proc,
        lambda: any(
            kv.key == 'skipped' and int(kv.value) >= 3
            for d in h.diag
            for s in d.status
            for kv in s.values
        ),
        10,
    )
    skipped = [
        int(kv.value)
        for d in h.diag
        for s in d.status
        if s.name.startswith('d3s_a')
        for kv in s.values
        if kv.key == 'skipped'
    ]
    assert skipped and skipped[-1] == 3


@pytest.fixture(scope='module')
def node_b(ros, model_file, tmp_path_factory):
    """Node B also gets a misspelt parameter (lable_source): it warns and starts normally."""
    proc, h = _start(
        tmp_path_factory.mktemp('b'),
        model_file,
        'd3s_b',
        with_info=False,
        output_resolution='camera',
        depth_encoding='16UC1',
        cloud_stride=2,
        cloud_organized=False,
        lable_source='2d',
    )
    yield proc, h
    assert h.close(proc) == 0, proc.log()


@pytest.mark.timeout(240)
def test_no_camera_info_publishes_images_but_no_cloud_then_camera_resolution(node_b):
    proc, h = node_b
    t0 = 1_800_000_000_000_000_000
    h.send(t0, info=False)
    assert h.wait(proc, lambda: all(t0 in h.got[k] for k in ('labels', 'overlay', 'depth'))), (
        proc.log()
    )
    h.wait(proc, lambda: False, 1.0)
    assert t0 not in h.got['points']
    log = proc.log()
    assert 'no CameraInfo' in log
    # the Segmenter's once-only "no K given" warning is for this real frame, not the start-up
    # warm-up
    assert log.count('no K given') == 1 and log.index('no K given') > log.index('warm-up'), log
    # a misspelt parameter is named with the closest known one; the node runs with the default
    assert "unknown parameter 'lable_source' is ignored; did you mean 'label_source'?" in log
    assert 'label_source=fused' in log
    for k in ('labels', 'overlay', 'depth'):
        assert (h.got[k][t0].width, h.got[k][t0].height) == (W, H)  # camera resolution
    h.pub_info = h.node.create_publisher(
        CameraInfo, h.info_topic, RELIABLE
    )  # the CameraInfo starts
    t1 = h.prime(proc, t0)
    assert h.wait(proc, lambda: t1 in h.got['depth/camera_info'] and t1 in h.got['labels']), (
        proc.log()
    )
    dep = h.got['depth'][t1]
    assert dep.encoding == '16UC1' and (dep.width, dep.height) == (W, H)
    ci = h.got['depth/camera_info'][t1]
    assert (ci.width, ci.height) == (W, H) and np.allclose(np.reshape(ci.k, (3, 3)), K_CAM)
    labels = imgmsg_to_cv2(h.got['labels'][t1])
    # nearest upsampling 64x48 -> 80x60 keeps only ids the network produced, blocks of whole pixels
    assert labels.shape == (H, W) and labels.min() >= 1
    # C25 options: stride 2, unorganized (invalid points dropped): one row, at most 40*30 points
    cloud = h.got['points'][t1]
    assert cloud.height == 1 and 0 < cloud.width <= (W // 2) * (H // 2)
    pts = read_points(cloud)
    assert np.isfinite(pts['x']).all()
    sub = backproject_np(depth_to_meters(imgmsg_to_cv2(dep), '16UC1'), K_CAM)[::2, ::2].reshape(
        -1, 3
    )
    sub = sub[np.isfinite(sub).all(axis=1)]
    got = np.stack([pts['x'], pts['y'], pts['z']], axis=-1)
    assert got.shape == sub.shape
    assert np.allclose(got, sub, atol=2e-3)  # 16UC1 mm rounding: published depth is exact to 1 mm


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(240)
def test_c25_full_hd_frame_gives_41mb_organized_cloud_over_dds(ros, model_file, tmp_path):
    """C25 sizes: a 1920x1080 rgb8 input (6,220,800 B) at output_resolution=camera gives the
    organized x,y,z,rgb,label cloud of 1920*1080*20 = 41,472,000 B, published and received across
    processes (reliable, LARGE_DATA), plus the 8,294,400 B 32FC1 depth; the node keeps running."""
    proc, h = _start(tmp_path, model_file, 'd3s_c', output_resolution='camera')
    try:
        t = h.prime(proc, 1_900_000_000_000_000_000, size=(1920, 1080))
        assert h.wait(proc, lambda: t in h.got['depth'])
        cloud, depth = h.got['points'][t], h.got['depth'][t]
        assert (cloud.height, cloud.width, cloud.point_step) == (1080, 1920, 20)
        assert len(cloud.data) == 41_472_000 and cloud.row_step == 1920 * 20
        assert (depth.width, depth.height, len(depth.data)) == (1920, 1080, 8_294_400)
        assert proc.alive()
    finally:
        assert h.close(proc) == 0, proc.log()


@pytest.mark.flaky(reruns=1)  # intermittent: node silent, then slow to stop (issue 14 note)
@pytest.mark.timeout(240)
def test_use_sim_time_and_compressed_input(ros, model_file, tmp_path):
    """use_sim_time: the node's clock follows /clock (diagnostics stamp, frame age from sim time);
    use_compressed: a png CompressedImage on <image>/compressed is decoded like the raw image;
    max_depth: depth beyond it is no data in ~/depth/image and ~/points."""
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CompressedImage
    from depth3dseg_ros.ros.compressed import encode_compressed
    from nodeutil import NodeProcess

    name = 'd3s_d'
    proc = NodeProcess(
        tmp_path / f'{name}.log',
        dict(
            model_file=str(model_file),
            device='cpu',
            input_width=NW,
            input_height=NH,
            torch_threads=1,
            diagnostics_period=0.5,
            use_sim_time=True,
            use_compressed=True,
            max_depth=1.0,
        ),
        name=name,
        remaps={'image': f'/{name}_cam/image', 'camera_info': f'/{name}_cam/camera_info'},
    )
    h = Harness(name, f'/{name}_cam/other', f'/{name}_cam/camera_info')
    pub_c = h.node.create_publisher(CompressedImage, f'/{name}_cam/image/compressed', RELIABLE)
    pub_clock = h.node.create_publisher(Clock, '/clock', 10)
    sim_t = 1_751_000_000_000_000_000  # 2025: far from the wall clock
    try:
        assert h.wait(proc, lambda: bool(h.classes), 90), proc.log()
        assert h.wait(
            proc, lambda: pub_c.get_subscription_count() and pub_clock.get_subscription_count(), 30
        )
        rgb = imgmsg_to_cv2(camera_image(W, H, 0))
        sent = None
        for k in range(300):  # a bag replay: clock, then the frame
            sim_t += 100_000_000
            pub_clock.publish(Clock(clock=stamp_msg(sim_t)))
            h.pub_info.publish(camera_info_msg(K_CAM, W, H, sim_t))
            pub_c.publish(
                encode_compressed(
                    rgb, 'rgb8', 'png', Header(stamp=stamp_msg(sim_t), frame_id='cam_optical')
                )
            )
            if h.wait(
                proc,
                lambda: (
                    bool(h.got['points'])
                    and any(
                        s.name.startswith(name)
                        and any(kv.key == 'processed' and int(kv.value) > 0 for kv in s.values)
                        for d in h.diag
                        for s in d.status
                    )
                ),
                0.1,
            ):
                sent = sim_t
                break
        assert sent is not None, proc.log()
        t = max(h.got['points'])
        assert h.got['labels'][t].width == NW and stamp_ns(h.got['overlay'][t]) == t
        ours = [d for d in h.diag if any(s.name.startswith(name) for s in d.status)]
        stamp = stamp_ns(ours[-1])
        assert abs(stamp - sent) < 60 * 10**9  # sim time, not the wall clock (2026+)
        age = [
            float(kv.value) for s in ours[-1].status for kv in s.values if kv.key == 'age_ms_p50'
        ][0]
        assert 0 <= age < 60_000  # now(sim) - stamp: small, not years
        # max_depth=1.0 m: the untrained model's depth (3 m everywhere) is all cut to no data
        assert np.isnan(imgmsg_to_cv2(h.got['depth'][t])).all()
        cloud = h.got['points'][t]
        assert np.isnan(read_points(cloud)['z']).all() and not cloud.is_dense
    finally:
        assert h.close(proc) == 0, proc.log()


@pytest.mark.flaky(reruns=1)  # intermittent: node silent, then slow to stop (issue 14 note)
@pytest.mark.timeout(240)
def test_more_than_256_classes_give_16uc1_labels_and_uint16_cloud_labels(ros, tmp_path):
    """300 classes: ids above 255 cannot be mono8 (uint8 would wrap 300 to 44), so
    ~/labels/image is 16UC1 and the cloud's label field UINT16; ~/classes lists all 300."""
    model = make_tiny_model(tmp_path / 'c300.pt', num_classes=300)
    proc, h = _start(tmp_path, model, 'd3s_e')
    try:
        t = h.prime(proc, 1_950_000_000_000_000_000)
        assert h.wait(proc, lambda: t in h.got['labels'])
        lab = h.got['labels'][t]
        assert lab.encoding == '16UC1' and lab.step == 2 * NW
        labels = imgmsg_to_cv2(lab)
        assert labels.dtype == np.uint16 and 1 <= labels.min() and labels.max() < 300
        cloud = h.got['points'][t]
        assert [(f.name, f.datatype) for f in cloud.fields if f.name == 'label'] == [('label', 4)]
        assert np.array_equal(read_points(cloud, organized=True)['label'], labels)
        assert len(json.loads(h.classes[0].data)['classes']) == 300
    finally:
        assert h.close(proc) == 0, proc.log()
