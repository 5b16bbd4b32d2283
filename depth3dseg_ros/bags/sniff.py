"""What a bag path holds, from the files' own bytes: formats, compression, cut-off recordings (C29,
C38).

Split out of ``bags.reader`` (which re-exports every name here). The storage file's leading bytes
decide its format everywhere — a bare file, a file with a misleading extension, the files of a
rosbag2 directory (for ``compression_mode: file`` the first bytes of the decompressed stream); a
directory's ``metadata.yaml`` ``storage_identifier`` is only a hint. Magics: SQLite ``SQLite format
3\\0``, MCAP ``89 4D 43 41 50 30 0D 0A``, ROS 1 ``#ROSBAG V2.0\\n``, zstd ``28 B5 2F FD``, lz4
frame ``04 22 4D 18``.

Cut-off recordings (case C38: a recorder killed before it closed its files):

* a rosbag2 directory without ``metadata.yaml`` (rosbag2 writes it on close): its storage files are
  found and sniffed here (:func:`storage_files_of_dir`) and read one by one as bare storage files;
  the topics, types and message counts come from the files themselves (SQLite ``topics`` table,
  MCAP Channel/Schema records) — the in-memory equivalent of ``ros2 bag reindex``;
* an MCAP without footer (:func:`mcap_is_closed` False): read in file order by
  ``bags.mcap_salvage``;
* a SQLite file whose ``-wal`` still holds transactions (``bags.sqlite_wal``): read from a copy
  with the log replayed;
* a ROS 1 bag whose header has ``index_pos`` 0 or pointing past the end of the file (the recorder
  writes the index on close; ``.bag.active``): refused by :func:`ros1_index_problem` with one line
  saying to run ``rosbag reindex`` (rosbags reads indexed ROS 1 bags only).
"""

from __future__ import annotations

import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Dict, List, Optional

import lz4.frame
import yaml

try:  # the same zstd module rosbags uses
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:  # Python < 3.14
    from backports import zstd  # type: ignore[no-redef]

from depth3dseg_ros.core.yamlfile import load_yaml_file

MAGIC_SQLITE = b'SQLite format 3\x00'
MAGIC_MCAP = b'\x89MCAP0\r\n'
MAGIC_ROS1 = b'#ROSBAG V2.0\n'
MAGIC_ZSTD = b'\x28\xb5\x2f\xfd'
MAGIC_LZ4 = b'\x04\x22\x4d\x18'

#: (mode, format) pairs that can be read; mode 'file'/'message' are rosbag2's generic compression,
#: 'chunk' is MCAP or ROS 1 chunk compression.
SUPPORTED_COMPRESSION = {
    ('file', 'zstd'),
    ('message', 'zstd'),
    ('chunk', ''),
    ('chunk', 'none'),
    ('chunk', 'zstd'),
    ('chunk', 'lz4'),
    ('chunk', 'bz2'),
}
_STORAGE_SUFFIX = {'sqlite3': '.db3', 'mcap': '.mcap', 'ros1': '.bag'}
_COPY_BLOCK = 1 << 20
_YAML_LOADER = getattr(
    yaml, 'CSafeLoader', yaml.SafeLoader
)  # libyaml: 25 ms -> ~1 ms per metadata.yaml


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
        kind: ``'rosbag2'`` (directory with metadata.yaml), ``'sqlite3'``, ``'mcap'`` or
            ``'ros1'``.
        compression_mode: ``'none'``, ``'file'``, ``'message'`` (rosbag2 generic), or
            ``'whole-file'`` for a bare storage file compressed as a whole.
        compression_format: ``''``, ``'zstd'``, ``'lz4'`` ...
        storage: rosbag2 directory: the storage of its files as their leading bytes say
            (``'sqlite3'``, ``'mcap'``, or ``'ros1'``), else ``''``.
        metadata_storage: rosbag2 directory: the ``storage_identifier`` its metadata.yaml names (a
            hint; may differ from ``storage``: :class:`BagReader` then warns and follows
            ``storage``); ``''`` for a directory without metadata.yaml (C38).
        recovery: ``''`` for a normally closed recording, else what was cut off (C38), e.g.
            ``'no metadata.yaml'`` or ``'not closed: ends at byte 123456 of 130000'``.
    """

    kind: str
    compression_mode: str = 'none'
    compression_format: str = ''
    storage: str = ''
    metadata_storage: str = ''
    recovery: str = ''

    def describe(self) -> str:
        """Short text such as ``'rosbag2/sqlite3 (file/zstd)'``, ``'ros1'`` or
        ``'rosbag2/mcap [no metadata.yaml]'``."""
        kind = f'{self.kind}/{self.storage}' if self.storage else self.kind
        comp = (
            ''
            if self.compression_mode == 'none'
            else f' ({self.compression_mode}/{self.compression_format})'
        )
        return kind + comp + (f' [{self.recovery}]' if self.recovery else '')


_MAGICS = (
    (MAGIC_SQLITE, 'sqlite3'),
    (MAGIC_MCAP, 'mcap'),
    (MAGIC_ROS1, 'ros1'),
    (MAGIC_ZSTD, 'zstd'),
    (MAGIC_LZ4, 'lz4'),
)
_EXPECTED = (
    "expected SQLite 'SQLite format 3\\0', MCAP 89 4D 43 41 50 30 0D 0A, ROS 1 '#ROSBAG V2.0', "
    'zstd 28 B5 2F FD or lz4 04 22 4D 18'
)


def kind_of_head(head: bytes) -> Optional[str]:
    """'sqlite3', 'mcap', 'ros1', 'zstd' or 'lz4' for a file's leading bytes, None when none
    matches."""
    return next((kind for magic, kind in _MAGICS if head.startswith(magic)), None)


def hex16(head: bytes) -> str:
    """The first 16 bytes as upper-case hex pairs, e.g. ``'6E 6F 74 20 61 20 62 61 67'``."""
    return ' '.join(f'{b:02X}' for b in head[:16])


def sniff_file(path: Path) -> str:
    """Storage kind of one file from its first bytes: 'sqlite3', 'mcap', 'ros1', 'zstd', 'lz4'.

    Raises:
        ValueError: an empty file, or one that matches no known magic; the message names the path
            and shows its first 16 bytes in hex (e.g. ``first 16 bytes 6E 6F 74 20 ...``).
    """
    with open(path, 'rb') as fh:
        head = fh.read(16)
    kind = kind_of_head(head)
    if kind is None:
        what = 'empty file (0 bytes)' if not head else f'first 16 bytes {hex16(head)}'
        raise ValueError(f'bag file {str(path)!r}: unknown format ({what}; {_EXPECTED})')
    return kind


def sniff_storage(path: Path) -> str:
    """Storage kind of a file, looking inside a zstd/lz4-compressed one (rosbag2
    ``compression_mode:
    file``): 'sqlite3', 'mcap' or 'ros1' (only the first 16 decompressed bytes are read).

    Raises:
        ValueError: unknown magic (first 16 bytes in hex, of the decompressed stream when
            compressed).
    """
    kind = sniff_file(path)
    if kind not in ('zstd', 'lz4'):
        return kind
    opener = zstd.open if kind == 'zstd' else lz4.frame.open
    try:
        with open(path, 'rb') as raw, opener(raw, 'rb') as inp:
            head = inp.read(16)
    except Exception as err:  # a corrupt stream: say so with the file named
        raise ValueError(
            f'bag file {str(path)!r}: {kind} stream cannot be decompressed ({err})'
        ) from None
    inner = kind_of_head(head)
    if inner not in _STORAGE_SUFFIX:
        raise ValueError(
            f'bag file {str(path)!r}: {kind}-compressed, but the decompressed data is no bag '
            f'storage (first 16 bytes {hex16(head)}; {_EXPECTED})'
        )
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
        raise FileNotFoundError(
            f'bag directory {str(path)!r}: storage file(s) {missing} listed in metadata.yaml '
            'do not exist'
        )
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

    The storage files' leading bytes decide the format (for a directory, ``storage`` is what its
    files hold; ``metadata_storage`` what metadata.yaml says). A directory without metadata.yaml
    whose files are bag storage (a killed recording, C38) gives ``kind 'rosbag2'``,
    ``metadata_storage ''`` and ``recovery 'no metadata.yaml'``.

    Raises:
        FileNotFoundError: ``path`` does not exist, or a storage file metadata.yaml lists is
            missing.
        ValueError: not a bag (a directory with neither metadata.yaml nor storage files — the
            message names the files found —, unknown file magic: first 16 bytes in hex, mixed
            storage formats in one directory); a ROS 1 bag without index (C38,
            :func:`ros1_index_problem`).
        UnsupportedCompression: a compression mode/format that cannot be read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f'bag path {str(path)!r} does not exist')
    if path.is_dir():
        meta_path = path / 'metadata.yaml'
        if not meta_path.is_file():
            return _format_without_metadata(path)
        data = load_yaml_file(meta_path, _YAML_LOADER) or {}  # a parse error: one line
        if not isinstance(data, dict) or not isinstance(
            data.get('rosbag2_bagfile_information', {}), dict
        ):
            raise ValueError(
                f'{meta_path}: not a rosbag2 metadata.yaml (no rosbag2_bagfile_information '
                'mapping)'
            )
        meta = data.get('rosbag2_bagfile_information', {})
        mode = str(meta.get('compression_mode') or 'none').lower()
        fmt = str(meta.get('compression_format') or '').lower()
        if mode not in ('none', '') and (mode, fmt) not in SUPPORTED_COMPRESSION:
            raise UnsupportedCompression(mode, fmt, path)
        storage = _storage_of_dir(path, meta)  # the files' own bytes decide; metadata is a hint
        if storage == 'ros1' and mode not in ('none', ''):
            raise UnsupportedCompression(mode, f'{fmt}+ros1', path)
        if storage == 'ros1':
            for f in _rosbag2_files(path, meta):
                _refuse_unindexed(f)
        return BagFormat(
            'rosbag2',
            mode or 'none',
            fmt if mode not in ('none', '') else '',
            storage,
            str(meta.get('storage_identifier', '') or ''),
        )
    kind = sniff_file(path)
    if kind in ('zstd', 'lz4'):
        return BagFormat('', 'whole-file', kind)
    if kind == 'ros1':
        _refuse_unindexed(path)
    return BagFormat(kind)


# -- cut-off recordings (C38)
# -----------------------------------------------------------------------
_SIDECAR = re.compile(r'(-wal|-shm|-journal)$')


def _split_key(p: Path) -> tuple:
    """Natural order of split files: ``run_2.db3`` before ``run_10.db3``."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r'(\d+)', p.name))


def storage_files_of_dir(path: Path, skipped: Optional[Dict[Path, str]] = None) -> Dict[Path, str]:
    """The bag storage files of a rosbag2 directory without metadata.yaml (C38), in split order,
    with their storage kind from their contents (``'sqlite3'``/``'mcap'``; file-mode compressed
    files are looked inside). Hidden files and SQLite side files (``-wal``, ``-shm``, ``-journal``)
    are not storage. A file that is no bag storage (empty: a split created as the recorder was
    killed; unknown bytes) is left out and, with ``skipped`` given, put there with the reason,
    as long as another file is storage.

    Raises:
        ValueError: no file in the directory (the message says a rosbag2 directory needs
            metadata.yaml or its storage files), or no file that is bag storage (the first
            file's problem: first 16 bytes in hex, or empty).
    """
    files = sorted(
        (
            p
            for p in path.iterdir()
            if p.is_file() and not p.name.startswith('.') and not _SIDECAR.search(p.name)
        ),
        key=_split_key,
    )
    if not files:
        found = sorted(p.name for p in path.iterdir())
        raise ValueError(
            f'bag directory {str(path)!r} has no metadata.yaml and no storage file '
            f'(found: {found}); pass the .db3/.mcap/.bag files directly if they are elsewhere'
        )
    kinds: Dict[Path, str] = {}
    problems: Dict[Path, str] = {}
    for f in files:
        try:
            kinds[f] = sniff_storage(f)
        except ValueError as err:
            problems[f] = str(err)
    if not kinds:
        first = next(iter(problems.values()))
        raise ValueError(f'bag directory {str(path)!r} has no metadata.yaml, and {first}')
    if skipped is not None:
        skipped.update(problems)
    return kinds


def _format_without_metadata(path: Path) -> BagFormat:
    kinds = storage_files_of_dir(path)
    if len(set(kinds.values())) > 1:
        raise ValueError(
            f'bag directory {str(path)!r} has no metadata.yaml and mixes storage formats: '
            f'{ {f.name: k for f, k in kinds.items()} }'
        )
    storage = next(iter(kinds.values()))
    outer = {sniff_file(f) for f in kinds}
    comp = next((c for c in ('zstd', 'lz4') if c in outer), '')
    if comp == 'lz4':
        raise UnsupportedCompression('file', 'lz4', path)
    if storage == 'ros1':
        for f in kinds:
            _refuse_unindexed(f)
    return BagFormat('rosbag2', 'file' if comp else 'none', comp, storage, '', 'no metadata.yaml')


MCAP_FOOTER_LEN = (
    37  # Footer record (op 0x02, length 20: summary_start, summary_offset_start, crc) + magic
)


def mcap_is_closed(path: Path) -> bool:
    """True when an MCAP file ends with a Footer record and the closing magic (a recorder writes
    them on close; without them the file was cut off, C38)."""
    size = path.stat().st_size
    if size < 8 + MCAP_FOOTER_LEN:
        return False
    with open(path, 'rb') as fh:
        fh.seek(size - MCAP_FOOTER_LEN)
        tail = fh.read(MCAP_FOOTER_LEN)
    return tail[-8:] == MAGIC_MCAP and tail[:9] == b'\x02' + (20).to_bytes(8, 'little')


def ros1_index_problem(path: Path) -> Optional[str]:
    """Why a ROS 1 bag cannot be read without reindexing, or None when its header points at an
    index.

    The bag header record (right after ``#ROSBAG V2.0\\n``) holds ``index_pos``; the recorder
    writes the index and sets it on close, so a killed recording has 0 (or a position past the end
    of a truncated file). Reads only the header record.
    """
    size = path.stat().st_size
    with open(path, 'rb') as fh:
        fh.seek(len(MAGIC_ROS1))
        raw = fh.read(4)
        hlen = struct.unpack('<I', raw)[0] if len(raw) == 4 else 0
        header = fh.read(hlen) if 0 < hlen < 1 << 16 else b''
    fields: Dict[str, bytes] = {}
    pos = 0
    while pos + 4 <= len(header):
        (flen,) = struct.unpack_from('<I', header, pos)
        name, _, value = header[pos + 4 : pos + 4 + flen].partition(b'=')
        fields[name.decode('latin-1')] = value
        pos += 4 + flen
    raw_pos = fields.get('index_pos', b'')
    if len(raw_pos) != 8:
        return 'its bag header record is cut off or damaged (no index_pos)'
    index_pos = struct.unpack('<Q', raw_pos)[0]
    if index_pos == 0:
        return 'it has no index (index_pos 0: the recording was not closed)'
    if index_pos >= size:
        return (
            f'its index is missing (index_pos {index_pos} is past the end of the {size}-byte '
            'file: truncated)'
        )
    want = sum(
        struct.unpack('<I', fields[k])[0] if len(fields.get(k, b'')) == 4 else 0
        for k in ('conn_count', 'chunk_count')
    )
    found = _records_from(path, index_pos, size)
    if found < want:
        return (
            f'its index is cut off (index_pos {index_pos}: {found} of its {want} connection and '
            f'chunk records fit in the {size}-byte file: truncated)'
        )
    return None


def _records_from(path: Path, pos: int, size: int) -> int:
    """How many whole ROS 1 records (header length, header, data length, data) follow ``pos``
    before the end of the file."""
    n = 0
    with open(path, 'rb') as fh:
        while pos + 4 <= size:
            fh.seek(pos)
            (hlen,) = struct.unpack('<I', fh.read(4))
            if pos + 8 + hlen > size:
                break
            fh.seek(pos + 4 + hlen)
            (dlen,) = struct.unpack('<I', fh.read(4))
            if pos + 8 + hlen + dlen > size:
                break
            pos += 8 + hlen + dlen
            n += 1
    return n


def _refuse_unindexed(path: Path) -> None:
    """Raise the one-line C38 error for a ROS 1 bag without index (see
    :func:`ros1_index_problem`)."""
    why = ros1_index_problem(path)
    if why:
        raise ValueError(
            f'ROS 1 bag {str(path)!r} cannot be read: {why}; run `rosbag reindex '
            f'{path.name}` (ROS 1 tools) to rebuild the index, then extract again'
        )


def _decompress_stream(src: Path, fmt: str, dst: Path) -> None:
    """Stream-decompress ``src`` (zstd or lz4 frame) into ``dst`` in 1 MiB blocks (C29)."""
    opener = zstd.open if fmt == 'zstd' else lz4.frame.open
    with open(src, 'rb') as raw, opener(raw, 'rb') as inp, open(dst, 'wb') as out:
        shutil.copyfileobj(inp, out, _COPY_BLOCK)
