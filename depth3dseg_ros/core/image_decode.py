"""The one decoder of compressed image bytes (JPEG, PNG, TIFF), with the size check first.

Every path that turns compressed bytes into pixels comes here: the node's CompressedImage input,
bag extraction (``depth3dseg-extract`` and ``depth3dseg-eval --bag``, colour, compressedDepth and
label images alike, through ros/compressed.py) and the dataset reader of training and evaluation
(the PNG files of a dataset directory). A 641-byte JPEG whose header claims 30000×30000 pixels made
OpenCV allocate 2.7 GB (issues 14 and 55); so :func:`decode_image` reads the width and height the
header declares (JPEG SOF marker, PNG IHDR chunk, TIFF first IFD, its tile size too) without
decoding, refuses an image over ``max_pixels`` with :class:`ImageTooLargeError` before a pixel is
allocated, and refuses bytes whose size it cannot read (any other format OpenCV would otherwise
sniff and decode: BMP, WebP, GIF, ...) with a ValueError. Pure: numpy and OpenCV only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

#: the default pixel limit (8192×8192 = 67,108,864), the node's ``max_image_pixels`` default and
#: depth3dseg-extract's
DEFAULT_MAX_PIXELS = 8192 * 8192
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
# JPEG start-of-frame markers (ITU T.81 B.1.1.3): C0..CF except DHT (C4), JPG (C8) and DAC (CC)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# TIFF tags (TIFF 6.0 section 8, 15): ImageWidth, ImageLength, TileWidth, TileLength
_TIFF_SIZE_TAGS = (256, 257, 322, 323)
# TIFF field types that hold a size: SHORT, LONG, LONG8 (BigTIFF) -> bytes
_TIFF_INT_TYPES = {3: 2, 4: 4, 16: 8}


class ImageTooLargeError(ValueError):
    """A compressed image whose header claims more pixels than allowed; raised before decoding.

    Attributes: width, height (from the header), max_pixels (the limit).
    """

    def __init__(self, text: str, width: int, height: int, max_pixels: int) -> None:
        super().__init__(text)
        self.width, self.height, self.max_pixels = width, height, max_pixels


def _jpeg_size(raw: bytes) -> tuple[int, int]:
    """(width, height) from the first SOFn segment of a JPEG (ITU T.81 B.2.2), walking the
    markers."""
    i, n = 2, len(raw)
    while i < n:
        if raw[i] != 0xFF:
            raise ValueError(f'JPEG: no marker at byte {i} (0x{raw[i]:02X}) before a SOF marker')
        while i < n and raw[i] == 0xFF:  # fill bytes
            i += 1
        if i >= n:
            break
        marker = raw[i]
        i += 1
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # TEM, SOI, RSTn: no length
            continue
        if marker in (0xD9, 0xDA):  # EOI, SOS before any SOF
            break
        if i + 2 > n:
            break
        length = int.from_bytes(raw[i : i + 2], 'big')
        if length < 2:
            raise ValueError(f'JPEG: segment 0xFF{marker:02X} at byte {i - 2} has length {length}')
        if marker in _SOF:
            if i + 7 > n:
                break
            return int.from_bytes(raw[i + 5 : i + 7], 'big'), int.from_bytes(
                raw[i + 3 : i + 5], 'big'
            )
        i += length
    raise ValueError(f'JPEG: no SOF marker (image size) in the first {n} bytes')


def _tiff_size(raw: bytes) -> tuple[int, int, int]:
    """(width, height, tile pixels or 0) from the first IFD of a TIFF or BigTIFF file (what
    OpenCV's TIFF decoder reads); the tile size matters because libtiff allocates a whole tile."""
    order = 'little' if raw[:2] == b'II' else 'big'

    def num(at: int, size: int) -> int:
        if at + size > len(raw):
            raise ValueError(f'TIFF: cut off at byte {at} (len(data)={len(raw)})')
        return int.from_bytes(raw[at : at + size], order)

    big = num(2, 2) == 43  # BigTIFF: 8-byte offsets and counts, 20-byte entries
    ifd = num(8, 8) if big else num(4, 4)
    count = num(ifd, 8 if big else 2)
    first, entry = ifd + (8 if big else 2), (20 if big else 12)
    if count > (len(raw) - first) // entry:
        raise ValueError(f'TIFF: first IFD at byte {ifd} claims {count} entries past the data')
    found: dict[int, int] = {}
    for k in range(count):
        at = first + k * entry
        tag, kind = num(at, 2), num(at + 2, 2)
        if tag in _TIFF_SIZE_TAGS and kind in _TIFF_INT_TYPES:
            found[tag] = num(at + (12 if big else 8), _TIFF_INT_TYPES[kind])
    if 256 not in found or 257 not in found:
        raise ValueError('TIFF: no ImageWidth/ImageLength tag in the first IFD')
    return found[256], found[257], found.get(322, 0) * found.get(323, 0)


def header_size(data: Any) -> tuple[int, int, int]:
    """(width, height, pixels) of a JPEG, PNG or TIFF file in ``data`` (bytes or uint8 array),
    from its header only; ``pixels`` is what a decoder allocates at least: width × height, or a
    TIFF tile's pixels when larger.

    Raises:
        ValueError: not a JPEG, PNG or TIFF (the first bytes named), or the header is cut or has
            no size.
    """
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    if raw[:2] == b'\xff\xd8':
        w, h = _jpeg_size(raw)
        return w, h, w * h
    if raw[:8] == PNG_SIGNATURE:
        if len(raw) < 24 or raw[12:16] != b'IHDR':
            raise ValueError(
                f'PNG: no IHDR chunk right after the signature (len(data)={len(raw)})'
            )
        w, h = int.from_bytes(raw[16:20], 'big'), int.from_bytes(raw[20:24], 'big')
        return w, h, w * h
    if raw[:4] in (b'II*\x00', b'MM\x00*', b'II+\x00', b'MM\x00+'):
        w, h, tile = _tiff_size(raw)
        return w, h, max(w * h, tile)
    raise ValueError(
        f'payload starting {raw[:8].hex(" ")!r} is neither JPEG nor PNG nor TIFF: its size '
        'cannot be read before decoding'
    )


def payload_size(data: Any) -> tuple[int, int]:
    """(width, height) of a JPEG, PNG or TIFF file in ``data`` (bytes or uint8 array), from its
    header only (:func:`header_size`).

    JPEG (starts FF D8): the SOF0..SOF15 segment (height, width: big-endian uint16 after the
    precision byte). PNG (8-byte signature): the IHDR chunk (width, height: big-endian uint32 at
    bytes 16 and 20). TIFF (``II*\\0``/``MM\\0*``, BigTIFF ``+``): ImageWidth and ImageLength of
    the first IFD. Nothing is decoded or allocated beyond the header walk.

    Raises:
        ValueError: as :func:`header_size`.
    """
    w, h, _ = header_size(data)
    return w, h


def check_pixel_limit(
    width: int, height: int, max_pixels: int | None, what: str = 'image', pixels: int = 0
) -> None:
    """Raise :class:`ImageTooLargeError` when ``max(width*height, pixels) > max_pixels`` (None: no
    limit; the raw-Image header check of the node). ``pixels``: what the decoder allocates when
    more than width × height (a TIFF tile).

    The message names both sizes and the limit, e.g. ``CompressedImage header says 30000x30000 =
    900000000 pixels > max_image_pixels=67108864``.
    """
    n = max(int(width) * int(height), int(pixels))
    if max_pixels is not None and n > int(max_pixels):
        tile = '' if n == int(width) * int(height) else ' (its tiles)'
        raise ImageTooLargeError(
            f'{what} says {width}x{height}{tile} = {n} pixels > max_image_pixels={max_pixels}',
            int(width),
            int(height),
            int(max_pixels),
        )


def decode_image(
    data: Any,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    flags: int = cv2.IMREAD_UNCHANGED,
    what: str = 'image',
) -> np.ndarray:
    """Decode JPEG, PNG or TIFF bytes with OpenCV once the header's size is within
    ``max_pixels``.

    Args:
        data: the file's bytes (bytes, memoryview or a 1-D uint8 array, not copied when an array).
        max_pixels: the pixel limit (width × height, or a TIFF tile's pixels); required: there is
            no decoding without one.
        flags: cv2.IMREAD_* (UNCHANGED keeps 16 bits and alpha; COLOR gives 8-bit BGR).
        what: how errors name the image (``"CompressedImage (format='jpeg')"``, a file path).
    Returns:
        The decoded array as OpenCV returns it (H×W, H×W×3 BGR or H×W×4 BGRA; uint8 or uint16).
    Raises:
        ImageTooLargeError: the header declares more than ``max_pixels``; nothing was decoded.
        ValueError: ``max_pixels`` not a positive number, a size that cannot be read (not JPEG,
            PNG or TIFF; a cut header: ``what`` and the length named), or bytes OpenCV cannot
            decode.
    """
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, (int, np.integer)):
        raise ValueError(f'max_pixels={max_pixels!r}: images are decoded only under a limit')
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
    try:
        w, h, pixels = header_size(buf)
    except ValueError as err:
        raise ValueError(f'{what} len(data)={buf.size}: {err}') from None
    check_pixel_limit(w, h, max_pixels, f'{what} header', pixels)
    img = cv2.imdecode(buf, flags)
    if img is None:
        raise ValueError(f'{what} len(data)={buf.size}: cannot be decoded')
    return img


def read_image_file(
    path: str | Path, flags: int = cv2.IMREAD_UNCHANGED, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray | None:
    """``cv2.imread`` with the size check of :func:`decode_image` (the dataset reader's files).

    Returns:
        The decoded array, or None when the file is missing or unreadable (as cv2.imread).
    Raises:
        ImageTooLargeError: the file's header declares more than ``max_pixels`` (path named).
        ValueError: a file that is neither JPEG, PNG nor TIFF, or that cannot be decoded.
    """
    try:
        data = np.fromfile(str(path), np.uint8)
    except OSError:
        return None
    if data.size == 0:
        return None
    return decode_image(data, max_pixels, flags, str(path))
