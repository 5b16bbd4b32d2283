"""ros/compressed_out.py: the node's compressed outputs (issue 14) decoded back, round trip per
format; the compressedDepth layout byte for byte (compressed_depth_image_transport codec.cpp)."""

import struct

import cv2
import numpy as np
import pytest
from std_msgs.msg import Header

from depth3dseg_ros.ros.compressed import decode_compressed, decode_compressed_depth
from depth3dseg_ros.ros.compressed_out import (
    CONFIG_HEADER,
    PNG_SIGNATURE,
    depth_compressed_depth,
    encode_compressed,
    encode_compressed_depth,
    inverse_depth_params,
    labels_png,
    overlay_jpeg,
    quantize_inverse_depth,
)

HDR = Header(frame_id='cam_optical')


def test_labels_png_is_lossless_mono8_and_16uc1():
    rng = np.random.default_rng(0)
    lab8 = rng.integers(0, 14, (48, 64), dtype=np.uint8)
    msg = labels_png(lab8, HDR)
    assert msg.format == 'mono8; png compressed mono8' and msg.header.frame_id == 'cam_optical'
    arr, enc = decode_compressed(msg)
    assert enc == 'mono8' and np.array_equal(arr, lab8)
    # independently of our decoder: the payload is a plain PNG
    assert bytes(msg.data[:8]) == PNG_SIGNATURE
    assert np.array_equal(cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), -1), lab8)
    lab16 = rng.integers(0, 300, (5, 7)).astype(np.uint16)
    arr, enc = decode_compressed(labels_png(lab16))
    assert enc == '16UC1' and np.array_equal(arr, lab16)
    for bad in (lab8.astype(np.int32), np.zeros((2, 2, 3), np.uint8)):
        with pytest.raises(ValueError, match='must be H×W uint8/uint16'):
            labels_png(bad)
    with pytest.raises(ValueError, match='png_level=10 must be in 0..9'):
        labels_png(lab8, png_level=10)


def test_overlay_jpeg_round_trips_rgb_order_within_jpeg_error():
    yy, xx = np.mgrid[0:48, 0:64]
    rgb = np.stack([xx * 4, yy * 5, np.full_like(xx, 200)], -1).astype(np.uint8)
    msg = overlay_jpeg(rgb, HDR, quality=90)
    assert msg.format == 'rgb8; jpeg compressed bgr8'
    assert bytes(msg.data[:2]) == b'\xff\xd8'
    arr, enc = decode_compressed(msg)
    assert enc == 'rgb8' and arr.shape == rgb.shape
    err = np.abs(arr.astype(int) - rgb.astype(int))
    assert err.mean() < 3 and err[..., 2].mean() < 3  # blue stays blue: no R/B swap
    small = overlay_jpeg(rgb, quality=10)
    assert len(small.data) < len(msg.data)
    for q in (0, 101, True):
        with pytest.raises(ValueError, match='jpeg_quality'):
            overlay_jpeg(rgb, quality=q)


def test_compressed_depth_16uc1_header_then_png_values_unchanged():
    mm = np.array([[0, 1, 1000, 65535], [500, 0, 9999, 42]], np.uint16)
    msg = depth_compressed_depth(mm, '16UC1', HDR)
    assert msg.format == '16UC1; compressedDepth png'
    raw = bytes(msg.data)
    # codec.cpp: a zero-initialised ConfigHeader (format INV_DEPTH = 0, A = B = 0) before the PNG
    assert CONFIG_HEADER.size == 12 and raw[:12] == struct.pack('<iff', 0, 0.0, 0.0)
    assert raw[12:20] == PNG_SIGNATURE
    assert np.array_equal(cv2.imdecode(np.frombuffer(raw[12:], np.uint8), -1), mm)
    assert np.array_equal(decode_compressed_depth(msg), mm)


def test_compressed_depth_32fc1_inverse_depth_within_quantisation_tolerance():
    qa, qb = inverse_depth_params(10.0, 100.0)
    assert (qa, qb) == (10100.0, -1009.0)  # the transport's defaults
    d = np.linspace(0.2, 9.99, 200, dtype=np.float32).reshape(10, 20)
    d[0, :5] = [np.nan, 0.0, -1.0, 10.0, 25.0]  # no data, and >= depth_max
    msg = depth_compressed_depth(d, '32FC1', HDR, depth_max=10.0)
    assert msg.format == '32FC1; compressedDepth png'
    fmt, a, b = struct.unpack('<iff', bytes(msg.data[:12]))
    assert (fmt, a, b) == (0, qa, qb)
    got = decode_compressed_depth(msg)
    assert got.dtype == np.float32 and np.isnan(got[0, :5]).all()
    ok = np.isfinite(d) & (d > 0) & (d < 10.0)
    tol = d[ok].astype(np.float64) ** 2 / (2 * qa) * 1.01 + 1e-5  # half a step + float32
    assert (np.abs(got[ok] - d[ok]) <= tol).all()
    assert np.abs(got[ok] - d[ok]).max() < 5.5e-3  # worst case near 10 m: ~5 mm
    v, _, _ = quantize_inverse_depth(d)
    assert v.dtype == np.uint16 and (v[ok] >= 1).all() and (v[~ok] == 0).all()


def test_compressed_depth_depth_max_follows_the_parameter():
    d = np.full((2, 3), 4.0, np.float32)
    assert np.isnan(
        decode_compressed_depth(depth_compressed_depth(d, '32FC1', depth_max=3.0))
    ).all()
    got = decode_compressed_depth(depth_compressed_depth(d, '32FC1', depth_max=5.0))
    assert np.allclose(got, 4.0, atol=4.0**2 / (2 * 100 * 101) + 1e-5)


def test_compressed_depth_errors_name_field_and_value():
    with pytest.raises(ValueError, match="encoding='mono8': compressedDepth supports"):
        encode_compressed_depth(np.zeros((2, 2), np.uint16), 'mono8')
    with pytest.raises(ValueError, match='must be H×W float metres'):
        encode_compressed_depth(np.zeros((2, 2), np.uint16), '32FC1')
    with pytest.raises(ValueError, match='depth_max=0.0 must be a finite number > 0'):
        inverse_depth_params(0.0)
    with pytest.raises(ValueError, match='png_level'):
        encode_compressed_depth(np.zeros((2, 2), np.uint16), '16UC1', png_level=-1)
    with pytest.raises(ValueError, match='jpeg'):
        encode_compressed(np.zeros((2, 2), np.uint16), '16UC1', 'jpeg')


def test_encoders_still_importable_from_ros_compressed():
    from depth3dseg_ros.ros import compressed, compressed_out

    assert compressed.encode_compressed is compressed_out.encode_compressed
    assert compressed.encode_compressed_depth is compressed_out.encode_compressed_depth


def test_compressed_depth_nearer_than_the_last_step_saturates():
    qa, qb = inverse_depth_params()
    nearest = qa / (65535 - qb)  # 0.152 m with the transport's defaults
    assert nearest == pytest.approx(0.1518, abs=1e-4)
    d = np.array([[0.05, nearest * 1.001]], np.float32)
    got = decode_compressed_depth(depth_compressed_depth(d, '32FC1'))
    assert got[0, 0] == pytest.approx(nearest, rel=1e-5)  # v = 65535: no wrap to a far depth
    assert got[0, 1] == pytest.approx(d[0, 1], abs=1e-5)
