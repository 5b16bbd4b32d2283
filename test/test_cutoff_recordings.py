"""C38 (cut-off recordings) and issue 15 (requested topics a bag lacks) through depth3dseg-extract.

Bags are built from the real NYU/TUM frames (test/bagutil.py), then cut the way a killed recorder
leaves them: metadata.yaml missing, MCAP bytes truncated at a chunk boundary or inside a chunk, ROS
1 bag header without index; or a closed MCAP with a damaged chunk. Frame counts and values are
exact.
"""

import json
import logging
import shutil

import numpy as np
import pytest
from rosbags.rosbag2.storage_mcap import McapReader

from bagutil import TOPICS, damage_mcap_chunk, make_frames, read_png, write_bag
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.bags.extract import ExtractConfig, extract, main
from depth3dseg_ros.bags.mcap_salvage import scan_mcap
from depth3dseg_ros.bags.reader import BagReader, detect_format, mcap_is_closed

N = 30  # 160x120 frames: the rosbags writer closes a chunk at 1 MiB, so 30 frames span 3 chunks


def _same_frames(out, frames, n):
    """The dataset holds exactly frames 0..n-1 of ``frames``, values exact (rgb, depth mm, labels,
    K)."""
    entries = read_index(out)
    assert [int(e['id'][-6:]) for e in entries] == list(range(n))
    for e in entries:
        f = frames[int(e['id'][-6:])]
        assert e['stamp_ns'] == f.stamp_ns
        np.testing.assert_array_equal(read_png(out / e['rgb']), f.rgb)
        if e['depth']:
            np.testing.assert_array_equal(read_png(out / e['depth']), f.depth_mm)
        if e['labels']:
            np.testing.assert_array_equal(read_png(out / e['labels']), f.labels)
        np.testing.assert_allclose(np.reshape(e['K'], (3, 3)), f.K, rtol=0, atol=1e-12)
    return entries


def _chunks(mcap):
    r = McapReader(mcap)
    r.open()
    try:
        return [(c.chunk_start_offset, c.chunk_length) for c in r.chunks]
    finally:
        r.close()


# (compression, where) -> (frames, with depth, with labels, rgb messages read): where = 'boundary'
# cuts at the start of the second chunk, 'mid' in the middle of its record.
EXPECTED = {
    ('none', 'boundary'): (10, 10, 4, 11),
    ('none', 'mid'): (16, 15, 5, 16),
    ('zstd-chunks', 'boundary'): (10, 10, 4, 11),
    ('zstd-chunks', 'mid'): (13, 13, 4, 13),
}


@pytest.mark.parametrize('compression', ['none', 'zstd-chunks'])
@pytest.mark.parametrize('where', ['boundary', 'mid'])
def test_c38_truncated_mcap_extracts_every_complete_frame(
    tmp_path, real_dir, caplog, compression, where
):
    """An MCAP without summary/footer, cut at a chunk boundary or inside a chunk: read in file
    order, every frame whose rgb + CameraInfo are complete is extracted with exact values, a
    warning names the byte where the recording ends; an uncut copy of the same bag still reads
    through its index."""
    frames = make_frames(real_dir, N)
    bag = write_bag(tmp_path / 'full', frames, storage='mcap', compression=compression)
    full = next(bag.glob('*.mcap'))
    chunks = _chunks(full)
    assert len(chunks) == 3 and mcap_is_closed(full)
    start1, len1 = chunks[1]
    cut = start1 if where == 'boundary' else start1 + len1 // 2
    cut_file = tmp_path / 'rec_0.mcap'
    cut_file.write_bytes(full.read_bytes()[:cut])
    assert not mcap_is_closed(cut_file) and detect_format(cut_file).kind == 'mcap'
    out = tmp_path / 'ds'
    with caplog.at_level(logging.WARNING):
        report = extract([cut_file], out, ExtractConfig(workers=1))
    n, n_depth, n_labels, n_rgb = EXPECTED[(compression, where)]
    entries = _same_frames(out, frames, n)
    assert sum(bool(e['depth']) for e in entries) == n_depth
    assert sum(bool(e['labels']) for e in entries) == n_labels
    rgb = next(t for t in report['rec_0']['topics'] if t['topic'] == TOPICS['rgb'])
    assert (rgb['read'], rgb['used']) == (n_rgb, n)
    warning = [
        r.getMessage() for r in caplog.records if 'not closed / truncated' in r.getMessage()
    ]
    assert len(warning) == 1 and str(cut_file) in warning[0]
    if where == 'boundary':
        assert f'the recording ends at byte {cut} of {cut} (end of file)' in warning[0]
        assert report['rec_0']['format'] == f'mcap [not closed: ends at byte {cut} of {cut}]'
    else:
        assert (
            f'intact up to byte {start1} of {cut}' in warning[0]
            and f'cut off at byte {cut}' in warning[0]
        )
    scan = scan_mcap(cut_file)
    assert scan.intact_end == start1 and scan.file_size == cut
    assert (scan.cut_chunk_messages > 0) == (where == 'mid')
    # the complete file: read by its summary (rosbags), all frames
    extract([bag], tmp_path / 'all', ExtractConfig(workers=1))
    assert len(_same_frames(tmp_path / 'all', frames, N)) == N


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_c38_directory_without_metadata_yaml(tmp_path, real_dir, caplog, storage):
    """A rosbag2 directory whose metadata.yaml is missing (recorder killed): its two split storage
    files are read directly (topics, types and counts from the files); the 6 frames come out exact,
    numbered in time order across the files."""
    frames = make_frames(real_dir, 6)
    suffix = '.db3' if storage == 'sqlite3' else '.mcap'
    rec = tmp_path / 'rec'
    rec.mkdir()
    for k, part in enumerate((frames[:4], frames[4:])):
        b = write_bag(tmp_path / f'part{k}', part, storage=storage)
        shutil.move(next(b.glob(f'*{suffix}')), rec / f'rec_{k}{suffix}')
    fmt = detect_format(rec)
    assert (fmt.kind, fmt.storage, fmt.metadata_storage, fmt.recovery) == (
        'rosbag2',
        storage,
        '',
        'no metadata.yaml',
    )
    with BagReader(rec) as r:
        assert {t: e.count for t, e in r.topics().items()} == {
            TOPICS['rgb']: 6,
            TOPICS['camera_info']: 6,
            TOPICS['depth']: 6,
            TOPICS['labels']: 2,
        }
    out = tmp_path / 'ds'
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        report = extract([rec], out, ExtractConfig(workers=1))
    entries = _same_frames(out, frames, 6)
    assert [e['id'] for e in entries] == [f'rec_{i:06d}' for i in range(6)]
    assert report['rec']['format'] == f'rosbag2/{storage} [no metadata.yaml]'
    warning = [r.getMessage() for r in caplog.records if 'has no metadata.yaml' in r.getMessage()]
    assert len(warning) == 1 and f"['rec_0{suffix}', 'rec_1{suffix}']" in warning[0]
    counts = json.loads((out / 'manifest.json').read_text())['counts']
    assert counts == {'frames': 6, 'with_depth': 6, 'with_labels': 2}


def test_c38_truncated_mcap_in_directory_without_metadata(tmp_path, real_dir):
    """Both at once, as a killed `ros2 bag record -s mcap` leaves it: no metadata.yaml and the MCAP
    cut inside its second chunk (zstd): the frames of the first chunk and the complete part of the
    second."""
    frames = make_frames(real_dir, N)
    bag = write_bag(tmp_path / 'full', frames, storage='mcap', compression='zstd-chunks')
    full = next(bag.glob('*.mcap'))
    start1, len1 = _chunks(full)[1]
    rec = tmp_path / 'killed'
    rec.mkdir()
    (rec / 'killed_0.mcap').write_bytes(full.read_bytes()[: start1 + len1 // 2])
    report = extract([rec], tmp_path / 'ds', ExtractConfig(workers=1))
    _same_frames(tmp_path / 'ds', frames, 13)
    assert report['killed']['format'].startswith(
        'rosbag2/mcap [no metadata.yaml, not closed: ends at byte '
    )


@pytest.mark.parametrize('compression', ['file', 'message'])
def test_c38_compressed_directory_without_metadata_yaml(tmp_path, real_dir, compression):
    """No metadata.yaml to say how the files are compressed: file mode is seen by the file's zstd
    magic, message mode by each message's zstd magic (CDR starts 00 01 00 00); 4 frames exact."""
    frames = make_frames(real_dir, 4)
    bag = write_bag(tmp_path / f'z_{compression}', frames, compression=compression)
    (bag / 'metadata.yaml').unlink()
    report = extract([bag], tmp_path / 'ds', ExtractConfig(workers=1))
    _same_frames(tmp_path / 'ds', frames, 4)
    assert report[bag.name]['format'] == (
        'rosbag2/sqlite3 (file/zstd) [no metadata.yaml]'
        if compression == 'file'
        else 'rosbag2/sqlite3 [no metadata.yaml]'
    )


def test_c38_sqlite_write_ahead_log_is_replayed(tmp_path, real_dir, caplog):
    """A recorder using SQLite WAL (rosbag2's resilient preset) killed before its last checkpoint:
    frames 3..5 exist only in rec_0.db3-wal. They are read from a checkpointed copy (the bag is not
    written), with a warning; all 6 frames exact. Without the log, 3."""
    import sqlite3

    frames = make_frames(real_dir, 6)
    first = write_bag(tmp_path / 'first', frames[:3])
    second = write_bag(tmp_path / 'second', frames[3:])
    db, db2 = next(first.glob('*.db3')), next(second.glob('*.db3'))
    rec = tmp_path / 'rec'
    rec.mkdir()
    con = sqlite3.connect(db)
    try:
        assert con.execute('PRAGMA journal_mode=WAL').fetchone() == ('wal',)
        con.execute('PRAGMA wal_autocheckpoint=0')
        con.execute('ATTACH DATABASE ? AS other', (str(db2),))
        con.execute(
            'INSERT INTO messages(topic_id, timestamp, data) '
            'SELECT topic_id, timestamp, data FROM other.messages ORDER BY id'
        )
        con.commit()
        shutil.copyfile(db, rec / 'rec_0.db3')  # what the disk holds at the kill
        shutil.copyfile(f'{db}-wal', rec / 'rec_0.db3-wal')
    finally:
        con.close()
    before = (rec / 'rec_0.db3').read_bytes()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        extract([rec], tmp_path / 'ds', ExtractConfig(workers=1))
    _same_frames(tmp_path / 'ds', frames, 6)
    assert (rec / 'rec_0.db3').read_bytes() == before and (
        rec / 'rec_0.db3-wal'
    ).stat().st_size > 0
    assert any(
        'rec_0.db3-wal holds' in r.getMessage() and 'log replayed' in r.getMessage()
        for r in caplog.records
    )
    (rec / 'rec_0.db3-wal').unlink()
    extract([rec], tmp_path / 'ds3', ExtractConfig(workers=1))
    _same_frames(tmp_path / 'ds3', frames, 3)


def _unindex_ros1(path, index_pos=0):
    data = bytearray(path.read_bytes())
    k = data.index(b'index_pos=') + len(b'index_pos=')
    data[k : k + 8] = int(index_pos).to_bytes(8, 'little')
    path.write_bytes(bytes(data))


def test_c38_unindexed_ros1_bag_is_a_one_line_error(tmp_path, real_dir, capsys):
    """A ROS 1 bag whose header has index_pos 0 (.bag.active of a killed rosbag record), or points
    past the end of a truncated file: one error line saying to reindex, exit 2, no output
    directory."""
    frames = make_frames(real_dir, 3)
    bag = write_bag(tmp_path / 'active.bag', frames, storage='ros1')
    cut = tmp_path / 'cut.bag'
    cut.write_bytes(bag.read_bytes()[: bag.stat().st_size // 2])
    in_index = tmp_path / 'in_index.bag'  # cut inside the index section after the chunks
    in_index.write_bytes(bag.read_bytes()[:-10])
    _unindex_ros1(bag)
    out = tmp_path / 'ds'
    assert main([str(bag), '-o', str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'Traceback' not in err
    assert err == (
        f"depth3dseg-extract: error: ROS 1 bag '{bag}' cannot be read: it has no index (index_pos "
        '0: the recording was not closed); run `rosbag reindex active.bag` (ROS 1 tools) to '
        'rebuild the index, then extract again\n'
    )
    assert main([str(cut), '-o', str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count('\n') == 1 and 'its index is missing (index_pos ' in err and 'truncated' in err
    )
    assert main([str(in_index), '-o', str(out)]) == 2  # was rosbags' 'Bag index looks damaged'
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'its index is cut off (index_pos ' in err
    assert 'rosbag reindex in_index.bag' in err
    assert not out.exists()


def test_c38_failed_open_leaves_no_output_directory(tmp_path, real_dir, capsys):
    """A bag that fails only when it is opened (an MCAP cut inside its Header record, in a
    directory without metadata.yaml): exit 2 with one line, and the output directory the run
    created is gone."""
    rec = tmp_path / 'rec'
    rec.mkdir()
    (rec / 'rec_0.mcap').write_bytes(b'\x89MCAP0\r\n\x01\x40\x00\x00')
    out = tmp_path / 'ds'
    assert main([str(rec), '-o', str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'cut off before the end of its Header record' in err
    assert not out.exists()
    empty = tmp_path / 'empty_dir'
    empty.mkdir()
    (empty / '.hidden').write_bytes(b'x')
    with pytest.raises(
        ValueError, match=r"has no metadata.yaml and no storage file \(found: \['.hidden'\]\)"
    ):
        detect_format(empty)


# -- issue 15: a requested topic the bag lacks
# --------------------------------------------------------
OTHER = {
    'rgb': TOPICS['rgb'],
    'camera_info': TOPICS['camera_info'],
    'depth': '/cam/depth',
    'labels': '/seg/labels',
}


def test_missing_requested_topic_is_an_error_naming_the_candidates(tmp_path, real_dir, capsys):
    """--preset realsense on a bag whose depth and labels live on other topics: exit 2, one line
    naming the bag's Image topics; nothing written. Selecting them extracts every role; an
    unselected image topic is warned about; --allow-missing writes an RGB-only dataset on
    purpose."""
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'other', frames, topics=OTHER)
    out = tmp_path / 'ds'
    assert main([str(bag), '-o', str(out), '--preset', 'realsense', '-q']) == 2
    err = capsys.readouterr().err
    assert err == (
        f"depth3dseg-extract: error: bag '{bag}': no depth topic "
        "'/camera/aligned_depth_to_color/image_raw' "
        '(sensor_msgs/msg/Image or sensor_msgs/msg/CompressedImage topics in this bag: '
        "['/cam/depth (sensor_msgs/msg/Image)', '/seg/labels (sensor_msgs/msg/Image)']); pass "
        '--depth-topic TOPIC, or --allow-missing depth to write its frames without depth\n'
    )
    assert not out.exists()
    assert (
        main(
            [
                str(bag),
                '-o',
                str(out),
                '--preset',
                'realsense',
                '-q',
                '--depth-topic',
                '/cam/depth',
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert err == (
        f"depth3dseg-extract: warning: bag '{bag}': image topics not extracted: "
        "['/seg/labels (sensor_msgs/msg/Image)'] (select them with --depth-topic / "
        "--labels-topic)\n"
    )
    assert json.loads((out / 'manifest.json').read_text())['counts'] == {
        'frames': 6,
        'with_depth': 6,
        'with_labels': 0,
    }
    full = tmp_path / 'full'
    assert (
        main(
            [
                str(bag),
                '-o',
                str(full),
                '-q',
                '--depth-topic',
                '/cam/depth',
                '--labels-topic',
                '/seg/labels',
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == ''
    assert json.loads((full / 'manifest.json').read_text())['counts'] == {
        'frames': 6,
        'with_depth': 6,
        'with_labels': 2,
    }
    rgb_only = tmp_path / 'rgb_only'
    assert main([str(bag), '-o', str(rgb_only), '-q', '--allow-missing', 'depth,labels']) == 0
    err = capsys.readouterr().err
    assert "has no depth topic '/camera/depth/image_raw'" in err and "has no labels topic" in err
    assert json.loads((rgb_only / 'manifest.json').read_text())['counts'] == {
        'frames': 6,
        'with_depth': 0,
        'with_labels': 0,
    }


def test_missing_labels_and_camera_info(tmp_path, real_dir, capsys):
    """The default topics on an unlabelled bag: labels are asked for, so exit 2 unless allowed; a
    bag without CameraInfo cannot be allowed (no K, no frame); a bad --allow-missing role is
    named."""
    frames = make_frames(real_dir, 3)
    rgbd = write_bag(tmp_path / 'rgbd', frames, with_labels=False)
    assert main([str(rgbd), '-o', str(tmp_path / 'a'), '-q']) == 2
    err = capsys.readouterr().err
    assert "no labels topic '/camera/semantic/labels'" in err and '--allow-missing labels' in err
    assert main([str(rgbd), '-o', str(tmp_path / 'a'), '-q', '--allow-missing', 'labels']) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / 'a' / 'manifest.json').read_text())['counts'] == {
        'frames': 3,
        'with_depth': 3,
        'with_labels': 0,
    }
    no_info = write_bag(tmp_path / 'noinfo', frames, with_info=False)
    assert (
        main([str(no_info), '-o', str(tmp_path / 'b'), '-q', '--allow-missing', 'depth,labels'])
        == 2
    )
    err = capsys.readouterr().err
    assert (
        "no camera_info topic '/camera/color/camera_info' (sensor_msgs/msg/CameraInfo topics in "
        "this bag: [])" in err
    )
    assert (
        'pass --camera-info-topic TOPIC (frames need K)' in err and not (tmp_path / 'b').exists()
    )
    assert main([str(rgbd), '-o', str(tmp_path / 'c'), '--allow-missing', 'camera_info']) == 2
    assert (
        "--allow-missing camera_info: 'camera_info' is not a role that may be missing"
        in capsys.readouterr().err
    )


def test_c38_damaged_chunk_in_a_closed_mcap_is_skipped(tmp_path, real_dir, caplog):
    """A closed MCAP (summary and footer intact) whose second chunk has 64 flipped bytes (bit rot,
    a broken copy): rosbags stops at 'Chunk checksum mismatch'; the bag is read again in file
    order, the damaged chunk skipped, and every other frame comes out with exact values, with a
    warning naming the chunk's byte (before: a traceback, no dataset)."""
    frames = make_frames(real_dir, N)
    bag = write_bag(tmp_path / 'rec', frames, storage='mcap')
    mcap = next(bag.glob('*.mcap'))
    start1 = damage_mcap_chunk(mcap, 1)
    assert mcap_is_closed(mcap)
    out = tmp_path / 'ds'
    with caplog.at_level(logging.WARNING):
        assert main([str(bag), '-o', str(out), '-q']) == 0
    entries = read_index(out)
    by_stamp = {f.stamp_ns: f for f in frames}
    assert 10 <= len(entries) < N
    for e in entries:
        np.testing.assert_array_equal(read_png(out / e['rgb']), by_stamp[e['stamp_ns']].rgb)
    text = [r.getMessage() for r in caplog.records]
    assert any('Chunk checksum mismatch' in t and 'again in file order' in t for t in text)
    assert any(f'damaged chunk(s) skipped, at byte(s) [{start1}]' in t for t in text)
    manifest = json.loads((out / 'manifest.json').read_text())
    assert 'damaged chunk(s) skipped' in json.dumps(manifest)


def test_c38_damaged_chunk_in_a_ros1_bag_is_one_error_line(tmp_path, real_dir, capsys):
    """A ROS 1 bag with lz4 chunks, 64 bytes flipped in the middle: lz4 fails while reading; the
    error is one line naming the bag and the bag time where reading stopped, exit 2, and no
    output directory (before: lz4's message alone, not naming the bag)."""
    frames = make_frames(real_dir, N)
    bag = write_bag(tmp_path / 'rec.bag', frames, storage='ros1', compression='lz4')
    data = bytearray(bag.read_bytes())
    at = len(data) // 2
    data[at : at + 64] = bytes(b ^ 0xFF for b in data[at : at + 64])
    bag.write_bytes(bytes(data))
    assert main([str(bag), '-o', str(tmp_path / 'ds'), '-q']) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"bag '{bag}' is damaged: reading stopped after bag time" in line
    assert 'RuntimeError' in line and not (tmp_path / 'ds').exists()
