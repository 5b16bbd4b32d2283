"""Issue 14 ("Inputs"): a CompressedImage's size is read from its header and refused over a pixel
limit before anything is decoded (a 641-byte JPEG claiming 30000x30000 pixels took the node to 5.5
GB).

Crafted headers: real small JPEG/PNG files from OpenCV whose SOF / IHDR size fields are
overwritten.
"""

from __future__ import annotations

import struct
import tracemalloc

import cv2
import numpy as np
import pytest
from bombutil import jpeg_bomb
from sensor_msgs.msg import CompressedImage

from depth3dseg_ros.ros.compressed import (
    DEFAULT_MAX_PIXELS,
    ImageTooLargeError,
    check_compressed_size,
    check_pixel_limit,
    compressed_image_size,
    compressed_to_rgb,
    decode_compressed,
    encode_compressed_depth,
    payload_size,
)


def jpeg(w=53, h=37, progressive=False) -> bytes:
    params = [cv2.IMWRITE_JPEG_PROGRESSIVE, 1] if progressive else []
    ok, buf = cv2.imencode('.jpg', np.full((h, w, 3), 100, np.uint8), params)
    return buf.tobytes()


def png(w=53, h=37) -> bytes:
    return cv2.imencode('.png', np.zeros((h, w, 3), np.uint8))[1].tobytes()


def with_png_size(data: bytes, w: int, h: int) -> bytes:
    return data[:16] + struct.pack('>II', w, h) + data[24:]


def msg(data: bytes, fmt: str = 'jpeg') -> CompressedImage:
    return CompressedImage(format=fmt, data=data)


def test_sizes_read_from_headers_without_decoding():
    assert payload_size(jpeg()) == (53, 37)
    assert payload_size(jpeg(progressive=True)) == (53, 37)  # SOF2
    assert payload_size(png()) == (53, 37)
    assert payload_size(np.frombuffer(png(7, 3), np.uint8)) == (7, 3)
    assert payload_size(jpeg_bomb(30000, 30000)) == (30000, 30000)
    assert payload_size(with_png_size(png(), 2**31 - 1, 5)) == (2**31 - 1, 5)
    # fill bytes before a marker and an APPn segment before the SOF are walked over
    j = jpeg()
    padded = j[:2] + b'\xff\xe1\x00\x04ab' + b'\xff\xff' + j[2:]
    assert payload_size(padded) == (53, 37)


def test_unreadable_headers_are_errors():
    with pytest.raises(
        ValueError,
        match="payload starting '47 49 46 38 39 61 01 00' is neither JPEG nor PNG nor TIFF",
    ):
        payload_size(b'GIF89a\x01\x00\x01\x00')
    with pytest.raises(
        ValueError, match=r'JPEG: no SOF marker \(image size\) in the first 6 bytes'
    ):
        payload_size(b'\xff\xd8\xff\xd9\x00\x00')
    with pytest.raises(ValueError, match='PNG: no IHDR chunk'):
        payload_size(png()[:20])
    with pytest.raises(
        ValueError, match="CompressedImage.format='jpeg' len\\(data\\)=4: JPEG: no SOF"
    ):
        compressed_image_size(msg(b'\xff\xd8\xff\xd9'))


def test_the_641_byte_30000x30000_jpeg_is_refused_before_decoding():
    bomb = jpeg_bomb(30000, 30000)
    assert len(bomb) < 1000
    tracemalloc.start()
    with pytest.raises(ImageTooLargeError) as err:
        compressed_to_rgb(msg(bomb), DEFAULT_MAX_PIXELS)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(err.value) == (
        "CompressedImage (format='jpeg') header says 30000x30000 = 900000000 pixels > "
        'max_image_pixels=67108864'
    )
    assert (err.value.width, err.value.height, err.value.max_pixels) == (30000, 30000, 8192 * 8192)
    assert isinstance(err.value, ValueError) and peak < 1_000_000


def test_limit_is_inclusive_and_png_and_compressed_depth_are_checked():
    assert DEFAULT_MAX_PIXELS == 67_108_864
    check_pixel_limit(8192, 8192, DEFAULT_MAX_PIXELS)  # exactly at the limit: accepted
    with pytest.raises(
        ImageTooLargeError, match=r'says 8193x8192 = 67117056 pixels > max_image_pixels=67108864'
    ):
        check_pixel_limit(8193, 8192, DEFAULT_MAX_PIXELS)
    check_pixel_limit(10**6, 10**6, None)  # None: no limit
    assert check_compressed_size(msg(png(), 'png'), 53 * 37) == (53, 37)
    with pytest.raises(
        ImageTooLargeError,
        match=r"format='png'\) header says 53x37 = 1961 pixels > max_image_pixels=1960",
    ):
        decode_compressed(msg(png(), 'png'), 1960)
    depth = encode_compressed_depth(np.full((30, 40), 1500, np.uint16), '16UC1')
    raw = bytes(depth.data)
    assert compressed_image_size(depth) == (40, 30)
    big = CompressedImage(
        format=depth.format, data=raw[:12] + with_png_size(raw[12:], 70000, 70000)
    )
    with pytest.raises(ImageTooLargeError, match=r'header says 70000x70000 = 4900000000 pixels'):
        decode_compressed(big, DEFAULT_MAX_PIXELS)


def test_images_under_the_limit_decode_as_without_it():
    for data, fmt in ((jpeg(), 'jpeg'), (png(), 'png')):
        a, enc = decode_compressed(msg(data, fmt), DEFAULT_MAX_PIXELS)
        b, enc2 = decode_compressed(msg(data, fmt))
        assert enc == enc2 and np.array_equal(a, b) and a.shape[:2] == (37, 53)
    # a payload whose size cannot be read is never left to the decoder (issue 55: there is no
    # decoding without the limit, which is DEFAULT_MAX_PIXELS unless given)
    for limit in ((), (DEFAULT_MAX_PIXELS,)):
        with pytest.raises(ValueError, match='neither JPEG nor PNG nor TIFF'):
            decode_compressed(msg(b'GIF89a\x01\x00', 'gif'), *limit)
