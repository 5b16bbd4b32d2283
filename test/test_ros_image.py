"""ros.image: sensor_msgs/Image <-> ndarray (C01, C03, C04, C05), rclpy and rosbags round trips,
properties."""

import types

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import Image

from depth3dseg_ros.ros.image import (
    ENCODINGS,
    EmptyImageError,
    array_to_rgb,
    bytes_per_pixel,
    check_same_size,
    cv2_to_imgmsg,
    describe,
    encoding_info,
    imgmsg_to_cv2,
    to_rgb,
)

TS = get_typestore(Stores.ROS2_KILTED)
RB_IMAGE = TS.types['sensor_msgs/msg/Image']


def fake(encoding, width, height, step, data, is_bigendian=0):
    """A duck-typed message (plain attributes), as a third kind of caller."""
    return types.SimpleNamespace(
        encoding=encoding,
        width=width,
        height=height,
        step=step,
        data=bytes(data),
        is_bigendian=is_bigendian,
    )


# ---------------------------------------------------------------- C01 row padding
def test_c01_row_padding_16uc1():
    data = bytes.fromhex('0100020003 00FFFF 0400050006 00FFFF'.replace(' ', ''))
    assert len(data) == 16
    arr = imgmsg_to_cv2(fake('16UC1', 3, 2, 8, data))
    assert arr.dtype == np.uint16 and arr.shape == (2, 3)
    assert arr.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_c01_row_padding_rgb8():
    rows = [bytes(range(1, 10)) + b'\xee' * 3, bytes(range(11, 20)) + b'\xee' * 3]
    arr = imgmsg_to_cv2(fake('rgb8', 3, 2, 12, b''.join(rows)))
    assert arr.shape == (2, 3, 3)
    assert arr.reshape(2, 9).tolist() == [list(range(1, 10)), list(range(11, 20))]
    assert 0xEE not in arr
    assert to_rgb(fake('rgb8', 3, 2, 12, b''.join(rows))).flags.c_contiguous


# ---------------------------------------------------------------- C03 dtype from the encoding
def test_c03_mono16_is_uint16():
    arr = imgmsg_to_cv2(fake('mono16', 2, 1, 4, bytes.fromhex('E803D007')))
    assert arr.dtype == np.uint16 and arr.tolist() == [[1000, 2000]]
    assert imgmsg_to_cv2(fake('16UC1', 2, 1, 4, bytes.fromhex('E803D007'))).tolist() == [
        [1000, 2000]
    ]


@pytest.mark.parametrize(
    'enc,dtype,ch',
    [
        ('mono8', np.uint8, 1),
        ('8UC1', np.uint8, 1),
        ('mono16', np.uint16, 1),
        ('16UC1', np.uint16, 1),
        ('32FC1', np.float32, 1),
        ('rgb8', np.uint8, 3),
        ('bgr8', np.uint8, 3),
        ('8UC3', np.uint8, 3),
        ('rgba8', np.uint8, 4),
        ('bgra8', np.uint8, 4),
        ('16SC1', np.int16, 1),
        ('32SC1', np.int32, 1),
        ('64FC1', np.float64, 1),
        ('rgb16', np.uint16, 3),
        ('8SC2', np.int8, 2),
    ],
)
def test_c03_encoding_table(enc, dtype, ch):
    assert encoding_info(enc) == (np.dtype(dtype), ch)
    assert bytes_per_pixel(enc) == np.dtype(dtype).itemsize * ch


@pytest.mark.parametrize('enc', ['yuv422', 'bayer_rggb8', '', '16UC5', 'RGB8'])
def test_c03_unknown_encoding_is_named(enc):
    with pytest.raises(ValueError, match=repr(enc).replace('[', r'\[')):
        imgmsg_to_cv2(fake(enc, 1, 1, 1, b'\0'))


# ---------------------------------------------------------------- C04 size checks, empty images
def test_c04a_len_data_mismatch():
    with pytest.raises(ValueError) as err:
        imgmsg_to_cv2(fake('rgb8', 640, 480, 1920, bytes(110592)))
    assert 'len(data)=110592' in str(err.value) and 'height*step=921600' in str(err.value)
    assert not isinstance(err.value, EmptyImageError)


def test_c04b_step_smaller_than_row():
    with pytest.raises(ValueError) as err:
        imgmsg_to_cv2(fake('16UC1', 1280, 720, 1280, bytes(1280 * 720)))
    assert 'step=1280' in str(err.value) and '2560' in str(err.value)
    assert not isinstance(err.value, EmptyImageError)


def test_c04c_zero_size_is_reported_distinctly():
    with pytest.raises(EmptyImageError, match='width=0 height=0'):
        imgmsg_to_cv2(fake('rgb8', 0, 0, 0, b''))
    with pytest.raises(EmptyImageError):
        to_rgb(Image(encoding='rgb8'))  # a default rclpy Image is 0x0
    assert issubclass(EmptyImageError, ValueError)


# --------------------------------------------------------- C05 alpha and mono to RGB network input
def test_c05_four_channel_and_mono_to_rgb():
    data = bytes.fromhex('0A141EFF28323C00')
    for enc, want in [
        ('bgra8', [[[30, 20, 10], [60, 50, 40]]]),
        ('rgba8', [[[10, 20, 30], [40, 50, 60]]]),
    ]:
        got = to_rgb(fake(enc, 2, 1, 8, data))
        assert got.dtype == np.uint8 and got.shape == (1, 2, 3) and got.tolist() == want
    mono = to_rgb(fake('mono8', 2, 1, 2, bytes.fromhex('0709')))
    assert mono.shape == (1, 2, 3) and mono.tolist() == [[[7, 7, 7], [9, 9, 9]]]
    # passthrough keeps 4 channels (the fault a network then meets)
    assert imgmsg_to_cv2(fake('bgra8', 2, 1, 8, data)).shape == (1, 2, 4)


def test_to_rgb_other_layouts():
    bgr = np.array([[[1, 2, 3]]], np.uint8)
    assert to_rgb(cv2_to_imgmsg(bgr, 'bgr8')).tolist() == [[[3, 2, 1]]]
    assert to_rgb(cv2_to_imgmsg(bgr, '8UC3')).tolist() == [
        [[3, 2, 1]]
    ]  # OpenCV order, as cv_bridge
    assert to_rgb(cv2_to_imgmsg(np.array([[0x1234]], np.uint16), 'mono16')).tolist() == [
        [[0x12] * 3]
    ]
    assert to_rgb(
        cv2_to_imgmsg(np.array([[[0x1100, 0x2200, 0x3300]]], np.uint16), 'rgb16')
    ).tolist() == [[[0x11, 0x22, 0x33]]]
    assert array_to_rgb(np.array([[[5, 6, 7, 0]]], np.uint8), 'bgra8').tolist() == [[[7, 6, 5]]]
    for enc in ('32FC1', '16SC1'):
        with pytest.raises(ValueError, match=enc):
            to_rgb(fake(enc, 1, 1, 4, bytes(4)))


def test_desired_encoding_conversions():
    rgb = np.array([[[255, 0, 0], [0, 255, 0]]], np.uint8)
    msg = cv2_to_imgmsg(rgb, 'rgb8')
    assert imgmsg_to_cv2(msg, 'bgr8').tolist() == [[[0, 0, 255], [0, 255, 0]]]
    assert imgmsg_to_cv2(msg, 'rgba8')[..., 3].tolist() == [[255, 255]]
    gray = imgmsg_to_cv2(msg, 'mono8')
    assert gray.tolist() == cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).tolist()
    assert imgmsg_to_cv2(msg, 'mono16').dtype == np.uint16
    assert imgmsg_to_cv2(
        cv2_to_imgmsg(np.array([[7]], np.uint16), '16UC1'), 'mono16'
    ).tolist() == [[7]]
    with pytest.raises(ValueError, match="'32FC1'.*'rgb8'"):
        imgmsg_to_cv2(cv2_to_imgmsg(np.zeros((1, 1), np.float32), '32FC1'), 'rgb8')


# ----------------------------------------------------- C20 sizes, encodings and steps in the error
def test_c20_message_size_mismatch_names_sizes_encodings_steps():
    depth = cv2_to_imgmsg(np.zeros((480, 640), np.uint16), '16UC1')
    rgb = cv2_to_imgmsg(np.zeros((720, 1280, 3), np.uint8), 'rgb8')
    with pytest.raises(ValueError) as err:
        check_same_size(depth=depth, rgb=rgb)
    text = str(err.value)
    assert '640x480 16UC1 step=1280' in text and '1280x720 rgb8 step=3840' in text
    assert check_same_size(
        depth=depth, labels=cv2_to_imgmsg(np.zeros((480, 640), np.uint8), 'mono8')
    ) == (480, 640)


# --------------------------------------------------------- is_bigendian, real big-endian PGM depth
def test_bigendian_real_pgm_depth(real_dir):
    """slambook ch5 depth is a standard big-endian 16-bit PGM (real Kinect-class frame, mm)."""
    path = real_dir / 'slambook_rgbd' / 'ch5' / 'joinMap' / 'depth' / '1.pgm'
    raw = path.read_bytes()
    want = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    h, w = want.shape
    payload = raw[len(raw) - h * w * 2 :]
    arr = imgmsg_to_cv2(fake('16UC1', w, h, w * 2, payload, is_bigendian=1))
    assert arr.dtype == np.uint16 and arr.dtype.isnative
    assert np.array_equal(arr, want) and want.max() > 255
    swapped = imgmsg_to_cv2(fake('16UC1', w, h, w * 2, payload, is_bigendian=0))
    assert not np.array_equal(swapped, want)


# --------------------------------------------------------------- ndarray -> Image for every output
@pytest.mark.parametrize(
    'arr,enc,step',
    [
        (np.array([[0, 5], [13, 1]], np.uint8), 'mono8', 2),
        (np.array([[0, 300], [65535, 1]], np.uint16), '16UC1', 4),
        (np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3), 'rgb8', 9),
        (np.array([[1.5, np.nan, 2.25]], np.float32), '32FC1', 12),
        (np.array([[1500, 0, 2250]], np.uint16), '16UC1', 6),
    ],
)
def test_outputs_rclpy_round_trip(arr, enc, step):
    hdr = Image().header
    hdr.frame_id, hdr.stamp.sec, hdr.stamp.nanosec = 'cam_optical', 12, 345
    msg = cv2_to_imgmsg(arr, enc, header=hdr)
    assert (
        isinstance(msg, Image)
        and msg.step == step
        and msg.encoding == enc
        and msg.is_bigendian == 0
    )
    back = deserialize_message(serialize_message(msg), Image)
    got = imgmsg_to_cv2(back)
    assert got.dtype == arr.dtype and np.array_equal(got, arr, equal_nan=arr.dtype.kind == 'f')
    assert (back.header.frame_id, back.header.stamp.sec, back.header.stamp.nanosec) == (
        'cam_optical',
        12,
        345,
    )


def test_cv2_to_imgmsg_rejects_mismatched_arrays():
    with pytest.raises(ValueError, match='rgb8'):
        cv2_to_imgmsg(np.zeros((2, 2), np.uint8), 'rgb8')
    with pytest.raises(ValueError, match='float64'):
        cv2_to_imgmsg(np.zeros((2, 2), np.float64), '32FC1')
    sub = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)[:, ::2]  # non-contiguous input is fine
    assert np.array_equal(imgmsg_to_cv2(cv2_to_imgmsg(sub, 'rgb8')), sub)


def test_padded_rclpy_image_serialized_round_trip():
    arr = np.arange(3 * 5, dtype=np.uint16).reshape(3, 5) * 1000
    msg = Image(height=3, width=5, encoding='16UC1', step=16)
    padded = np.zeros((3, 8), np.uint16)
    padded[:, :5] = arr
    msg.data = padded.tobytes()
    back = deserialize_message(serialize_message(msg), Image)
    assert np.array_equal(imgmsg_to_cv2(back), arr)
    assert describe(back) == '5x3 16UC1 step=16 len(data)=48'


# ---------------------------------------------------------------- rosbags messages
def test_rosbags_deserialized_image_decodes():
    rgb = np.random.default_rng(1).integers(0, 255, (4, 5, 3), dtype=np.uint8)
    msg = cv2_to_imgmsg(rgb, 'bgr8', msg_cls=RB_IMAGE)
    assert isinstance(msg, RB_IMAGE) and isinstance(msg.data, np.ndarray)
    raw = TS.serialize_cdr(msg, 'sensor_msgs/msg/Image')
    back = TS.deserialize_cdr(raw, 'sensor_msgs/msg/Image')
    assert np.array_equal(imgmsg_to_cv2(back), rgb)
    assert np.array_equal(to_rgb(back), rgb[..., ::-1])
    # rosbags bytes are the same CDR rclpy reads
    assert np.array_equal(imgmsg_to_cv2(deserialize_message(bytes(raw), Image)), rgb)


def test_rosbags_padded_depth_built_by_rosbags():
    hdr = TS.types['std_msgs/msg/Header'](
        stamp=TS.types['builtin_interfaces/msg/Time'](sec=1, nanosec=2), frame_id='f'
    )
    data = np.frombuffer(
        bytes.fromhex('0100020003 00FFFF 0400050006 00FFFF'.replace(' ', '')), np.uint8
    )
    msg = RB_IMAGE(
        header=hdr, height=2, width=3, encoding='16UC1', is_bigendian=0, step=8, data=data.copy()
    )
    back = TS.deserialize_cdr(TS.serialize_cdr(msg, RB_IMAGE.__msgtype__), RB_IMAGE.__msgtype__)
    assert imgmsg_to_cv2(back).tolist() == [[1, 2, 3], [4, 5, 6]]


# ---------------------------------------------------------------- property-based round trips
_ENCS = [
    'rgb8',
    'bgr8',
    'rgba8',
    'bgra8',
    'mono8',
    'mono16',
    '8UC1',
    '8UC3',
    '16UC1',
    '32FC1',
    '16SC1',
    '32SC1',
    '64FC1',
]


@settings(max_examples=150, deadline=None)
@given(
    enc=st.sampled_from(_ENCS),
    h=st.integers(1, 6),
    w=st.integers(1, 7),
    pad=st.integers(0, 9),
    big=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_image_round_trip(enc, h, w, pad, big, seed):
    dt, ch = encoding_info(enc)
    rng = np.random.default_rng(seed)
    shape = (h, w) if ch == 1 else (h, w, ch)
    if dt.kind == 'f':
        arr = rng.normal(size=shape).astype(dt)
    else:
        info = np.iinfo(dt)
        arr = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
    row = (
        arr.reshape(h, -1)
        .astype(dt.newbyteorder('>' if big else '<'))
        .view(np.uint8)
        .reshape(h, -1)
    )
    data = np.concatenate([row, np.full((h, pad), 0xAB, np.uint8)], axis=1).tobytes()
    msg = fake(enc, w, h, w * bytes_per_pixel(enc) + pad, data, is_bigendian=int(big))
    got = imgmsg_to_cv2(msg)
    assert got.dtype == dt and got.shape == shape and np.array_equal(got, arr)
    out = cv2_to_imgmsg(got, enc)
    assert out.step == w * bytes_per_pixel(enc)
    assert np.array_equal(imgmsg_to_cv2(out), arr)


def test_encoding_table_covers_required_set():
    for enc in ['rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8', 'mono16']:
        assert enc in ENCODINGS
