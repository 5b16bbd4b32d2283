"""sensor_msgs/Image <-> numpy, in cv_bridge's vocabulary (``imgmsg_to_cv2``, ``cv2_to_imgmsg``).

Why the package's own code: cv_bridge for ROS 2 is not on pip; PyPI's ``cv-bridge`` decodes 16UC1
as 8-bit (docs/cases.md C03); rosbags-image ignores row padding (C01). This module is numpy-only,
duck-typed (rclpy messages give ``data`` as array('B'), rosbags messages as a numpy uint8 array,
anything with the buffer protocol works) and honours ``step`` and ``is_bigendian``. dtype and
channel count come from one table (:data:`ENCODINGS`) plus the OpenCV type names (``8UC3``,
``16SC1``, ``32FC1``, ...).

Size checks (C04): ``step >= width * bytes_per_pixel`` and ``height * step == len(data)``; a
violation raises ValueError naming the field and value. A 0×0 image raises :class:`EmptyImageError`
(a ValueError subclass) so a node can skip it with a warning instead of an error.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from depth3dseg_ros.ros.msgutil import as_uint8, build, convert_header, rclpy_cls, uint8_field

#: ROS named encodings -> (numpy dtype, channels). sensor_msgs/image_encodings.hpp.
ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    'rgb8': (np.dtype(np.uint8), 3),
    'bgr8': (np.dtype(np.uint8), 3),
    'rgba8': (np.dtype(np.uint8), 4),
    'bgra8': (np.dtype(np.uint8), 4),
    'rgb16': (np.dtype(np.uint16), 3),
    'bgr16': (np.dtype(np.uint16), 3),
    'rgba16': (np.dtype(np.uint16), 4),
    'bgra16': (np.dtype(np.uint16), 4),
    'mono8': (np.dtype(np.uint8), 1),
    'mono16': (np.dtype(np.uint16), 1),
}
_CV_DEPTHS = {
    '8U': np.uint8,
    '8S': np.int8,
    '16U': np.uint16,
    '16S': np.int16,
    '32S': np.int32,
    '32F': np.float32,
    '64F': np.float64,
}
_CV_RE = re.compile(r'^(8U|8S|16U|16S|32S|32F|64F)C([1-4])$')

#: Channel order of each colour layout; 8UC3/8UC4 are BGR/BGRA as in cv_bridge (OpenCV's order).
_ORDER = {
    'rgb8': 'RGB',
    'bgr8': 'BGR',
    'rgba8': 'RGBA',
    'bgra8': 'BGRA',
    'rgb16': 'RGB',
    'bgr16': 'BGR',
    'rgba16': 'RGBA',
    'bgra16': 'BGRA',
    '8UC3': 'BGR',
    '8UC4': 'BGRA',
    '16UC3': 'BGR',
    '16UC4': 'BGRA',
    'mono8': 'MONO',
    'mono16': 'MONO',
    '8UC1': 'MONO',
    '16UC1': 'MONO',
}


class EmptyImageError(ValueError):
    """The image has width 0 or height 0 (C04 c): skip the frame with a warning, publish
    nothing."""


def is_encoding(encoding: str) -> bool:
    """True if ``encoding`` is a supported ROS image encoding."""
    return encoding in ENCODINGS or bool(_CV_RE.match(encoding or ''))


def has_channel_order(encoding: str) -> bool:
    """True for colour and mono encodings (those :func:`to_rgb` accepts)."""
    return encoding in _ORDER


def encoding_info(encoding: str) -> tuple[np.dtype, int]:
    """(dtype, channels) of a ROS image encoding (C03: mono16/16UC1 -> uint16, 1 channel).

    Raises:
        ValueError: unknown encoding, named (``Image.encoding='yuv422' is not supported``).
    """
    if encoding in ENCODINGS:
        return ENCODINGS[encoding]
    m = _CV_RE.match(encoding or '')
    if m:
        return np.dtype(_CV_DEPTHS[m.group(1)]), int(m.group(2))
    raise ValueError(
        f'Image.encoding={encoding!r} is not supported (known: {sorted(ENCODINGS)} and '
        f'OpenCV types like 8UC3, 16UC1, 32FC1)'
    )


def bytes_per_pixel(encoding: str) -> int:
    """Bytes per pixel of ``encoding`` (e.g. rgb8 -> 3, 16UC1 -> 2, 32FC1 -> 4)."""
    dt, ch = encoding_info(encoding)
    return dt.itemsize * ch


def _check_geometry(height: int, width: int, step: int, nbytes: int, encoding: str) -> int:
    if height < 0 or width < 0:
        raise ValueError(f'Image size width={width} height={height} is negative')
    if height == 0 or width == 0:
        raise EmptyImageError(f'Image is empty: width={width} height={height} len(data)={nbytes}')
    bpp = bytes_per_pixel(encoding)
    if step < width * bpp:
        raise ValueError(
            f'Image.step={step} < width*bpp={width * bpp} (width={width}, {encoding})'
        )
    if height * step != nbytes:
        raise ValueError(
            f'Image len(data)={nbytes} != height*step={height * step} '
            f'(height={height}, step={step}, {encoding})'
        )
    return bpp


def image_array(
    data: Any, height: int, width: int, step: int, encoding: str, is_bigendian: bool = False
) -> np.ndarray:
    """Decode raw image bytes to an H×W (1 channel) or H×W×C array, honouring ``step`` and
    endianness.

    The buffer is viewed as ``height × step`` bytes, each row cropped to ``width*bpp`` (padding
    dropped, C01), then viewed as the encoding's dtype in the message's byte order and returned in
    native order. Little-endian data on a little-endian machine is returned as a (possibly
    non-contiguous, possibly read-only) view of ``data``; use ``np.ascontiguousarray`` before
    OpenCV or torch.

    Raises:
        EmptyImageError: width or height is 0.
        ValueError: unknown encoding or inconsistent step/len(data) (C04).
    """
    buf = as_uint8(data)
    height, width, step = int(height), int(width), int(step)
    bpp = _check_geometry(height, width, step, buf.size, encoding)
    dt, ch = encoding_info(encoding)
    rows = buf.reshape(height, step)[:, : width * bpp]
    wire = dt.newbyteorder('>' if is_bigendian else '<') if dt.itemsize > 1 else dt
    arr = rows.view(wire)
    if not wire.isnative:
        arr = arr.astype(dt)
    return arr.reshape(height, width) if ch == 1 else arr.reshape(height, width, ch)


def convert_layout(arr: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Convert an array between colour/mono layouts (channel order, alpha, 8/16-bit), as cv_bridge
    does.

    Orders: rgb/bgr(a)8/16, mono8/16, 8UC1/3/4 (= mono8/bgr8/bgra8), 16UC1 (= mono16). 16 -> 8 bit
    keeps the high byte; 8 -> 16 multiplies by 257; colour -> mono uses BT.601 luma; added alpha is
    opaque.

    Raises:
        ValueError: a layout without a channel order (e.g. 32FC1) or an impossible bit-depth
            change.
    """
    if src == dst:
        return arr
    sdt, sch = encoding_info(src)
    ddt, dch = encoding_info(dst)
    if sch == dch and sdt == ddt and (_ORDER.get(src) == _ORDER.get(dst) or sch == 1):
        return arr  # aliases: mono8/8UC1, mono16/16UC1, bgr8/8UC3, bgra8/8UC4
    so, do = _ORDER.get(src), _ORDER.get(dst)
    if so is None or do is None:
        raise ValueError(f'cannot convert Image.encoding={src!r} to desired_encoding={dst!r}')
    a = arr
    if (
        sdt != ddt
    ):  # bit depth: 16 -> 8 keeps the high byte, 8 -> 16 multiplies by 257 (cv_bridge scaling)
        if sdt == np.uint16 and ddt == np.uint8:
            a = (a >> 8).astype(np.uint8)
        elif sdt == np.uint8 and ddt == np.uint16:
            a = a.astype(np.uint16) * np.uint16(257)
        else:
            raise ValueError(f'cannot convert Image.encoding={src!r} to desired_encoding={dst!r}')
    if so == 'MONO' and do == 'MONO':
        return a
    if so == 'MONO':
        rgb = np.repeat(a[..., None], 3, axis=2)
    else:
        rgb = a[..., :3] if so.startswith('RGB') else a[..., 2::-1]
    if do == 'MONO':  # ITU-R BT.601 luma, as cv::COLOR_RGB2GRAY
        luma = rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114
        return np.rint(luma).astype(ddt)
    out = rgb if do.startswith('RGB') else rgb[..., ::-1]
    if do.endswith('A'):
        alpha = (
            a[..., 3:4]
            if so.endswith('A')
            else np.full(out.shape[:2] + (1,), np.iinfo(ddt).max, ddt)
        )
        out = np.concatenate([out, alpha], axis=2)
    return np.ascontiguousarray(out)


def imgmsg_to_cv2(msg: Any, desired_encoding: str = 'passthrough') -> np.ndarray:
    """sensor_msgs/Image (rclpy or rosbags) -> ndarray, like cv_bridge's ``imgmsg_to_cv2``.

    Args:
        msg: any object with height, width, step, encoding, is_bigendian, data.
        desired_encoding: 'passthrough' (layout of ``msg.encoding``, see :func:`image_array`) or a
            colour or mono encoding to convert to (rgb8, bgr8, rgba8, bgra8, mono8, mono16, ...).
            Depth units are not converted here (see core.depth).
    Returns:
        H×W or H×W×C ndarray in native byte order.
    Raises:
        EmptyImageError: 0×0 image. ValueError: unknown encoding, inconsistent sizes, impossible
            conversion.
    """
    arr = image_array(
        msg.data, msg.height, msg.width, msg.step, msg.encoding, bool(msg.is_bigendian)
    )
    if desired_encoding in ('passthrough', msg.encoding):
        return arr
    return convert_layout(arr, msg.encoding, desired_encoding)


def to_rgb(msg: Any) -> np.ndarray:
    """Network input from any colour or mono Image: C-contiguous H×W×3 uint8 RGB (C05).

    bgra8/rgba8 drop alpha (even 0), mono8 is replicated, 16-bit encodings keep the high byte, and
    8UC3/8UC4 are taken as BGR/BGRA (OpenCV order, as cv_bridge).

    Raises:
        EmptyImageError, ValueError: as :func:`imgmsg_to_cv2`; also for depth/float encodings.
    """
    if msg.encoding not in _ORDER:
        raise ValueError(
            f'Image.encoding={msg.encoding!r} is not a colour or mono encoding for RGB input'
        )
    return np.ascontiguousarray(imgmsg_to_cv2(msg, 'rgb8'))


def array_to_rgb(arr: np.ndarray, encoding: str) -> np.ndarray:
    """Like :func:`to_rgb` for an already decoded array with layout ``encoding`` (e.g. a decoded
    JPEG, bgr8)."""
    if encoding not in _ORDER:
        raise ValueError(f'encoding={encoding!r} is not a colour or mono encoding for RGB input')
    return np.ascontiguousarray(convert_layout(np.asarray(arr), encoding, 'rgb8'))


def check_array_encoding(arr: np.ndarray, encoding: str) -> tuple[int, int]:
    """Check that ``arr`` fits ``encoding`` (dtype and channels); return (height, width).

    Raises:
        ValueError: naming the encoding, the expected dtype/channels and the array's shape/dtype.
    """
    dt, ch = encoding_info(encoding)
    a = np.asarray(arr)
    shape_ok = (a.ndim == 2 and ch == 1) or (a.ndim == 3 and a.shape[2] == ch)
    if a.dtype.newbyteorder('=') != dt or not shape_ok:
        raise ValueError(
            f'array shape={a.shape} dtype={a.dtype} does not fit encoding={encoding!r} '
            f'({dt}, {ch} channel{"s" if ch > 1 else ""})'
        )
    return int(a.shape[0]), int(a.shape[1])


def cv2_to_imgmsg(
    arr: np.ndarray, encoding: str, header: Any = None, msg_cls: type | None = None
) -> Any:
    """ndarray -> sensor_msgs/Image with packed rows (``step = width * bpp``), little-endian.

    Used for every image the node publishes: mono8/16UC1 labels, rgb8 overlay and mask, 32FC1/16UC1
    depth. ``msg.data`` is filled with one copy (array('B') from a memoryview for rclpy).

    Args:
        arr: H×W or H×W×C array whose dtype and channels match ``encoding`` (non-contiguous is
            fine).
        encoding: a ROS encoding from :data:`ENCODINGS` or an OpenCV type (32FC1, 16UC1, ...).
        header: std_msgs/Header to copy (stamp, frame_id); None gives an empty header.
        msg_cls: message class; None = rclpy ``sensor_msgs.msg.Image``, or a rosbags typestore
            class.
    Raises:
        ValueError: dtype/channels do not fit the encoding.
    """
    height, width = check_array_encoding(arr, encoding)
    dt, _ = encoding_info(encoding)
    data = np.ascontiguousarray(np.asarray(arr), dtype=dt.newbyteorder('<'))
    cls = msg_cls or rclpy_cls('sensor_msgs/msg/Image')
    return build(
        cls,
        header=convert_header(header, cls),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=width * bytes_per_pixel(encoding),
        data=uint8_field(data, cls),
    )


def describe(msg: Any) -> str:
    """One-line summary for error messages: ``640x480 rgb8 step=1920 len(data)=921600`` (C20)."""
    try:
        n = as_uint8(msg.data).size
    except Exception:  # noqa: BLE001 - only for a message text
        n = '?'
    return f'{msg.width}x{msg.height} {msg.encoding} step={msg.step} len(data)={n}'


def check_same_size(**msgs: Any) -> tuple[int, int]:
    """Check that the given Images (None skipped) share width×height; return (height, width) (C20).

    Raises:
        ValueError: naming each message's size, encoding, step and len(data) (:func:`describe`),
            e.g. ``Image size mismatch: depth 640x480 16UC1 step=1280 ..., rgb 1280x720 rgb8
            step=3840 ...``.
    """
    given = {k: m for k, m in msgs.items() if m is not None}
    if not given:
        raise ValueError('check_same_size needs at least one message')
    sizes = {(int(m.height), int(m.width)) for m in given.values()}
    if len(sizes) > 1:
        raise ValueError(
            'Image size mismatch: ' + ', '.join(f'{k} {describe(m)}' for k, m in given.items())
        )
    return next(iter(sizes))
