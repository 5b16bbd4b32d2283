"""depth3dseg-extract: bags built from real NYU/TUM frames -> dataset directory
(docs/ARCHITECTURE.md).

Checks frames, exact values (rgb bytes, depth mm, label ids), K, stamps, per-topic counts and
reasons, C28/C29 through the whole pipeline, idempotent re-runs and crash safety (injected
failure).
"""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bagutil import (
    TOPICS,
    ExtraTopic,
    bag_typestore,
    frame_messages,
    make_frames,
    read_png,
    set_metadata_compression,
    write_bag,
    write_messages,
)
from depth3dseg_ros.bags import dataset_writer
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.bags.extract import ExtractConfig, extract, load_extract_config, main
from depth3dseg_ros.bags.pairing import match_nearest
from depth3dseg_ros.core.classes import NYU13, ClassSet


def _topic(report, bag, topic):
    return next(t for t in report[bag]['topics'] if t['topic'] == topic)


def _check_frames(out, frames, ids=None):
    """Every index entry matches its source frame exactly (rgb, depth mm, labels, K, stamp)."""
    entries = read_index(out)
    by_stamp = {f.stamp_ns: f for f in frames}
    for e in entries:
        f = by_stamp[e['stamp_ns']]
        assert (e['width'], e['height']) == (160, 120) and e['depth_scale'] == 0.001
        np.testing.assert_array_equal(read_png(out / e['rgb']), f.rgb)
        if e['depth'] is not None:
            depth = read_png(out / e['depth'])
            assert depth.dtype == np.uint16
            np.testing.assert_array_equal(depth, f.depth_mm)
        if e['labels'] is not None:
            np.testing.assert_array_equal(read_png(out / e['labels']), f.labels)
        np.testing.assert_allclose(np.reshape(e['K'], (3, 3)), f.K, rtol=0, atol=1e-12)
    return entries


def test_extract_real_frames_exact_values_and_manifest(tmp_path, real_dir):
    """NYU 0001 (+labels) and TUM frames: rgb bytes, depth mm and label ids exact; K and stamps
    kept; manifest has counts, NYU13 class names, sources and the per-topic report."""
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'nyu_tum', frames)
    out = tmp_path / 'ds'
    report = extract([bag], out, ExtractConfig())
    entries = _check_frames(out, frames)
    assert [e['id'] for e in entries] == [f'nyu_tum_{i:06d}' for i in range(6)]
    assert [e['labels'] is not None for e in entries] == [True, False, False] * 2
    assert all(e['depth'] is not None for e in entries)
    assert entries[0]['topics'] == {
        'rgb': TOPICS['rgb'],
        'depth': TOPICS['depth'],
        'labels': TOPICS['labels'],
        'camera_info': TOPICS['camera_info'],
    }
    assert entries[1]['topics']['labels'] is None and entries[0]['bag'] == str(bag)
    labels = read_png(out / entries[0]['labels'])
    assert labels.dtype == np.uint8 and 0 < labels.max() < len(NYU13)
    manifest = json.loads((out / 'manifest.json').read_text())
    assert manifest['version'] == 1 and ClassSet.from_dict(manifest['classes']) == NYU13
    assert manifest['counts'] == {'frames': 6, 'with_depth': 6, 'with_labels': 2}
    assert manifest['sources'][0]['topics']['depth'] == TOPICS['depth']
    rgb = _topic(report, 'nyu_tum', TOPICS['rgb'])
    assert (rgb['read'], rgb['used'], rgb['skipped']) == (6, 6, 0)
    assert _topic(report, 'nyu_tum', TOPICS['labels'])['read'] == 2
    assert manifest['report']['nyu_tum']['topics'] == report['nyu_tum']['topics']


def test_c29_all_compression_variants_give_identical_datasets(tmp_path, real_dir):
    """C29 end to end: every storage/compression variant extracts to byte-identical PNGs and equal
    index entries (apart from the bag path and id prefix)."""
    frames = make_frames(real_dir, 3)
    variants = [
        ('sqlite3', 'none'),
        ('sqlite3', 'file'),
        ('sqlite3', 'message'),
        ('mcap', 'zstd-chunks'),
        ('mcap', 'lz4-chunks'),
        ('ros1', 'bz2'),
        ('ros1', 'lz4'),
    ]
    ref = None
    for storage, comp in variants:
        name = f'v_{storage}_{comp}'.replace('-', '_')
        bag = write_bag(
            tmp_path / (name + ('.bag' if storage == 'ros1' else '')),
            frames,
            storage=storage,
            compression=comp,
        )
        out = tmp_path / f'ds_{name}'
        extract([bag], out, ExtractConfig())
        entries = read_index(out)
        files = [
            (out / e[k]).read_bytes() for e in entries for k in ('rgb', 'depth', 'labels') if e[k]
        ]
        norm = [
            {k: v for k, v in e.items() if k not in ('id', 'bag', 'rgb', 'depth', 'labels', 'dir')}
            for e in entries
        ]
        if ref is None:
            ref = (files, norm)
            _check_frames(out, frames)
            assert len(norm) == 3
        assert (files, norm) == ref, (storage, comp)


def test_c29_unsupported_compression_fails_before_writing(tmp_path, real_dir, capsys):
    """C29: the CLI refuses an unsupported variant up front (rc 2, bad input: 'unsupported
    compression: file/lz4'); a good bag listed first is not extracted either."""
    frames = make_frames(real_dir, 2)
    good = write_bag(tmp_path / 'good', frames)
    bad = write_bag(tmp_path / 'bad', frames, compression='file')
    set_metadata_compression(bad, 'file', 'lz4')
    out = tmp_path / 'ds'
    assert main([str(good), str(bad), '-o', str(out)]) == 2
    assert 'unsupported compression: file/lz4' in capsys.readouterr().err
    assert not out.exists()


def test_c28_custom_type_skipped_and_counted(tmp_path, real_dir, caplog):
    """C28: .db3 without definitions plus /det of an uninstalled type: frames extract through the
    ros2_kilted typestore; /det is 0 read / all skipped ('unknown type'), with one warning."""
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'old', frames, extra=[ExtraTopic()], strip_definitions=True)
    out = tmp_path / 'ds'
    report = extract([bag], out, ExtractConfig())
    _check_frames(out, frames)
    assert len(read_index(out)) == 6
    det = _topic(report, 'old', '/det')
    assert (det['read'], det['used'], det['skipped'], det['reasons']) == (
        0,
        0,
        6,
        {'unknown type': 6},
    )
    rgb = _topic(report, 'old', TOPICS['rgb'])
    assert (rgb['read'], rgb['skipped']) == (6, 0)
    warnings = [
        r.getMessage() for r in caplog.records if 'my_pkg/msg/Detections' in r.getMessage()
    ]
    assert len(warnings) == 1 and '/det' in warnings[0]


def test_compressed_rgb_and_compressed_depth(tmp_path, real_dir):
    """CompressedImage png rgb + compressedDepth (and 16-bit png) depth decode exactly; jpeg rgb
    closely."""
    frames = make_frames(real_dir, 3)
    for depth_format in ('compressedDepth', 'png'):
        bag = write_bag(
            tmp_path / f'c_{depth_format}.bag',
            frames,
            storage='ros1',
            rgb_format='png',
            depth_format=depth_format,
        )
        out = tmp_path / f'ds_{depth_format}'
        extract([bag], out, ExtractConfig())
        assert len(_check_frames(out, frames)) == 3
    bag = write_bag(tmp_path / 'jpeg', frames, storage='mcap', rgb_format='jpeg')
    extract([bag], tmp_path / 'ds_jpeg', ExtractConfig())
    for e, f in zip(read_index(tmp_path / 'ds_jpeg'), frames):
        diff = np.abs(read_png(tmp_path / 'ds_jpeg' / e['rgb']).astype(int) - f.rgb.astype(int))
        assert diff.mean() < 6
        np.testing.assert_array_equal(read_png(tmp_path / 'ds_jpeg' / e['depth']), f.depth_mm)


def test_float_depth_and_mm_passthrough_match_core_depth(tmp_path, real_dir):
    """32FC1 metres (NaN = no data) become the same 16-bit mm as the 16UC1 bag; the 16UC1 copy used
    for millimetres equals core.depth's mm -> m -> mm round trip for every uint16 value."""
    from depth3dseg_ros.core.depth import depth_to_meters, meters_to_16uc1

    every = np.arange(65536, dtype=np.uint16).reshape(256, 256)
    np.testing.assert_array_equal(meters_to_16uc1(depth_to_meters(every, '16UC1')), every)
    frames = make_frames(real_dir, 3)
    bag = write_bag(
        tmp_path / 'float', frames, storage='mcap', depth_format='32FC1', with_labels=False
    )
    extract([bag], tmp_path / 'ds', ExtractConfig(png_strategy='default', workers=1))
    assert len(_check_frames(tmp_path / 'ds', frames)) == 3


def test_pairing_tolerance_and_skip_reasons(tmp_path, real_dir):
    """Depth 30 ms late: skipped 'no partner within tolerance' at 20 ms, paired at 40 ms. A missing
    CameraInfo skips that rgb; a missing label gives labels null; a depth of another size is a
    'size mismatch'; an undecodable rgb is 'undecodable'."""
    frames = make_frames(real_dir, 6, sources=('nyu0001',), period_ns=100_000_000)  # 10 Hz
    small = np.zeros((60, 80), np.uint16)
    frames[4] = replace(frames[4], depth_mm=small)
    ts = bag_typestore('sqlite3')
    msgs = frame_messages(
        ts,
        frames,
        stamp_offsets_ns={'depth': 30_000_000},
        drop={'camera_info': [1], 'labels': [2]},
    )
    t, topic, mt, rgb5 = next(
        m
        for m in msgs
        if m[1] == TOPICS['rgb'] and m[3].header.stamp.nanosec == frames[5].stamp_ns % 10**9
    )
    msgs[msgs.index((t, topic, mt, rgb5))] = (
        t,
        topic,
        mt,
        ts.serialize_cdr(rgb5, mt)[:40].tobytes(),
    )
    bag = write_messages(tmp_path / 'jitter', ts, msgs)
    report = extract([bag], tmp_path / 'ds20', ExtractConfig())
    rgb = _topic(report, 'jitter', TOPICS['rgb'])
    assert rgb['reasons'] == {'no camera_info within tolerance': 1, 'undecodable': 1}
    assert rgb['used'] == 4
    depth = _topic(report, 'jitter', TOPICS['depth'])
    assert (depth['read'], depth['used'], depth['reasons']) == (
        6,
        0,
        {'no partner within tolerance': 6},
    )
    labels = _topic(report, 'jitter', TOPICS['labels'])
    assert labels['used'] == 3 and labels['reasons'] == {'frame not extracted': 2}  # rgb 1 and 5
    entries = read_index(tmp_path / 'ds20')
    assert [e['depth'] for e in entries] == [None] * 4
    assert [e['labels'] is None for e in entries] == [False, True, False, False]

    report = extract(
        [bag], tmp_path / 'ds40', load_extract_config(None, overrides={'tolerance_ms': 40})
    )
    depth = _topic(report, 'jitter', TOPICS['depth'])
    assert depth['used'] == 3 and depth['reasons'] == {
        'frame not extracted': 2,
        'size mismatch': 1,
    }
    entries = _check_frames(tmp_path / 'ds40', frames)
    assert [e['depth'] is None for e in entries] == [False, False, False, True]


def test_bags_without_labels_or_depth(tmp_path, real_dir):
    """No labels topic -> labels null; no depth either -> depth null too; frames still written when
    allowed (allow_missing)."""
    frames = make_frames(real_dir, 3)
    rgbd = write_bag(tmp_path / 'rgbd', frames, with_labels=False)
    rgb_only = write_bag(tmp_path / 'rgbonly', frames, with_labels=False, with_depth=False)
    out = tmp_path / 'ds'
    report = extract([rgbd, rgb_only], out, ExtractConfig(allow_missing=['depth', 'labels']))
    entries = _check_frames(out, frames)
    assert len(entries) == 6 and all(e['labels'] is None for e in entries)
    assert [e['depth'] is None for e in entries] == [False] * 3 + [True] * 3
    assert report['rgbonly']['missing_roles'] == ['depth', 'labels']
    counts = json.loads((out / 'manifest.json').read_text())['counts']
    assert counts == {'frames': 6, 'with_depth': 3, 'with_labels': 0}


def test_several_bags_every_max_frames_and_idempotent_rerun(tmp_path, real_dir):
    """Two bags (same name in two folders) -> unique ids; --every 2 --max-frames 5; re-running
    changes nothing; a later run without the limit adds only the missing frames."""
    frames = make_frames(real_dir, 6)
    a = write_bag(tmp_path / 'x' / 'run', frames)
    b = write_bag(tmp_path / 'y' / 'run', frames, storage='mcap')
    out = tmp_path / 'ds'
    cfg = load_extract_config(None, overrides={'every': 2, 'max_frames': 5})
    report = extract([a, b], out, cfg)
    ids = [e['id'] for e in read_index(out)]
    assert ids == ['run_000000', 'run_000002', 'run_000004', 'run_2_000000', 'run_2_000002']
    assert _topic(report, 'run_2', TOPICS['rgb'])['reasons'] == {
        'subsampled (--every)': 3,
        'max-frames reached': 1,
    }
    before = {p.name: p.read_bytes() for p in out.rglob('*.png')}
    index_before = (out / 'index.jsonl').read_bytes()
    report = extract([a, b], out, cfg)
    assert (out / 'index.jsonl').read_bytes() == index_before
    assert {p.name: p.read_bytes() for p in out.rglob('*.png')} == before
    assert report['run']['frames_written'] == 0 and report['run']['frames_present'] == 3
    extract([a, b], out, ExtractConfig())
    entries = _check_frames(out, frames)
    assert len(entries) == 12 and len({e['id'] for e in entries}) == 12
    assert json.loads((out / 'manifest.json').read_text())['counts']['frames'] == 12


@pytest.mark.parametrize('workers', [1, 3])
def test_interrupted_run_leaves_only_complete_frames_and_resumes(
    tmp_path, real_dir, monkeypatch, workers
):
    """A failure injected while writing frame 4's depth PNG (sequential and with an encoding pool):
    the index lists only frames whose files are all in place; a torn index line is dropped on
    reopen; the re-run completes the dataset and equals an uninterrupted run."""
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'b', frames)
    clean = tmp_path / 'clean'
    extract([bag], clean, ExtractConfig(workers=1))

    out = tmp_path / 'ds'
    real_write = dataset_writer.DatasetWriter._write_png
    calls = []

    def failing(self, rel, img):
        calls.append(rel)
        if rel == 'depth/b_000004.png':
            raise OSError('disk full (injected)')
        return real_write(self, rel, img)

    monkeypatch.setattr(dataset_writer.DatasetWriter, '_write_png', failing)
    with pytest.raises(OSError, match='injected'):
        extract([bag], out, ExtractConfig(workers=workers))
    monkeypatch.setattr(dataset_writer.DatasetWriter, '_write_png', real_write)
    entries = read_index(out)
    assert [e['id'] for e in entries] == [f'b_{i:06d}' for i in range(4)]
    assert (out / 'rgb' / 'b_000004.png').exists()  # written, but not part of the dataset
    for e in entries:
        for k in ('rgb', 'depth', 'labels'):
            assert e[k] is None or read_png(out / e[k]).size > 0
    assert not list(out.rglob('*.tmp'))
    with open(out / 'index.jsonl', 'ab') as fh:  # a line torn by a kill mid-write
        fh.write(b'{"id": "b_000004", "rgb": "rgb/b_0')
    extract([bag], out, ExtractConfig(workers=workers))
    assert (out / 'index.jsonl').read_bytes() == (clean / 'index.jsonl').read_bytes()
    for p in clean.rglob('*.png'):
        assert (out / p.relative_to(clean)).read_bytes() == p.read_bytes()


def test_killed_process_leaves_only_complete_frames(tmp_path, real_dir):
    """SIGKILL of a running depth3dseg-extract process once frames are being indexed: every indexed
    frame has all its PNGs decodable (a torn last line is ignored), no index line names a temp
    file, and a re-run completes the dataset."""
    frames = make_frames(real_dir, 24, size=(320, 240))
    bag = write_bag(tmp_path / 'big', frames, with_labels=False)
    out = tmp_path / 'ds'
    cmd = [
        sys.executable,
        '-m',
        'depth3dseg_ros.bags.extract',
        str(bag),
        '-o',
        str(out),
        '-q',
        '--png-level',
        '6',
        '--labels-topic',
        '',
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        index = out / 'index.jsonl'
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if index.is_file() and index.read_bytes().count(b'\n') >= 2:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    entries = read_index(out)
    assert 2 <= len(entries) < 24
    for e in entries:
        np.testing.assert_array_equal(
            read_png(out / e['depth']), frames[int(e['id'][-6:])].depth_mm
        )
        assert read_png(out / e['rgb']).shape == (240, 320, 3)
    assert subprocess.run(cmd, timeout=300, capture_output=True).returncode == 0
    entries = read_index(out)
    assert [e['id'] for e in entries] == [f'big_{i:06d}' for i in range(24)]


def test_cli_yaml_preset_and_errors(tmp_path, real_dir, capsys):
    """CLI: realsense preset via YAML + flag override; the report table is printed; a wrong rgb
    topic is an error listing the image topics; bad settings name the field and value."""
    frames = make_frames(real_dir, 4)
    rs_topics = {
        'rgb': '/camera/color/image_raw',
        'depth': '/camera/aligned_depth_to_color/image_raw',
        'camera_info': '/camera/color/camera_info',
    }
    bag = write_bag(tmp_path / 'rs', frames, topics=rs_topics, with_labels=False)
    cfg = tmp_path / 'extract.yaml'
    cfg.write_text('preset: realsense\ntolerance_ms: 5\nevery: 3\n')
    out = tmp_path / 'ds'
    assert (
        main([str(bag), '-o', str(out), '--config', str(cfg), '--every', '1', '--png-level', '3'])
        == 0
    )
    printed = capsys.readouterr().out
    assert '/camera/aligned_depth_to_color/image_raw' in printed and 'read' in printed
    entries = _check_frames(out, frames)
    assert len(entries) == 4 and all(e['depth'] for e in entries)
    assert main([str(bag), '-o', str(tmp_path / 'x'), '--rgb-topic', '/nope']) == 2
    err = capsys.readouterr().err
    assert "rgb_topic='/nope'" in err and '/camera/color/image_raw' in err
    assert err.count('\n') == 1 and 'pass --rgb-topic TOPIC' in err
    assert main([str(tmp_path / 'no_such_bag'), '-o', str(tmp_path / 'y')]) == 2  # a user error
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'no_such_bag' in err and not (tmp_path / 'y').exists()
    with pytest.raises(ValueError, match='every=0'):
        load_extract_config(None, overrides={'every': 0})
    with pytest.raises(ValueError, match="unknown key 'rgb'"):
        (tmp_path / 'bad.yaml').write_text('rgb: /x\n')
        load_extract_config(str(tmp_path / 'bad.yaml'))
    with pytest.raises(SystemExit):
        main([str(bag)])  # -o missing
    capsys.readouterr()
    # a preset whose depth topic the bag lacks: an error naming the bag's image topics (exit 2,
    # issue 15); with --allow-missing depth the frames are written without depth, and a warning
    # says so
    plain = write_bag(tmp_path / 'plain', frames, with_labels=False)
    assert main([str(plain), '-o', str(tmp_path / 'p'), '--preset', 'realsense', '-q']) == 2
    err = capsys.readouterr().err
    assert (
        err.count('\n') == 1 and "no depth topic '/camera/aligned_depth_to_color/image_raw'" in err
    )
    assert (
        '/camera/depth/image_raw (sensor_msgs/msg/Image)' in err and '--allow-missing depth' in err
    )
    assert not (tmp_path / 'p').exists()
    assert (
        main(
            [
                str(plain),
                '-o',
                str(tmp_path / 'p'),
                '--preset',
                'realsense',
                '-q',
                '--allow-missing',
                'depth',
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "no depth topic '/camera/aligned_depth_to_color/image_raw'" in err
        and '--allow-missing depth' in err
    )
    assert 'labels topic' not in err  # the realsense preset asks for no labels
    assert json.loads((tmp_path / 'p' / 'manifest.json').read_text())['counts'] == {
        'frames': 4,
        'with_depth': 0,
        'with_labels': 0,
    }


def test_match_nearest_unique_and_shared():
    """Nearest partner within tolerance (inclusive); unique partners go to the closest anchor."""
    assert match_nearest([0, 100, 200], [5, 96, 260], 10) == [0, 1, None]
    assert match_nearest([0, 100], [150], 50) == [None, 0]
    assert match_nearest([0, 10], [6], 10, unique=True) == [None, 0]
    assert match_nearest([0, 10], [6], 10, unique=False) == [0, 0]
    assert match_nearest([1, 2], [], 10) == [None, None]
    with pytest.raises(ValueError, match='tolerance_ns=-1'):
        match_nearest([0], [0], -1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 1000), max_size=12),
    st.lists(st.integers(0, 1000), max_size=12),
    st.integers(0, 100),
)
def test_match_nearest_properties(anchors, partners, tol):
    """Every pair is within tolerance, unique partners are used once, and a shared match is the
    nearest partner."""
    uniq = match_nearest(anchors, partners, tol, unique=True)
    used = [j for j in uniq if j is not None]
    assert len(used) == len(set(used))
    shared = match_nearest(anchors, partners, tol, unique=False)
    for a, ju, js in zip(anchors, uniq, shared):
        for j in (ju, js):
            assert j is None or abs(partners[j] - a) <= tol
        if js is not None:
            assert abs(partners[js] - a) == min(abs(p - a) for p in partners)
        elif partners:
            assert min(abs(p - a) for p in partners) > tol and ju is None
