"""The dataset directory written by ``depth3dseg-extract`` (format fixed in docs/ARCHITECTURE.md).

::

    <dir>/manifest.json   {"version": 1, "classes": ClassSet.to_dict(), "counts": {...}, "sources":
                          [...],
                           "report": {...}}
    <dir>/index.jsonl     one JSON line per complete frame
    <dir>/rgb/<id>.png    8-bit RGB (``png_level`` 0: stored PNG by bags.png_stored; 1..9:
    cv2/libpng) <dir>/depth/<id>.png  16-bit PNG, millimetres, 0 = no data
    <dir>/labels/<id>.png 8-bit (or 16-bit) PNG of class ids

Label ids: a label image may only hold ids of the class set (0..len(classes)-1). The writer refuses
any other id (ValueError: ``bags.extract`` applies the out-of-range policy before writing, case
C43) and records each frame's largest id as ``label_max`` in its index line, and the dataset's in
manifest.json under ``labels`` (``max_id``, ``num_classes``, ``frames``), so a training run checks
the label range from the index without decoding a PNG (``dataset_format.check_label_range``,
re-exported here).

Crash safety: each frame's files are written to ``.<name>.tmp`` names and moved in place with
``os.replace``; only then is its index line appended and flushed to the OS (so a killed process
never leaves a frame indexed without its files); the index is fsync'ed at least once a second and
when the writer is flushed or closed (``fsync_interval_s``). A frame is part of the dataset iff its
line is in index.jsonl, so an interrupted run never leaves a half-written frame in the index. A
torn last line (killed mid-write) is dropped when the directory is reopened. Re-running is
idempotent: frames whose id is already indexed are skipped (:meth:`DatasetWriter.has`).
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

import cv2
import numpy as np

from depth3dseg_ros.bags.png_stored import png_stored_parts
from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.dataset_format import (  # noqa: F401  (check_label_range: re-exported)
    check_label_range,
    complete_index_bytes,
    index_line,
    read_index,
)

FORMAT_VERSION = 1
DEPTH_SCALE = 0.001  # metres per unit of the stored 16-bit depth PNG
#: zlib strategies for cv2 PNG encoding. 'rle' is the default: on the real NYU/TUM frames at
#: 640x480 it encoded faster than level 1 'default' and 11 % smaller than level 3
#: (docs/extraction.md).
PNG_STRATEGIES = {
    'default': cv2.IMWRITE_PNG_STRATEGY_DEFAULT,
    'rle': cv2.IMWRITE_PNG_STRATEGY_RLE,
    'filtered': cv2.IMWRITE_PNG_STRATEGY_FILTERED,
    'huffman': cv2.IMWRITE_PNG_STRATEGY_HUFFMAN_ONLY,
}


def _write_file(path: str | Path, parts: Sequence[Any]) -> None:
    """Create/truncate ``path`` and write the bytes-like ``parts`` in order with ``os.writev`` (no
    Python file object, one system call for a whole PNG; short writes are continued).

    Raises:
        OSError: the file cannot be created or written.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, 'O_BINARY', 0), 0o666)
    try:
        views = [v for v in (memoryview(p).cast('B') for p in parts) if len(v)]
        while views:
            n = os.writev(fd, views[:1024])  # IOV_MAX
            if n <= 0:
                raise OSError(f'{path}: write returned {n}')
            while views and n >= len(views[0]):
                n -= len(views.pop(0))
            if n:
                views[0] = views[0][n:]
    finally:
        os.close(fd)


class DatasetWriter:
    """Append frames to a dataset directory (created if missing).

    Args:
        root: dataset directory.
        classes: class set recorded in manifest.json (must match an existing manifest's classes).
        png_level: PNG compression level 0..9. 0 = stored (uncompressed) PNGs written by
            bags.png_stored (fastest, files as large as the pixels); 1..9 = cv2/libpng with
            ``png_strategy`` (1 rle: about a third of the size, ~40x slower; docs/extraction.md).
        png_strategy: zlib strategy for levels 1..9, one of PNG_STRATEGIES ('rle' default).
        workers: threads that encode and write PNGs (cv2, zlib and numpy copies release the GIL).
            Frames are still indexed strictly in submission order, each only after all its files
            are in place.
        fsync_interval_s: the index is flushed to the OS after every frame (a killed process never
            leaves a frame indexed without its files) and fsync'ed when this many seconds have
            passed since the last fsync, and on :meth:`flush`/:meth:`close` (0 = after every frame,
            as before); never twice without a line appended in between.

    Raises:
        ValueError: ``png_level`` outside 0..9, an index line that is not JSON (other than a torn
            last line), or classes that differ from the existing manifest's.
    """

    def __init__(
        self,
        root: Path | str,
        classes: ClassSet,
        png_level: int = 0,
        workers: int = 1,
        png_strategy: str = 'rle',
        fsync_interval_s: float = 1.0,
    ) -> None:
        if not 0 <= int(png_level) <= 9:
            raise ValueError(f'png_level={png_level} must be in 0..9')
        if png_strategy not in PNG_STRATEGIES:
            raise ValueError(
                f'png_strategy={png_strategy!r} is not one of {sorted(PNG_STRATEGIES)}'
            )
        if int(workers) < 1:
            raise ValueError(f'workers={workers} must be >= 1')
        self._pool = ThreadPoolExecutor(int(workers)) if int(workers) > 1 else None
        self._max_pending = 2 * int(workers)
        self._pending: Deque[Tuple[Dict[str, Any], Future]] = deque()
        self._submitted: set = set()
        self.root = Path(root)
        self._root = str(self.root)
        self.classes = classes
        self.png_level = int(png_level)
        self.fsync_interval_s = float(fsync_interval_s)
        self._last_fsync = time.monotonic()
        self._unsynced = False  # index lines appended since the last fsync
        self.png_params = [
            cv2.IMWRITE_PNG_COMPRESSION,
            int(png_level),
            cv2.IMWRITE_PNG_STRATEGY,
            PNG_STRATEGIES[png_strategy],
        ]
        for sub in ('rgb', 'depth', 'labels'):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.index_path = self.root / 'index.jsonl'
        self.manifest_path = self.root / 'manifest.json'
        self.manifest = self._load_manifest()
        self.entries: Dict[str, Dict[str, Any]] = {}
        self._load_index()
        self._index = open(self.index_path, 'a', encoding='utf-8')

    # -- loading ---------------------------------------------------------------------------
    def _load_manifest(self) -> Dict[str, Any]:
        if not self.manifest_path.is_file():
            return {
                'version': FORMAT_VERSION,
                'classes': self.classes.to_dict(),
                'counts': {},
                'sources': [],
                'report': {},
            }
        manifest = json.loads(self.manifest_path.read_text(encoding='utf-8'))
        if manifest.get('classes') != self.classes.to_dict():
            old = [c.get('name') for c in (manifest.get('classes') or {}).get('classes', [])]
            raise ValueError(
                f'{self.manifest_path}: classes {old} differ from the requested '
                f'{list(self.classes.names)}'
            )
        return manifest

    def _load_index(self) -> None:
        if not self.index_path.is_file():
            return
        for entry in read_index(self.root, check_keys=False):  # a torn last line is left out ...
            entry.pop('dir')
            self.entries[entry['id']] = entry
        good, size = complete_index_bytes(self.root)
        good_end = len(good)
        if good_end < size:  # ... and cut off the file here
            with open(self.index_path, 'r+b') as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())

    # -- writing ---------------------------------------------------------------------------
    def has(self, frame_id: str) -> bool:
        """True when ``frame_id`` is already a complete frame of the dataset."""
        return frame_id in self.entries

    def _write_png(self, rel: str, img: np.ndarray) -> None:
        sub, name = rel.split('/')  # '<rgb|depth|labels>/<id>.png' (str ops: no pathlib per file)
        path = os.path.join(self._root, sub, name)
        tmp = os.path.join(self._root, sub, f'.{name}.tmp')
        if self.png_level == 0:  # stored PNG, RGB order as given (bags.png_stored)
            parts = png_stored_parts(img)
        else:
            ok, buf = cv2.imencode(
                '.png',
                cv2.cvtColor(img, cv2.COLOR_RGB2BGR) if img.ndim == 3 else img,
                self.png_params,
            )
            if not ok:
                raise ValueError(f'cannot PNG-encode {rel}: shape={img.shape} dtype={img.dtype}')
            parts = [buf.data]
        _write_file(tmp, parts)
        os.replace(tmp, path)

    def write_frame(
        self,
        frame_id: str,
        rgb: np.ndarray,
        K: np.ndarray,
        stamp_ns: int,
        bag: str,
        topics: Mapping[str, Optional[str]],
        depth_mm: Optional[np.ndarray] = None,
        labels: Optional[np.ndarray] = None,
        geometry: bool = True,
    ) -> Dict[str, Any]:
        """Write one frame's PNGs, then append its index line (fsync'ed). Returns the index entry.

        With ``workers > 1`` the PNGs are written by the pool and the line is appended once they
        and every earlier frame are done (at the latest by :meth:`flush`/:meth:`close`).

        Args:
            frame_id: unique id, characters [A-Za-z0-9_.-] (used as file name).
            rgb: H×W×3 uint8 RGB. depth_mm: H×W uint16 millimetres (0 = no data) or None.
            labels: H×W uint8/uint16 class ids in 0..len(classes)-1, or None (its max goes to the
                entry's ``label_max``). K: 3×3 intrinsics of this H×W image.
            stamp_ns: header stamp of the RGB message. bag: source bag name/path.
            topics: role -> topic actually used (None for a missing role).
            geometry: False for an image that shows no real 3D scene (e.g. painted over a label
                layout): the entry gets ``"geometry": false`` and trains the 2D segmentation term
                only (core.train_step ``has_geometry``, METHOD M5).
        Raises:
            ValueError: bad id, dtype or shape (field and value named); a duplicate id; a label id
                outside the class set (naming the frame, the ids and the range; C43).
            OSError: a file could not be written (the frame is then not indexed).
        """
        entry, images = self._prepare(frame_id, rgb, K, stamp_ns, bag, topics, depth_mm, labels)
        if not geometry:
            entry['geometry'] = False
        self._submitted.add(frame_id)
        if self._pool is None:
            self._write_files(images)
            self._append(entry)
            return entry
        self._pending.append((entry, self._pool.submit(self._write_files, images)))
        while len(self._pending) > self._max_pending:
            self._complete_oldest()
        return entry

    def _prepare(
        self,
        frame_id: str,
        rgb: np.ndarray,
        K: np.ndarray,
        stamp_ns: int,
        bag: str,
        topics: Mapping[str, Optional[str]],
        depth_mm: Optional[np.ndarray],
        labels: Optional[np.ndarray],
    ) -> Tuple[Dict[str, Any], List[Tuple[str, np.ndarray]]]:
        if not frame_id or any(not (c.isalnum() or c in '_.-') for c in frame_id):
            raise ValueError(f'frame_id={frame_id!r} must be non-empty [A-Za-z0-9_.-]')
        if self.has(frame_id) or frame_id in self._submitted:
            raise ValueError(f'frame_id={frame_id!r} is already in {self.index_path}')
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f'rgb shape={rgb.shape} dtype={rgb.dtype}: expected HxWx3 uint8')
        h, w = rgb.shape[:2]
        for name, arr, dtypes in (
            ('depth_mm', depth_mm, (np.uint16,)),
            ('labels', labels, (np.uint8, np.uint16)),
        ):
            if arr is not None and (arr.shape != (h, w) or arr.dtype not in dtypes):
                raise ValueError(
                    f'{name} shape={arr.shape} dtype={arr.dtype}: expected ({h}, {w}) '
                    f'{"/".join(np.dtype(d).name for d in dtypes)}'
                )
        K = np.asarray(K, dtype=np.float64)
        if K.shape != (3, 3):
            raise ValueError(f'K shape={K.shape}: expected (3, 3)')
        entry: Dict[str, Any] = {
            'id': frame_id,
            'rgb': f'rgb/{frame_id}.png',
            'depth': None,
            'depth_scale': DEPTH_SCALE,
            'labels': None,
            'K': [float(x) for x in K.reshape(9)],
            'width': int(w),
            'height': int(h),
            'stamp_ns': int(stamp_ns),
            'bag': str(bag),
            'topics': dict(topics),
        }
        images = [(entry['rgb'], rgb)]
        if depth_mm is not None:
            entry['depth'] = f'depth/{frame_id}.png'
            images.append((entry['depth'], depth_mm))
        if labels is not None:
            n = len(self.classes)
            top = int(labels.max()) if labels.size else 0
            if top >= n:
                ids = np.unique(labels[labels >= n])
                raise ValueError(
                    f'frame {frame_id}: label ids {ids[:8].tolist()} are outside the class set '
                    f'0..{n - 1} ({n} classes); depth3dseg-extract maps them to void or refuses '
                    'the frame (--out-of-range-labels, C43)'
                )
            entry['labels'] = f'labels/{frame_id}.png'
            entry['label_max'] = top
            images.append((entry['labels'], labels))
        return entry, images

    def _write_files(self, images: List[Tuple[str, np.ndarray]]) -> None:
        for rel, img in images:
            self._write_png(rel, img)  # img: RGB for 3 channels

    def _append(self, entry: Dict[str, Any]) -> None:
        self._index.write(index_line(entry))
        self._index.flush()  # in the OS after the frame's files: safe against a killed process
        self._unsynced = True
        if time.monotonic() - self._last_fsync >= self.fsync_interval_s:
            self._fsync()
        self.entries[entry['id']] = entry

    def _fsync(self) -> None:
        if self._unsynced:  # nothing appended since the last fsync: nothing to make durable
            os.fsync(self._index.fileno())
            self._unsynced = False
        self._last_fsync = time.monotonic()

    def _complete_oldest(self) -> None:
        entry, fut = self._pending.popleft()
        try:
            fut.result()
        except BaseException:
            for _, later in self._pending:  # later frames are never indexed after a failure
                later.cancel()
            self._pending.clear()
            raise
        self._append(entry)

    def flush(self) -> None:
        """Wait for pooled frames and index them in order (re-raises a worker's error)."""
        while self._pending:
            self._complete_oldest()
        if not self._index.closed:
            self._index.flush()
            self._fsync()

    def counts(self) -> Dict[str, int]:
        """Frame counts of the whole dataset: frames, with_depth, with_labels."""
        vals = list(self.entries.values())
        return {
            'frames': len(vals),
            'with_depth': sum(e['depth'] is not None for e in vals),
            'with_labels': sum(e['labels'] is not None for e in vals),
        }

    def label_stats(self) -> Dict[str, Any]:
        """Label-id statistics of the whole dataset (manifest.json ``labels``): ``max_id`` (largest
        id of any label image, None without labels), ``num_classes``, ``frames`` (frames with
        labels) and ``frames_without_max`` (labelled frames indexed by an older writer, without
        ``label_max``)."""
        labelled = [e for e in self.entries.values() if e.get('labels')]
        known = [int(e['label_max']) for e in labelled if e.get('label_max') is not None]
        return {
            'max_id': max(known) if known else None,
            'num_classes': len(self.classes),
            'frames': len(labelled),
            'frames_without_max': len(labelled) - len(known),
        }

    def write_manifest(self, sources: Sequence[Dict[str, Any]], report: Dict[str, Any]) -> None:
        """Flush pending frames, then rewrite manifest.json atomically with current counts and
        label stats (:meth:`label_stats`); ``sources``/``report`` entries replace earlier ones of
        the same bag (keyed by ``source['bag']``)."""
        self.flush()
        by_bag: Dict[str, Dict[str, Any]] = {s['bag']: s for s in self.manifest.get('sources', [])}
        by_bag.update({s['bag']: s for s in sources})
        merged_report = dict(self.manifest.get('report', {}))
        merged_report.update(report)
        self.manifest.update(
            {
                'version': FORMAT_VERSION,
                'classes': self.classes.to_dict(),
                'counts': self.counts(),
                'labels': self.label_stats(),
                'sources': list(by_bag.values()),
                'report': merged_report,
            }
        )
        tmp = self.manifest_path.with_name('.manifest.json.tmp')
        tmp.write_text(json.dumps(self.manifest, indent=1) + '\n', encoding='utf-8')
        os.replace(tmp, self.manifest_path)

    def close(self) -> None:
        """Index pending frames (unless one failed), stop the pool and close the index file."""
        try:
            self.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
            if not self._index.closed:
                self._index.close()

    def __enter__(self) -> 'DatasetWriter':
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:  # an error elsewhere: index only what is already complete
            for _, fut in self._pending:
                fut.cancel()
            done: Deque[Tuple[Dict[str, Any], Future]] = deque()
            for entry, fut in self._pending:  # the completed prefix; running ones are awaited
                try:
                    fut.result()
                except BaseException:
                    break
                done.append((entry, fut))
            self._pending = done
        self.close()
