"""Image messages of a bag -> the arrays of a dataset frame (rgb, depth in mm, label ids), for
``depth3dseg-extract``'s pass 2 (bags.frames). Image and CompressedImage, via ros.image,
ros.compressed and core.depth.

Every decoder here takes ``max_pixels`` (depth3dseg-extract's ``max_image_pixels``): a
CompressedImage is decoded only through core.image_decode.decode_image, which refuses a header
declaring more pixels before decoding; an Image whose width × height is over it is refused the same
way (:class:`ImageTooLargeError`, as the node does).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from depth3dseg_ros.core.depth import INTEGER_DEPTH_ENCODINGS, depth_to_meters, meters_to_16uc1
from depth3dseg_ros.ros.compressed import (
    DEFAULT_MAX_PIXELS,
    check_pixel_limit,
    compressed_to_rgb,
    decode_compressed,
)
from depth3dseg_ros.ros.image import imgmsg_to_cv2, to_rgb

COMPRESSED = 'sensor_msgs/msg/CompressedImage'


def _decode_any(msg: Any, msgtype: str, max_pixels: int) -> Tuple[np.ndarray, str]:
    """(array, encoding) of an Image or CompressedImage, refused over ``max_pixels``."""
    if msgtype == COMPRESSED:
        return decode_compressed(msg, max_pixels)
    check_pixel_limit(msg.width, msg.height, max_pixels, 'Image header')
    return imgmsg_to_cv2(msg), msg.encoding


def decode_rgb(msg: Any, msgtype: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """H×W×3 uint8 RGB from an Image or CompressedImage (ros.image / ros.compressed).

    Raises:
        ImageTooLargeError: more than ``max_pixels`` pixels (header; nothing decoded).
        ValueError: a malformed or undecodable message (field or format named).
    """
    if msgtype == COMPRESSED:
        return compressed_to_rgb(msg, max_pixels)
    check_pixel_limit(msg.width, msg.height, max_pixels, 'Image header')
    return to_rgb(msg)


def decode_depth(
    msg: Any, msgtype: str, depth_scale: Optional[float], max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """H×W uint16 mm (0 = no data) via core.depth from 16UC1/mono16/32FC1 Image or CompressedImage
    (compressedDepth or 16-bit PNG). ``depth_scale``: metres per unit of integer depth (None = mm).

    uint16 millimetres (integer encoding, scale None/0.001) are copied unchanged: that is exactly
    what the core.depth round trip mm -> m -> mm returns (tested), without its two float passes.
    Over ``max_pixels``: ImageTooLargeError, as :func:`decode_rgb`.
    """
    arr, enc = _decode_any(msg, msgtype, max_pixels)
    if enc in INTEGER_DEPTH_ENCODINGS and arr.dtype == np.uint16 and depth_scale in (None, 0.001):
        return np.ascontiguousarray(arr, dtype=np.uint16)
    return meters_to_16uc1(depth_to_meters(arr, enc, depth_scale))


def decode_labels(msg: Any, msgtype: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """H×W class ids from a 1-channel integer Image (mono8/8UC1/mono16/16UC1, and the signed or
    32-bit 8SC1/16SC1/32SC1 some simulators publish, e.g. -1 for "no class") or a gray PNG
    CompressedImage: uint8/uint16 as stored, other integer types as int64 (negative ids kept, so
    that the out-of-range policy, bags.label_policy, counts and maps them; C43).

    Raises:
        ValueError: a colour or float label image (encoding named). ImageTooLargeError: over
            ``max_pixels``, as :func:`decode_rgb`.
    """
    arr, enc = _decode_any(msg, msgtype, max_pixels)
    if arr.ndim != 2 or arr.dtype.kind not in 'iu':
        raise ValueError(
            f'label image encoding={enc!r} shape={arr.shape}: expected 1-channel integer ids'
        )
    if arr.dtype not in (np.uint8, np.uint16):
        return arr.astype(np.int64)
    return np.ascontiguousarray(arr)
