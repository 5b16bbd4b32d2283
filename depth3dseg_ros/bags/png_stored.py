"""Uncompressed ("stored") PNG writer for ``--png-level 0``: numpy + zlib, 4-5x faster than cv2's
level 0.

The files are ordinary PNGs (PNG specification, ISO/IEC 15948): signature, IHDR, one IDAT, IEND;
every row has filter type 0 (None) and the zlib stream holds stored (uncompressed) deflate blocks
(``zlib.compress(rows, 0)``), so any PNG reader (cv2.imread, PIL, libpng) decodes them. Samples are
stored as PNG requires: 8-bit gray, 8-bit RGB (R, G, B byte order — no BGR swap), 16-bit gray big
endian. Size = raw pixel bytes + one byte per row + about 5 bytes per 64 KiB + 57 bytes.

Why not cv2 at level 0: cv2 (libpng) still runs its adaptive row filters and writes through zlib
row by row; measured on 640x480 rgb8 + 16UC1 + mono8 (this machine, loaded): 11.7 ms/frame with
``IMWRITE_PNG_FILTER_NONE``, 65 ms/frame without, 2.6 ms/frame here (the numpy copy, zlib's stored
blocks and adler32, and the chunk CRC-32 are the work; zlib and numpy copies release the GIL, so
the writer's thread pool runs them in parallel).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_COLOR_TYPE = {1: 0, 3: 2}  # channels -> PNG colour type (gray, truecolour)


def _chunk(kind: bytes, data: bytes) -> list:
    """A PNG chunk as parts (length, type, data, CRC-32 of type + data), so the data is never
    copied."""
    return [
        struct.pack('>I', len(data)),
        kind,
        data,
        struct.pack('>I', zlib.crc32(data, zlib.crc32(kind))),
    ]


def png_stored_parts(img: np.ndarray) -> list:
    """The byte strings of a stored PNG of ``img``, in file order (write them with ``writelines``).

    Args:
        img: H×W uint8 (gray) or uint16 (gray, e.g. depth mm), or H×W×3 uint8 **RGB**.

    Raises:
        ValueError: another dtype, channel count or an empty image (shape and dtype named).
    """
    if (
        img.ndim not in (2, 3)
        or img.size == 0
        or (img.ndim == 3 and img.shape[2] != 3)
        or img.dtype not in (np.uint8, np.uint16)
        or (img.ndim == 3 and img.dtype != np.uint8)
    ):
        raise ValueError(
            f'cannot write a stored PNG of shape={img.shape} dtype={img.dtype}: expected HxW '
            'uint8/uint16 or HxWx3 uint8 RGB'
        )
    h, w = img.shape[:2]
    channels = 1 if img.ndim == 2 else 3
    bit_depth = 16 if img.dtype == np.uint16 else 8
    rows = np.empty((h, 1 + w * channels * img.itemsize), np.uint8)
    rows[:, 0] = 0  # filter type None
    body = rows[:, 1:].view('>u2' if bit_depth == 16 else np.uint8).reshape(h, w * channels)
    body[...] = img.reshape(h, w * channels)  # one copy (and the byte swap for 16 bit)
    ihdr = struct.pack('>IIBBBBB', w, h, bit_depth, _COLOR_TYPE[channels], 0, 0, 0)
    return [
        PNG_SIGNATURE,
        *_chunk(b'IHDR', ihdr),
        *_chunk(b'IDAT', zlib.compress(rows, 0)),
        *_chunk(b'IEND', b''),
    ]


def encode_png_stored(img: np.ndarray) -> bytes:
    """PNG file bytes of ``img`` without compression (:func:`png_stored_parts` joined)."""
    return b''.join(png_stored_parts(img))
