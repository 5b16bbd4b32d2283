"""Which paths ``bags.reader.BagReader`` hands to rosbags' AnyReader (split out of bags/reader.py).

rosbags picks its reader from a path's suffix and a rosbag2 directory's plugin from its
metadata.yaml. The storage file's own leading bytes decide here (bags.sniff), so a bag may be
handed over as itself, as a correctly named link, as a decompressed copy (a whole-file compressed
storage file), as a checkpointed copy (SQLite with a non-empty ``-wal``, C38), as links to the
storage files of a cut-off rosbag2 directory (C38), or as a directory of links with a corrected
metadata.yaml (its ``storage_identifier`` disagreed with the files). :class:`OpenPaths` is the
part of BagReader that makes those paths; its attributes are BagReader's (``path``, ``warn``,
``format``, ``_tmp``, ``_salvage``, ``_message_zstd``). Details in bags/reader.py's docstring.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import List, Optional

import yaml

from depth3dseg_ros.bags.sniff import (
    _STORAGE_SUFFIX,
    BagFormat,
    UnsupportedCompression,
    _decompress_stream,
    _rosbag2_files,
    detect_format,
    mcap_is_closed,
    sniff_file,
    storage_files_of_dir,
)
from depth3dseg_ros.bags.mcap_salvage import cached_scan
from depth3dseg_ros.bags.sqlite_salvage import (
    salvaged_copy,
    sqlite_problem,
    unreadable_definitions,
    without_definitions,
)
from depth3dseg_ros.bags.sqlite_wal import checkpointed_copy, wal_bytes

LOG = logging.getLogger('depth3dseg_ros.bags.reader')  # the reader's warnings, as before the split


def _damaged_sqlite(f: Path) -> bool:
    """A listed storage file that is SQLite by its bytes and not whole (cut off by a full disk
    after metadata.yaml was written, a damaged copy: C38); compressed files are checked once
    decompressed."""
    return f.is_file() and sniff_file(f) == 'sqlite3' and sqlite_problem(f) is not None


class OpenPaths:
    """Mixin of :class:`bags.reader.BagReader`: the paths it opens with rosbags."""

    path: Path
    warn: bool
    file_order: bool  # MCAP files read in file order even when closed (damaged chunks, C38)
    format: Optional[BagFormat]
    _tmp: Optional[tempfile.TemporaryDirectory]
    _salvage: set
    _message_zstd: bool
    _skipped: list  # why each storage file left out of this opening was (for the error if all are)

    def _open_path(self) -> List[Path]:
        """Paths handed to AnyReader: the bag itself, or correctly named links / a decompressed
        copy / a directory of links with a corrected metadata.yaml (its storage_identifier
        disagreed with the files' contents: one warning)."""
        fmt = detect_format(self.path)
        self.format = fmt
        self._skipped = []
        if fmt.kind == 'rosbag2':
            listed = self._dir_files()
            extra = self._unlisted_files(listed) if not fmt.recovery else []
            if (
                fmt.recovery
                or extra
                or (
                    fmt.storage == 'mcap'
                    and fmt.compression_mode != 'file'
                    and not all(mcap_is_closed(f) for f in listed)
                )
                or (fmt.storage == 'mcap' and self.file_order)
                or (fmt.storage == 'sqlite3' and any(map(wal_bytes, listed)))
                or (fmt.storage == 'sqlite3' and any(map(unreadable_definitions, listed)))
                or (fmt.storage == 'sqlite3' and any(map(_damaged_sqlite, listed)))
            ):
                return self._storage_files(fmt, listed + extra)  # a cut-off recording (C38)
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
        # rosbags picks the reader from the suffix: give it a name that matches the contents.
        if kind == 'sqlite3' and src == self.path and wal_bytes(src):
            src = self._with_wal(src, 0)  # a bare .db3 next to its -wal (C38)
        if kind == 'sqlite3':
            src = self._readable_sqlite(src, 0, alone=True)  # cut off or damaged: salvaged
        if kind == 'mcap' and self._in_file_order(src):
            self._salvage.add(src)  # read in file order (C38); the link below keeps the name right
        if src.suffix == _STORAGE_SUFFIX[kind] and src == self.path:
            self._tmp.cleanup()
            self._tmp = None
            return [src]
        link = Path(self._tmp.name, self.path.name.split('.')[0] + _STORAGE_SUFFIX[kind])
        os.symlink(src.resolve(), link)
        if src in self._salvage:
            self._salvage.add(link)
        return [link]

    def _with_wal(self, db: Path, i: int) -> Path:
        """A checkpointed copy of a SQLite file whose ``-wal`` still holds data (C38), with a
        warning."""
        assert self._tmp is not None
        sub = Path(self._tmp.name, f'wal_{i}')
        sub.mkdir()
        self._warn(
            'bag file %s: its write-ahead log %s-wal holds %d bytes not yet in the file (the '
            'recording was not closed): reading a copy with the log replayed',
            db,
            db.name,
            wal_bytes(db),
        )
        return checkpointed_copy(db, sub)

    def _warn(self, text: str, *args: object) -> None:
        """Log a warning about the bag (debug when the reader was made with ``warn=False``)."""
        (LOG.warning if self.warn else LOG.debug)(text, *args)

    def _readable_sqlite(self, db: Path, i: int, alone: bool = False) -> Optional[Path]:
        """``db`` when SQLite reads it whole; else a salvaged copy of its readable rows
        (bags.sqlite_salvage, with a warning), or None (nothing readable: skipped, with a
        warning) unless it is the bag's only file (``alone``: ValueError naming it)."""
        problem = sqlite_problem(db)
        if problem is None:
            return self._known_definitions(db, i)
        assert self._tmp is not None
        sub = Path(self._tmp.name, f'salvaged_{i}')
        sub.mkdir(exist_ok=True)
        try:
            copy, n = salvaged_copy(db, sub / db.name)
        except ValueError as err:
            if alone:
                raise
            return self._skip(db, str(err))
        if not n:
            if alone:
                raise ValueError(
                    f'bag file {str(db)!r} is damaged ({problem}): no message is readable'
                )
            return self._skip(db, f'damaged ({problem}) and no message is readable')
        self._warn(
            'bag file %s is damaged (%s): reading the %d messages that are still '
            'readable, the rest is lost',
            db,
            problem,
            n,
        )
        return self._known_definitions(copy, i)

    def _known_definitions(self, db: Path, i: int) -> Path:
        """``db``, or a copy without the message definitions rosbags cannot read (encoding
        'unknown' for a type not installed at record time, C28: rosbags would fail on the whole
        bag), with a warning naming the types."""
        bad = unreadable_definitions(db)
        if not bad:
            return db
        assert self._tmp is not None
        sub = Path(self._tmp.name, f'definitions_{i}')
        sub.mkdir(exist_ok=True)
        self._warn(
            'bag file %s stores no readable definition of %s: those types are unknown unless the '
            'typestore knows them; reading a copy without those rows',
            db,
            ', '.join(f'{t} (encoding {e!r})' for t, e in bad),
        )
        return without_definitions(db, sub / db.name)

    def _skip(self, f: Path, why: str) -> None:
        """Leave storage file ``f`` out of the bag, with a warning (kept for the error when no
        file is left)."""
        self._warn('bag file %s skipped: %s', f, why)
        self._skipped.append(why)

    def _unlisted_files(self, listed: List[Path]) -> List[Path]:
        """Storage files in the rosbag2 directory that its metadata.yaml does not list (a split
        written after the metadata, C38), with a warning: they are read too."""
        if not (self.path / 'metadata.yaml').is_file():
            return []
        known = {f.resolve() for f in listed}
        extra = [
            f
            for f in sorted(self.path.iterdir())
            if f.is_file()
            and f.resolve() not in known
            and any(f.name.endswith(s + c) for s in ('.db3', '.mcap') for c in ('', '.zstd'))
        ]
        if extra:
            self._warn(
                'bag %s: metadata.yaml lists %s, the directory also holds %s (written after the '
                'metadata?): reading all of them; topics, types and counts come from the files',
                self.path,
                [f.name for f in listed],
                [f.name for f in extra],
            )
        return extra

    def _dir_files(self) -> List[Path]:
        """Storage files of the rosbag2 directory (metadata.yaml's list, else the files found,
        C38; files there that are no storage, e.g. an empty last split, are skipped with a
        warning)."""
        meta_path = self.path / 'metadata.yaml'
        if not meta_path.is_file():
            skipped: dict = {}
            files = list(storage_files_of_dir(self.path, skipped))
            for f, why in skipped.items():
                self._warn('bag file %s skipped (last split of a killed recording?): %s', f, why)
            return files
        meta = (yaml.safe_load(meta_path.read_text(encoding='utf-8')) or {}).get(
            'rosbag2_bagfile_information', {}
        )
        return _rosbag2_files(self.path, meta)

    def _storage_files(self, fmt: BagFormat, files: List[Path]) -> List[Path]:
        """A cut-off rosbag2 directory (C38): no metadata.yaml, or an MCAP file that was not
        closed. Each storage file is handed to rosbags as a bare storage file (a correctly named
        link, a decompressed copy for file-mode compression), so topics, types and counts come from
        the files (SQLite ``topics`` table, MCAP Channel/Schema records); MCAP files without footer
        are read in file order (bags.mcap_salvage), damaged SQLite files from a salvaged copy
        (bags.sqlite_salvage); a file of which nothing is readable is skipped with a warning, as
        long as another one is. Message-mode compression is undone in :meth:`messages`."""
        if fmt.recovery:
            self._warn(
                'bag %s has no metadata.yaml (the recording was not closed?): reading its %d %s '
                'storage file(s) %s directly; topics, types and message counts come from the '
                'files',
                self.path,
                len(files),
                fmt.storage,
                [f.name for f in files],
            )
        self._tmp = tempfile.TemporaryDirectory(prefix='depth3dseg_bag_')
        # message-mode zstd: known from metadata.yaml, or (no metadata.yaml) seen by each message's
        # magic
        self._message_zstd = fmt.compression_mode == 'message' or bool(fmt.recovery)
        links = []
        for i, f in enumerate(files):
            src = f
            outer = sniff_file(f)  # each file by its own bytes: a killed file-mode recording
            if outer in ('zstd', 'lz4'):  # leaves its closed splits compressed, the last plain
                src = Path(self._tmp.name, f'plain_{i}')
                _decompress_stream(f, outer, src)
            elif fmt.storage == 'sqlite3' and wal_bytes(f):
                src = self._with_wal(f, i)
            in_order = fmt.storage == 'mcap' and self._in_file_order(src)
            usable = self._usable(src, fmt.storage, i, f, in_order)
            if usable is None:
                continue
            src = usable
            links.append(
                Path(
                    self._tmp.name, f'{i:04d}_{f.name.split(".")[0]}{_STORAGE_SUFFIX[fmt.storage]}'
                )
            )
            os.symlink(src.resolve(), links[-1])
            if in_order:
                self._salvage.add(links[-1])
        if not links:
            why = '; '.join(self._skipped)
            raise ValueError(
                f'bag {str(self.path)!r}: none of its storage files is readable: {why}'
            )
        return links

    def _in_file_order(self, mcap: Path) -> bool:
        """Whether the MCAP file is read in file order (bags.mcap_salvage): not closed, or the
        reader was made with ``file_order`` (a damaged chunk, C38)."""
        return self.file_order or not mcap_is_closed(mcap)

    def _usable(
        self, src: Path, storage: str, i: int, name: Path, in_order: bool
    ) -> Optional[Path]:
        """``src`` (storage file ``name`` of the directory, maybe decompressed; ``in_order``: an
        MCAP read in file order) as it can be read, or None (skipped, with a warning)."""
        if storage == 'sqlite3':
            return self._readable_sqlite(src, i)
        if in_order:
            try:
                cached_scan(src)
            except ValueError as err:  # e.g. cut inside its Header record: no message
                return self._skip(name, str(err))
        return src

    def _relabelled_dir(self, fmt: BagFormat) -> List[Path]:
        """A rosbag2 directory whose metadata.yaml names another storage plugin than its files
        hold:
        warn once, then read the files by their contents (rosbags picks the plugin from
        metadata.yaml:
        a temporary directory of links with storage_identifier corrected; ROS 1 files: links named
        .bag)."""
        meta_path = self.path / 'metadata.yaml'
        files = _rosbag2_files(
            self.path,
            (yaml.safe_load(meta_path.read_text(encoding='utf-8')) or {}).get(
                'rosbag2_bagfile_information', {}
            ),
        )
        self._warn(
            'bag %s: metadata.yaml names storage %r but its file(s) %s are %s: reading them as %s '
            '(the file contents decide; metadata.yaml is only a hint)',
            self.path,
            fmt.metadata_storage,
            [f.name for f in files],
            fmt.storage,
            fmt.storage,
        )
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
        (fixed / 'metadata.yaml').write_text(
            yaml.safe_dump(data, sort_keys=False), encoding='utf-8'
        )
        return [fixed]
