"""Read an MCAP file that was never closed: no summary, no footer, possibly cut inside a chunk
(C38).

A recorder writes an MCAP's summary (Schema/Channel copies, ChunkIndex, Statistics) and its Footer
only when it closes the file; a killed ``ros2 bag record`` leaves the data section alone, possibly
cut in the middle of a record. rosbags' ``McapReader`` refuses such a file (``File end magic is
invalid``). This module reads it the way the MCAP specification allows any reader to: in file
order.

:func:`scan_mcap` walks the records from the header on (``op`` 1 byte, ``length`` uint64 LE, body):
Schema (0x03), Channel (0x04), Message (0x05) and Chunk (0x06; zstd, lz4 or uncompressed, each
decompressed, size and CRC-32 checked) — the Schema/Channel records of a rosbag2 MCAP are in the
data section, inside its chunks, so topics and types are known without a summary. It stops at the
first record that does not fit in the file (or an invalid opcode, e.g. a zero-filled tail), at
DataEnd or at the Footer. A Chunk record cut off by the end of the file is decompressed as far as
its bytes go (zstd and lz4 frames decode block by block) and its complete Message records are kept;
the rest of that chunk is lost. A complete Chunk that fails its size/CRC check or does not
decompress (bit rot, a broken copy) is skipped and the walk goes on at the next record; the same
walk reads a *closed* file in which rosbags met such a chunk (``BagReader(file_order=True)``), so
only the damaged chunks' messages are lost. Nothing is written: the scan keeps, per message, its
chunk, offset and length.

The reader over a scan, :class:`bags.mcap_salvaged.SalvagedMcap`, is in its own module.
"""

from __future__ import annotations

import functools
import os
import struct
from binascii import crc32
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import lz4.frame
from rosbags.rosbag2.storage_mcap import Schema

from depth3dseg_ros.bags.sniff import MAGIC_MCAP, UnsupportedCompression, zstd

_U16 = struct.Struct('<H')
_U32 = struct.Struct('<I')
_U64 = struct.Struct('<Q')
_MSG_HEAD = struct.Struct('<HIQQ')  # channel_id, sequence, log_time, publish_time (22 bytes)
_CHUNK_HEAD = struct.Struct(
    '<QQQI'
)  # message_start_time, message_end_time, uncompressed_size, crc
_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK, _OP_DATA_END, _OP_FOOTER = (
    0x03,
    0x04,
    0x05,
    0x06,
    0x0F,
    0x02,
)
_MAX_OP = 0x10


@dataclass
class Segment:
    """Where some messages' bytes are: one Chunk record, or the file itself (top-level messages).

    Attributes:
        data_offset: file offset of the chunk's (compressed) data; -1 for top-level messages.
        compression: chunk compression ``''``, ``'zstd'`` or ``'lz4'``.
        size: compressed bytes present in the file (less than the record says for a cut chunk).
        complete: False for the chunk cut off by the end of the file.
        messages: ``(log_time_ns, channel_id, offset, length)`` per message; offset into the
            decompressed chunk, or into the file for top-level messages.
    """

    data_offset: int
    compression: str = ''
    size: int = 0
    complete: bool = True
    messages: List[Tuple[int, int, int, int]] = field(default_factory=list)


@dataclass
class McapScan:
    """Result of :func:`scan_mcap`.

    Attributes:
        file_size: bytes in the file. intact_end: offset where the last intact record ends (file
            order); bytes after it are lost, except the complete messages of a cut chunk.
        stop_reason: why the scan stopped: ``'data end'`` (DataEnd/Footer reached), ``'end of
            file'`` (cut at a record boundary), ``'cut record'`` (op 0x.. at offset N does not
            fit) or ``'invalid opcode'``.
        bad_chunks: file offsets of complete Chunk records that fail their size/CRC check or do
            not decompress (bit rot, a broken copy): skipped, their messages lost, the scan goes on
            at the next record (their length field is intact when one follows).
        schemas: {id: Schema}. channels: {id: (schema_id, topic, message_encoding, metadata
            bytes)}.
        segments: chunks and top-level message runs, in file order.
        cut_chunk_messages: complete messages salvaged from the chunk cut by the end of the file.
    """

    file_size: int
    intact_end: int = 8
    stop_reason: str = 'end of file'
    schemas: Dict[int, Schema] = field(default_factory=dict)
    channels: Dict[int, Tuple[int, str, str, bytes]] = field(default_factory=dict)
    segments: List[Segment] = field(default_factory=list)
    cut_chunk_messages: int = 0
    bad_chunks: List[int] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        """Number of messages recovered (all segments)."""
        return sum(len(s.messages) for s in self.segments)

    def recovery(self) -> str:
        """The report's short recovery text (BagFormat.recovery): where a file that was not
        closed ends, and how many damaged chunks were skipped."""
        bad = f'{len(self.bad_chunks)} damaged chunk(s) skipped' if self.bad_chunks else ''
        if self.stop_reason == 'data end':
            return bad
        cut = f'not closed: ends at byte {self.intact_end} of {self.file_size}'
        return f'{cut}, {bad}' if bad else cut

    def describe(self) -> str:
        """One line for the C38 warning, after "MCAP file F was": how the file ends, what was
        recovered and which damaged chunks were skipped."""
        chunks = sum(1 for s in self.segments if s.data_offset >= 0 and s.complete)
        bad = (
            f'; {len(self.bad_chunks)} damaged chunk(s) skipped, at byte(s) {self.bad_chunks} '
            '(size/CRC check failed: their messages are lost)'
            if self.bad_chunks
            else ''
        )
        if self.stop_reason == 'data end':  # a closed file read in file order (damage inside)
            return (
                f'closed but damaged: read in file order: {self.message_count} messages '
                f'({chunks} intact chunks){bad}'
            )
        if self.cut_chunk_messages:
            where = (
                f'its records are intact up to byte {self.intact_end} of {self.file_size}; the '
                f'chunk starting there is cut off at byte {self.file_size} and its first '
                f'{self.cut_chunk_messages} messages are complete'
            )
        else:
            where = (
                f'the recording ends at byte {self.intact_end} of {self.file_size} '
                f'({self.stop_reason})'
            )
        return (
            f'not closed / truncated (no summary or footer): {where}; read in file order: '
            f'{self.message_count} messages ({chunks} complete chunks){bad}; anything after that '
            'is lost'
        )


def _string(buf: bytes, pos: int) -> Tuple[str, int]:
    (n,) = _U32.unpack_from(buf, pos)
    end = pos + 4 + n
    if end > len(buf):
        raise ValueError('string past the end of its record')
    return buf[pos + 4 : end].decode(), end


def decompress(data: bytes, compression: str, partial: bool) -> bytes:
    """Chunk data; ``partial``: the data is cut, return what decodes (zstd/lz4 block by block).

    Raises:
        UnsupportedCompression: another codec (C29).
    """
    if compression == '':
        return data
    if compression == 'zstd':
        return zstd.ZstdDecompressor().decompress(data) if partial else zstd.decompress(data)
    if compression == 'lz4':
        return (
            lz4.frame.LZ4FrameDecompressor().decompress(data)
            if partial
            else lz4.frame.decompress(data)
        )
    raise UnsupportedCompression('chunk', compression)


class _Scanner:
    """Record walker shared by the file level and the inside of chunks."""

    def __init__(self, scan: McapScan) -> None:
        self.scan = scan

    def records(self, buf: bytes, seg: Segment, base: int) -> int:
        """Parse the records in ``buf`` (a decompressed chunk); returns the end of the last
        complete record. Messages are added to ``seg`` with offsets relative to ``buf`` plus
        ``base``."""
        pos = 0
        while pos + 9 <= len(buf):
            op = buf[pos]
            (length,) = _U64.unpack_from(buf, pos + 1)
            end = pos + 9 + length
            if op == 0 or op >= _MAX_OP or end > len(buf):
                break
            self.record(op, buf, pos + 9, end, seg, base)
            pos = end
        return pos

    def record(self, op: int, buf: bytes, start: int, end: int, seg: Segment, base: int) -> None:
        if op == _OP_SCHEMA:
            (sid,) = _U16.unpack_from(buf, start)
            name, p = _string(buf, start + 2)
            enc, p = _string(buf, p)
            (n,) = _U32.unpack_from(buf, p)
            self.scan.schemas[sid] = Schema(sid, name, enc, buf[p + 4 : p + 4 + n].decode())
        elif op == _OP_CHANNEL:
            cid, sid = struct.unpack_from('<HH', buf, start)
            topic, p = _string(buf, start + 4)
            enc, p = _string(buf, p)
            (n,) = _U32.unpack_from(buf, p)
            self.scan.channels[cid] = (sid, topic, enc, bytes(buf[p + 4 : p + 4 + n]))
        elif op == _OP_MESSAGE and end - start >= _MSG_HEAD.size:
            cid, _seq, log_time, _pub = _MSG_HEAD.unpack_from(buf, start)
            seg.messages.append(
                (log_time, cid, base + start + _MSG_HEAD.size, end - start - _MSG_HEAD.size)
            )


def scan_mcap(path: Path | str) -> McapScan:
    """Walk an MCAP file in file order (see the module docstring); reads one chunk at a time.

    Raises:
        ValueError: not an MCAP file (magic), or cut before its Header record ends.
        UnsupportedCompression: a complete chunk compressed with a codec other than zstd/lz4 (C29).
    """
    path = Path(path)
    size = path.stat().st_size
    scan = McapScan(size)
    walker = _Scanner(scan)
    top = Segment(-1)
    with open(path, 'rb') as fh:
        if fh.read(8) != MAGIC_MCAP:
            raise ValueError(f'{str(path)!r} is not an MCAP file (magic)')
        pos = 8
        while True:
            if pos + 9 > size:
                scan.stop_reason = 'end of file' if pos == size else f'cut record at byte {pos}'
                break
            fh.seek(pos)
            head = fh.read(9)
            op, (length,) = head[0], _U64.unpack_from(head, 1)
            end = pos + 9 + length
            if op in (_OP_DATA_END, _OP_FOOTER):
                scan.stop_reason = 'data end'
                break
            if op == 0 or op >= _MAX_OP:
                scan.stop_reason = f'invalid opcode 0x{op:02X} at byte {pos}'
                break
            if end > size:
                scan.stop_reason = f'record op 0x{op:02X} at byte {pos} cut off'
                if op == _OP_CHUNK:
                    _salvage_cut_chunk(fh, pos, size, walker, scan)
                break
            if op == _OP_CHUNK:
                seg = _read_chunk(fh, pos, length, walker)
                if seg is None:  # damaged inside: skipped; the next record says if framing holds
                    scan.bad_chunks.append(pos)
                else:
                    scan.segments.append(seg)
            elif op in (_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE):
                body = fh.read(length)
                before = len(top.messages)
                walker.record(op, body, 0, length, top, pos + 9)
                if len(top.messages) > before and not any(seg is top for seg in scan.segments):
                    scan.segments.append(top)  # one segment for all top-level messages
            pos = end
            scan.intact_end = pos
    if pos == 8:
        raise ValueError(
            f'MCAP file {str(path)!r} is cut off before the end of its Header record '
            f'({size} bytes): it holds no message'
        )
    return scan


def cached_scan(path: Path | str) -> McapScan:
    """:func:`scan_mcap`, remembered for the last 4 files (keyed by real path, size and mtime), so
    a bag looked at before extraction (bags.topic_check) is not scanned twice."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return _scan_cached(real, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _scan_cached(real: str, _size: int, _mtime_ns: int) -> McapScan:
    return scan_mcap(real)


def _chunk_head(fh: Any, pos: int) -> Tuple[int, int, int, str, int, int]:
    """(uncompressed_size, crc, compressed_size, compression, data_offset, record_body_start)."""
    fh.seek(pos + 9)
    head = fh.read(_CHUNK_HEAD.size + 4)
    _t0, _t1, usize, crc = _CHUNK_HEAD.unpack_from(head)
    (n,) = _U32.unpack_from(head, _CHUNK_HEAD.size)
    comp = fh.read(n).decode()
    (csize,) = _U64.unpack(fh.read(8))
    return usize, crc, csize, comp, pos + 9 + _CHUNK_HEAD.size + 4 + n + 8, pos + 9


def _read_chunk(fh: Any, pos: int, length: int, walker: _Scanner) -> Optional[Segment]:
    usize, crc, csize, comp, data_off, body = _chunk_head(fh, pos)
    if data_off + csize > body + length:
        return None
    if comp not in ('', 'zstd', 'lz4'):
        raise UnsupportedCompression('chunk', comp, fh.name)
    try:
        raw = decompress(fh.read(csize), comp, partial=False)
    except Exception:  # corrupt data: the chunk is not read (scan_mcap skips it)
        return None
    if len(raw) != usize or (crc and crc32(raw) != crc):
        return None
    seg = Segment(data_off, comp, csize, True)
    walker.records(raw, seg, 0)
    return seg


def _salvage_cut_chunk(fh: Any, pos: int, size: int, walker: _Scanner, scan: McapScan) -> None:
    """Complete Message records of the chunk cut off by the end of the file."""
    try:
        _usize, _crc, _csize, comp, data_off, _body = _chunk_head(fh, pos)
        if data_off >= size:
            return
        fh.seek(data_off)
        raw = decompress(fh.read(size - data_off), comp, partial=True)
    except Exception:  # the cut left too little to decode: nothing to salvage
        return
    seg = Segment(data_off, comp, size - data_off, False)
    walker.records(raw, seg, 0)
    if seg.messages:
        scan.segments.append(seg)
        scan.cut_chunk_messages = len(seg.messages)
