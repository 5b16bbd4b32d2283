"""Decompression bombs for tests (issues 14 and 55): small compressed files whose header declares a
huge picture, in every format the package reads (JPEG, PNG, 16-bit PNG for compressedDepth,
TIFF).

* :func:`jpeg_bomb`: a real 8×8 JPEG whose SOF says ``w``×``h``; libjpeg decodes what is there and
  fills the rest, so decoding it allocates and writes w × h × 3 bytes (a few hundred bytes of
  file).
* :func:`png_bomb` / :func:`tiff_bomb`: valid files whose pixels are all zero, deflated (about
  1/1000 of the pixel bytes): decoding them writes every pixel.
* :func:`tiff_header`: a TIFF (little- or big-endian, classic or BigTIFF) with only its first IFD,
  for header tests.
"""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np

CHUNK = 1 << 20


def _zeros_zlib(n: int) -> bytes:
    """A zlib stream of ``n`` zero bytes, built from one compressed 1 MiB block repeated (full
    flushes reset the compressor, so the block's bytes repeat) and the right Adler-32."""
    c = zlib.compressobj(9)
    block = bytes(CHUNK)
    head = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)  # the 2-byte zlib header + block
    body = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    full, rest = divmod(n, CHUNK)
    assert full >= 2
    tail = c.compress(bytes(rest)) + c.flush()  # the final block, then a 4-byte Adler-32
    adler = 1
    for _ in range(full):
        adler = zlib.adler32(block, adler)
    adler = zlib.adler32(bytes(rest), adler)
    return head + body * (full - 1) + tail[:-4] + struct.pack('>I', adler)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))


def png_bomb(w: int, h: int, depth16: bool = False, rgb: bool = False) -> bytes:
    """A valid PNG of w×h zero pixels: 8-bit RGB (``rgb``), 8-bit gray, or 16-bit gray
    (``depth16``, the compressedDepth payload)."""
    channels, bits = (3, 8) if rgb else (1, 16 if depth16 else 8)
    ihdr = struct.pack('>IIBBBBB', w, h, bits, 2 if rgb else 0, 0, 0, 0)
    raw = h * (1 + w * channels * bits // 8)  # a filter byte (0) before each row
    return (
        b'\x89PNG\r\n\x1a\n'
        + _chunk(b'IHDR', ihdr)
        + _chunk(b'IDAT', _zeros_zlib(raw))
        + _chunk(b'IEND', b'')
    )


def png_header_bomb(w: int, h: int) -> bytes:
    """A PNG of only its IHDR chunk declaring w×h 8-bit RGB pixels, and IEND: what a header check
    refuses; no pixel data at all (a size that cannot be built as a valid file, e.g.
    100000×100000)."""
    ihdr = struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)
    return b'\x89PNG\r\n\x1a\n' + _chunk(b'IHDR', ihdr) + _chunk(b'IEND', b'')


def jpeg_bomb(w: int, h: int) -> bytes:
    """A real 8×8 JPEG with its SOF's height and width set to ``h`` and ``w``."""
    data = cv2.imencode('.jpg', np.full((8, 8, 3), 100, np.uint8))[1].tobytes()
    i = 2
    while True:
        marker, length = data[i + 1], int.from_bytes(data[i + 2 : i + 4], 'big')
        if marker in (0xC0, 0xC1, 0xC2):
            return data[: i + 5] + struct.pack('>HH', h, w) + data[i + 9 :]
        i += 2 + length


def tiff_header(
    w: int,
    h: int,
    big_endian: bool = False,
    bigtiff: bool = False,
    tile: tuple[int, int] | None = None,
    strip: bytes = b'',
    compression: int = 1,
) -> bytes:
    """An 8-bit gray TIFF of w×h with one strip (``strip``'s bytes) or, with ``tile``, the tile
    tags only."""
    e = '>' if big_endian else '<'
    entries = [(256, 4, w), (257, 4, h), (258, 3, 8), (259, 3, compression), (262, 3, 1)]
    entries += [(277, 3, 1)]
    if tile:
        entries += [(322, 4, tile[0]), (323, 4, tile[1])]
    else:
        entries += [(273, 4, 0), (278, 4, h), (279, 4, len(strip))]
    entries.sort()
    if bigtiff:
        head = (b'MM' if big_endian else b'II') + struct.pack(e + 'HHHQ', 43, 8, 0, 16)
        ifd = struct.pack(e + 'Q', len(entries))
        size = len(head) + 8 + 20 * len(entries) + 8
        pack = []
        for t, k, v in entries:
            v = size if t == 273 else v
            value = struct.pack(e + 'H', v) + bytes(6) if k == 3 else struct.pack(e + 'Q', v)
            pack.append(struct.pack(e + 'HHQ', t, 16 if k == 4 else k, 1) + value)
        return head + ifd + b''.join(pack) + struct.pack(e + 'Q', 0) + strip
    head = (b'MM' if big_endian else b'II') + struct.pack(e + 'HI', 42, 8)
    size = len(head) + 2 + 12 * len(entries) + 4
    pack = []
    for t, k, v in entries:
        v = size if t == 273 else v
        value = struct.pack(e + 'H', v) + b'\0\0' if k == 3 else struct.pack(e + 'I', v)
        pack.append(struct.pack(e + 'HHI', t, k, 1) + value)
    return head + struct.pack(e + 'H', len(entries)) + b''.join(pack) + b'\0\0\0\0' + strip


def tiff_bomb(w: int, h: int) -> bytes:
    """A valid 8-bit gray TIFF of w×h zero pixels in one deflated strip."""
    return tiff_header(w, h, strip=_zeros_zlib(w * h), compression=8)
