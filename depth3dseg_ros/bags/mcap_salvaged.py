"""A rosbags storage reader over an MCAP scan (C38): the messages that
:func:`bags.mcap_salvage.scan_mcap` found in a file rosbags' ``McapReader`` refuses or stops in.

:class:`SalvagedMcap` is a rosbags rosbag2 storage reader (the protocol of
``rosbags.rosbag2.reader.ReaderProtocol``: ``connections``, ``metadata``, ``open``, ``close``,
``messages``) over a scan, so ``AnyReader`` and everything above it work unchanged; ``bags.reader``
puts it in place of rosbags' ``McapReader`` for files :func:`bags.sniff.mcap_is_closed` says are
not closed, and for closed ones with a damaged chunk. Messages come in log-time order (each chunk
sorted, chunks merged lazily: one decompressed chunk in memory per overlapping chunk, as in
rosbags).
"""

from __future__ import annotations

import heapq
from collections import Counter
from pathlib import Path
from typing import Any, Collection, Dict, Iterator, List, Optional, Tuple

from rosbags.interfaces import Connection, ConnectionExtRosbag2
from rosbags.rosbag2.metadata import ReaderMetadata
from rosbags.rosbag2.storage_mcap import get_qos

from depth3dseg_ros.bags.mcap_salvage import McapScan, Segment, decompress, scan_mcap
from depth3dseg_ros.bags.msgdef_compat import tolerant_get_msgdef as get_msgdef


class SalvagedMcap:
    """rosbags rosbag2 storage reader over :func:`scan_mcap` (see the module docstring).

    Args:
        path: the MCAP file. scan: its scan (made on ``open`` when None).
    """

    def __init__(self, path: Path | str, scan: Optional[McapScan] = None) -> None:
        self.path = Path(path)
        self.scan = scan
        self.bio: Any = None
        self.connections: List[Connection] = []
        self.metadata = ReaderMetadata(0, 2**63 - 1, 0, 0, None, None, None, None)

    def open(self) -> None:
        """Scan (when not given), open the file and build connections and metadata."""
        if self.scan is None:
            self.scan = scan_mcap(self.path)
        self.bio = open(self.path, 'rb')
        counts: Counter = Counter(cid for s in self.scan.segments for _, cid, _, _ in s.messages)
        self.connections = []
        for cid, (sid, topic, enc, meta) in sorted(self.scan.channels.items()):
            schema = self.scan.schemas.get(sid)
            self.connections.append(
                Connection(
                    cid,
                    topic,
                    schema.name if schema else '__schemaless__',
                    get_msgdef(schema),
                    '',
                    counts.get(cid, 0),
                    ConnectionExtRosbag2(enc, get_qos(meta)),
                    self,
                )
            )
        times = [t for s in self.scan.segments for t, _, _, _ in s.messages]
        n = len(times)
        start, end = (min(times), max(times)) if n else (2**63 - 1, 0)
        self.metadata = ReaderMetadata(
            end - start + 1 if n else 0, start, end + 1 if n else 0, n, None, None, None, None
        )

    def close(self) -> None:
        """Close the file."""
        if self.bio is not None:
            self.bio.close()
            self.bio = None

    def _segment_bytes(self, seg: Segment) -> bytes:
        self.bio.seek(seg.data_offset)
        return decompress(self.bio.read(seg.size), seg.compression, partial=not seg.complete)

    def _source(
        self, seg: Segment, cmap: Dict[int, Connection], start: int, stop: int
    ) -> Iterator[Tuple[int, int, Any, Any]]:
        msgs = sorted(m for m in seg.messages if m[1] in cmap and start <= m[0] < stop)
        if not msgs:
            return
        yield (msgs[0][0], 0, None, None)  # sentinel: decompress only when this chunk's turn comes
        if seg.data_offset < 0:
            for t, cid, off, n in msgs:
                self.bio.seek(off)
                yield (t, 1, cmap[cid], self.bio.read(n))
            return
        raw = memoryview(self._segment_bytes(seg))
        for t, cid, off, n in msgs:
            yield (t, 1, cmap[cid], bytes(raw[off : off + n]))

    def messages(
        self,
        connections: Collection[Connection],
        start: Optional[int] = None,
        stop: Optional[int] = None,
    ) -> Iterator[Tuple[Connection, int, bytes]]:
        """``(connection, log_time_ns, raw CDR bytes)`` of the given connections, in log-time
        order."""
        assert self.scan is not None and self.bio is not None, 'not open'
        cmap = {c.id: c for c in connections}
        lo, hi = (0 if start is None else start), (2**63 - 1 if stop is None else stop)
        sources = [self._source(s, cmap, lo, hi) for s in self.scan.segments]
        for t, real, conn, data in heapq.merge(*sources, key=lambda m: (m[0], m[1])):
            if real:
                yield conn, t, data
