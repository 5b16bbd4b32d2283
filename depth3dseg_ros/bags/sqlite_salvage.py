"""SQLite bag files cut off or damaged (case C38: a recorder killed, a disk full, a copy that did
not finish): read what is still readable instead of refusing the whole bag.

rosbags opens a ``.db3`` and reads its ``topics`` and ``messages`` tables; a file whose pages end
early ("database disk image is malformed") fails there, for every message, complete or not.
:func:`sqlite_problem` says whether a file is damaged; :func:`salvaged_copy` copies its schema,
its small tables and its messages in row order up to the first unreadable one into a new file
and after it each further row that still reads, by id (the bag itself is never written), which
rosbags then reads as usual. The caller warns with the
counts, and skips a file of which nothing is readable.

:func:`unreadable_definitions` / :func:`without_definitions` handle a file whose
``message_definitions`` table holds an encoding rosbags cannot read: rosbag2 writes encoding
``unknown`` with an empty text for a type whose package was not installed at record time (C28),
and rosbags' SQLite reader then fails with ``KeyError: 'unknown'`` while opening the bag, for every
topic. The copy leaves those rows out, so those types are simply unknown (skipped with a warning,
unless the typestore knows them) and the other topics read as usual.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import List, Optional, Tuple

#: rosbag2's SQLite tables other than ``messages`` (small: copied whole when readable)
SMALL_TABLES = ('topics', 'schema', 'metadata', 'message_definitions')


#: after the first unreadable row, ids probed one by one until this many in a row are missing
PROBE_MISSES = 64


def _ro(path: Path, damaged: bool = False) -> sqlite3.Connection:
    con = sqlite3.connect(f'file:{path}?mode=ro&immutable=1', uri=True)
    if damaged:  # SQLite refuses a file shorter than its header's page count unless this is on
        con.execute('PRAGMA writable_schema=ON')
    return con


def _cut_off(path: Path) -> Optional[str]:
    """Why the file is shorter than its SQLite header says, or None. The header holds the page
    size (bytes 16-17, 1 = 65536) and, when valid (bytes 92-95 equal the change counter at
    24-27), the page count (28-31); a file cut off ends inside a page or before its last page."""
    size = path.stat().st_size
    with open(path, 'rb') as fh:
        head = fh.read(100)
    if len(head) < 100:
        return f'{size} bytes: cut inside its 100-byte header'
    page = int.from_bytes(head[16:18], 'big')
    page = 65536 if page == 1 else page
    if not page or size % page:
        return f'{size} bytes is no whole number of its {page}-byte pages'
    pages = int.from_bytes(head[28:32], 'big')
    if head[92:96] == head[24:28] and size < pages * page:
        return f'{size} bytes, its header says {pages} pages of {page} bytes ({pages * page})'
    return None


def sqlite_problem(path: Path) -> Optional[str]:
    """None when the SQLite bag file ``path`` looks whole: not shorter than its header says, and
    its ``topics`` table, every ``messages`` row's record and the timestamp order rosbags reads
    in are readable; else why not (e.g. ``database disk image is malformed``)."""
    cut = _cut_off(path)
    if cut:
        return f'cut off: {cut}'
    try:
        con = _ro(path)
        try:
            con.execute('SELECT * FROM topics').fetchall()
            # every row's record (SQLite scans the messages table) with its topic, as rosbags
            # joins them (an aggregate has one row: no ORDER BY to apply)
            con.execute(
                'SELECT count(*), sum(length(messages.data)) FROM messages JOIN topics ON '
                'messages.topic_id=topics.id'
            ).fetchall()
            # the timestamp index rosbags orders by (SQLite counts through that covering index)
            con.execute('SELECT count(*) FROM messages ORDER BY timestamp').fetchall()
        finally:
            con.close()
    except sqlite3.Error as err:
        return str(err)
    return None


def salvaged_copy(db: Path, dst: Path) -> Tuple[Path, int]:
    """Copy what is readable of the damaged SQLite bag file ``db`` into the new file ``dst``: the
    tables' definitions, the small tables (:data:`SMALL_TABLES`, ``topics`` required) and the
    ``messages`` rows in ``id`` order up to the first one that cannot be read, then the later ids
    that still read (until :data:`PROBE_MISSES` in a row do not). Returns ``(dst, rows copied)``.

    Raises:
        ValueError: not even the schema or the ``topics`` table can be read (the message names
            the file and SQLite's error).
    """
    src = _ro(db, damaged=True)
    try:
        try:
            tables = src.execute(
                "SELECT name, sql FROM sqlite_master WHERE type='table' AND sql IS NOT NULL"
            ).fetchall()
            names = {name for name, _ in tables}
            if not {'topics', 'messages'} <= names:
                raise sqlite3.DatabaseError(f'tables {sorted(names)} lack topics/messages')
            small = {'topics': src.execute('SELECT * FROM topics').fetchall()}
        except sqlite3.Error as err:
            raise ValueError(
                f'bag file {str(db)!r} is damaged beyond its schema and topics ({err})'
            ) from None
        for t in SMALL_TABLES[1:]:
            if t in names:
                try:
                    small[t] = src.execute(f'SELECT * FROM {t}').fetchall()
                except sqlite3.Error:
                    pass  # e.g. message_definitions on a lost page: no definitions then
        out = sqlite3.connect(dst)
        try:
            for _, sql in tables:
                out.execute(sql)
            for table, rows in small.items():
                if rows:
                    marks = ','.join('?' * len(rows[0]))
                    out.executemany(f'INSERT OR IGNORE INTO {table} VALUES ({marks})', rows)
            cols = [r[1] for r in src.execute('PRAGMA table_info(messages)').fetchall()]
            names_sql, marks = ','.join(cols), ','.join('?' * len(cols))
            insert = f'INSERT OR IGNORE INTO messages ({names_sql}) VALUES ({marks})'
            select = f'SELECT {",".join(cols)} FROM messages'
            n, last = 0, 0
            try:
                for row in src.execute(f'{select} ORDER BY id'):
                    out.execute(insert, row)
                    n, last = n + 1, row[cols.index('id')]
            except sqlite3.Error:  # the damage: the rows after it that still read, one by one
                misses, i = 0, last
                while misses < PROBE_MISSES:
                    i += 1
                    try:
                        row = src.execute(f'{select} WHERE id=?', (i,)).fetchone()
                    except sqlite3.Error:
                        row = None
                    if row is None:
                        misses += 1
                        continue
                    misses = 0
                    out.execute(insert, row)
                    n += 1
            out.commit()
        finally:
            out.close()
    finally:
        src.close()
    return dst, n


#: the definition encodings rosbags' SQLite reader knows
KNOWN_ENCODINGS = ('ros2msg', 'ros2idl')


def unreadable_definitions(db: Path) -> List[Tuple[str, str]]:
    """``(type, encoding)`` of the ``message_definitions`` rows of ``db`` whose encoding rosbags
    cannot read (e.g. ``('my_pkg/msg/Detections', 'unknown')``); [] when none or no such table."""
    try:
        con = _ro(db)
        try:
            names = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if 'message_definitions' not in names:
                return []
            rows = con.execute('SELECT topic_type, encoding FROM message_definitions').fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []  # a damaged file: salvaged_copy's business
    return [(t, e) for t, e in rows if e not in KNOWN_ENCODINGS]


def without_definitions(db: Path, dst: Path) -> Path:
    """A copy of ``db`` at ``dst`` without its unreadable ``message_definitions`` rows
    (:func:`unreadable_definitions`); the bag itself is never written. Returns ``dst``."""
    shutil.copyfile(db, dst)
    con = sqlite3.connect(dst)
    try:
        marks = ','.join('?' * len(KNOWN_ENCODINGS))
        con.execute(
            f'DELETE FROM message_definitions WHERE encoding NOT IN ({marks})', KNOWN_ENCODINGS
        )
        con.commit()
    finally:
        con.close()
    return dst
