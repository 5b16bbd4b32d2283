"""bags.sqlite_heads: pass 1 of the extraction on SQLite3 storage reads only the first bytes of
large messages, in exactly rosbags' order (issue 15, extraction speed)."""

import shutil

import pytest
import yaml

from bagutil import bag_typestore, frame_messages, make_frames, write_bag, write_messages
from depth3dseg_ros.bags import frames as frames_mod
from depth3dseg_ros.bags import sqlite_heads
from depth3dseg_ros.bags.extract import ExtractConfig, extract
from depth3dseg_ros.bags.reader import BagReader
from depth3dseg_ros.dataset_format import read_index


def _expected(reader, whole=()):
    """What message_heads must return: BagReader.messages, large messages cut to their head (and
    read_message of each location the whole message, checked in _heads)."""
    out = []
    for topic, msgtype, t, raw in reader.messages(reader.topics()):
        raw = bytes(raw)
        if topic not in whole and len(raw) > sqlite_heads.WHOLE_BYTES:
            raw = raw[: sqlite_heads.HEAD_BYTES]
        out.append((topic, msgtype, t, raw))
    return out


def _heads(reader, whole=()):
    it = sqlite_heads.message_heads(reader, reader.topics(), whole)
    assert it is not None
    out = []
    full = [bytes(m[3]) for m in reader.messages(reader.topics())]
    for k, (t, mt, ts, raw, loc) in enumerate(it):
        assert bytes(sqlite_heads.read_message(loc)) == full[k]  # pass 2 reads it whole
        out.append((t, mt, ts, bytes(raw)))
    return out


def _tied_bag(path, frames):
    """A bag whose messages share bag times (every rgb, depth and CameraInfo of a frame at one
    time, and two frames at the same time): the order of ties is SQLite's."""
    ts = bag_typestore('sqlite3')
    msgs = frame_messages(ts, frames)
    tied = [(1000 + 10 * (k // 6), topic, mt, m) for k, (_t, topic, mt, m) in enumerate(msgs)]
    return write_messages(path, ts, tied)


def _two_file_dir(tmp_path, frames):
    """A rosbag2 directory (with metadata.yaml) of two SQLite3 files, as ``ros2 bag record
    --max-bag-size`` leaves it."""
    parts = [write_bag(tmp_path / f'p{k}', p) for k, p in enumerate((frames[:3], frames[3:]))]
    out = tmp_path / 'split'
    out.mkdir()
    meta = yaml.safe_load((parts[0] / 'metadata.yaml').read_text())
    info = meta['rosbag2_bagfile_information']
    info['relative_file_paths'] = ['split_0.db3', 'split_1.db3']
    info['files'] = []
    for k, p in enumerate(parts):
        shutil.move(next(p.glob('*.db3')), out / f'split_{k}.db3')
        other = yaml.safe_load((p / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
        info['files'].append(dict(other['files'][0], path=f'split_{k}.db3'))
    counts = {}
    for p in parts:
        other = yaml.safe_load((p / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
        for t in other['topics_with_message_count']:
            name = t['topic_metadata']['name']
            counts[name] = counts.get(name, 0) + t['message_count']
    for t in info['topics_with_message_count']:
        t['message_count'] = counts[t['topic_metadata']['name']]
    info['message_count'] = sum(counts.values())
    (out / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    return out


@pytest.mark.parametrize('kind', ['dir', 'bare', 'ties', 'two files'])
def test_heads_are_rosbags_messages_in_rosbags_order(tmp_path, real_dir, kind):
    frames = make_frames(real_dir, 6, size=(320, 240))
    if kind == 'ties':
        bag = _tied_bag(tmp_path / 'tied', frames)
    elif kind == 'two files':
        bag = _two_file_dir(tmp_path, frames)
    else:
        bag = write_bag(tmp_path / 'b', frames)
        if kind == 'bare':
            bag = next(bag.glob('*.db3'))
    with BagReader(bag) as r:
        whole = ['/camera/color/camera_info']
        expected = _expected(r, whole)
        assert len(expected) >= 20 and any(len(e[3]) == sqlite_heads.HEAD_BYTES for e in expected)
        assert _heads(r, whole) == expected
        assert _heads(r) == _expected(r)


@pytest.mark.parametrize(
    'storage, compression', [('mcap', 'none'), ('ros1', 'none'), ('sqlite3', 'message')]
)
def test_heads_not_used_where_they_do_not_apply(tmp_path, real_dir, storage, compression):
    """MCAP, ROS 1 and message-compressed SQLite3: None (pass 1 reads through rosbags)."""
    bag = write_bag(
        tmp_path / ('b.bag' if storage == 'ros1' else 'b'),
        make_frames(real_dir, 2),
        storage=storage,
        compression=compression,
    )
    with BagReader(bag) as r:
        assert sqlite_heads.message_heads(r, r.topics()) is None


def test_extraction_with_and_without_heads_is_the_same(tmp_path, real_dir, monkeypatch):
    """Same index lines and pixels whether pass 1 reads heads or whole messages, on a bag with
    tied bag times and labels on every third frame; --every 2 leaves messages unused."""
    frames = make_frames(real_dir, 9)
    bag = _tied_bag(tmp_path / 'tied', frames)
    used = []
    real = sqlite_heads.message_heads
    monkeypatch.setattr(frames_mod, 'message_heads', lambda *a: used.append(1) or real(*a))
    rep_fast = extract([bag], tmp_path / 'fast', ExtractConfig(workers=1, every=2))
    monkeypatch.setattr(frames_mod, 'message_heads', lambda *a: None)
    rep_slow = extract([bag], tmp_path / 'slow', ExtractConfig(workers=1, every=2))
    assert used and rep_fast == rep_slow
    fast, slow = read_index(tmp_path / 'fast'), read_index(tmp_path / 'slow')
    assert len(fast) == 5 and [dict(e, dir=0) for e in fast] == [dict(e, dir=0) for e in slow]
    for e in fast:
        for k in ('rgb', 'depth', 'labels'):
            if e[k]:
                a = (tmp_path / 'fast' / e[k]).read_bytes()
                assert a == (tmp_path / 'slow' / e[k]).read_bytes()


def test_pass_two_refuses_messages_other_than_pass_one(tmp_path, real_dir, monkeypatch):
    """Should pass 1 ever see another order than pass 2 (a bug, never a bad bag), the extraction
    stops with a RuntimeError instead of pairing the wrong images."""
    bag = write_bag(tmp_path / 'b', make_frames(real_dir, 3))
    real = sqlite_heads.message_heads

    def swapped(*a):  # pass 1 sees rgb 0 and 1 swapped; no locations: pass 2 reads via rosbags
        msgs = [m[:4] for m in real(*a)]
        rgb = [k for k, m in enumerate(msgs) if m[0] == '/camera/color/image_raw']
        msgs[rgb[0]], msgs[rgb[1]] = msgs[rgb[1]], msgs[rgb[0]]
        return iter(msgs)

    monkeypatch.setattr(frames_mod, 'message_heads', swapped)
    with pytest.raises(RuntimeError, match='rgb message 0 differs between the two passes'):
        extract([bag], tmp_path / 'ds', ExtractConfig(workers=1))
    assert not (tmp_path / 'ds').exists()  # failed before its first frame: nothing left
