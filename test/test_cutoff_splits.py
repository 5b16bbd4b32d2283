"""C38, more ways a recording ends badly (bags.open_paths, bags.sqlite_salvage): every frame still
readable comes out, and each file left out or cut short is named in a warning.

- a file-mode compressed recording killed: its closed splits compressed, the last one plain;
- the last split of a directory cut off, empty, or an MCAP holding only its magic;
- a ``.db3`` cut off (bare, a split, or listed by metadata.yaml): the messages before the damage
  (and after it, that still read) come out;
- a ``-wal`` with data beside a ``.db3`` whose directory has metadata.yaml;
- a storage file in the directory that metadata.yaml does not list.
"""

from __future__ import annotations

import logging
import shutil

import pytest

from bagutil import make_frames, write_bag
from depth3dseg_ros.bags.extract import ExtractConfig, extract, main
from depth3dseg_ros.bags.sniff import zstd
from depth3dseg_ros.bags.sqlite_salvage import salvaged_copy, sqlite_problem
from depth3dseg_ros.dataset_format import read_index

SUFFIX = {'sqlite3': '.db3', 'mcap': '.mcap'}


def _split_dir(tmp_path, frames, parts, storage, name='rec'):
    """A rosbag2 directory without metadata.yaml holding one storage file per part of
    ``frames`` (``parts``: slices), named like rosbag2's splits."""
    rec = tmp_path / name
    rec.mkdir()
    files = []
    for k, part in enumerate(parts):
        b = write_bag(tmp_path / f'{name}_part{k}', frames[part], storage=storage)
        files.append(rec / f'{name}_{k}{SUFFIX[storage]}')
        shutil.move(next(b.glob(f'*{SUFFIX[storage]}')), files[-1])
    return rec, files


def _n_frames(out):
    return len(read_index(out))


def _warnings(caplog, words):
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_c38_file_mode_recording_killed_leaves_the_last_split_plain(tmp_path, real_dir, storage):
    """rosbag2's file mode compresses a split when it is closed: a killed recording leaves
    ``rec_0.db3.zstd`` and a plain ``rec_1.db3``. Each file is read by its own bytes: 8 of 8
    (before: the plain one was put through zstd, a traceback, nothing extracted)."""
    frames = make_frames(real_dir, 8)
    rec, files = _split_dir(tmp_path, frames, [slice(0, 4), slice(4, 8)], storage)
    files[0].with_name(files[0].name + '.zstd').write_bytes(zstd.compress(files[0].read_bytes()))
    files[0].unlink()
    report = extract([rec], tmp_path / 'ds', ExtractConfig(workers=1))
    assert _n_frames(tmp_path / 'ds') == 8
    assert report['rec']['format'] == f'rosbag2/{storage} (file/zstd) [no metadata.yaml]'


@pytest.mark.parametrize(
    'storage,damage',
    [
        ('sqlite3', 'empty'),
        ('mcap', 'empty'),
        ('mcap', 'magic_only'),
        ('sqlite3', 'cut_in_half'),
    ],
)
def test_c38_unusable_last_split_is_skipped_and_the_others_read(
    tmp_path, real_dir, caplog, storage, damage
):
    """The recorder was killed as it opened its next split: the complete first split's 4 frames
    come out and the last file is named in a warning (before: the whole bag was refused)."""
    frames = make_frames(real_dir, 8)
    rec, files = _split_dir(tmp_path, frames, [slice(0, 4), slice(4, 8)], storage)
    data = files[1].read_bytes()
    files[1].write_bytes(
        {'empty': b'', 'magic_only': data[:8], 'cut_in_half': data[: len(data) // 2]}[damage]
    )
    with caplog.at_level(logging.WARNING):
        extract([rec], tmp_path / 'ds', ExtractConfig(workers=1))
    assert _n_frames(tmp_path / 'ds') >= 4
    named = [w for w in caplog.records if files[1].name in w.getMessage()]
    assert named and any(
        'skipped' in w.getMessage() or 'damaged' in w.getMessage() for w in named
    ), [w.getMessage() for w in caplog.records]


def test_c38_sqlite_file_cut_off_gives_the_messages_before_the_damage(tmp_path, real_dir, caplog):
    """A bare .db3 cut at 95 %: the frames whose messages still read come out, with a warning
    saying the file is damaged and how many messages were read (before: a traceback from
    apsw.CorruptError); cut to nothing readable: one error line, exit 2 (bad input)."""
    frames = make_frames(real_dir, 8)
    db = next(write_bag(tmp_path / 'full', frames).glob('*.db3'))
    data = db.read_bytes()
    cut = tmp_path / 'cut.db3'
    cut.write_bytes(data[: int(len(data) * 0.95)])
    assert sqlite_problem(db) is None and sqlite_problem(cut).startswith('cut off')
    copy, n = salvaged_copy(cut, tmp_path / 'salvaged.db3')
    assert (
        0 < n < 8 * 4
        and sqlite_problem(copy) is None
        and cut.read_bytes() == data[: len(cut.read_bytes())]
    )
    with caplog.at_level(logging.WARNING):
        extract([cut], tmp_path / 'ds', ExtractConfig(workers=1))
    got = _n_frames(tmp_path / 'ds')
    assert 1 <= got <= 8  # 26 of 32 messages: the lost ones may be labels (frames without)
    (w,) = _warnings(caplog, 'is damaged')
    assert 'cut.db3' in w and f'reading the {n} messages that are still readable' in w
    tiny = tmp_path / 'tiny.db3'
    tiny.write_bytes(data[:4000])
    assert main([str(tiny), '-o', str(tmp_path / 'none')]) == 2


def test_c38_write_ahead_log_is_replayed_when_metadata_yaml_exists(tmp_path, real_dir, caplog):
    """A recorder in WAL mode killed after writing metadata.yaml (or a bag copied while open):
    the frames only in the -wal come out too, with the warning (before: silently 3 of 6)."""
    import sqlite3

    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'bag', frames[:3])
    db = next(bag.glob('*.db3'))
    other = next(write_bag(tmp_path / 'more', frames[3:]).glob('*.db3'))
    con = sqlite3.connect(db)
    try:
        con.execute('PRAGMA journal_mode=WAL').fetchone()
        con.execute('PRAGMA wal_autocheckpoint=0')
        con.execute('ATTACH DATABASE ? AS other', (str(other),))
        con.execute(
            'INSERT INTO messages(topic_id, timestamp, data) '
            'SELECT topic_id, timestamp, data FROM other.messages ORDER BY id'
        )
        con.commit()
        rec = tmp_path / 'rec'
        shutil.copytree(bag, rec)  # what the disk holds: metadata.yaml, .db3 and its -wal
        shutil.copyfile(f'{db}-wal', rec / f'{db.name}-wal')
    finally:
        con.close()
    assert (rec / 'metadata.yaml').is_file()
    with caplog.at_level(logging.WARNING):
        extract([rec], tmp_path / 'ds', ExtractConfig(workers=1))
    assert _n_frames(tmp_path / 'ds') == 6
    assert _warnings(caplog, 'log replayed')


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_c38_storage_file_not_listed_in_metadata_is_read_with_a_warning(
    tmp_path, real_dir, caplog, storage
):
    """metadata.yaml written at a split lists rec_0 only; rec_1 holds 4 more frames: all 8 come
    out and a warning names the unlisted file (before: 4, silently)."""
    frames = make_frames(real_dir, 8)
    bag = write_bag(tmp_path / 'bag', frames[:4], storage=storage)
    more = next(
        write_bag(tmp_path / 'more', frames[4:], storage=storage).glob(f'*{SUFFIX[storage]}')
    )
    listed = next(bag.glob(f'*{SUFFIX[storage]}'))
    extra = listed.with_name(listed.name.replace(SUFFIX[storage], f'_1{SUFFIX[storage]}'))
    shutil.copyfile(more, extra)
    with caplog.at_level(logging.WARNING):
        extract([bag], tmp_path / 'ds', ExtractConfig(workers=1))
    assert _n_frames(tmp_path / 'ds') == 8
    (w,) = _warnings(caplog, 'metadata.yaml lists')
    assert extra.name in w


def test_c38_damaged_db3_in_a_closed_directory_gives_the_readable_messages(
    tmp_path, real_dir, caplog
):
    """A rosbag2 directory with metadata.yaml whose .db3 was cut afterwards (disk full, a broken
    copy): the frames whose messages still read come out with the 'is damaged' warning (before: a
    one-line error, exit 1, and nothing extracted)."""
    frames = make_frames(real_dir, 8)
    rec = write_bag(tmp_path / 'rec', frames)
    db = next(rec.glob('*.db3'))
    data = db.read_bytes()
    db.write_bytes(data[: int(len(data) * 0.95)])
    assert (rec / 'metadata.yaml').is_file() and sqlite_problem(db).startswith('cut off')
    with caplog.at_level(logging.WARNING):
        assert main([str(rec), '-o', str(tmp_path / 'ds')]) == 0
    assert 1 <= _n_frames(tmp_path / 'ds') <= 8
    (w,) = _warnings(caplog, 'is damaged')
    assert db.name in w and 'messages that are still readable' in w
