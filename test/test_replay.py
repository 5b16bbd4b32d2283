"""depth3dseg-replay: a bag's camera topics republished through rclpy (separate process), with
/clock."""

import subprocess
from pathlib import Path
import sys
import time

import numpy as np
import pytest
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image

from bagutil import damage_mcap_chunk, make_frames
from bagutil import write_bag as write_bag_frames
from depth3dseg_ros.bags.rclpy_copy import ros_msg_class
from depth3dseg_ros.bags.replay import CAMERA_TYPES, select_topics

TS = get_typestore(Stores.ROS2_KILTED)
N = 6


def _header(t_ns):
    Time = TS.types['builtin_interfaces/msg/Time']
    Header = TS.types['std_msgs/msg/Header']
    return Header(stamp=Time(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id='cam_optical')


def write_bag(path):
    Img, Info, Str = (
        TS.types[k]
        for k in ('sensor_msgs/msg/Image', 'sensor_msgs/msg/CameraInfo', 'std_msgs/msg/String')
    )
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        ci = w.add_connection('/cam/image_raw', 'sensor_msgs/msg/Image', typestore=TS)
        cc = w.add_connection('/cam/camera_info', 'sensor_msgs/msg/CameraInfo', typestore=TS)
        cs = w.add_connection('/chatter', 'std_msgs/msg/String', typestore=TS)
        for k in range(N):
            t = 5 * 10**9 + k * 50_000_000
            data = np.full(4 * 3 * 3, k, np.uint8)
            img = Img(
                header=_header(t),
                height=3,
                width=4,
                encoding='rgb8',
                is_bigendian=0,
                step=12,
                data=data,
            )
            info = Info(
                header=_header(t),
                height=3,
                width=4,
                distortion_model='plumb_bob',
                d=np.zeros(5),
                k=np.array([2.0, 0, 1.5, 0, 2.0, 1.0, 0, 0, 1]),
                r=np.eye(3).ravel(),
                p=np.zeros(12),
                binning_x=0,
                binning_y=0,
                roi=TS.types['sensor_msgs/msg/RegionOfInterest'](
                    x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
                ),
            )
            w.write(ci, t, TS.serialize_cdr(img, 'sensor_msgs/msg/Image'))
            w.write(cc, t + 1000, TS.serialize_cdr(info, 'sensor_msgs/msg/CameraInfo'))
            w.write(cs, t, TS.serialize_cdr(Str(data='x'), 'std_msgs/msg/String'))


def test_select_topics_and_classes():
    topics = {
        '/a': 'sensor_msgs/msg/Image',
        '/b': 'std_msgs/msg/String',
        '/c': 'sensor_msgs/msg/CameraInfo',
    }
    assert select_topics(topics, None) == {'/a': topics['/a'], '/c': topics['/c']}
    assert select_topics(topics, ['/b']) == {'/b': 'std_msgs/msg/String'}
    with pytest.raises(ValueError, match=r"\['/zz'\] not in the bag"):
        select_topics(topics, ['/zz'])
    assert ros_msg_class('sensor_msgs/msg/Image') is Image
    with pytest.raises(ValueError, match='not installed'):
        ros_msg_class('my_pkg/msg/Detections')
    assert 'sensor_msgs/msg/CompressedImage' in CAMERA_TYPES


def _spin_until_replay_ends(node, args, received=lambda: True, limit=60.0):
    """Run depth3dseg-replay ``args`` in a subprocess while spinning ``node``, until the process
    has ended and ``received()`` is true (or ``limit`` s); returns (exit code, its output). The
    node is destroyed and the process killed if still running."""
    proc = subprocess.Popen(
        [sys.executable, '-m', 'depth3dseg_ros.bags.replay', *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        end = time.monotonic() + limit
        while time.monotonic() < end and (proc.poll() is None or not received()):
            rclpy.spin_once(node, timeout_sec=0.05)
        out = proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        node.destroy_node()
    return proc.returncode, out


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(120)
def test_replay_publishes_every_camera_message_with_clock(tmp_path, ros):
    bag = tmp_path / 'bag'
    write_bag(bag)
    node = rclpy.create_node('replay_listener')
    got = {'img': [], 'info': [], 'clock': [], 'chatter': 0}
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Image, '/cam/image_raw', lambda m: got['img'].append(m), qos)
    node.create_subscription(CameraInfo, '/cam/camera_info', lambda m: got['info'].append(m), qos)
    node.create_subscription(Clock, '/clock', lambda m: got['clock'].append(m), 100)
    from std_msgs.msg import String

    node.create_subscription(
        String, '/chatter', lambda m: got.__setitem__('chatter', got['chatter'] + 1), qos
    )
    code, out = _spin_until_replay_ends(
        node,
        [str(bag), '--rate', '2', '--clock', '--wait-subscribers', '20'],
        lambda: len(got['img']) >= N and len(got['info']) >= N,
    )
    assert code == 0, out
    assert f'/cam/image_raw={N}' in out and f'/cam/camera_info={N}' in out
    assert got['chatter'] == 0  # not a camera topic: not replayed by default
    assert [m.header.stamp.nanosec for m in got['img']] == [k * 50_000_000 for k in range(N)]
    for k, m in enumerate(got['img']):
        assert (m.width, m.height, m.encoding, m.step) == (4, 3, 'rgb8', 12)
        assert bytes(m.data) == bytes([k]) * 36 and m.header.frame_id == 'cam_optical'
    assert list(got['info'][0].k) == [2.0, 0, 1.5, 0, 2.0, 1.0, 0, 0, 1]
    clocks = [c.clock.sec * 10**9 + c.clock.nanosec for c in got['clock']]
    assert clocks == sorted(clocks)  # bag time, monotonic
    assert clocks[0] >= 5 * 10**9 and clocks[-1] >= 5 * 10**9 + (N - 1) * 50_000_000


def test_replay_bad_topic_and_missing_bag_exit_2(tmp_path):
    bag = tmp_path / 'bag'
    write_bag(bag)
    for args, want in (
        ([str(bag), '--topics', '/nope'], "['/nope'] not in the bag"),
        ([str(bag), '--wait-for', '/nope'], '--wait-for /nope: not a replayed topic'),
        (  # checked without waiting too
            [str(bag), '--wait-for', '/nope', '--wait-subscribers', '0'],
            '--wait-for /nope: not a replayed topic',
        ),
        ([str(bag), '--wait-subscribers', '-1'], '--wait-subscribers -1 must be a finite number'),
        ([str(bag), '--delay', 'nan'], '--delay nan must be a finite number >= 0'),
        ([str(tmp_path / 'none')], 'argument BAG: bag'),
        ([''], "argument BAG is empty ('')"),  # the README's $(...) when it printed nothing
    ):
        r = subprocess.run(
            [sys.executable, '-m', 'depth3dseg_ros.bags.replay', *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and want in r.stderr, (args, r.stderr)
        assert 'waiting up to' not in r.stderr  # refused before any wait


def test_c38_replay_of_a_damaged_mcap_is_one_error_line(tmp_path, real_dir):
    """A closed MCAP whose second chunk fails its CRC: replay publishes up to it, then stops with
    one line naming the bag and what it published, exit 2 (bad input; before: a traceback)."""
    bag = write_bag_frames(tmp_path / 'rec', make_frames(real_dir, 30), storage='mcap')
    damage_mcap_chunk(next(bag.glob('*.mcap')), 1)
    r = subprocess.run(
        [sys.executable, '-m', 'depth3dseg_ros.bags.replay', str(bag), '--rate', '20'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert 'Traceback' not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if 'is damaged' in ln]
    assert str(bag) in line and 'Chunk checksum mismatch' in line and 'published before it' in line


def write_ros1_bag(path):
    from rosbags.rosbag1 import Writer as Writer1

    ts1 = get_typestore(Stores.ROS1_NOETIC)
    Img, Header, Time = (
        ts1.types[k]
        for k in ('sensor_msgs/msg/Image', 'std_msgs/msg/Header', 'builtin_interfaces/msg/Time')
    )
    with Writer1(path) as w:
        c = w.add_connection('/cam1/image_raw', 'sensor_msgs/msg/Image', typestore=ts1)
        for k in range(3):
            t = 7 * 10**9 + k * 20_000_000
            img = Img(
                header=Header(
                    seq=k, stamp=Time(sec=t // 10**9, nanosec=t % 10**9), frame_id='cam1'
                ),
                height=2,
                width=2,
                encoding='mono8',
                is_bigendian=0,
                step=2,
                data=np.array([k, k + 1, k + 2, k + 3], np.uint8),
            )
            w.write(c, t, ts1.serialize_ros1(img, 'sensor_msgs/msg/Image'))


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(120)
def test_replay_ros1_bag_converted_to_cdr_and_loop(tmp_path, ros):
    """A ROS 1 bag is republished as ROS 2 messages (ros1_to_cdr); --loop starts over at the
    end."""
    bag = tmp_path / 'r1.bag'
    write_ros1_bag(bag)
    node = rclpy.create_node('replay_listener_ros1')
    got = []
    node.create_subscription(
        Image,
        '/cam1/image_raw',
        got.append,
        QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'depth3dseg_ros.bags.replay',
            str(bag),
            '--loop',
            '--rate',
            '4',
            '--wait-subscribers',
            '20',
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and len(got) < 7 and proc.poll() is None:
            rclpy.spin_once(node, timeout_sec=0.05)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
        node.destroy_node()
    assert len(got) >= 7, out  # 3 frames, looped at least twice
    assert [bytes(m.data) for m in got[:4]] == [
        bytes([0, 1, 2, 3]),
        bytes([1, 2, 3, 4]),
        bytes([2, 3, 4, 5]),
        bytes([0, 1, 2, 3]),
    ]
    assert got[0].header.frame_id == 'cam1' and got[0].encoding == 'mono8'
    assert got[1].header.stamp.nanosec == 20_000_000 and got[1].header.stamp.sec == 7


def test_to_rclpy_copies_ros1_camera_info_upper_case_fields():
    from depth3dseg_ros.bags.rclpy_copy import to_rclpy

    ts1 = get_typestore(Stores.ROS1_NOETIC)
    Info, Header, Time, Roi = (
        ts1.types[k]
        for k in (
            'sensor_msgs/msg/CameraInfo',
            'std_msgs/msg/Header',
            'builtin_interfaces/msg/Time',
            'sensor_msgs/msg/RegionOfInterest',
        )
    )
    msg = Info(
        header=Header(seq=3, stamp=Time(sec=5, nanosec=6), frame_id='c'),
        height=480,
        width=640,
        distortion_model='plumb_bob',
        D=np.array([0.1, 0, 0, 0, 0]),
        K=np.arange(9.0),
        R=np.eye(3).ravel(),
        P=np.arange(12.0),
        binning_x=1,
        binning_y=2,
        roi=Roi(x_offset=1, y_offset=2, height=3, width=4, do_rectify=True),
    )
    raw = ts1.serialize_ros1(msg, 'sensor_msgs/msg/CameraInfo')
    out = to_rclpy(ts1.deserialize_ros1(raw, 'sensor_msgs/msg/CameraInfo'), CameraInfo)
    assert (
        isinstance(out, CameraInfo)
        and out.header.frame_id == 'c'
        and out.header.stamp.nanosec == 6
    )
    assert (
        list(out.k) == list(range(9))
        and list(out.p) == list(range(12))
        and list(out.d) == [0.1, 0, 0, 0, 0]
    )
    assert (out.binning_y, out.roi.width, out.roi.do_rectify) == (2, 4, True)


def readme_run_commands() -> tuple[str, str]:
    """The node and replay command lines of README.md "Run the node", exactly as written (comments
    cut)."""
    from nodeutil import REPO

    text = (REPO / 'README.md').read_text()
    block = text.split('## Run the node', 1)[1].split('```bash', 1)[1].split('```', 1)[0]
    lines = [
        ln.split('  #')[0].rstrip() for ln in block.strip().splitlines() if not ln.startswith('. ')
    ]
    joined = '\n'.join(lines).replace('\\\n', ' ')
    node = next(ln for ln in joined.splitlines() if ln.startswith('depth3dseg_node'))
    replay = next(ln for ln in joined.splitlines() if ln.startswith('depth3dseg-replay'))
    return ' '.join(node.split()), replay.strip()


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(300)
def test_readme_commands_node_first_then_replay_outputs_arrive(tmp_path, real_bag, ros):
    """The README's two commands as written: the node first, then ``depth3dseg-replay BAG --clock``
    (no --wait-subscribers): the replay waits for the node's subscription by default, so outputs
    arrive. Before, it published before discovery and the node received nothing."""
    import os
    import signal

    from nodeutil import REPO
    from depth3dseg_ros.procutil import popen_tied

    node_line, replay_line = readme_run_commands()
    assert '--wait-subscribers' not in replay_line and '--clock' in replay_line
    env = dict(os.environ, PATH=f'{Path(sys.executable).parent}:{os.environ["PATH"]}')
    h = rclpy.create_node('readme_harness')
    got = []
    h.create_subscription(
        Image,
        '/depth3dseg/labels/image',
        got.append,
        QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE),
    )
    node_log = open(tmp_path / 'node.log', 'w')
    node = popen_tied(
        ['bash', '-c', f'exec {node_line}'],
        cwd=REPO,
        env=env,
        stdout=node_log,
        stderr=subprocess.STDOUT,
    )
    replay = None
    try:
        end = time.monotonic() + 180
        while 'model ' not in (tmp_path / 'node.log').read_text() and time.monotonic() < end:
            assert node.poll() is None, (tmp_path / 'node.log').read_text()
            rclpy.spin_once(h, timeout_sec=0.1)
        replay = popen_tied(
            ['bash', '-c', replay_line],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        end = time.monotonic() + 120
        while replay.poll() is None and time.monotonic() < end:
            rclpy.spin_once(h, timeout_sec=0.05)
        quiet = time.monotonic() + 3.0
        while time.monotonic() < quiet:
            rclpy.spin_once(h, timeout_sec=0.05)
        out = replay.communicate(timeout=30)[0]
        assert replay.returncode == 0, out
        assert 'waiting up to 10 s for a subscriber' in out and 'no subscriber' not in out, out
        assert len(got) >= 3, (out, (tmp_path / 'node.log').read_text())
        assert got[0].header.frame_id != '' and got[0].encoding == 'mono8'
    finally:
        for proc in (replay, node):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
        node_log.close()
        h.destroy_node()
    assert node.returncode == 0, (tmp_path / 'node.log').read_text()


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(120)
def test_wait_for_holds_the_first_frame_until_that_topic_has_a_subscriber(tmp_path, ros):
    """--wait-for TOPIC: a subscriber on another replayed topic is not enough (the demo's recorder
    reads the image topic before the node subscribes its camera_info); without one on TOPIC by
    the deadline the replay says so and publishes anyway."""
    bag = tmp_path / 'bag'
    write_bag(bag)
    node = rclpy.create_node('replay_image_only')
    got = []
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Image, '/cam/image_raw', got.append, qos)
    code, out = _spin_until_replay_ends(
        node, [str(bag), '--wait-subscribers', '4', '--wait-for', '/cam/camera_info']
    )
    assert code == 0, out
    assert 'waiting up to 4 s for a subscriber on /cam/camera_info' in out
    assert 'no subscriber on /cam/camera_info after 4 s; publishing anyway' in out, out
    assert f'/cam/image_raw={N}' in out
