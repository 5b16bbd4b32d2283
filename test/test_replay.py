"""depth3dseg-replay: a bag's camera topics republished through rclpy (separate process), with /clock."""
import subprocess
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

from depth3dseg_ros.bags.replay import CAMERA_TYPES, ros_msg_class, select_topics

TS = get_typestore(Stores.ROS2_KILTED)
N = 6


def _header(t_ns):
    Time = TS.types['builtin_interfaces/msg/Time']
    Header = TS.types['std_msgs/msg/Header']
    return Header(stamp=Time(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id='cam_optical')


def write_bag(path):
    Img, Info, Str = (TS.types[k] for k in ('sensor_msgs/msg/Image', 'sensor_msgs/msg/CameraInfo',
                                          'std_msgs/msg/String'))
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        ci = w.add_connection('/cam/image_raw', 'sensor_msgs/msg/Image', typestore=TS)
        cc = w.add_connection('/cam/camera_info', 'sensor_msgs/msg/CameraInfo', typestore=TS)
        cs = w.add_connection('/chatter', 'std_msgs/msg/String', typestore=TS)
        for k in range(N):
            t = 5 * 10**9 + k * 50_000_000
            data = np.full(4 * 3 * 3, k, np.uint8)
            img = Img(header=_header(t), height=3, width=4, encoding='rgb8', is_bigendian=0, step=12, data=data)
            info = Info(header=_header(t), height=3, width=4, distortion_model='plumb_bob',
                        d=np.zeros(5), k=np.array([2.0, 0, 1.5, 0, 2.0, 1.0, 0, 0, 1]), r=np.eye(3).ravel(),
                        p=np.zeros(12), binning_x=0, binning_y=0,
                        roi=TS.types['sensor_msgs/msg/RegionOfInterest'](x_offset=0, y_offset=0, height=0,
                                                                         width=0, do_rectify=False))
            w.write(ci, t, TS.serialize_cdr(img, 'sensor_msgs/msg/Image'))
            w.write(cc, t + 1000, TS.serialize_cdr(info, 'sensor_msgs/msg/CameraInfo'))
            w.write(cs, t, TS.serialize_cdr(Str(data='x'), 'std_msgs/msg/String'))


def test_select_topics_and_classes():
    topics = {'/a': 'sensor_msgs/msg/Image', '/b': 'std_msgs/msg/String', '/c': 'sensor_msgs/msg/CameraInfo'}
    assert select_topics(topics, None) == {'/a': topics['/a'], '/c': topics['/c']}
    assert select_topics(topics, ['/b']) == {'/b': 'std_msgs/msg/String'}
    with pytest.raises(ValueError, match=r"\['/zz'\] not in the bag"):
        select_topics(topics, ['/zz'])
    assert ros_msg_class('sensor_msgs/msg/Image') is Image
    with pytest.raises(ValueError, match='not installed'):
        ros_msg_class('my_pkg/msg/Detections')
    assert 'sensor_msgs/msg/CompressedImage' in CAMERA_TYPES


@pytest.mark.timeout(120)
def test_replay_publishes_every_camera_message_with_clock(tmp_path):
    bag = tmp_path / 'bag'
    write_bag(bag)
    rclpy.init()
    node = rclpy.create_node('replay_listener')
    got = {'img': [], 'info': [], 'clock': [], 'chatter': 0}
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Image, '/cam/image_raw', lambda m: got['img'].append(m), qos)
    node.create_subscription(CameraInfo, '/cam/camera_info', lambda m: got['info'].append(m), qos)
    node.create_subscription(Clock, '/clock', lambda m: got['clock'].append(m), 100)
    from std_msgs.msg import String
    node.create_subscription(String, '/chatter', lambda m: got.__setitem__('chatter', got['chatter'] + 1), qos)
    proc = subprocess.Popen([sys.executable, '-m', 'depth3dseg_ros.bags.replay', str(bag), '--rate', '2',
                             '--clock', '--wait-subscribers', '20'],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and (len(got['img']) < N or len(got['info']) < N or proc.poll() is None):
            rclpy.spin_once(node, timeout_sec=0.05)
        out = proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        node.destroy_node()
        rclpy.try_shutdown()
    assert proc.returncode == 0, out
    assert f'/cam/image_raw={N}' in out and f'/cam/camera_info={N}' in out
    assert got['chatter'] == 0                       # not a camera topic: not replayed by default
    assert [m.header.stamp.nanosec for m in got['img']] == [k * 50_000_000 for k in range(N)]
    for k, m in enumerate(got['img']):
        assert (m.width, m.height, m.encoding, m.step) == (4, 3, 'rgb8', 12)
        assert bytes(m.data) == bytes([k]) * 36 and m.header.frame_id == 'cam_optical'
    assert list(got['info'][0].k) == [2.0, 0, 1.5, 0, 2.0, 1.0, 0, 0, 1]
    clocks = [c.clock.sec * 10**9 + c.clock.nanosec for c in got['clock']]
    assert clocks == sorted(clocks)                 # bag time, monotonic
    assert clocks[0] >= 5 * 10**9 and clocks[-1] >= 5 * 10**9 + (N - 1) * 50_000_000


def test_replay_bad_topic_and_missing_bag_exit_2(tmp_path):
    bag = tmp_path / 'bag'
    write_bag(bag)
    r = subprocess.run([sys.executable, '-m', 'depth3dseg_ros.bags.replay', str(bag), '--topics', '/nope'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "['/nope'] not in the bag" in r.stderr
    r = subprocess.run([sys.executable, '-m', 'depth3dseg_ros.bags.replay', str(tmp_path / 'none')],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and 'not found' in r.stderr
