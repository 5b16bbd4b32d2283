"""Uncompressed ("stored") PNG writer for ``--png-level 0``: numpy + zlib checksums, ~10x faster
than cv2's level 0.

The files are ordinary PNGs (PNG specification, ISO/IEC 15948): signature, IHDR, one IDAT, IEND;
every row has filter type 0 (None) and the zlib stream (RFC 1950) holds stored (uncompressed)
deflate blocks (RFC 1951 section 3.2.4, BTYPE 00), so any PNG reader (cv2.imread, PIL, libpng)
decodes them. Samples are stored as PNG requires: 8-bit gray, 8-bit RGB (R, G, B byte order — no
BGR swap), 16-bit gray big endian. Size = raw pixel bytes + one byte per row + 5 bytes per stored
block (at most 65535 bytes each) + 57 bytes.

How: the zlib stream is laid out by hand in one numpy buffer — a 2-byte zlib header, then blocks of
as many whole rows as fit in 65535 bytes, each behind its 5-byte block header, then the adler32 —
and the image rows are copied once straight into it (with the byte swap of 16-bit samples). The
work left is that copy, the adler32 over the rows and the CRC-32 over the chunk, all of which
release the GIL, so the writer's threads run them in parallel. The two checksums come from
zlib-ng (``zlib_ng``, SIMD: ~15x faster than the stdlib's zlib 1.2.13 here) when it is installed
(requirements.txt), else from ``zlib``; both give the same bytes. (``zlib.compress(rows, 0)``, used
before, copied the data twice more and cost 2.5x as much; cv2 at level 0 still runs libpng's
adaptive row filters: 640x480 rgb8 + 16UC1 + mono8 measured 11.7 ms/frame with
``IMWRITE_PNG_FILTER_NONE``, 65 ms/frame without, 2.6 ms/frame with ``zlib.compress(rows, 0)``,
docs/extraction.md.) A row longer than 65535 bytes (width > 21845 rgb) falls back to
``zlib.compress``.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

try:  # zlib-ng's SIMD adler32/crc32: ~15x zlib 1.2's (requirements.txt); same values
    from zlib_ng import zlib_ng as _checksums
except ImportError:  # pragma: no cover - the stdlib's zlib gives the same bytes, slower
    _checksums = zlib

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_COLOR_TYPE = {1: 0, 3: 2}  # channels -> PNG colour type (gray, truecolour)
_MAX_BLOCK = 65535  # bytes of data in one stored deflate block
_ZLIB_HEADER = (0x78, 0x01)  # deflate, 32 KiB window, "fastest" level; (0x7801 % 31 == 0)


def _chunk(kind: bytes, data) -> list:
    """A PNG chunk as parts (length, type, data, CRC-32 of type + data), so the data is never
    copied. ``data``: bytes or a C-contiguous buffer (numpy array)."""
    return [
        struct.pack('>I', len(memoryview(data).cast('B'))),
        kind,
        data,
        struct.pack('>I', _checksums.crc32(data, _checksums.crc32(kind))),
    ]


def _check(img: np.ndarray) -> None:
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


def _fill_rows(rows: np.ndarray, img: np.ndarray) -> None:
    """Copy image rows behind their filter byte 0: ``rows`` is (..., n, 1 + W*C*itemsize) uint8,
    ``img`` the matching (..., n, W*C) samples (16-bit ones are written big endian)."""
    rows[..., 0] = 0  # filter type None
    if img.dtype == np.uint16:  # byte swap into a contiguous array first (vectorised), then
        # copy bytes: 3x faster than swapping into the odd, unaligned row offsets directly
        img = img.astype('>u2').view(np.uint8)
    rows[..., 1:] = img  # the copy into the stream


def zlib_stored(img: np.ndarray) -> np.ndarray:
    """The zlib stream (RFC 1950) of the PNG scanlines of ``img`` (filter byte 0 + samples per
    row) in stored deflate blocks, as one C-contiguous uint8 array (the IDAT data).

    Args:
        img: H×W uint8/uint16 or H×W×3 uint8 (RGB), checked by :func:`png_stored_parts`.
    """
    h = img.shape[0]
    samples = img.reshape(h, -1)
    rowlen = 1 + samples.shape[1] * img.itemsize
    k = _MAX_BLOCK // rowlen  # whole rows per stored block
    if k == 0:  # one row does not fit in a block: let zlib split it (rare: width > 21845 rgb)
        rows = np.empty((h, rowlen), np.uint8)
        _fill_rows(rows, samples)
        return np.frombuffer(zlib.compress(rows, 0), np.uint8)
    nfull, rest = divmod(h, k)
    full_len = 5 + k * rowlen
    buf = np.empty(2 + nfull * full_len + (5 + rest * rowlen if rest else 0) + 4, np.uint8)
    buf[:2] = _ZLIB_HEADER
    blocks = []  # (header view, data view, data length)
    if nfull:
        full = buf[2 : 2 + nfull * full_len].reshape(nfull, full_len)
        _fill_rows(
            full[:, 5:].reshape(nfull, k, rowlen), samples[: nfull * k].reshape(nfull, k, -1)
        )
        blocks += [(full[i, :5], full[i, 5:], k * rowlen) for i in range(nfull)]
    if rest:
        tail = buf[2 + nfull * full_len : -4]
        _fill_rows(tail[5:].reshape(rest, rowlen), samples[nfull * k :])
        blocks.append((tail[:5], tail[5:], rest * rowlen))
    adler = 1
    for i, (head, data, n) in enumerate(blocks):
        head[:] = np.frombuffer(
            struct.pack('<BHH', int(i == len(blocks) - 1), n, n ^ 0xFFFF), np.uint8
        )  # BFINAL on the last block, BTYPE 00 (stored), LEN, NLEN
        adler = _checksums.adler32(data, adler)
    buf[-4:] = np.frombuffer(struct.pack('>I', adler), np.uint8)
    return buf


def png_stored_parts(img: np.ndarray) -> list:
    """The byte strings of a stored PNG of ``img``, in file order (write them with ``writelines``;
    the IDAT data is a uint8 numpy array, any bytes-like consumer takes it).

    Args:
        img: H×W uint8 (gray) or uint16 (gray, e.g. depth mm), or H×W×3 uint8 **RGB**.

    Raises:
        ValueError: another dtype, channel count or an empty image (shape and dtype named).
    """
    _check(img)
    h, w = img.shape[:2]
    channels = 1 if img.ndim == 2 else 3
    bit_depth = 16 if img.dtype == np.uint16 else 8
    ihdr = struct.pack('>IIBBBBB', w, h, bit_depth, _COLOR_TYPE[channels], 0, 0, 0)
    return [
        PNG_SIGNATURE,
        *_chunk(b'IHDR', ihdr),
        *_chunk(b'IDAT', zlib_stored(img)),
        *_chunk(b'IEND', b''),
    ]


def encode_png_stored(img: np.ndarray) -> bytes:
    """PNG file bytes of ``img`` without compression (:func:`png_stored_parts` joined)."""
    return b''.join(png_stored_parts(img))
