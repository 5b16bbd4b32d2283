"""``depth3dseg-extract`` on SQLite3 storage: pass 1 without reading the image blobs, pass 2
reading only the needed ones, straight into numpy buffers.

Pass 1 (bags.frames) needs only the header stamp of each rgb/depth/labels message: its first 12
bytes. rosbags' SQLite reader returns every message's whole blob (``SELECT ... messages.data``);
SQLite then walks each image's chain of overflow pages (~250 pages for a 640x480 rgb8 image) and
Python copies it into a bytes object: about as long as reading the bag. Here the same query asks
for ``length(data)`` (SQLite reads it from the record header, no overflow page) and the data only
of small messages and of the topics read whole (CameraInfo); of any other message only the first
:data:`HEAD_BYTES` bytes are read, through SQLite's incremental blob I/O (``apsw`` blob_open: the
first page only). 60 frames of 640x480 rgb8 + 16UC1 + mono8: 60-70 ms -> 0.5 ms. Each message
comes with its location (connection, row id, length).

Pass 2 reads the messages of the planned frames at those locations (:func:`read_message`): only
those (``--every``, ``--max-frames``, frames already in the dataset cost nothing), each into a new
numpy buffer without a Python bytes object in between, and apsw releases the GIL while SQLite
copies, so the reader thread (bags.prefetch) overlaps with the writer.

The messages come in exactly rosbags' order, so frame ids (the rgb message's index in its topic)
are the same as when rosbags reads the bag: per storage file the same ``FROM``/``JOIN``/``WHERE``
and ``ORDER BY timestamp`` as ``rosbags.rosbag2.storage_sqlite3.Sqlite3Reader.messages``
(0.11.9), the files of a rosbag2 directory one after the other, the readers of an AnyReader merged
by timestamp in rosbags' order (grouped by ``id(connection.owner)``, ``heapq.merge``); tested
against rosbags, ties in bag time and split directories included (test/test_sqlite_heads.py).

Used only where it applies: every connection's storage is SQLite3 (a bare ``.db3`` or a rosbag2
directory of them) and no message is compressed (``compression_mode: message`` and a cut-off
directory without metadata.yaml read their blobs whole: :func:`message_heads` returns None and
the caller falls back to ``BagReader.messages`` for both passes).
"""

from __future__ import annotations

from heapq import merge
from itertools import groupby
from typing import Any, Collection, Iterable, Iterator, List, Optional, Tuple

import numpy as np

#: bytes read of a large message: its header (encapsulation, stamp, frame_id) and more.
HEAD_BYTES = 64
#: messages up to this size are read whole by the query itself (cheaper than a blob handle).
WHOLE_BYTES = 4096
#: bytes of a storage file SQLite may memory-map (it maps at most the file and at most its
#: compile-time limit; past that it reads as usual).
MMAP_BYTES = 1 << 40

#: where a message's bytes are: (apsw connection, messages.id, length in bytes)
Location = Tuple[Any, int, int]
Head = Tuple[str, str, int, bytes, Location]


def _sqlite_storages(owner: Any) -> Optional[Tuple[List[Any], bool]]:
    """The SQLite3 files behind a connection owner (rosbags sets ``Connection.owner`` to the
    storage reader: a bare file's ``Sqlite3Reader``, or a directory's ``DirectoryReader`` whose
    ``storages`` are its files in order) and whether the owner is the file itself; None when the
    fast path does not apply (another storage, message compression)."""
    from rosbags.rosbag2.storage_sqlite3 import Sqlite3Reader

    if isinstance(owner, Sqlite3Reader):
        return [owner], True
    if getattr(getattr(owner, 'metadata', None), 'compression_mode', None) == 'message':
        return None
    parts = getattr(owner, 'storages', None)
    if not parts or not all(isinstance(p, Sqlite3Reader) for p in parts):
        return None
    return list(parts), False


def _matches(x: Any, y: Any) -> bool:
    """rosbags' DirectoryReader rule pairing a storage connection ``x`` with a reader one ``y``."""
    return (
        y.topic == x.topic
        and y.msgtype == x.msgtype
        and y.ext == x.ext
        and (not x.digest or not y.digest or y.digest == x.digest)
    )


def _storage_heads(
    storage: Any, conns: Collection[Any], whole: Collection[str], direct: bool
) -> Iterator[Tuple[Any, int, bytes, Location]]:
    """``(connection, bag_time_ns, head, location)`` of one SQLite3 file in rosbags' order
    (module doc)."""
    if direct:  # a bare .db3: rosbags yields the storage's own connection objects
        connmap = {x.id: x for x in storage.connections}
        ids = tuple({x.id for x in conns})
    else:  # a file of a rosbag2 directory: matched to the reader's connections like rosbags does
        connmap = {
            x.id: c
            for x in storage.connections
            if (c := next((y for y in conns if _matches(x, y)), None)) is not None
        }
        ids = tuple(x.id for x in storage.connections if x.id in connmap)
    if not ids:
        return
    whole_ids = tuple(i for i in ids if connmap[i].topic in whole) or (-1,)
    marks = ','.join('?' for _ in ids)
    wmarks = ','.join('?' for _ in whole_ids)
    query = (
        'SELECT topics.id,messages.timestamp,messages.id,length(messages.data),'
        f'CASE WHEN length(messages.data)<=? OR topics.id IN ({wmarks}) THEN messages.data END '
        'FROM messages JOIN topics ON messages.topic_id=topics.id '
        f'WHERE topics.id IN ({marks}) ORDER BY timestamp'
    )
    db = storage.dbconn
    # Memory-mapped reads: SQLite then copies a blob's pages from the mapping instead of one
    # pread() per 4 KiB page into its cache first (pass 2, 60 frames: 31 -> 16 ms). rosbags opens
    # the file immutable (never written while read); the setting is per connection.
    db.execute(f'PRAGMA mmap_size={MMAP_BYTES}').fetchall()
    for cid, stamp, rowid, size, data in db.execute(query, (WHOLE_BYTES, *whole_ids, *ids)):
        if data is None and size:  # large: its first bytes only
            with db.blob_open('main', 'messages', 'data', rowid, False) as blob:
                data = blob.read(HEAD_BYTES)
        yield connmap[cid], stamp, data if data is not None else b'', (db, rowid, size or 0)


def message_heads(
    bag: Any, topics: Iterable[str], whole: Iterable[str] = ()
) -> Optional[Iterator[Head]]:
    """Like ``BagReader.messages(topics)`` but each raw message of a topic not in ``whole`` may
    be cut to its first :data:`HEAD_BYTES` bytes (messages up to :data:`WHOLE_BYTES` bytes come
    whole), reading no more of the file than that. Same messages, same order.

    Args:
        bag: an open ``bags.reader.BagReader``.
        topics: topics to read (those of unknown type are left out, as ``messages`` does).
        whole: topics whose messages come whole (e.g. CameraInfo, decoded in pass 1).
    Returns:
        an iterator of ``(topic, msgtype, bag_time_ns, raw_or_head, location)`` (``location``:
        for :func:`read_message`), or None when the bag is not all SQLite3 storage without
        message compression (then use ``BagReader.messages``).
    """
    if bag.message_compressed:
        return None
    wanted = set(topics)
    conns = [c for c in bag.reader.connections if c.topic in wanted and bag.is_known(c.msgtype)]
    storages = {}
    for conn in conns:
        if id(conn.owner) not in storages:
            found = _sqlite_storages(conn.owner)
            if found is None:
                return None
            storages[id(conn.owner)] = found
    whole = set(whole)

    def owner_heads(owner: Any, group: List[Any]) -> Iterator[Tuple[Any, int, bytes, Location]]:
        parts, direct = storages[id(owner)]
        for storage in parts:
            yield from _storage_heads(storage, group, whole, direct)

    def run() -> Iterator[Head]:
        if not conns:
            return
        gens = [
            owner_heads(owner, list(group))
            for owner, group in groupby(
                sorted(conns, key=lambda x: id(x.owner)), key=lambda x: x.owner
            )
        ]  # AnyReader.messages' grouping and merge
        for conn, stamp, data, loc in merge(*gens, key=lambda x: x[1]):
            yield conn.topic, conn.msgtype, stamp, data, loc

    return run()


def read_message(loc: Location) -> bytes | memoryview:
    """The whole raw message at ``loc`` (from :func:`message_heads`), read with SQLite's
    incremental blob I/O straight into a new buffer: no Python bytes object built from the row
    (rosbags' ``SELECT data`` copies each blob once more, holding the GIL), and apsw releases the
    GIL while SQLite copies, so a reader thread overlaps with the writer (bags.prefetch).

    Returns:
        a memoryview of a fresh uint8 buffer (writable), or bytes for messages up to
        :data:`WHOLE_BYTES` (rosbags decodes small messages faster from bytes).
    Raises:
        apsw.Error: the row is gone (the file changed since pass 1).
    """
    db, rowid, size = loc
    if not size:
        return b''
    buf = np.empty(size, np.uint8)
    with db.blob_open('main', 'messages', 'data', rowid, False) as blob:
        blob.read_into(buf)
    return buf.tobytes() if size <= WHOLE_BYTES else memoryview(buf)
