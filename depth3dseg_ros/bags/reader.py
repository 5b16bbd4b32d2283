"""Open any ROS bag through rosbags' AnyReader: format sniffing, typestores, compression (C28, C29).

Formats (detected from file contents, never from the extension — docs/ros_conventions.md "Bags"):

* rosbag2 directory (``metadata.yaml`` + ``.db3``/``.mcap`` files), plain or compressed with
  rosbag2's generic compression (``compression_mode`` FILE -> ``*_0.db3.zstd``, or MESSAGE);
* a bare rosbag2 storage file: SQLite3 (``SQLite format 3\\0``) or MCAP (``\\x89MCAP0\\r\\n``),
  whatever its name; MCAP chunks may be zstd- or lz4-compressed;
* a ROS 1 bag (``#ROSBAG V2.0``), chunks uncompressed, bz2 or lz4;
* a bare storage file compressed as a whole with zstd (magic ``28 B5 2F FD``) or lz4 frame
  (``04 22 4D 18``): streamed to a temporary file first.

The storage file's own leading bytes decide its format everywhere: a bare file, a file with a misleading
extension, and the files of a rosbag2 directory (for ``compression_mode: file`` the first bytes of the
decompressed stream). A directory's ``metadata.yaml`` ``storage_identifier`` is only a hint: when it
names another plugin than the files' contents, :class:`BagReader` logs one warning and reads the files
by their contents (through a temporary copy of the directory of links with a corrected metadata.yaml).
An unrecognised file is refused with its first 16 bytes in hex.

What rosbags 0.11.9 does natively (read in its source, ``rosbag2/reader.py``): FILE mode zstd is
streamed (``zstd.open`` + ``shutil.copyfileobj``) into a ``TemporaryDirectory``; MESSAGE mode zstd is
decompressed per message; MCAP chunk compression zstd/lz4 and ROS 1 chunk compression bz2/lz4 are
supported. Any other combination is refused here *before* any message is read, with
:class:`UnsupportedCompression` ``"unsupported compression: <mode>/<format>"`` (C29).

Typestores (C28): a bag's own message definitions (MCAP schemas, newer ``.db3``, every ROS 1 bag)
are registered from the bag and take precedence. Types the bag carries no definition for are
filled in from the built-in typestore of the selected distro (``ros2_kilted`` by default). A topic
whose type is known neither way is reported by :meth:`BagReader.unknown_topics` and never decoded.
"""
from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import lz4.frame
import yaml
from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.typesys import Stores, get_typestore

try:  # the same zstd module rosbags uses
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:  # Python < 3.14
    from backports import zstd  # type: ignore[no-redef]

LOG = logging.getLogger(__name__)

DEFAULT_TYPESTORE = 'ros2_kilted'

MAGIC_SQLITE = b'SQLite format 3\x00'
MAGIC_MCAP = b'\x89MCAP0\r\n'
MAGIC_ROS1 = b'#ROSBAG V2.0\n'
MAGIC_ZSTD = b'\x28\xb5\x2f\xfd'
MAGIC_LZ4 = b'\x04\x22\x4d\x18'

#: (mode, format) pairs that can be read; mode 'file'/'message' are rosbag2's generic compression,
#: 'chunk' is MCAP or ROS 1 chunk compression.
SUPPORTED_COMPRESSION = {
    ('file', 'zstd'), ('message', 'zstd'),
    ('chunk', ''), ('chunk', 'none'), ('chunk', 'zstd'), ('chunk', 'lz4'), ('chunk', 'bz2'),
}
_STORAGE_SUFFIX = {'sqlite3': '.db3', 'mcap': '.mcap', 'ros1': '.bag'}
_COPY_BLOCK = 1 << 20


class UnsupportedCompression(ValueError):
    """A bag compression variant that cannot be read (raised before any message is read, C29)."""

    def __init__(self, mode: str, fmt: str, path: Path | str = '') -> None:
        self.mode, self.fmt = mode, fmt
        where = f' ({path})' if path else ''
        super().__init__(f'unsupported compression: {mode}/{fmt}{where}')


@dataclass(frozen=True)
class BagFormat:
    """What a bag path holds.

    Attributes:
        kind: ``'rosbag2'`` (directory with metadata.yaml), ``'sqlite3'``, ``'mcap'`` or ``'ros1'``.
        compression_mode: ``'none'``, ``'file'``, ``'message'`` (rosbag2 generic), or
            ``'whole-file'`` for a bare storage file compressed as a whole.
        compression_format: ``''``, ``'zstd'``, ``'lz4'`` ...
        storage: rosbag2 directory: the storage of its files as their leading bytes say (``'sqlite3'``,
            ``'mcap'``, or ``'ros1'``), else ``''``.
        metadata_storage: rosbag2 directory: the ``storage_identifier`` its metadata.yaml names (a hint;
            may differ from ``storage``: :class:`BagReader` then warns and follows ``storage``).
    """

    kind: str
    compression_mode: str = 'none'
    compression_format: str = ''
    storage: str = ''
    metadata_storage: str = ''

    def describe(self) -> str:
        """Short text such as ``'rosbag2/sqlite3 (file/zstd)'`` or ``'ros1'``."""
        kind = f'{self.kind}/{self.storage}' if self.storage else self.kind
        comp = '' if self.compression_mode == 'none' else f' ({self.compression_mode}/{self.compression_format})'
        return kind + comp


_MAGICS = ((MAGIC_SQLITE, 'sqlite3'), (MAGIC_MCAP, 'mcap'), (MAGIC_ROS1, 'ros1'), (MAGIC_ZSTD, 'zstd'),
           (MAGIC_LZ4, 'lz4'))
_EXPECTED = ("expected SQLite 'SQLite format 3\\0', MCAP 89 4D 43 41 50 30 0D 0A, ROS 1 '#ROSBAG V2.0', "
             'zstd 28 B5 2F FD or lz4 04 22 4D 18')


def kind_of_head(head: bytes) -> Optional[str]:
    """'sqlite3', 'mcap', 'ros1', 'zstd' or 'lz4' for a file's leading bytes, None when none matches."""
    return next((kind for magic, kind in _MAGICS if head.startswith(magic)), None)


def hex16(head: bytes) -> str:
    """The first 16 bytes as upper-case hex pairs, e.g. ``'6E 6F 74 20 61 20 62 61 67'``."""
    return ' '.join(f'{b:02X}' for b in head[:16])


def sniff_file(path: Path) -> str:
    """Storage kind of one file from its first bytes: 'sqlite3', 'mcap', 'ros1', 'zstd', 'lz4'.

    Raises:
        ValueError: an empty file, or one that matches no known magic; the message names the path and
            shows its first 16 bytes in hex (e.g. ``first 16 bytes 6E 6F 74 20 ...``).
    """
    with open(path, 'rb') as fh:
        head = fh.read(16)
    kind = kind_of_head(head)
    if kind is None:
        what = 'empty file (0 bytes)' if not head else f'first 16 bytes {hex16(head)}'
        raise ValueError(f'bag file {str(path)!r}: unknown format ({what}; {_EXPECTED})')
    return kind


def sniff_storage(path: Path) -> str:
    """Storage kind of a file, looking inside a zstd/lz4-compressed one (rosbag2 ``compression_mode:
    file``): 'sqlite3', 'mcap' or 'ros1' (only the first 16 decompressed bytes are read).

    Raises:
        ValueError: unknown magic (first 16 bytes in hex, of the decompressed stream when compressed).
    """
    kind = sniff_file(path)
    if kind not in ('zstd', 'lz4'):
        return kind
    opener = zstd.open if kind == 'zstd' else lz4.frame.open
    try:
        with open(path, 'rb') as raw, opener(raw, 'rb') as inp:
            head = inp.read(16)
    except Exception as err:  # a corrupt stream: say so with the file named
        raise ValueError(f'bag file {str(path)!r}: {kind} stream cannot be decompressed ({err})') from None
    inner = kind_of_head(head)
    if inner not in _STORAGE_SUFFIX:
        raise ValueError(f'bag file {str(path)!r}: {kind}-compressed, but the decompressed data is no bag '
                         f'storage (first 16 bytes {hex16(head)}; {_EXPECTED})')
    return inner


def _rosbag2_files(path: Path, meta: Dict[str, Any]) -> List[Path]:
    """The storage files of a rosbag2 directory: metadata ``relative_file_paths`` (by base name, as
    rosbags opens them), else the directory's ``*.db3``/``*.mcap`` (+ ``.zstd``) files."""
    rel = meta.get('relative_file_paths') or []
    files = [path / PurePath(str(x)).name for x in rel]
    if not files:
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name != 'metadata.yaml')
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f'bag directory {str(path)!r}: storage file(s) {missing} listed in metadata.yaml '
                                'do not exist')
    return files


def _storage_of_dir(path: Path, meta: Dict[str, Any]) -> str:
    """The one storage kind of a rosbag2 directory's files, from their contents.

    Raises:
        ValueError: no storage file, files of different kinds (each named), or an unknown file."""
    files = _rosbag2_files(path, meta)
    if not files:
        raise ValueError(f'bag directory {str(path)!r} has no storage file')
    kinds = {f.name: sniff_storage(f) for f in files}
    if len(set(kinds.values())) > 1:
        raise ValueError(f'bag directory {str(path)!r} mixes storage formats: {kinds}')
    return next(iter(kinds.values()))


def detect_format(path: Path | str) -> BagFormat:
    """Detect the bag format and compression of ``path`` (a rosbag2 directory or one file).

    The storage files' leading bytes decide the format (for a directory, ``storage`` is what its files
    hold; ``metadata_storage`` what metadata.yaml says).

    Raises:
        FileNotFoundError: ``path`` does not exist, or a storage file metadata.yaml lists is missing.
        ValueError: not a bag (no metadata.yaml in a directory, unknown file magic: first 16 bytes in
            hex, mixed storage formats in one directory).
        UnsupportedCompression: a compression mode/format that cannot be read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f'bag path {str(path)!r} does not exist')
    if path.is_dir():
        meta_path = path / 'metadata.yaml'
        if not meta_path.is_file():
            raise ValueError(f'bag directory {str(path)!r} has no metadata.yaml')
        with open(meta_path, encoding='utf-8') as fh:
            meta = (yaml.safe_load(fh) or {}).get('rosbag2_bagfile_information', {})
        mode = str(meta.get('compression_mode') or 'none').lower()
        fmt = str(meta.get('compression_format') or '').lower()
        if mode not in ('none', '') and (mode, fmt) not in SUPPORTED_COMPRESSION:
            raise UnsupportedCompression(mode, fmt, path)
        storage = _storage_of_dir(path, meta)  # the files' own bytes decide; metadata is a hint
        if storage == 'ros1' and mode not in ('none', ''):
            raise UnsupportedCompression(mode, f'{fmt}+ros1', path)
        return BagFormat('rosbag2', mode or 'none', fmt if mode not in ('none', '') else '', storage,
                         str(meta.get('storage_identifier', '') or ''))
    kind = sniff_file(path)
    if kind in ('zstd', 'lz4'):
        return BagFormat('', 'whole-file', kind)
    return BagFormat(kind)


def _decompress_stream(src: Path, fmt: str, dst: Path) -> None:
    """Stream-decompress ``src`` (zstd or lz4 frame) into ``dst`` in 1 MiB blocks (C29)."""
    opener = zstd.open if fmt == 'zstd' else lz4.frame.open
    with open(src, 'rb') as raw, opener(raw, 'rb') as inp, open(dst, 'wb') as out:
        shutil.copyfileobj(inp, out, _COPY_BLOCK)


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


def header_stamp_ns(raw: bytes | memoryview, ros1: bool) -> int:
    """Header stamp (ns) of a serialized message whose first field is std_msgs/Header.

    ROS 2 CDR: 4-byte encapsulation (byte 1 = 1 little, 0 big endian), then int32 sec, uint32 nanosec.
    ROS 1: uint32 seq, then uint32 secs, uint32 nsecs (little endian). Reading the stamp this way
    avoids deserializing large images just to pair them.

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


@dataclass(frozen=True)
class TopicEntry:
    """One topic of an open bag: type, message count and whether its type can be decoded."""

    topic: str
    msgtype: str
    count: int
    known: bool


class BagReader:
    """Context manager over one bag (any format above), built on ``rosbags.highlevel.AnyReader``.

    Args:
        path: rosbag2 directory, bare ``.db3``/``.mcap`` file or ROS 1 bag (any file name).
        typestore: distro of the built-in definitions used for types the bag does not define
            (C28); ``'ros2_kilted'`` by default. ROS 1 bags always carry their definitions.

    Raises (on ``open``/``__enter__``):
        FileNotFoundError, ValueError: see :func:`detect_format`.
        UnsupportedCompression: the compression variant cannot be read (C29), before any message.
        RuntimeError: rosbags cannot open the bag (its message is kept).
    """

    def __init__(self, path: Path | str, typestore: str = DEFAULT_TYPESTORE) -> None:
        self.path = Path(path)
        self.typestore_name = typestore
        self.default_typestore = resolve_typestore(typestore)
        self.format: Optional[BagFormat] = None
        self.is_ros1 = False
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._reader: Optional[AnyReader] = None
        self._warned: set = set()

    # -- opening -----------------------------------------------------------------------------
    def _open_path(self) -> List[Path]:
        """Paths handed to AnyReader: the bag itself, or correctly named links / a decompressed copy /
        a directory of links with a corrected metadata.yaml (its storage_identifier disagreed with the
        files' contents: one warning)."""
        fmt = detect_format(self.path)
        self.format = fmt
        if fmt.kind == 'rosbag2':
            if fmt.storage == fmt.metadata_storage:
                return [self.path]
            return self._relabelled_dir(fmt)
        src, kind = self.path, fmt.kind
        self._tmp = tempfile.TemporaryDirectory(prefix='depth3dseg_bag_')
        if fmt.compression_mode == 'whole-file':
            plain = Path(self._tmp.name, 'decompressed')
            _decompress_stream(self.path, fmt.compression_format, plain)
            kind = sniff_file(plain)
            if kind not in _STORAGE_SUFFIX:
                raise UnsupportedCompression('whole-file', f'{fmt.compression_format}+{kind}', src)
            src = plain
            self.format = BagFormat(kind, 'whole-file', fmt.compression_format)
        if src.suffix == _STORAGE_SUFFIX[kind] and src == self.path:
            self._tmp.cleanup()
            self._tmp = None
            return [src]
        # rosbags picks the reader from the suffix: give it a name that matches the contents.
        link = Path(self._tmp.name, self.path.name.split('.')[0] + _STORAGE_SUFFIX[kind])
        os.symlink(src.resolve(), link)
        return [link]

    def _relabelled_dir(self, fmt: BagFormat) -> List[Path]:
        """A rosbag2 directory whose metadata.yaml names another storage plugin than its files hold:
        warn once, then read the files by their contents (rosbags picks the plugin from metadata.yaml:
        a temporary directory of links with storage_identifier corrected; ROS 1 files: links named .bag)."""
        meta_path = self.path / 'metadata.yaml'
        files = _rosbag2_files(self.path, (yaml.safe_load(meta_path.read_text(encoding='utf-8')) or {})
                               .get('rosbag2_bagfile_information', {}))
        LOG.warning('bag %s: metadata.yaml names storage %r but its file(s) %s are %s: reading them as %s '
                    '(the file contents decide; metadata.yaml is only a hint)', self.path,
                    fmt.metadata_storage, [f.name for f in files], fmt.storage, fmt.storage)
        self._tmp = tempfile.TemporaryDirectory(prefix='depth3dseg_bag_')
        tmp = Path(self._tmp.name)
        if fmt.storage == 'ros1':
            links = []
            for i, f in enumerate(files):
                links.append(tmp / f'{f.name.split(".")[0]}_{i}.bag')
                os.symlink(f.resolve(), links[-1])
            return links
        fixed = tmp / self.path.name
        fixed.mkdir()
        for entry in self.path.iterdir():
            if entry.name != 'metadata.yaml':
                os.symlink(entry.resolve(), fixed / entry.name)
        data = yaml.safe_load(meta_path.read_text(encoding='utf-8'))
        data['rosbag2_bagfile_information']['storage_identifier'] = fmt.storage
        (fixed / 'metadata.yaml').write_text(yaml.safe_dump(data, sort_keys=False), encoding='utf-8')
        return [fixed]

    def open(self) -> 'BagReader':
        """Open the bag; see the class docstring for errors (temporary files are removed on error)."""
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
        try:
            reader.open()
        except AnyReaderError as err:
            text = ' '.join(str(a) for a in err.args)
            if 'Compression' in text and 'not supported' in text:
                fmt = text.split("'")[1] if "'" in text else text
                raise UnsupportedCompression('chunk', fmt, self.path) from None
            raise RuntimeError(f'cannot open bag {str(self.path)!r}: {text}') from None
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

    def is_known(self, msgtype: str) -> bool:
        """True when ``msgtype`` can be deserialized (bag definition or built-in typestore)."""
        return msgtype in self.reader.typestore.fielddefs

    def topics(self) -> Dict[str, TopicEntry]:
        """All topics of the bag: ``{topic: TopicEntry}`` (count summed over connections)."""
        out: Dict[str, TopicEntry] = {}
        for conn in self.reader.connections:
            prev = out.get(conn.topic)
            count = conn.msgcount + (prev.count if prev else 0)
            out[conn.topic] = TopicEntry(conn.topic, conn.msgtype, count, self.is_known(conn.msgtype))
        return out

    def unknown_topics(self) -> List[TopicEntry]:
        """Topics whose type is unknown; logs one warning per topic naming topic and type (C28)."""
        entries = [e for e in self.topics().values() if not e.known]
        for e in entries:
            if e.topic not in self._warned:
                self._warned.add(e.topic)
                LOG.warning('skipping topic %s: message type %s is unknown (no definition in the bag, '
                            'not in typestore %s)', e.topic, e.msgtype, self.typestore_name)
        return entries

    def messages(self, topics: Iterable[str]) -> Iterator[Tuple[str, str, int, bytes]]:
        """Raw messages of the given topics whose type is known, in bag time order.

        Yields:
            ``(topic, msgtype, bag_time_ns, raw)``; ``raw`` is CDR (ROS 2) or ROS 1 serialized bytes,
            already decompressed (message mode).
        """
        wanted = set(topics)
        conns = [c for c in self.reader.connections if c.topic in wanted and self.is_known(c.msgtype)]
        if not conns:
            return
        for conn, t_ns, raw in self.reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, t_ns, raw

    def deserialize(self, raw: bytes, msgtype: str) -> Any:
        """Deserialize one raw message with the bag's typestore (rosbags message object).

        Raises:
            ValueError: the bytes do not decode as ``msgtype``.
        """
        try:
            return self.reader.deserialize(raw, msgtype)
        except (AnyReaderError, Exception) as err:  # rosbags raises assorted errors on bad bytes
            raise ValueError(f'cannot deserialize {msgtype}: {err}') from None

    def stamp_ns(self, raw: bytes, msgtype: str) -> int:
        """Header stamp of a raw message whose type starts with a std_msgs Header (see header_stamp_ns).

        Raises:
            ValueError: the type has no leading ``header`` field, or the bytes are too short.
        """
        fields = self.reader.typestore.fielddefs[msgtype][1]
        if not fields or fields[0][0] != 'header':
            raise ValueError(f'{msgtype} has no leading header field')
        return header_stamp_ns(raw, self.is_ros1)
