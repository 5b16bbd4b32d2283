"""SQLite bags whose write-ahead log still holds transactions (case C38: a recorder killed before
it closed its files).

rosbag2's ``resilient`` storage preset writes SQLite in WAL mode; a killed recorder leaves its last
transactions in ``<db>-wal``. rosbags opens SQLite immutable and would not see them, so such a
file is read from a copy with the log replayed (the bag itself is never written).
"""

from __future__ import annotations

import shutil
from pathlib import Path


def wal_bytes(db: Path) -> int:
    """Size of the SQLite write-ahead log next to ``db`` (``<db>-wal``), 0 when there is none. A
    killed recorder using WAL (rosbag2's ``resilient`` storage preset) leaves its last transactions
    there; rosbags opens SQLite immutable and would not see them (C38)."""
    wal = db.with_name(db.name + '-wal')
    return wal.stat().st_size if wal.is_file() else 0


def checkpointed_copy(db: Path, dst_dir: Path) -> Path:
    """Copy ``db`` and its ``-wal`` into ``dst_dir`` and checkpoint the log into the copy (the bag
    itself is never written). Returns the copy's path.

    Raises:
        ValueError: SQLite cannot replay the log (the message names the file).
    """
    import sqlite3

    copy = dst_dir / db.name
    shutil.copyfile(db, copy)
    shutil.copyfile(db.with_name(db.name + '-wal'), copy.with_name(copy.name + '-wal'))
    try:
        con = sqlite3.connect(copy)
        try:
            con.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()
            con.execute('PRAGMA journal_mode=DELETE').fetchall()
        finally:
            con.close()
    except sqlite3.Error as err:
        raise ValueError(
            f'bag file {str(db)!r}: its write-ahead log cannot be replayed ({err})'
        ) from None
    return copy
