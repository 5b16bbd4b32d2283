"""sensor_msgs/CompressedImage: jpeg/png (8- and 16-bit) and ``compressedDepth`` decoding (the
encoders live in ros/compressed_out.py and are re-exported here).

Format strings have no fixed grammar (image_transport_plugins #63, docs/cases.md C07): ``"jpeg"``,
``"png"``, ``"rgb8; jpeg compressed bgr8"``, ``"16UC1; compressedDepth"``, ``"32FC1;
compressedDepth png"``. The parser splits on ``;``, takes the first token as the source encoding
when it is one, and looks for the word ``compressedDepth`` and a codec word anywhere.
compressedDepth payloads are a 12-byte ConfigHeader (int32 format, float32 depthQuantA, float32
depthQuantB, little-endian) then a PNG of uint16 values; the PNG is found by its signature, not by
a fixed offset. 16UC1: the PNG values are millimetres.
32FC1: depth = A / (v - B) metres, v = 0 -> NaN. RVL payloads are refused with a clear error.

Size before decoding (issues 14 and 55): every payload is decoded by
core.image_decode.decode_image, which reads width and height from the JPEG SOF marker, the PNG IHDR
chunk or the TIFF IFD (compressedDepth: the PNG after the 12-byte header) and refuses an image over
``max_pixels`` (default :data:`DEFAULT_MAX_PIXELS`; the node passes its ``max_image_pixels``,
depth3dseg-extract its ``max_image_pixels`` setting) with :class:`ImageTooLargeError` before any
pixel is allocated, and a payload whose size it cannot read with a ValueError. There is no
decoding without a limit.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.core.depth import valid_depth
from depth3dseg_ros.core.image_decode import (  # noqa: F401 - re-exported (API)
    DEFAULT_MAX_PIXELS,
    ImageTooLargeError,
    check_pixel_limit,
    decode_image,
    payload_size,
)
from depth3dseg_ros.ros.image import (
    ENCODINGS,
    EmptyImageError,
    array_to_rgb,
    convert_layout,
    is_encoding,
)
from depth3dseg_ros.ros.compressed_out import (  # noqa: F401 - encoders re-exported (API)
    CONFIG_HEADER as _HEADER,
    INV_DEPTH,
    PNG_SIGNATURE,
    encode_compressed,
    encode_compressed_depth,
)
from depth3dseg_ros.ros.msgutil import as_uint8


def compressed_image_size(msg: Any) -> tuple[int, int]:
    """(width, height) a CompressedImage would decode to, from its JPEG/PNG/TIFF header (no
    decoding).

    compressedDepth: the PNG found by its signature after the 12-byte ConfigHeader.

    Raises:
        EmptyImageError: no data. ValueError: size unreadable (see :func:`payload_size`), the
            format named.
    """
    buf = _payload(msg)
    raw = buf.tobytes()
    if parse_format(msg.format)['depth']:
        start = raw.find(PNG_SIGNATURE)
        raw = raw[start:] if start >= 0 else raw
    try:
        return payload_size(raw)
    except ValueError as err:
        raise ValueError(
            f'CompressedImage.format={msg.format!r} len(data)={len(buf)}: {err}'
        ) from None


def check_compressed_size(msg: Any, max_pixels: int | None) -> tuple[int, int]:
    """:func:`compressed_image_size`, refused over ``max_pixels`` (None: size read, no limit;
    decoding itself always checks, :func:`decode_compressed`).

    Raises: ImageTooLargeError, EmptyImageError, ValueError (as :func:`compressed_image_size`).
    """
    w, h = compressed_image_size(msg)
    check_pixel_limit(w, h, max_pixels, f'{_what(msg)} header')
    return w, h


def _what(msg: Any) -> str:
    """How errors name a CompressedImage: ``CompressedImage (format='jpeg')``."""
    return f'CompressedImage (format={msg.format!r})'


def parse_format(fmt: str) -> dict:
    """Split a CompressedImage.format leniently.

    Returns:
        dict with ``encoding`` (first token if it is an image encoding, else None), ``depth`` (True
        for compressedDepth) and ``codec`` ('png', 'jpeg', 'rvl' or None when not named).
    """
    text = (fmt or '').strip()
    tokens = [t.strip() for t in text.split(';')]
    first = tokens[0] if tokens else ''
    words = text.replace(';', ' ').lower().split()
    codec = next((w for w in words if w in ('png', 'jpeg', 'jpg', 'rvl', 'tiff')), None)
    return {
        'encoding': first if is_encoding(first) else None,
        'depth': 'compresseddepth' in words,
        'codec': 'jpeg' if codec == 'jpg' else codec,
    }


def _payload(msg: Any) -> np.ndarray:
    buf = as_uint8(msg.data)
    if buf.size == 0:
        raise EmptyImageError(f'CompressedImage is empty: format={msg.format!r} len(data)=0')
    return buf


def decode_compressed_depth(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode a ``compressedDepth`` CompressedImage (C07); the PNG header's size is checked
    against ``max_pixels`` first (core.image_decode.decode_image: ImageTooLargeError).

    Returns:
        uint16 H×W millimetres (0 = no data) for 16UC1; float32 H×W metres (NaN = no data) for
        32FC1.
    Raises:
        EmptyImageError: no data. ValueError: not compressedDepth, an RVL or unknown codec, an
        encoding other than 16UC1/32FC1, no PNG signature, a PNG that is not 16-bit 1-channel, or a
        32FC1 payload without its 12-byte quantisation header.
    """
    info = parse_format(msg.format)
    if not info['depth']:
        raise ValueError(f'CompressedImage.format={msg.format!r} is not compressedDepth')
    if info['codec'] not in (None, 'png'):
        raise ValueError(
            f'CompressedImage.format={msg.format!r}: compressedDepth codec '
            f'{info["codec"]!r} is not supported (only png)'
        )
    enc = info['encoding']
    if enc not in ('16UC1', '32FC1', 'mono16'):
        raise ValueError(
            f'CompressedImage.format={msg.format!r}: depth encoding {enc!r} is not 16UC1/32FC1'
        )
    buf = _payload(msg)
    raw = buf.tobytes()
    start = raw.find(PNG_SIGNATURE)
    if start < 0:
        raise ValueError(
            f'CompressedImage.format={msg.format!r}: no PNG signature in len(data)={len(raw)}'
        )
    img = decode_image(buf[start:], max_pixels, cv2.IMREAD_UNCHANGED, _what(msg))
    if img.dtype != np.uint16 or img.ndim != 2:
        desc = f'shape={img.shape} dtype={img.dtype}'
        raise ValueError(
            f'CompressedImage compressedDepth PNG is {desc}, expected 16-bit 1-channel'
        )
    if enc in ('16UC1', 'mono16'):
        return img
    if start < _HEADER.size:
        raise ValueError(
            f'CompressedImage.format={msg.format!r}: 32FC1 needs a 12-byte header, '
            f'PNG starts at byte {start}'
        )
    _, qa, qb = _HEADER.unpack_from(raw, start - _HEADER.size)
    v = img.astype(np.float32)
    with np.errstate(divide='ignore', invalid='ignore'):
        depth = (np.float32(qa) / (v - np.float32(qb))).astype(np.float32)
    depth[(img == 0) | ~valid_depth(depth)] = np.nan
    return depth


def decode_compressed(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[np.ndarray, str]:
    """Decode any supported CompressedImage to (array, encoding of the array's layout).

    jpeg/png colour decode to ``bgr8``/``bgra8`` (OpenCV order), gray to ``mono8``, 16-bit PNG to
    ``16UC1``/``mono16`` (IMREAD_UNCHANGED keeps 16 bits); if the format names an rgb source
    encoding (``"rgb8; jpeg compressed bgr8"``) the result is converted back to it, as
    compressed_image_transport does. compressedDepth gives ``16UC1`` (mm) or ``32FC1`` (m).

    ``max_pixels``: the size in the JPEG/PNG/TIFF header is read first and an image over it (or
    one whose size cannot be read: not JPEG, PNG or TIFF) is refused before decoding (issues 14,
    55; core.image_decode.decode_image, the one decoder of compressed bytes).

    Raises:
        EmptyImageError: no data. ImageTooLargeError: over ``max_pixels``. ValueError: undecodable
        payload (format and length named).
    """
    info = parse_format(msg.format)
    if info['depth']:
        arr = decode_compressed_depth(msg, max_pixels)
        return arr, ('32FC1' if arr.dtype == np.float32 else '16UC1')
    img = decode_image(_payload(msg), max_pixels, cv2.IMREAD_UNCHANGED, _what(msg))
    if img.ndim == 2:
        enc = 'mono8' if img.dtype == np.uint8 else ('16UC1' if img.dtype == np.uint16 else None)
        if info['encoding'] == 'mono16' and img.dtype == np.uint16:
            enc = 'mono16'
    else:
        deep = img.dtype == np.uint16
        enc = {3: 'bgr16' if deep else 'bgr8', 4: 'bgra16' if deep else 'bgra8'}.get(img.shape[2])
    if enc is None:
        raise ValueError(
            f'CompressedImage.format={msg.format!r}: decoded shape={img.shape} '
            f'dtype={img.dtype} is not supported'
        )
    src = info['encoding']
    if src in ('rgb8', 'rgba8', 'rgb16', 'rgba16') and encoding_channels(src) == encoding_channels(
        enc
    ):
        return convert_layout(img, enc, src), src
    return img, enc


def encoding_channels(encoding: str) -> int:
    """Channels of a named encoding (1 for unknown names)."""
    return ENCODINGS.get(encoding, (None, 1))[1]


def compressed_to_cv2(
    msg: Any, desired_encoding: str = 'passthrough', max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """CompressedImage -> ndarray like cv_bridge's ``compressed_imgmsg_to_cv2``.

    'passthrough' returns the layout given by :func:`decode_compressed`; otherwise a colour/mono
    conversion (e.g. 'rgb8') as in :func:`depth3dseg_ros.ros.image.imgmsg_to_cv2`. Images over
    ``max_pixels`` are refused before decoding (ImageTooLargeError).
    """
    arr, enc = decode_compressed(msg, max_pixels)
    if desired_encoding in ('passthrough', enc):
        return arr
    return convert_layout(arr, enc, desired_encoding)


def compressed_to_rgb(msg: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Network input from a colour/mono CompressedImage: H×W×3 uint8 RGB (alpha dropped, C05);
    images over ``max_pixels`` refused before decoding (ImageTooLargeError)."""
    arr, enc = decode_compressed(msg, max_pixels)
    return array_to_rgb(arr, enc)
