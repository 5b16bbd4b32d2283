"""sensor_msgs/CompressedImage encoding: jpeg/png (compressed_image_transport) and compressedDepth
(compressed_depth_image_transport), for the node's optional compressed outputs (issue 14) and for
tests and tools that build compressed input. Pure: numpy + OpenCV, duck-typed messages (rclpy by
default, rosbags with ``msg_cls``); ros/compressed.py decodes what this module writes.

Formats written, as the image_transport_plugins publishers write them (ros-perception/
image_transport_plugins, ``compressed_image_transport/src/compressed_publisher.cpp`` and
``compressed_depth_image_transport/src/codec.cpp``, ``encodeCompressedDepthImage``; the header
struct in ``compressed_depth_image_transport/.../compression_common.h``):

- jpeg/png colour and mono: ``format = "<encoding>; <jpeg|png> compressed <stored layout>"``,
  colour stored BGR in the file (OpenCV order) so ``"rgb8; jpeg compressed bgr8"`` tells a decoder
  to swap back; 16-bit mono only as png.
- compressedDepth: ``format = "<16UC1|32FC1>; compressedDepth png"`` and ``data`` = a 12-byte
  ``ConfigHeader`` then a 16-bit single-channel PNG. The header is the C struct
  ``{int32 format = INV_DEPTH (0); float32 depthParam[2] = {depthQuantA, depthQuantB}}``,
  little-endian on every platform ROS runs on; codec.cpp writes it for both encodings (zero-
  initialised, so 16UC1 carries A = B = 0).
  16UC1: the PNG holds the millimetres unchanged.
  32FC1 (inverse-depth quantisation, publisher parameters ``depth_max`` = 10 m and
  ``depth_quantization`` = 100 by default): A = q (q + 1), B = 1 - A / depth_max (both float32),
  v = A / d + B for d < depth_max, else 0 (no data); the subscriber decodes d = A / (v - B), v = 0
  -> NaN. Two deliberate differences from codec.cpp, neither visible to its decoder: v is rounded
  (codec.cpp truncates when it converts the float to uint16), halving the error to about
  d^2 / (2 A) (5 mm at 10 m, 0.05 mm at 1 m with the defaults); and d <= 0 or NaN is always 0,
  no data (codec.cpp would convert A / 0 = inf to uint16, undefined behaviour in C++). v saturates
  at 65535: depths below A / (65535 - B) (0.152 m with the defaults) decode as that depth.
"""

from __future__ import annotations

import struct
from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.core.depth import valid_depth
from depth3dseg_ros.ros.image import check_array_encoding, convert_layout, has_channel_order
from depth3dseg_ros.ros.msgutil import build, convert_header, rclpy_cls, uint8_field

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
#: compressed_depth_image_transport's ``compressionFormat`` enum value written in the header
INV_DEPTH = 0
#: compressed_depth_image_transport's ConfigHeader: int32 format, float32 depthQuantA, depthQuantB
CONFIG_HEADER = struct.Struct('<iff')
#: compressed_depth_image_transport publisher defaults (compressed_depth_publisher.cpp)
DEPTH_MAX = 10.0
DEPTH_QUANTIZATION = 100.0
#: compressed_image_transport defaults: jpeg_quality 95, png_level 3 (compressedDepth uses 9)
JPEG_QUALITY = 95
PNG_LEVEL = 3


def _check_level(png_level: int) -> int:
    if isinstance(png_level, bool) or not isinstance(png_level, (int, np.integer)):
        raise ValueError(f'png_level={png_level!r} must be an integer 0..9')
    if not 0 <= png_level <= 9:
        raise ValueError(f'png_level={png_level} must be in 0..9')
    return int(png_level)


def inverse_depth_params(
    depth_max: float = DEPTH_MAX, depth_quantization: float = DEPTH_QUANTIZATION
) -> tuple[float, float]:
    """compressedDepth 32FC1 quantisation (A, B) as float32 values: A = q (q + 1), B = 1 - A /
    depth_max (codec.cpp computes them in float).

    Raises:
        ValueError: ``depth_max`` or ``depth_quantization`` not a finite number > 0.
    """
    for name, value in (('depth_max', depth_max), ('depth_quantization', depth_quantization)):
        if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
            raise ValueError(f'{name}={value!r} must be a finite number > 0')
    qa = np.float32(depth_quantization) * (np.float32(depth_quantization) + np.float32(1.0))
    qb = np.float32(1.0) - qa / np.float32(depth_max)
    return float(qa), float(qb)


def quantize_inverse_depth(
    depth: np.ndarray,
    depth_max: float = DEPTH_MAX,
    depth_quantization: float = DEPTH_QUANTIZATION,
) -> tuple[np.ndarray, float, float]:
    """32FC1 metres -> (H×W uint16 v, A, B): v = rint(A / d + B) clipped to 1..65535 for
    0 < d < depth_max, 0 (no data) for NaN, inf, d <= 0 and d >= depth_max.

    The round trip ``A / (v - B)`` is within about d^2 / (2 A) of d (plus float32 rounding) for
    d >= A / (65535 - B); nearer depths saturate at v = 65535.
    Raises:
        ValueError: ``depth`` not H×W float, or bad quantisation parameters.
    """
    d = np.asarray(depth)
    if d.ndim != 2 or d.dtype.kind != 'f':
        raise ValueError(
            f'depth shape={d.shape} dtype={d.dtype} must be H×W float metres for 32FC1'
        )
    qa, qb = inverse_depth_params(depth_max, depth_quantization)
    ok = valid_depth(d) & (d < depth_max)
    v = np.zeros(d.shape, np.uint16)
    v[ok] = np.clip(np.rint(qa / d[ok].astype(np.float64) + qb), 1, 65535).astype(np.uint16)
    return v, qa, qb


def _png(arr: np.ndarray, png_level: int, what: str) -> np.ndarray:
    params = [cv2.IMWRITE_PNG_COMPRESSION, _check_level(png_level)]
    ok, png = cv2.imencode('.png', np.ascontiguousarray(arr), params)
    if not ok:
        raise ValueError(f'PNG encoding failed for {what} shape={arr.shape} dtype={arr.dtype}')
    return png.reshape(-1)


def encode_compressed_depth(
    depth: np.ndarray,
    encoding: str = '16UC1',
    header: Any = None,
    msg_cls: type | None = None,
    depth_max: float = DEPTH_MAX,
    depth_quantization: float = DEPTH_QUANTIZATION,
    fmt_suffix: str = ' png',
    png_level: int = 9,
) -> Any:
    """Build a compressedDepth CompressedImage (the layout in the module docstring).

    Args:
        depth: uint16 H×W millimetres (0 = no data) for ``16UC1``; float H×W metres (NaN = no
            data) for ``32FC1``.
        encoding: '16UC1' or '32FC1' (the raw image's encoding, first token of ``format``).
        depth_max, depth_quantization: 32FC1 quantisation (:func:`quantize_inverse_depth`);
            16UC1 values are stored unchanged.
        fmt_suffix: text after 'compressedDepth' (' png' as current writers, '' as old bags).
        png_level: zlib level 0..9 (compressed_depth_image_transport's default 9).
    Raises:
        ValueError: wrong array for the encoding, unsupported encoding, bad level or parameters.
    """
    d = np.asarray(depth)
    qa = qb = 0.0
    if encoding == '16UC1':
        check_array_encoding(d, '16UC1')
        png_in = d
    elif encoding == '32FC1':
        png_in, qa, qb = quantize_inverse_depth(d, depth_max, depth_quantization)
    else:
        raise ValueError(f'encoding={encoding!r}: compressedDepth supports 16UC1 and 32FC1')
    png = _png(png_in, png_level, 'depth')
    payload = np.concatenate([np.frombuffer(CONFIG_HEADER.pack(INV_DEPTH, qa, qb), np.uint8), png])
    return _build(payload, f'{encoding}; compressedDepth{fmt_suffix}', header, msg_cls)


def encode_compressed(
    arr: np.ndarray,
    encoding: str = 'rgb8',
    codec: str = 'png',
    header: Any = None,
    msg_cls: type | None = None,
    jpeg_quality: int = JPEG_QUALITY,
    png_level: int = PNG_LEVEL,
) -> Any:
    """Build a jpeg/png CompressedImage from an array with layout ``encoding``.

    Colour is stored BGR in the file (OpenCV); the format string is
    ``"<encoding>; <codec> compressed <bgr8|mono8|...>"`` so ros.compressed.decode_compressed (and
    compressed_image_transport) restore the order. 16-bit mono (16UC1/mono16) needs png, which is
    lossless; jpeg at ``jpeg_quality`` 1..100 is not.

    Raises:
        ValueError: codec not png/jpeg, array not fitting the encoding, 16-bit with jpeg, quality
            outside 1..100, level outside 0..9, failure.
    """
    if codec not in ('png', 'jpeg'):
        raise ValueError(f'codec={codec!r} must be png or jpeg')
    if not has_channel_order(encoding):
        raise ValueError(
            f'encoding={encoding!r} cannot be stored as {codec} (colour/mono 8/16-bit only)'
        )
    check_array_encoding(arr, encoding)
    a = np.asarray(arr)
    target = {'rgb8': 'bgr8', 'rgba8': 'bgra8', 'rgb16': 'bgr16', 'rgba16': 'bgra16'}.get(
        encoding, encoding
    )
    if a.dtype == np.uint16 and codec == 'jpeg':
        raise ValueError(f'encoding={encoding!r} is 16-bit: jpeg cannot hold it, use png')
    img = np.ascontiguousarray(convert_layout(a, encoding, target))
    if codec == 'png':
        data = _png(img, png_level, encoding)
    else:
        if isinstance(jpeg_quality, bool) or not 1 <= int(jpeg_quality) <= 100:
            raise ValueError(f'jpeg_quality={jpeg_quality!r} must be an integer 1..100')
        ok, data = cv2.imencode('.jpg', img, [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
        if not ok:
            raise ValueError(f'jpeg encoding failed for shape={a.shape} dtype={a.dtype}')
    return _build(data.reshape(-1), f'{encoding}; {codec} compressed {target}', header, msg_cls)


# -- the node's compressed outputs (issue 14): one function per output, one format each ---------
def labels_png(labels: np.ndarray, header: Any = None, png_level: int = PNG_LEVEL) -> Any:
    """``~/labels/image/compressed``: H×W uint8 (mono8) or uint16 (16UC1) class ids as a lossless
    PNG (a JPEG would invent class ids at region borders, C22).

    Raises:
        ValueError: labels not H×W uint8/uint16, bad level.
    """
    lab = np.asarray(labels)
    enc = {np.dtype(np.uint8): 'mono8', np.dtype(np.uint16): '16UC1'}.get(lab.dtype)
    if enc is None or lab.ndim != 2:
        raise ValueError(f'labels shape={lab.shape} dtype={lab.dtype} must be H×W uint8/uint16')
    return encode_compressed(lab, enc, 'png', header, png_level=png_level)


def overlay_jpeg(rgb: np.ndarray, header: Any = None, quality: int = JPEG_QUALITY) -> Any:
    """``~/overlay/image/compressed``: H×W×3 uint8 RGB as JPEG at ``quality`` 1..100 (format
    ``"rgb8; jpeg compressed bgr8"``).

    Raises:
        ValueError: not H×W×3 uint8, quality outside 1..100.
    """
    return encode_compressed(rgb, 'rgb8', 'jpeg', header, jpeg_quality=quality)


def depth_compressed_depth(
    depth: np.ndarray,
    encoding: str,
    header: Any = None,
    depth_max: float = DEPTH_MAX,
    png_level: int = 9,
) -> Any:
    """``~/depth/image/compressedDepth`` for a depth image published as ``encoding``: 16UC1 (H×W
    uint16 mm, stored unchanged) or 32FC1 (H×W float32 m, inverse-depth quantised with
    ``depth_max`` and quantisation 100, the compressed_depth_image_transport defaults).

    Raises:
        ValueError: as :func:`encode_compressed_depth`.
    """
    return encode_compressed_depth(
        depth, encoding, header, depth_max=depth_max, png_level=png_level
    )


def _build(payload: np.ndarray, fmt: str, header: Any, msg_cls: type | None) -> Any:
    cls = msg_cls or rclpy_cls('sensor_msgs/msg/CompressedImage')
    return build(
        cls, header=convert_header(header, cls), format=fmt, data=uint8_field(payload, cls)
    )
