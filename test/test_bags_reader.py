"""bags.reader: format sniffing, compression variants (C29), typestores and custom types (C28).

Bags are built with rosbags writers from real NYU/TUM frames (test/bagutil.py).
"""

import logging
import shutil
import tracemalloc

import numpy as np
import pytest

from bagutil import (
    DETECTIONS_TYPE,
    TOPICS,
    ExtraTopic,
    bag_typestore,
    frame_messages,
    make_frames,
    set_metadata_compression,
    write_bag,
    write_messages,
)
from depth3dseg_ros.bags.reader import (
    BagReader,
    UnsupportedCompression,
    detect_format,
    raw_header_stamp_ns,
    resolve_typestore,
)

IMAGE = 'sensor_msgs/msg/Image'

#: C29 variants: (storage, compression) -> name
VARIANTS = [
    ('sqlite3', 'none'),
    ('sqlite3', 'file'),
    ('sqlite3', 'message'),
    ('mcap', 'zstd-chunks'),
    ('mcap', 'lz4-chunks'),
    ('mcap', 'file'),
    ('mcap', 'message'),
    ('ros1', 'bz2'),
    ('ros1', 'lz4'),
    ('ros1', 'none'),
]


def _bag(tmp_path, frames, storage, compression, **kw):
    name = f'{storage}_{compression}' + ('.bag' if storage == 'ros1' else '')
    return write_bag(tmp_path / name, frames, storage=storage, compression=compression, **kw)


def _rgb_messages(path):
    """[(stamp_ns, data bytes, height, width, encoding)] of the rgb topic, decoded with rosbags."""
    out = []
    with BagReader(path) as r:
        for _topic, mt, _t, raw in r.messages([TOPICS['rgb']]):
            m = r.deserialize(raw, mt)
            stamp = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            assert r.stamp_ns(raw, mt) == stamp
            out.append((stamp, bytes(m.data), m.height, m.width, m.encoding))
    return out


def test_c29_every_compression_variant_yields_identical_messages(tmp_path, real_dir):
    """C29: plain .db3, FILE zstd (*.db3.zstd), MESSAGE zstd, MCAP zstd/lz4 chunks, MCAP
    file/message, ROS 1 bz2/lz4/plain -> the same 3 Image messages, byte-identical data, same
    stamps."""
    frames = make_frames(real_dir, 3)
    ref = None
    for storage, comp in VARIANTS:
        path = _bag(
            tmp_path, frames, storage, comp, with_depth=False, with_labels=False, with_info=False
        )
        fmt = detect_format(path)
        if comp in ('file', 'message'):
            assert (fmt.compression_mode, fmt.compression_format) == (comp, 'zstd')
        if storage == 'sqlite3' and comp == 'file':
            (stored,) = [p for p in path.iterdir() if p.name.endswith('.db3.zstd')]
            assert stored.read_bytes()[:4] == b'\x28\xb5\x2f\xfd'
        msgs = _rgb_messages(path)
        assert len(msgs) == 3, (storage, comp)
        if ref is None:
            ref = msgs
            assert [m[0] for m in ref] == [f.stamp_ns for f in frames]
            assert ref[0][1] == frames[0].rgb.tobytes()
        assert msgs == ref, (storage, comp)


def test_c29_unsupported_file_compression_fails_up_front(tmp_path, real_dir):
    """C29: a rosbag2 compression format rosbags cannot read -> 'unsupported compression: file/lz4'
    from detect_format and BagReader.open, before any message is read."""
    path = _bag(tmp_path, make_frames(real_dir, 2), 'sqlite3', 'file')
    set_metadata_compression(path, 'file', 'lz4')
    with pytest.raises(UnsupportedCompression, match=r'^unsupported compression: file/lz4'):
        detect_format(path)
    with pytest.raises(UnsupportedCompression, match='unsupported compression: file/lz4'):
        BagReader(path).open()
    set_metadata_compression(path, 'message', 'bz2')
    with pytest.raises(UnsupportedCompression, match='unsupported compression: message/bz2'):
        BagReader(path).open()


def test_c29_unsupported_mcap_chunk_codec_fails_up_front(tmp_path, real_dir):
    """C29: an MCAP or ROS 1 bag whose chunks use a codec without a decompressor fails at open, not
    mid-read."""
    frames = make_frames(real_dir, 2)
    ts = bag_typestore('mcap')
    msgs = frame_messages(ts, frames)
    path = write_messages(tmp_path / 'brotli', ts, msgs, storage='mcap', chunk_codec='brotli')
    with pytest.raises(UnsupportedCompression, match='unsupported compression: chunk/brotli'):
        BagReader(path).open()
    ts1 = bag_typestore('ros1')
    path = write_messages(
        tmp_path / 'z.bag', ts1, frame_messages(ts1, frames), storage='ros1', chunk_codec='zstd'
    )
    with pytest.raises(UnsupportedCompression, match='unsupported compression: chunk/zstd'):
        BagReader(path).open()


def test_c29_file_mode_decompression_streams(tmp_path, real_dir):
    """C29: file-mode decompression streams to a temporary file: the Python heap peak while opening
    a ~20 MB zstd-compressed bag stays far below the bag size. Covers rosbags' native FILE mode and
    our own whole-file path (a bare '*.db3.zstd' without metadata.yaml)."""
    frames = make_frames(real_dir, 24, size=(640, 480))
    path = _bag(tmp_path, frames, 'sqlite3', 'file', with_labels=False, with_info=False)
    (stored,) = list(path.glob('*.zstd'))
    plain_size = 24 * (640 * 480 * 5)
    bare = tmp_path / 'bare_copy.db3.zstd'
    shutil.copy(stored, bare)
    assert detect_format(bare).compression_mode == 'whole-file'
    for target in (path, bare):
        tracemalloc.start()
        with BagReader(target) as r:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert r.topics()[TOPICS['rgb']].count == 24
        assert peak < plain_size / 2, (target, peak, plain_size)  # loading it all would be >= 1x
    assert len(_rgb_messages(bare)) == 24


def test_format_detected_from_contents_not_extension(tmp_path, real_dir):
    """A ROS 1 bag named .dat, an MCAP file named .db3 and a bare .db3 file all open and read."""
    frames = make_frames(real_dir, 3)
    ros1 = _bag(tmp_path, frames, 'ros1', 'none', with_depth=False, with_labels=False)
    mcap = _bag(tmp_path, frames, 'mcap', 'none', with_depth=False, with_labels=False)
    db3 = _bag(tmp_path, frames, 'sqlite3', 'none', with_depth=False, with_labels=False)
    renamed = tmp_path / 'recording.dat'
    shutil.copy(ros1, renamed)
    mcap_as_db3 = tmp_path / 'oddly_named.db3'
    shutil.copy(next(mcap.glob('*.mcap')), mcap_as_db3)
    bare_db3 = next(db3.glob('*.db3'))
    ref = _rgb_messages(db3)
    for path, kind in ((renamed, 'ros1'), (mcap_as_db3, 'mcap'), (bare_db3, 'sqlite3')):
        assert detect_format(path).kind == kind
        assert _rgb_messages(path) == ref
    junk = tmp_path / 'junk.bag'
    junk.write_bytes(b'not a bag at all')
    with pytest.raises(ValueError, match='unknown format'):
        detect_format(junk)
    with pytest.raises(FileNotFoundError, match='does not exist'):
        detect_format(tmp_path / 'missing')
    with pytest.raises(ValueError, match='metadata.yaml'):
        detect_format(tmp_path)


def test_c28_no_definitions_custom_type_skipped_with_one_warning(tmp_path, real_dir, caplog):
    """C28: .db3 without stored definitions, custom my_pkg/msg/Detections not installed: Image and
    CameraInfo decode through the ros2_kilted typestore; /det is unknown, one warning names it."""
    frames = make_frames(real_dir, 4)
    path = write_bag(tmp_path / 'old', frames, extra=[ExtraTopic()], strip_definitions=True)
    with caplog.at_level(logging.WARNING), BagReader(path) as r:
        topics = r.topics()
        assert not topics['/det'].known and topics['/det'].msgtype == DETECTIONS_TYPE
        assert all(topics[t].known for t in TOPICS.values())
        assert [e.topic for e in r.unknown_topics()] == ['/det']
        r.unknown_topics()  # warned once only
        n, infos = 0, []
        for _topic, mt, _t, raw in r.messages(['/det', TOPICS['rgb'], TOPICS['camera_info']]):
            assert mt != DETECTIONS_TYPE
            msg = r.deserialize(raw, mt)
            n += 1
            if mt == 'sensor_msgs/msg/CameraInfo':
                infos.append(np.asarray(msg.k).reshape(3, 3))
        assert n == 8
        np.testing.assert_allclose(np.stack(infos), np.stack([f.K for f in frames]))
    warnings = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert (
        '/det' in warnings[0] and DETECTIONS_TYPE in warnings[0] and 'ros2_kilted' in warnings[0]
    )


def test_c28_definitions_in_bag_are_registered_and_take_precedence(tmp_path, real_dir):
    """C28: an MCAP carrying the my_pkg definition decodes /det; a ROS 1 bag decodes with its own
    (noetic) definitions (Header.seq) although the default typestore is ros2_kilted."""
    frames = make_frames(real_dir, 2)
    mcap = write_bag(tmp_path / 'new', frames, storage='mcap', extra=[ExtraTopic()])
    with BagReader(mcap) as r:
        assert r.topics()['/det'].known
        dets = [r.deserialize(raw, mt) for _t, mt, _s, raw in r.messages(['/det'])]
        assert len(dets) == 2 and list(dets[0].labels) == [] and dets[0].scores.dtype == np.float32
        assert dets[1].header.stamp.nanosec == frames[1].stamp_ns % 10**9
    ros1 = write_bag(tmp_path / 'r1.bag', frames, storage='ros1', extra=[ExtraTopic()])
    with BagReader(ros1, typestore='ros2_kilted') as r:
        assert r.is_ros1 and r.topics()['/det'].known
        (_t, mt, _s, raw) = next(iter(r.messages([TOPICS['rgb']])))
        assert hasattr(r.deserialize(raw, mt).header, 'seq')


def test_typestore_selection_and_errors(tmp_path, real_dir):
    """--typestore picks the built-in definitions; an unknown name lists the valid ones."""
    frames = make_frames(real_dir, 2)
    path = write_bag(tmp_path / 'old', frames, strip_definitions=True)
    with BagReader(path, typestore='ros2_humble') as r:
        assert len(_rgb_messages(path)) == 2 and r.topics()[TOPICS['rgb']].known
    assert resolve_typestore('ROS2_JAZZY').fielddefs['sensor_msgs/msg/Image']
    with pytest.raises(ValueError, match=r"typestore='ros2_nope' is not one of: .*ros2_kilted"):
        BagReader(path, typestore='ros2_nope')


def test_header_stamp_from_bytes_matches_deserialized(real_dir):
    """raw_header_stamp_ns reads sec/nanosec from CDR (little and big endian) and ROS 1 bytes."""
    frames = make_frames(real_dir, 1)
    for storage in ('sqlite3', 'ros1'):
        ts = bag_typestore(storage)
        (_, _, mt, msg) = frame_messages(
            ts, frames, with_depth=False, with_labels=False, with_info=False
        )[0]
        raw = ts.serialize_ros1(msg, mt) if storage == 'ros1' else ts.serialize_cdr(msg, mt)
        assert raw_header_stamp_ns(raw, storage == 'ros1') == frames[0].stamp_ns
    ts = bag_typestore('sqlite3')
    (_, _, mt, msg) = frame_messages(
        ts, frames, with_depth=False, with_labels=False, with_info=False
    )[0]
    raw_be = ts.serialize_cdr(msg, mt, little_endian=False)
    assert raw_header_stamp_ns(raw_be, False) == frames[0].stamp_ns
    with pytest.raises(ValueError, match='too short'):
        raw_header_stamp_ns(b'\x00\x01\x00\x00', False)


# --------------------------------------------------------------- storage from the files' own bytes
def _set_storage_id(bag_dir, storage, rename=None):
    """Rewrite metadata.yaml's storage_identifier (and optionally rename its storage file: old ->
    new)."""
    import yaml

    meta = yaml.safe_load((bag_dir / 'metadata.yaml').read_text())
    info = meta['rosbag2_bagfile_information']
    info['storage_identifier'] = storage
    if rename:
        old, new = rename
        (bag_dir / old).rename(bag_dir / new)
        info['relative_file_paths'] = [new if p == old else p for p in info['relative_file_paths']]
        for f in info.get('files', []):
            if f.get('path') == old:
                f['path'] = new
    (bag_dir / 'metadata.yaml').write_text(yaml.safe_dump(meta, sort_keys=False))
    return bag_dir


@pytest.mark.parametrize(
    'storage,compression,claimed',
    [
        ('sqlite3', 'none', 'mcap'),
        ('mcap', 'none', 'sqlite3'),
        ('sqlite3', 'file', 'mcap'),
        ('mcap', 'message', 'sqlite3'),
    ],
)
def test_rosbag2_dir_storage_from_file_contents_metadata_is_a_hint(
    tmp_path, real_dir, caplog, storage, compression, claimed
):
    """metadata.yaml naming another storage plugin than the files hold: one warning, read by
    contents."""
    frames = make_frames(real_dir, 3)
    bag = _bag(tmp_path, frames, storage, compression, with_depth=False, with_labels=False)
    ref = _rgb_messages(bag)
    assert len(ref) == 3
    _set_storage_id(bag, claimed)
    fmt = detect_format(bag)
    assert (fmt.kind, fmt.storage, fmt.metadata_storage) == ('rosbag2', storage, claimed)
    assert fmt.describe() == f'rosbag2/{storage}' + (
        '' if compression == 'none' else f' ({compression}/zstd)'
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger='depth3dseg_ros.bags.reader'):
        assert _rgb_messages(bag) == ref
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"metadata.yaml names storage '{claimed}' but its file(s)" in warnings[0]
    assert f'are {storage}: reading them as {storage}' in warnings[0]
    assert (bag / 'metadata.yaml').read_text().count(
        f'storage_identifier: {claimed}'
    ) == 1  # bag untouched


def test_rosbag2_dir_file_with_misleading_extension_and_ros1_inside(tmp_path, real_dir, caplog):
    """An MCAP file named .db3 under metadata 'sqlite3', and a ROS 1 bag listed in a rosbag2
    directory, both read by their contents; the extraction report names the real storage."""
    from depth3dseg_ros.bags.extract import ExtractConfig, extract

    frames = make_frames(real_dir, 3)
    mcap = _bag(tmp_path, frames, 'mcap', 'none', with_depth=False, with_labels=False)
    ref = _rgb_messages(mcap)
    name = next(mcap.glob('*.mcap')).name
    _set_storage_id(mcap, 'sqlite3', rename=(name, name.replace('.mcap', '.db3')))
    assert detect_format(mcap).storage == 'mcap'
    assert _rgb_messages(mcap) == ref
    ros1 = _bag(tmp_path, frames, 'ros1', 'none', with_depth=False, with_labels=False)
    d = tmp_path / 'ros1_in_dir'
    shutil.copytree(mcap, d)
    (d / name.replace('.mcap', '.db3')).unlink()
    shutil.copy(ros1, d / 'rec_0.db3')
    _set_storage_id(d, 'sqlite3')
    import yaml

    meta = yaml.safe_load((d / 'metadata.yaml').read_text())
    meta['rosbag2_bagfile_information']['relative_file_paths'] = ['rec_0.db3']
    (d / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    assert detect_format(d).storage == 'ros1'
    assert _rgb_messages(d) == ref
    out = tmp_path / 'ds'
    report = extract([mcap], out, ExtractConfig(workers=1, depth_topic=None, labels_topic=None))
    assert report[mcap.name]['format'] == 'rosbag2/mcap'


def test_unrecognised_storage_file_error_shows_first_16_bytes_in_hex(tmp_path, real_dir):
    junk = tmp_path / 'junk.mcap'
    junk.write_bytes(b'not a bag at all, really')
    with pytest.raises(ValueError) as err:
        detect_format(junk)
    assert (
        f"bag file '{junk}': unknown format (first 16 bytes "
        '6E 6F 74 20 61 20 62 61 67 20 61 74 20 61 6C 6C; expected SQLite' in str(err.value)
    )
    short = tmp_path / 'short.db3'
    short.write_bytes(b'\x00\x01\xff')
    with pytest.raises(ValueError, match=r'unknown format \(first 16 bytes 00 01 FF; '):
        detect_format(short)
    empty = tmp_path / 'empty.bag'
    empty.write_bytes(b'')
    with pytest.raises(ValueError, match=r'unknown format \(empty file \(0 bytes\)'):
        BagReader(empty).open()
    bag = _bag(
        tmp_path, make_frames(real_dir, 1), 'sqlite3', 'none', with_depth=False, with_labels=False
    )
    db3 = next(bag.glob('*.db3'))
    db3.write_bytes(b'PK\x03\x04' + bytes(20))  # a zip where the SQLite file should be
    with pytest.raises(
        ValueError, match=rf"bag file '{db3}': unknown format \(first 16 bytes 50 4B 03 04 00 00"
    ):
        detect_format(bag)
