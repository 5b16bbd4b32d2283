"""ros.compressed: jpeg/png/16-bit PNG and compressedDepth decoding and encoding (C07), rclpy and
rosbags."""

import struct
import types

import cv2
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import CompressedImage

from depth3dseg_ros.core.depth import depth_to_meters
from depth3dseg_ros.ros.compressed import (
    PNG_SIGNATURE,
    compressed_to_cv2,
    compressed_to_rgb,
    decode_compressed,
    decode_compressed_depth,
    encode_compressed,
    encode_compressed_depth,
    parse_format,
)
from depth3dseg_ros.ros.image import EmptyImageError

TS = get_typestore(Stores.ROS2_KILTED)
RB_COMPRESSED = TS.types['sensor_msgs/msg/CompressedImage']


def fake(fmt, data):
    return types.SimpleNamespace(format=fmt, data=bytes(data))


def png16(values):
    ok, buf = cv2.imencode('.png', np.asarray(values, np.uint16))
    assert ok
    return buf.tobytes()


# ---------------------------------------------------------------- C07 compressedDepth
def test_c07_old_16uc1_format_string():
    payload = struct.pack('<iff', 0, 0.0, 0.0) + png16([[1500, 0, 65535]])
    for fmt in ['16UC1; compressedDepth', '16UC1; compressedDepth png', '16UC1;compressedDepth']:
        got = decode_compressed_depth(fake(fmt, payload))
        assert got.dtype == np.uint16 and got.tolist() == [[1500, 0, 65535]]
    arr, enc = decode_compressed(fake('16UC1; compressedDepth', payload))
    assert enc == '16UC1' and depth_to_meters(arr, enc)[0, 0] == pytest.approx(1.5)


def test_c07_32fc1_dequantised_as_a_over_v_minus_b():
    A, B = 100.0 * 101.0, 1.0 - 100.0 * 101.0 / 10.0
    assert (A, B) == (10100.0, -1009.0)
    payload = struct.pack('<iff', 0, A, B) + png16([[9091, 4041, 0]])
    got = decode_compressed_depth(fake('32FC1; compressedDepth png', payload))
    assert got.dtype == np.float32
    assert got[0, 0] == pytest.approx(1.0, abs=1e-6) and got[0, 1] == pytest.approx(2.0, abs=1e-6)
    assert np.isnan(got[0, 2])
    assert (
        abs(got[0, 0] - 1.2497) > 0.2 and abs(got[0, 1] - 3.331) > 1.0
    )  # the +B mistake's values


def test_c07_png_found_by_signature_not_offset():
    png = png16([[9091, 4041]])
    shifted = b'\x00' * 4 + struct.pack('<iff', 0, 10100.0, -1009.0) + png  # PNG at byte 16
    got = decode_compressed_depth(fake('32FC1; compressedDepth', shifted))
    assert got[0].tolist() == pytest.approx([1.0, 2.0])
    no_header = png16([[7, 8]])  # 16UC1 without header bytes still decodes
    assert decode_compressed_depth(fake('16UC1; compressedDepth', no_header)).tolist() == [[7, 8]]
    assert shifted.find(PNG_SIGNATURE) == 16


def test_c07_rvl_and_bad_payloads_are_clear_errors():
    with pytest.raises(ValueError, match="'rvl' is not supported"):
        decode_compressed_depth(fake('16UC1; compressedDepth rvl', b'\x01' * 40))
    with pytest.raises(ValueError, match='no PNG signature'):
        decode_compressed_depth(fake('16UC1; compressedDepth', b'\x00' * 40))
    with pytest.raises(ValueError, match='12-byte header'):
        decode_compressed_depth(fake('32FC1; compressedDepth', png16([[1]])))
    with pytest.raises(ValueError, match="'8UC1'"):
        decode_compressed_depth(fake('8UC1; compressedDepth', png16([[1]])))
    with pytest.raises(ValueError, match='not compressedDepth'):
        decode_compressed_depth(fake('png', png16([[1]])))
    with pytest.raises(EmptyImageError):
        decode_compressed_depth(fake('16UC1; compressedDepth', b''))
    rgb_png = cv2.imencode('.png', np.zeros((2, 2, 3), np.uint8))[1].tobytes()
    with pytest.raises(ValueError, match='16-bit 1-channel'):
        decode_compressed_depth(fake('16UC1; compressedDepth', b'\0' * 12 + rgb_png))


def test_parse_format_is_lenient():
    assert parse_format('16UC1; compressedDepth') == {
        'encoding': '16UC1',
        'depth': True,
        'codec': None,
    }
    assert parse_format(' 32FC1 ;compressedDepth  png ') == {
        'encoding': '32FC1',
        'depth': True,
        'codec': 'png',
    }
    assert parse_format('jpeg') == {'encoding': None, 'depth': False, 'codec': 'jpeg'}
    assert parse_format('rgb8; jpeg compressed bgr8')['encoding'] == 'rgb8'
    assert parse_format('')['codec'] is None


def test_encode_compressed_depth_round_trips():
    mm = np.array([[0, 1, 1000, 65535]], np.uint16)
    msg = encode_compressed_depth(mm, '16UC1')
    assert msg.format == '16UC1; compressedDepth png' and isinstance(msg, CompressedImage)
    assert bytes(msg.data[12:20]) == PNG_SIGNATURE
    assert np.array_equal(decode_compressed_depth(msg), mm)
    old = encode_compressed_depth(mm, '16UC1', fmt_suffix='')
    assert old.format == '16UC1; compressedDepth' and np.array_equal(
        decode_compressed_depth(old), mm
    )
    d = np.array([[0.3, 1.0, 2.0, 9.5, 12.0, np.nan, 0.0, -1.0]], np.float32)
    got = decode_compressed_depth(encode_compressed_depth(d, '32FC1'))
    assert np.allclose(got[0, :4], d[0, :4], rtol=2e-3)  # quantisation error grows ~ d^2 / A
    assert np.isnan(got[0, 4:]).all()  # beyond depth_max, NaN, 0, negative -> no data
    with pytest.raises(ValueError, match='16UC1 and 32FC1'):
        encode_compressed_depth(mm, 'mono8')


# ---------------------------------------------------------------- jpeg / png colour, 16-bit png
def test_png_colour_exact_and_rgb_order():
    rgb = np.random.default_rng(2).integers(0, 255, (6, 7, 3), dtype=np.uint8)
    msg = encode_compressed(rgb, 'rgb8', 'png')
    assert msg.format == 'rgb8; png compressed bgr8'
    assert np.array_equal(compressed_to_rgb(msg), rgb)
    arr, enc = decode_compressed(msg)
    assert enc == 'rgb8' and np.array_equal(arr, rgb)
    plain = fake(
        'png', cv2.imencode('.png', rgb[..., ::-1])[1]
    )  # a bag writer's plain "png" (BGR file)
    assert np.array_equal(compressed_to_rgb(plain), rgb)
    assert np.array_equal(compressed_to_cv2(plain), rgb[..., ::-1])
    assert np.array_equal(compressed_to_cv2(plain, 'rgb8'), rgb)


def test_jpeg_colour_close(real_dir):
    bgr = cv2.imread(str(real_dir / 'slambook_rgbd' / 'ch7' / '1.png'), cv2.IMREAD_COLOR)
    rgb = bgr[..., ::-1]
    msg = encode_compressed(rgb, 'rgb8', 'jpeg', jpeg_quality=95)
    assert msg.format == 'rgb8; jpeg compressed bgr8'
    got = compressed_to_rgb(msg)
    err = np.abs(got.astype(int) - rgb).mean()
    swapped = np.abs(got.astype(int) - bgr).mean()  # R and B exchanged
    assert got.shape == rgb.shape and err < 6.0 and swapped > 3 * err
    jpeg_plain = fake('jpeg', cv2.imencode('.jpg', bgr)[1])
    assert np.abs(compressed_to_rgb(jpeg_plain).astype(int) - rgb).mean() < 6.0


def test_png_rgba_and_mono():
    bgra = np.array([[[1, 2, 3, 0], [4, 5, 6, 255]]], np.uint8)
    assert compressed_to_rgb(fake('png', cv2.imencode('.png', bgra)[1])).tolist() == [
        [[3, 2, 1], [6, 5, 4]]
    ]
    mono = np.array([[7, 9]], np.uint8)
    arr, enc = decode_compressed(encode_compressed(mono, 'mono8', 'png'))
    assert enc == 'mono8' and arr.tolist() == [[7, 9]]


def test_16bit_png_kept_via_imread_unchanged(real_dir):
    """A real TUM depth PNG (uint16, /5000) as a plain 'png' CompressedImage and as 16UC1
    encode."""
    depth = cv2.imread(
        str(real_dir / 'slambook_rgbd' / 'ch7' / '1_depth.png'), cv2.IMREAD_UNCHANGED
    )
    assert depth.dtype == np.uint16 and depth.max() > 255
    arr, enc = decode_compressed(fake('16UC1; png', cv2.imencode('.png', depth)[1]))
    assert enc == '16UC1' and arr.dtype == np.uint16 and np.array_equal(arr, depth)
    msg = encode_compressed(depth, 'mono16', 'png')
    arr, enc = decode_compressed(msg)
    assert enc == 'mono16' and np.array_equal(arr, depth)
    assert np.array_equal(decode_compressed_depth(encode_compressed_depth(depth, '16UC1')), depth)
    with pytest.raises(ValueError, match='jpeg'):
        encode_compressed(depth, 'mono16', 'jpeg')


def test_undecodable_payload_names_format():
    with pytest.raises(ValueError, match="'jpeg'\\) len\\(data\\)=5"):
        decode_compressed(fake('jpeg', b'hello'))
    with pytest.raises(EmptyImageError):
        decode_compressed(CompressedImage(format='jpeg'))


# ---------------------------------------------------------------- rclpy and rosbags round trips
def test_rclpy_serialized_round_trip():
    hdr = CompressedImage().header
    hdr.frame_id = 'cam'
    d = np.array([[1.0, 2.0], [np.nan, 4.5]], np.float32)
    msg = encode_compressed_depth(d, '32FC1', header=hdr)
    back = deserialize_message(serialize_message(msg), CompressedImage)
    assert back.header.frame_id == 'cam' and back.format == '32FC1; compressedDepth png'
    got = decode_compressed_depth(back)
    assert np.allclose(got, d, rtol=2e-3, equal_nan=True)
    rgb = np.arange(30, dtype=np.uint8).reshape(2, 5, 3)
    back = deserialize_message(serialize_message(encode_compressed(rgb, 'rgb8')), CompressedImage)
    assert np.array_equal(compressed_to_rgb(back), rgb)


def test_rosbags_deserialized_round_trip():
    mm = np.array([[0, 1234], [4321, 65535]], np.uint16)
    msg = encode_compressed_depth(mm, '16UC1', msg_cls=RB_COMPRESSED)
    assert isinstance(msg, RB_COMPRESSED) and isinstance(msg.data, np.ndarray)
    t = RB_COMPRESSED.__msgtype__
    back = TS.deserialize_cdr(TS.serialize_cdr(msg, t), t)
    assert np.array_equal(decode_compressed_depth(back), mm)
    rgb = np.arange(30, dtype=np.uint8).reshape(2, 5, 3)
    back = TS.deserialize_cdr(
        TS.serialize_cdr(encode_compressed(rgb, 'rgb8', msg_cls=RB_COMPRESSED), t), t
    )
    assert np.array_equal(compressed_to_rgb(back), rgb)
    # rclpy reads the same bytes
    assert np.array_equal(
        compressed_to_rgb(deserialize_message(bytes(TS.serialize_cdr(back, t)), CompressedImage)),
        rgb,
    )
