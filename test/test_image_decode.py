"""Issue 55: one decoder of compressed image bytes (core.image_decode.decode_image) for every path,
with the declared size checked before decoding in every format the package reads (JPEG, PNG,
compressedDepth's 16-bit PNG, TIFF); any other format is refused, its size being unreadable; a
refused image in a bag is counted and reported as skipped with its reason, never fatal.

The peak memory of whole runs (extract, eval --bag) is measured in test_decode_bombs.py
(subprocesses, full tier).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
from bagutil import TOPICS, bag_typestore, frame_messages, make_frames, write_messages
from bombutil import jpeg_bomb, png_bomb, tiff_bomb, tiff_header
from sensor_msgs.msg import CompressedImage

from depth3dseg_ros.bags.extract import extract, refused_image_lines
from depth3dseg_ros.bags.extract_config import ExtractConfig, load_extract_config
from depth3dseg_ros.bags.frames import OVER_LIMIT
from depth3dseg_ros.core.image_decode import (
    DEFAULT_MAX_PIXELS,
    ImageTooLargeError,
    decode_image,
    header_size,
    read_image_file,
)
from depth3dseg_ros.ros.compressed import decode_compressed

PACKAGE = Path(__file__).resolve().parents[1] / 'depth3dseg_ros'


def depth_msg(png: bytes) -> CompressedImage:
    """A compressedDepth message: 12-byte ConfigHeader, then ``png``."""
    return CompressedImage(
        format='16UC1; compressedDepth png', data=struct.pack('<iff', 0, 0.0, 0.0) + png
    )


BOMBS = {  # format -> message declaring 30000 x 30000 (or 20000 x 20000) pixels
    'jpeg': lambda: CompressedImage(format='jpeg', data=jpeg_bomb(30000, 30000)),
    'png': lambda: CompressedImage(format='png', data=png_bomb(20000, 20000, rgb=True)),
    'compressedDepth': lambda: depth_msg(png_bomb(20000, 20000, depth16=True)),
    'tiff': lambda: CompressedImage(format='tiff', data=tiff_header(30000, 30000)),
    'tiff tiles': lambda: CompressedImage(
        format='tiff', data=tiff_header(64, 64, tile=(30000, 30000))
    ),
}


@pytest.mark.parametrize('fmt', sorted(BOMBS))
def test_every_format_is_refused_over_the_default_limit_without_being_asked(fmt):
    """No caller can forget the limit: decode_compressed's default is DEFAULT_MAX_PIXELS."""
    with pytest.raises(
        ImageTooLargeError, match=r'header says \d+x\d+.* > max_image_pixels=67108864'
    ):
        decode_compressed(BOMBS[fmt]())


@pytest.mark.parametrize(
    'kw',
    [{}, {'big_endian': True}, {'bigtiff': True}, {'bigtiff': True, 'big_endian': True}],
    ids=['II', 'MM', 'bigtiff-II', 'bigtiff-MM'],
)
def test_tiff_size_is_read_from_its_first_ifd_in_both_byte_orders(kw):
    data = tiff_header(50, 40, strip=bytes(2000), **kw)
    assert header_size(data) == (50, 40, 2000)
    img = decode_image(data, 2000)
    assert img.shape == (40, 50) and img.dtype == np.uint8
    with pytest.raises(
        ImageTooLargeError, match='says 50x40 = 2000 pixels > max_image_pixels=1999'
    ):
        decode_image(data, 1999)
    assert header_size(tiff_header(64, 64, tile=(256, 512), **kw)) == (64, 64, 256 * 512)


def test_tiff_from_opencv_decodes_as_opencv_does():
    rgb = np.random.default_rng(0).integers(0, 255, (37, 53, 3), np.uint8)
    data = cv2.imencode('.tiff', rgb)[1]
    assert np.array_equal(decode_image(data), cv2.imdecode(data, cv2.IMREAD_UNCHANGED))
    a, enc = decode_compressed(CompressedImage(format='tiff', data=data.tobytes()))
    assert enc == 'bgr8' and np.array_equal(a, rgb)


@pytest.mark.parametrize('ext', ['.bmp', '.webp', '.ppm'])
def test_formats_whose_size_is_not_read_are_refused_though_opencv_decodes_them(ext):
    """OpenCV sniffs the bytes, whatever CompressedImage.format says: a format the size reader
    does not know would be decoded unchecked, so it is refused."""
    data = cv2.imencode(ext, np.zeros((30, 40, 3), np.uint8))[1]
    assert cv2.imdecode(data, cv2.IMREAD_UNCHANGED) is not None
    with pytest.raises(ValueError, match='neither JPEG nor PNG nor TIFF: its size cannot be read'):
        decode_compressed(CompressedImage(format='jpeg', data=data.tobytes()))


def test_there_is_no_decoding_without_a_limit():
    data = cv2.imencode('.png', np.zeros((3, 4), np.uint8))[1]
    for bad in (None, 1.5, True, '100'):
        with pytest.raises(ValueError, match='images are decoded only under a limit'):
            decode_image(data, bad)


def test_cut_tiff_headers_are_errors_not_crashes():
    data = tiff_header(50, 40)
    for cut in (6, 12, len(data) - 20):
        with pytest.raises(ValueError, match='TIFF: '):
            header_size(data[:cut])
    no_size = data[:8] + struct.pack('<H', 0) + bytes(4)
    with pytest.raises(ValueError, match='no ImageWidth/ImageLength tag'):
        header_size(no_size)


def test_dataset_files_are_read_through_the_same_check(tmp_path):
    """read_image_file (the dataset reader's cv2.imread): a PNG whose header declares more than
    the limit is refused naming the file; a missing file is None, as cv2.imread."""
    bomb = tmp_path / 'labels.png'
    bomb.write_bytes(png_bomb(20000, 20000))
    with pytest.raises(
        ImageTooLargeError, match=f'{re.escape(str(bomb))} header says 20000x20000'
    ):
        read_image_file(bomb)
    assert read_image_file(tmp_path / 'none.png') is None
    ok = tmp_path / 'ok.png'
    cv2.imwrite(str(ok), np.full((5, 6), 7, np.uint16))
    assert read_image_file(ok).dtype == np.uint16


#: cv2 decoders of files outside core/image_decode.py: bytes the package itself encoded in memory
#: (camera_aug's JPEG round trip) and the sample files checked by their sha256 (samples/)
DECODER_EXEMPT = {'training/camera_aug.py', 'samples/frames.py'}


def test_one_decoder_every_path_uses():
    """No other module of the package calls OpenCV's decoders (cv2.imdecode / cv2.imread): the
    node, extraction, evaluation and the dataset reader all go through core.image_decode."""
    found = []
    for path in sorted(PACKAGE.rglob('*.py')):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == 'core/image_decode.py' or rel in DECODER_EXEMPT:
            continue
        text = path.read_text(encoding='utf-8')
        found += [f'{rel}: {m}' for m in re.findall(r'cv2\.im(?:decode|read)\w*\(', text)]
    assert found == []


def bomb_bag(path: Path, real_dir, storage: str = 'mcap') -> Path:
    """4 real frames (rgb as JPEG, depth as compressedDepth, labels raw) and, between them, one
    bomb per format on the colour topic, one compressedDepth bomb and one PNG label bomb, each
    with its CameraInfo: the bombs' frames must be skipped with their reason, the others
    written."""
    frames = make_frames(real_dir, 4)
    ts = bag_typestore(storage)
    msgs = frame_messages(ts, frames, rgb_format='jpeg', depth_format='compressedDepth')
    from bagutil import build_msg, camera_info_msg, header

    t0 = frames[-1].stamp_ns + 10**9
    bombs = [
        ('rgb', jpeg_bomb(30000, 30000), 'rgb8; jpeg compressed bgr8'),
        ('rgb', png_bomb(16000, 16000, rgb=True), 'rgb8; png compressed bgr8'),
        ('rgb', tiff_bomb(30000, 30000), 'tiff'),
        (
            'depth',
            struct.pack('<iff', 0, 0, 0) + png_bomb(16000, 16000, True),
            '16UC1; compressedDepth png',
        ),
        ('labels', png_bomb(16000, 16000), 'mono8; png'),
    ]
    h, w = frames[0].rgb.shape[:2]
    for k, (role, data, fmt) in enumerate(bombs):
        s = t0 + k * 10**8
        if role != 'rgb':  # the bomb is the partner of a good colour image
            rgb = cv2.imencode('.jpg', frames[0].rgb)[1].tobytes()
            msgs.append(
                (
                    s + 1,
                    TOPICS['rgb'],
                    'sensor_msgs/msg/CompressedImage',
                    build_msg(
                        ts,
                        'sensor_msgs/msg/CompressedImage',
                        header=header(ts, s),
                        format='jpeg',
                        data=np.frombuffer(rgb, np.uint8).copy(),
                    ),
                )
            )
        msgs.append(
            (
                s + 1,
                TOPICS[role],
                'sensor_msgs/msg/CompressedImage',
                build_msg(
                    ts,
                    'sensor_msgs/msg/CompressedImage',
                    header=header(ts, s),
                    format=fmt,
                    data=np.frombuffer(data, np.uint8).copy(),
                ),
            )
        )
        msgs.append(
            (
                s + 1,
                TOPICS['camera_info'],
                'sensor_msgs/msg/CameraInfo',
                camera_info_msg(ts, frames[0].K, w, h, s),
            )
        )
    msgs.sort(key=lambda m: m[0])
    return write_messages(path, ts, msgs, storage=storage)


def test_extraction_skips_bombs_with_their_reason_and_keeps_the_rest(tmp_path, real_dir):
    bag = bomb_bag(tmp_path / 'bombs', real_dir)
    report = extract([bag], tmp_path / 'ds', ExtractConfig())
    (rep,) = report.values()
    by_topic = {t['role']: t for t in rep['topics'] if t['role']}
    assert by_topic['rgb']['reasons'].get(OVER_LIMIT) == 3
    assert by_topic['depth']['reasons'].get(OVER_LIMIT) == 1
    assert by_topic['labels']['reasons'].get(OVER_LIMIT) == 1
    assert rep['frames_written'] == 4 + 2  # the 4 real frames, the 2 whose depth/labels bombed
    assert 'header says 30000x30000 = 900000000 pixels' in rep['refused_images'][TOPICS['rgb']]
    lines = refused_image_lines(report, 'depth3dseg-extract')
    assert len(lines) == 3 and all('max_image_pixels' in line for line in lines), lines


def test_max_image_pixels_setting_is_checked_and_applies(tmp_path, real_dir):
    with pytest.raises(ValueError, match='max_image_pixels=0 must be >= 1'):
        load_extract_config(None, None, {'max_image_pixels': 0})
    frames = make_frames(real_dir, 2)  # 160 x 120: refused under a limit of 160 * 120 - 1
    ts = bag_typestore('mcap')
    bag = write_messages(tmp_path / 'b', ts, frame_messages(ts, frames), storage='mcap')
    cfg = load_extract_config(None, None, {'max_image_pixels': 160 * 120 - 1})
    (rep,) = extract([bag], tmp_path / 'ds', cfg).values()
    assert rep['frames_written'] == 0
    rgb = next(t for t in rep['topics'] if t['role'] == 'rgb')
    assert rgb['reasons'] == {OVER_LIMIT: 2}
    assert DEFAULT_MAX_PIXELS == ExtractConfig().max_image_pixels
