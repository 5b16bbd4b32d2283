"""Open any ROS bag through rosbags' AnyReader: format sniffing, typestores, compression, cut-off
recordings (C28, C29, C38).

Formats (detected from file contents, never from the extension — docs/ros_conventions.md "Bags"):

* rosbag2 directory (``metadata.yaml`` + ``.db3``/``.mcap`` files), plain or compressed with
  rosbag2's generic compression (``compression_mode`` FILE -> ``*_0.db3.zstd``, or MESSAGE);
* a bare rosbag2 storage file: SQLite3 (``SQLite format 3\\0``) or MCAP (``\\x89MCAP0\\r\\n``),
  whatever its name; MCAP chunks may be zstd- or lz4-compressed;
* a ROS 1 bag (``#ROSBAG V2.0``), chunks uncompressed, bz2 or lz4;
* a bare storage file compressed as a whole with zstd (magic ``28 B5 2F FD``) or lz4 frame
  (``04 22 4D 18``): streamed to a temporary file first.

The storage file's own leading bytes decide its format everywhere: a bare file, a file with a
misleading extension, and the files of a rosbag2 directory (for ``compression_mode: file`` the
first bytes of the decompressed stream). A directory's ``metadata.yaml`` ``storage_identifier`` is
only a hint: when it names another plugin than the files' contents, :class:`BagReader` logs one
warning and reads the files by their contents (through a temporary copy of the directory of links
with a corrected metadata.yaml). An unrecognised file is refused with its first 16 bytes in hex.
Detection lives in ``bags.sniff`` (its names are re-exported here); the paths handed to rosbags
(links, copies, a corrected metadata.yaml) are made by ``bags.open_paths`` (BagReader's mixin).

Cut-off recordings (C38, details in ``bags.sniff`` and ``bags.mcap_salvage``): a rosbag2 directory
without metadata.yaml, or one whose MCAP file was not closed, is read file by file as bare storage
files (rosbags reads topics and types from the files); an MCAP without footer is read in file order
by :class:`bags.mcap_salvaged.SalvagedMcap`, put in place of rosbags' MCAP reader; a ``.db3`` whose
``-wal`` still holds data is read from a copy with the log replayed. Each case logs one warning
(where the recording ends, which files are read) and shows in :attr:`BagReader.format`
(``BagFormat.recovery``). A ROS 1 bag without index is refused by :func:`detect_format`.

What rosbags 0.11.9 does natively (read in its source, ``rosbag2/reader.py``): FILE mode zstd is
streamed (``zstd.open`` + ``shutil.copyfileobj``) into a ``TemporaryDirectory``; MESSAGE mode zstd
is decompressed per message; MCAP chunk compression zstd/lz4 and ROS 1 chunk compression bz2/lz4
are supported. Any other combination is refused here *before* any message is read, with
:class:`UnsupportedCompression` ``"unsupported compression: <mode>/<format>"`` (C29).

Typestores (C28): a bag's own message definitions (MCAP schemas, newer ``.db3``, every ROS 1 bag)
are registered from the bag and take precedence. Types the bag carries no definition for are
filled in from the built-in typestore of the selected distro (``ros2_kilted`` by default). A topic
whose type is known neither way is reported by :meth:`BagReader.unknown_topics` and never decoded.
"""

from __future__ import annotations

import logging
import os
import struct
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.rosbag1 import ReaderError as Ros1ReaderError
from rosbags.rosbag2 import ReaderError as Ros2ReaderError
from rosbags.typesys import Stores, get_typestore

from depth3dseg_ros.bags.mcap_salvage import cached_scan
from depth3dseg_ros.bags.mcap_salvaged import SalvagedMcap
from depth3dseg_ros.bags.msgdef_compat import install as _tolerate_unknown_definitions
from depth3dseg_ros.bags.open_paths import OpenPaths
from depth3dseg_ros.bags.sniff import (  # noqa: F401  (re-exported: the reader's public names)
    MAGIC_LZ4,
    MAGIC_MCAP,
    MAGIC_ROS1,
    MAGIC_SQLITE,
    MAGIC_ZSTD,
    SUPPORTED_COMPRESSION,
    BagFormat,
    UnsupportedCompression,
    _decompress_stream,
    _rosbag2_files,
    _STORAGE_SUFFIX,
    detect_format,
    hex16,
    kind_of_head,
    mcap_is_closed,
    ros1_index_problem,
    sniff_file,
    sniff_storage,
    storage_files_of_dir,
    zstd,
)

_tolerate_unknown_definitions()  # C28: a schema of encoding 'unknown' is no definition

LOG = logging.getLogger(__name__)

DEFAULT_TYPESTORE = 'ros2_kilted'


def resolve_typestore(name: str) -> Any:
    """rosbags typestore for a distro name such as ``'ros2_kilted'`` or ``'ros1_noetic'``.

    Raises:
        ValueError: unknown name (the message lists the valid ones).
    """
    try:
        return get_typestore(Stores(name.lower()))
    except ValueError:
        valid = ', '.join(s.value for s in Stores)
        raise ValueError(f'typestore={name!r} is not one of: {valid}') from None


def raw_header_stamp_ns(raw: bytes | memoryview, ros1: bool) -> int:
    """Header stamp (ns) of a serialized message whose first field is std_msgs/Header.

    ROS 2 CDR: 4-byte encapsulation (byte 1 = 1 little, 0 big endian), then int32 sec, uint32
    nanosec. ROS 1: uint32 seq, then uint32 secs, uint32 nsecs (little endian). Reading the stamp
    this way avoids deserializing large images just to pair them.

    Raises:
        ValueError: the buffer is too short or the encapsulation is unknown.
    """
    buf = bytes(raw[:12])
    if len(buf) < 12:
        raise ValueError(f'message too short for a Header: {len(raw)} bytes')
    if ros1:
        sec, nsec = struct.unpack_from('<II', buf, 4)
    else:
        if buf[1] not in (0, 1):
            raise ValueError(f'unknown CDR encapsulation {buf[:4]!r}')
        sec, nsec = struct.unpack_from('<iI' if buf[1] == 1 else '>iI', buf, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


#: What reading a bag raises on damaged bytes (rosbags' readers; lz4 RuntimeError, zstd ZstdError,
#: bz2 OSError / EOFError, struct.error on a cut record): reported as :class:`BagDamaged`
_READ_DAMAGE = (
    Ros1ReaderError,
    Ros2ReaderError,
    AnyReaderError,
    zstd.ZstdError,
    RuntimeError,
    OSError,
    EOFError,
    struct.error,
)


class BagOpenError(ValueError):
    """rosbags cannot open a bag (its message kept): bad input, exit 2 in the CLIs (issue 55)."""


class BagDamaged(ValueError):
    """Reading stopped inside a bag whose opening went fine: damage that only shows while
    reading (an MCAP chunk failing its CRC, a ROS 1 chunk that does not decompress; C38).
    ``retryable``: an MCAP bag not yet read in file order, which ``BagReader(file_order=True)``
    reads with the damaged chunks skipped."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class TopicEntry:
    """One topic of an open bag: type, message count and whether its type can be decoded."""

    topic: str
    msgtype: str
    count: int
    known: bool


class BagReader(OpenPaths):
    """Context manager over one bag (any format above), built on ``rosbags.highlevel.AnyReader``.

    Args:
        path: rosbag2 directory, bare ``.db3``/``.mcap`` file or ROS 1 bag (any file name).
        typestore: distro of the built-in definitions used for types the bag does not define
            (C28); ``'ros2_kilted'`` by default. ROS 1 bags always carry their definitions.
        warn: log the warnings about a cut-off recording (C38) and a misleading metadata.yaml;
            False for a look at the topics before the real read (bags.topic_check), so they appear
            once.

    Raises (on ``open``/``__enter__``):
        FileNotFoundError, ValueError: see :func:`detect_format`.
        UnsupportedCompression: the compression variant cannot be read (C29), before any message.
        BagOpenError (a ValueError): rosbags cannot open the bag (its message is kept).
    """

    def __init__(
        self,
        path: Path | str,
        typestore: str = DEFAULT_TYPESTORE,
        warn: bool = True,
        file_order: bool = False,
    ) -> None:
        self.path = Path(path)
        self.warn = warn
        self.file_order = file_order  # MCAP read in file order, damaged chunks skipped (C38)
        self.typestore_name = typestore
        self.default_typestore = resolve_typestore(typestore)
        self.format: Optional[BagFormat] = None
        self.is_ros1 = False
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._reader: Optional[AnyReader] = None
        self._warned: set = set()
        self._salvage: set = (
            set()
        )  # paths of MCAP files without footer, read by bags.mcap_salvage (C38)
        self._message_zstd = (
            False  # message-mode compression undone here (cut-off rosbag2 dir, C38)
        )

    # -- opening -----------------------------------------------------------------------------
    # (which paths rosbags gets: bags.open_paths.OpenPaths._open_path)

    def open(self) -> 'BagReader':
        """Open the bag; see the class docstring for errors (temporary files are removed on
        error)."""
        try:
            return self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> 'BagReader':
        paths = self._open_path()
        self.is_ros1 = paths[0].suffix == '.bag'
        default = resolve_typestore('ros1_noetic') if self.is_ros1 else self.default_typestore
        reader = AnyReader(paths, default_typestore=default)
        scans = []
        for sub, p in zip(reader.readers, paths):
            if (
                p in self._salvage
            ):  # not closed, or damaged (C38): read in file order instead of by the summary
                sub.storage = SalvagedMcap(p, cached_scan(p))
                scans.append((p, sub.storage.scan))
        for p, scan in scans:
            name = self.path if self.path.is_file() else self.path / Path(os.path.realpath(p)).name
            self._warn('MCAP file %s was %s', name, scan.describe())
        if scans and self.format is not None:
            p, scan = scans[-1]
            self.format = replace(
                self.format,
                recovery=', '.join(
                    filter(
                        None,
                        [
                            self.format.recovery,
                            scan.recovery(),
                        ],
                    )
                ),
            )
        try:
            reader.open()
        except AnyReaderError as err:
            text = ' '.join(str(a) for a in err.args)
            if 'Compression' in text and 'not supported' in text:
                fmt = text.split("'")[1] if "'" in text else text
                raise UnsupportedCompression('chunk', fmt, self.path) from None
            raise BagOpenError(f'cannot open bag {str(self.path)!r}: {text}') from None
        self._reader = reader
        self._check_chunk_compression()
        if not self.is_ros1:
            self._fill_missing_types()
        return self

    def _check_chunk_compression(self) -> None:
        """Refuse MCAP chunk codecs rosbags cannot decompress, before reading messages (C29)."""
        assert self._reader is not None
        for sub in self._reader.readers:
            storage = getattr(sub, 'storage', None)
            for part in getattr(storage, 'storages', [storage]):
                for chunk in getattr(part, 'chunks', None) or []:
                    codec = getattr(chunk, 'compression', '')
                    if isinstance(codec, str) and ('chunk', codec) not in SUPPORTED_COMPRESSION:
                        raise UnsupportedCompression('chunk', codec, self.path)

    def _fill_missing_types(self) -> None:
        """Register built-in definitions for types the bag does not define; bag definitions win."""
        assert self._reader is not None
        have = self._reader.typestore.fielddefs
        if all(c.msgtype in have for c in self._reader.connections):
            return  # the bag defines every type it uses (registering ~1000 types costs ~0.1 s)
        missing = {k: v for k, v in self.default_typestore.fielddefs.items() if k not in have}
        if missing:
            self._reader.typestore.register(missing)

    def close(self) -> None:
        """Close the reader and remove any temporary link or decompressed copy."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> 'BagReader':
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- topics ------------------------------------------------------------------------------
    @property
    def reader(self) -> AnyReader:
        """The open rosbags AnyReader (raises RuntimeError when closed)."""
        if self._reader is None:
            raise RuntimeError(f'bag {str(self.path)!r} is not open')
        return self._reader

    @property
    def message_compressed(self) -> bool:
        """True when messages may be zstd-compressed one by one (``compression_mode: message``, or
        a cut-off rosbag2 directory without metadata.yaml): :meth:`messages` decompresses them."""
        return self._message_zstd or any(
            getattr(sub, 'compression_mode', None) == 'message' for sub in self.reader.readers
        )

    def is_known(self, msgtype: str) -> bool:
        """True when ``msgtype`` can be deserialized (bag definition or built-in typestore)."""
        return msgtype in self.reader.typestore.fielddefs

    def topics(self) -> Dict[str, TopicEntry]:
        """All topics of the bag: ``{topic: TopicEntry}`` (count summed over connections)."""
        out: Dict[str, TopicEntry] = {}
        for conn in self.reader.connections:
            prev = out.get(conn.topic)
            count = conn.msgcount + (prev.count if prev else 0)
            out[conn.topic] = TopicEntry(
                conn.topic, conn.msgtype, count, self.is_known(conn.msgtype)
            )
        return out

    def unknown_topics(self) -> List[TopicEntry]:
        """Topics whose type is unknown; logs one warning per topic naming topic and type (C28)."""
        entries = [e for e in self.topics().values() if not e.known]
        for e in entries:
            if e.topic not in self._warned:
                self._warned.add(e.topic)
                LOG.warning(
                    'skipping topic %s: message type %s is unknown (no definition in the bag, '
                    'not in typestore %s)',
                    e.topic,
                    e.msgtype,
                    self.typestore_name,
                )
        return entries

    def messages(self, topics: Iterable[str]) -> Iterator[Tuple[str, str, int, bytes]]:
        """Raw messages of the given topics whose type is known, in bag time order.

        Yields:
            ``(topic, msgtype, bag_time_ns, raw)``; ``raw`` is CDR (ROS 2) or ROS 1 serialized
            bytes, already decompressed (message mode).
        """
        wanted = set(topics)
        conns = [
            c for c in self.reader.connections if c.topic in wanted and self.is_known(c.msgtype)
        ]
        if not conns:
            return
        t_ns = None
        try:
            for conn, t_ns, raw in self.reader.messages(connections=conns):
                # CDR starts 00 0x 00 00: no ambiguity with the zstd magic
                if self._message_zstd and not self.is_ros1 and raw[:4] == MAGIC_ZSTD:
                    raw = zstd.decompress(raw)
                yield conn.topic, conn.msgtype, t_ns, raw
        except _READ_DAMAGE as err:
            # damage inside a closed file that only shows while reading (an MCAP chunk failing its
            # CRC, a ROS 1 chunk that does not decompress): an error naming the bag, not a
            # traceback; MCAP can be read again in file order, skipping the damaged chunks (C38)
            after = 'before its first message' if t_ns is None else f'after bag time {t_ns} ns'
            mcap = 'mcap' in (self.format.kind, self.format.storage) if self.format else False
            raise BagDamaged(
                f'bag {str(self.path)!r} is damaged: reading stopped {after}: '
                f'{type(err).__name__}: {str(err).rstrip(".")}',
                retryable=mcap and not self.file_order,
            ) from None

    def deserialize(self, raw: bytes, msgtype: str) -> Any:
        """Deserialize one raw message with the bag's typestore (rosbags message object). Arrays
        (e.g. ``Image.data``) are read-only numpy views of ``raw``. A large CDR message is handed
        over as a memoryview: rosbags slices off the 4-byte encapsulation, which copies a bytes
        object (640x480 rgb8: 88 -> 13 us; small messages decode faster from bytes).

        Raises:
            ValueError: the bytes do not decode as ``msgtype``.
        """
        if not self.is_ros1 and len(raw) > 4096:
            raw = memoryview(raw)
        try:
            return self.reader.deserialize(raw, msgtype)
        except (AnyReaderError, Exception) as err:  # rosbags raises assorted errors on bad bytes
            raise ValueError(f'cannot deserialize {msgtype}: {err}') from None

    def stamp_ns(self, raw: bytes, msgtype: str) -> int:
        """Header stamp of a raw message whose type starts with a std_msgs Header (see
        raw_header_stamp_ns).

        Raises:
            ValueError: the type has no leading ``header`` field, or the bytes are too short.
        """
        fields = self.reader.typestore.fielddefs[msgtype][1]
        if not fields or fields[0][0] != 'header':
            raise ValueError(f'{msgtype} has no leading header field')
        return raw_header_stamp_ns(raw, self.is_ros1)
