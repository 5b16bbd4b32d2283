"""bags.png_stored: stored (uncompressed) PNGs that any reader decodes to the exact input; the
writer's level-0 path and its batched index fsync (issue 15, extraction speed)."""

import os
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from bagutil import make_frames, read_png, write_bag
from depth3dseg_ros.bags import dataset_writer
from depth3dseg_ros.bags.dataset_writer import DatasetWriter
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.bags.extract import ExtractConfig, extract
from depth3dseg_ros.bags.png_stored import encode_png_stored
from depth3dseg_ros.core.classes import NYU13


def _images():
    rng = np.random.default_rng(15)
    depth = rng.integers(0, 65536, (480, 640), dtype=np.uint16)
    depth[0, :4] = [0, 1, 256, 65535]  # byte order shows in these
    return {
        'rgb 480x640': rng.integers(0, 256, (480, 640, 3), dtype=np.uint8),
        'depth 480x640': depth,
        'labels 3x5': np.arange(15, dtype=np.uint8).reshape(3, 5),
        'rgb 1x1': np.array([[[1, 2, 3]]], np.uint8),
        'mono16 1x2': np.array([[1000, 2000]], np.uint16),
        # stored blocks hold whole rows (34 rgb rows of 640): a last block that is full, one row
        # per block (width 10000 rgb), and a row longer than a block (zlib splits it)
        'rgb 68x640 (2 full blocks)': rng.integers(0, 256, (68, 640, 3), dtype=np.uint8),
        'depth 51x640 (2 full blocks)': rng.integers(0, 65536, (51, 640), dtype=np.uint16),
        'rgb 3x10000 (1 row a block)': rng.integers(0, 256, (3, 10000, 3), dtype=np.uint8),
        'rgb 2x30000 (row > block)': rng.integers(0, 256, (2, 30000, 3), dtype=np.uint8),
        'depth 2x33000 (row > block)': rng.integers(0, 65536, (2, 33000), dtype=np.uint16),
    }


@pytest.mark.parametrize('name', list(_images()))
def test_stored_png_decodes_exactly_with_cv2_and_pil(name, tmp_path):
    img = _images()[name]
    data = encode_png_stored(img)
    path = tmp_path / 'x.png'
    path.write_bytes(data)
    dec = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img.ndim == 3:
        dec = cv2.cvtColor(dec, cv2.COLOR_BGR2RGB)
    assert dec.dtype == img.dtype and dec.shape == img.shape
    np.testing.assert_array_equal(dec, img)
    with Image.open(path) as pil:  # a second, independent decoder (PIL's own zlib/PNG code)
        mode = {3: 'RGB'}.get(img.ndim, 'L' if img.dtype == np.uint8 else 'I;16')
        assert pil.mode == mode and pil.size == (img.shape[1], img.shape[0])
        np.testing.assert_array_equal(np.asarray(pil), img)
    h = img.shape[0]
    raw = img.nbytes + h  # one filter byte per row
    idat = zlib.decompress(data[8 + 25 + 8 : -12 - 4])
    assert len(idat) == raw and idat[:: raw // h] == bytes(h)  # filter type 0 on every row
    assert raw + 57 + 2 + 4 < len(data) <= raw + 57 + 2 + 4 + 5 * (raw // 1024 + 1)


def test_stored_png_same_bytes_with_zlib_and_zlib_ng(monkeypatch):
    """The checksums come from zlib-ng when installed, else the stdlib's zlib: same file bytes."""
    from depth3dseg_ros.bags import png_stored

    pytest.importorskip('zlib_ng')
    imgs = _images()
    fast = {k: encode_png_stored(v) for k, v in imgs.items()}
    monkeypatch.setattr(png_stored, '_checksums', zlib)
    assert {k: encode_png_stored(v) for k, v in imgs.items()} == fast


def test_stored_png_refuses_other_images():
    for bad in (
        np.zeros((2, 2), np.float32),
        np.zeros((2, 2, 4), np.uint8),
        np.zeros((2, 2, 3), np.uint16),
        np.zeros((0, 3), np.uint8),
    ):
        with pytest.raises(ValueError, match='cannot write a stored PNG of shape='):
            encode_png_stored(bad)


def test_level_0_dataset_equals_level_1_pixel_for_pixel(tmp_path, real_dir):
    """The default level 0 and level 1 rle give the same decoded rgb/depth/labels (only file sizes
    differ: level 0 is larger), with 1 and 2 writer threads."""
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'b', frames)
    outs = {}
    for level, workers in ((0, 1), (0, 2), (1, 1)):
        out = tmp_path / f'ds{level}_{workers}'
        extract([bag], out, ExtractConfig(png_level=level, workers=workers))
        outs[(level, workers)] = out
    ref = read_index(outs[(1, 1)])
    size = {k: sum(p.stat().st_size for p in o.rglob('*.png')) for k, o in outs.items()}
    assert size[(0, 1)] == size[(0, 2)] > 2 * size[(1, 1)]
    for key in ((0, 1), (0, 2)):
        entries = read_index(outs[key])
        assert [dict(e, dir=None) for e in entries] == [dict(e, dir=None) for e in ref]
        for e in entries:
            for k in ('rgb', 'depth', 'labels'):
                if e[k]:
                    np.testing.assert_array_equal(
                        read_png(outs[key] / e[k]), read_png(outs[(1, 1)] / e[k])
                    )


def test_index_fsync_is_batched_but_flushed_per_frame(tmp_path, real_dir, monkeypatch):
    """Every index line reaches the OS right after its files (a killed process loses nothing
    indexed); fsync runs once per fsync_interval_s and on flush/close, not once per frame."""
    frames = make_frames(real_dir, 3)
    calls = []
    monkeypatch.setattr(dataset_writer.os, 'fsync', lambda fd: calls.append(fd))
    for interval, expected in ((3600.0, 1), (0.0, 3)):  # closing with nothing new: no fsync
        calls.clear()
        root = tmp_path / f'ds{interval}'
        with DatasetWriter(root, NYU13, fsync_interval_s=interval) as w:
            for i, f in enumerate(frames):
                w.write_frame(
                    f'f{i}', f.rgb, f.K, f.stamp_ns, 'bag', {'rgb': '/c'}, depth_mm=f.depth_mm
                )
                assert (root / 'index.jsonl').read_bytes().count(b'\n') == i + 1  # flushed already
        assert len(calls) == expected, (interval, calls)
    assert os.path.getsize(tmp_path / 'ds0.0' / 'index.jsonl') == os.path.getsize(
        tmp_path / 'ds3600.0' / 'index.jsonl'
    )
