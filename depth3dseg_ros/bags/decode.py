"""Image messages of a bag -> the arrays of a dataset frame (rgb, depth in mm, label ids), for
``depth3dseg-extract``'s pass 2 (bags.frames). Image and CompressedImage, via ros.image,
ros.compressed and core.depth.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from depth3dseg_ros.core.depth import INTEGER_DEPTH_ENCODINGS, depth_to_meters, meters_to_16uc1
from depth3dseg_ros.ros.compressed import compressed_to_rgb, decode_compressed
from depth3dseg_ros.ros.image import imgmsg_to_cv2, to_rgb

COMPRESSED = 'sensor_msgs/msg/CompressedImage'


def decode_rgb(msg: Any, msgtype: str) -> np.ndarray:
    """H×W×3 uint8 RGB from an Image or CompressedImage (ros.image / ros.compressed)."""
    return compressed_to_rgb(msg) if msgtype == COMPRESSED else to_rgb(msg)


def decode_depth(msg: Any, msgtype: str, depth_scale: Optional[float]) -> np.ndarray:
    """H×W uint16 mm (0 = no data) via core.depth from 16UC1/mono16/32FC1 Image or CompressedImage
    (compressedDepth or 16-bit PNG). ``depth_scale``: metres per unit of integer depth (None = mm).

    uint16 millimetres (integer encoding, scale None/0.001) are copied unchanged: that is exactly
    what the core.depth round trip mm -> m -> mm returns (tested), without its two float passes.
    """
    if msgtype == COMPRESSED:
        arr, enc = decode_compressed(msg)
    else:
        arr, enc = imgmsg_to_cv2(msg), msg.encoding
    if enc in INTEGER_DEPTH_ENCODINGS and arr.dtype == np.uint16 and depth_scale in (None, 0.001):
        return np.ascontiguousarray(arr, dtype=np.uint16)
    return meters_to_16uc1(depth_to_meters(arr, enc, depth_scale))


def decode_labels(msg: Any, msgtype: str) -> np.ndarray:
    """H×W class ids from a 1-channel integer Image (mono8/8UC1/mono16/16UC1, and the signed or
    32-bit 8SC1/16SC1/32SC1 some simulators publish, e.g. -1 for "no class") or a gray PNG
    CompressedImage: uint8/uint16 as stored, other integer types as int64 (negative ids kept, so
    that the out-of-range policy, bags.label_policy, counts and maps them; C43).

    Raises:
        ValueError: a colour or float label image (encoding named).
    """
    if msgtype == COMPRESSED:
        arr, enc = decode_compressed(msg)
    else:
        arr, enc = imgmsg_to_cv2(msg), msg.encoding
    if arr.ndim != 2 or arr.dtype.kind not in 'iu':
        raise ValueError(
            f'label image encoding={enc!r} shape={arr.shape}: expected 1-channel integer ids'
        )
    if arr.dtype not in (np.uint8, np.uint16):
        return arr.astype(np.int64)
    return np.ascontiguousarray(arr)
