"""Extraction speed work (issue 15) keeps the output: CameraInfo decoded once per distinct content,
frames still get their own K."""

import os

import numpy as np
import pytest

from bagutil import make_frames, write_bag
from depth3dseg_ros.bags import frames as frames_mod
from depth3dseg_ros.bags.extract import ExtractConfig, extract
from depth3dseg_ros.dataset_format import read_index


@pytest.mark.parametrize('storage', ['sqlite3', 'ros1'])
def test_camera_info_decoded_once_per_content_each_frame_keeps_its_K(
    tmp_path, real_dir, storage, monkeypatch
):
    """CameraInfo messages cycle over the K of the sources (NYU, TUM) and repeat: each index
    line has its own CameraInfo's K and the stamps still pair (messages whose bytes differ
    only in the stamp share one decoded Intrinsics)."""
    frames = make_frames(real_dir, 7)
    assert len({tuple(f.K.ravel()) for f in frames}) >= 2
    bag = write_bag(tmp_path / ('b.bag' if storage == 'ros1' else 'b'), frames, storage=storage)
    out = tmp_path / 'ds'
    decoded = []
    real = frames_mod.intrinsics_from_camera_info
    monkeypatch.setattr(
        frames_mod,
        'intrinsics_from_camera_info',
        lambda msg, rect: decoded.append(msg) or real(msg, rect),
    )
    report = extract([bag], out, ExtractConfig(workers=1))
    entries = read_index(out)
    assert len(entries) == 7
    for f, e in zip(frames, entries):
        np.testing.assert_allclose(np.reshape(e['K'], (3, 3)), f.K, rtol=0, atol=1e-9)
        assert e['stamp_ns'] == f.stamp_ns
    assert len(decoded) == len({tuple(f.K.ravel()) for f in frames})  # once per distinct K
    (rep,) = report.values()
    info = [t for t in rep['topics'] if t['role'] == 'camera_info'][0]
    assert (info['read'], info['used'], info['skipped']) == (7, 7, 0)


def test_png_files_survive_short_writes(tmp_path, monkeypatch):
    """The writer continues a short ``os.writev`` (POSIX allows them) until all is written."""
    from depth3dseg_ros.bags import dataset_writer
    from depth3dseg_ros.bags.png_stored import encode_png_stored, png_stored_parts

    img = np.arange(120 * 50 * 3, dtype=np.uint32).astype(np.uint8).reshape(120, 50, 3)
    real = os.writev
    calls = []

    def short(fd, views):
        calls.append(len(views))
        return real(fd, [bytes(b''.join(views))[:1000]])

    monkeypatch.setattr(dataset_writer.os, 'writev', short)
    dataset_writer._write_file(tmp_path / 'x.png', png_stored_parts(img))
    assert (tmp_path / 'x.png').read_bytes() == encode_png_stored(img)
    assert len(calls) == -(-len(encode_png_stored(img)) // 1000)


def test_camera_info_used_by_a_written_frame_counts_as_used_after_a_refused_one(
    tmp_path, real_dir
):
    """One CameraInfo serves every frame; the first frame is refused (label id 255, policy refuse,
    C43) while the reader thread decodes the next ones ahead: the CameraInfo still counts as
    used, as it did when frames were decoded one at a time."""
    from dataclasses import replace

    frames = make_frames(real_dir, 4)
    lab = frames[0].labels.copy()
    lab[:2] = 255
    frames[0] = replace(frames[0], labels=lab)
    bag = write_bag(tmp_path / 'b', frames, drop={'camera_info': [1, 2, 3]})
    cfg = ExtractConfig(workers=1, tolerance_ms=200, out_of_range_labels='refuse')
    report = extract([bag], tmp_path / 'ds', cfg)
    topics = {t['role']: t for t in report['b']['topics'] if t['role']}
    assert (topics['camera_info']['read'], topics['camera_info']['used']) == (1, 1)
    assert (topics['rgb']['used'], topics['rgb']['skipped']) == (3, 1)
    assert [e['id'] for e in read_index(tmp_path / 'ds')] == [f'b_{i:06d}' for i in (1, 2, 3)]
