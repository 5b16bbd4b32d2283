"""The dataset directory written by ``depth3dseg-extract`` (format fixed in docs/ARCHITECTURE.md).

::

    <dir>/manifest.json   {"version": 1, "classes": ClassSet.to_dict(), "counts": {...}, "sources": [...],
                           "report": {...}}
    <dir>/index.jsonl     one JSON line per complete frame
    <dir>/rgb/<id>.png    8-bit RGB (written with cv2 after RGB->BGR)
    <dir>/depth/<id>.png  16-bit PNG, millimetres, 0 = no data
    <dir>/labels/<id>.png 8-bit (or 16-bit) PNG of class ids

Crash safety: each frame's files are written to ``.<name>.tmp`` names and moved in place with
``os.replace``; only then is its index line appended, flushed and fsync'ed. A frame is part of the
dataset iff its line is in index.jsonl, so an interrupted run never leaves a half-written frame in the
index. A torn last line (killed mid-write) is dropped when the directory is reopened. Re-running is
idempotent: frames whose id is already indexed are skipped (:meth:`DatasetWriter.has`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import cv2
import numpy as np

from depth3dseg_ros.core.classes import ClassSet

FORMAT_VERSION = 1
DEPTH_SCALE = 0.001  # metres per unit of the stored 16-bit depth PNG


class DatasetWriter:
    """Append frames to a dataset directory (created if missing).

    Args:
        root: dataset directory.
        classes: class set recorded in manifest.json (must match an existing manifest's classes).
        png_level: cv2 PNG compression level 0..9 (1 is fast; see docs/extraction.md for figures).

    Raises:
        ValueError: ``png_level`` outside 0..9, an index line that is not JSON (other than a torn last
            line), or classes that differ from the existing manifest's.
    """

    def __init__(self, root: Path | str, classes: ClassSet, png_level: int = 1) -> None:
        if not 0 <= int(png_level) <= 9:
            raise ValueError(f'png_level={png_level} must be in 0..9')
        self.root = Path(root)
        self.classes = classes
        self.png_params = [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)]
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
            return {'version': FORMAT_VERSION, 'classes': self.classes.to_dict(), 'counts': {},
                    'sources': [], 'report': {}}
        manifest = json.loads(self.manifest_path.read_text(encoding='utf-8'))
        if manifest.get('classes') != self.classes.to_dict():
            old = [c.get('name') for c in (manifest.get('classes') or {}).get('classes', [])]
            raise ValueError(f'{self.manifest_path}: classes {old} differ from the requested '
                             f'{list(self.classes.names)}')
        return manifest

    def _load_index(self) -> None:
        if not self.index_path.is_file():
            return
        data = self.index_path.read_bytes()
        good_end = data.rfind(b'\n') + 1  # a torn last line (no newline) is dropped
        for n, line in enumerate(data[:good_end].splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f'{self.index_path}:{n}: not a JSON line ({err})') from None
            self.entries[entry['id']] = entry
        if good_end < len(data):
            with open(self.index_path, 'r+b') as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())

    # -- writing ---------------------------------------------------------------------------
    def has(self, frame_id: str) -> bool:
        """True when ``frame_id`` is already a complete frame of the dataset."""
        return frame_id in self.entries

    def _write_png(self, rel: str, img: np.ndarray) -> None:
        path = self.root / rel
        tmp = path.with_name(f'.{path.name}.tmp')
        ok, buf = cv2.imencode('.png', img, self.png_params)
        if not ok:
            raise ValueError(f'cannot PNG-encode {rel}: shape={img.shape} dtype={img.dtype}')
        with open(tmp, 'wb') as fh:
            fh.write(buf.tobytes())
        os.replace(tmp, path)

    def write_frame(self, frame_id: str, rgb: np.ndarray, K: np.ndarray, stamp_ns: int, bag: str,
                    topics: Mapping[str, Optional[str]], depth_mm: Optional[np.ndarray] = None,
                    labels: Optional[np.ndarray] = None) -> Dict[str, Any]:
        """Write one frame's PNGs, then append its index line (fsync'ed). Returns the index entry.

        Args:
            frame_id: unique id, characters [A-Za-z0-9_.-] (used as file name).
            rgb: H×W×3 uint8 RGB. depth_mm: H×W uint16 millimetres (0 = no data) or None.
            labels: H×W uint8/uint16 class ids or None. K: 3×3 intrinsics of this H×W image.
            stamp_ns: header stamp of the RGB message. bag: source bag name/path.
            topics: role -> topic actually used (None for a missing role).
        Raises:
            ValueError: bad id, dtype or shape (field and value named); a duplicate id.
        """
        if not frame_id or any(not (c.isalnum() or c in '_.-') for c in frame_id):
            raise ValueError(f'frame_id={frame_id!r} must be non-empty [A-Za-z0-9_.-]')
        if self.has(frame_id):
            raise ValueError(f'frame_id={frame_id!r} is already in {self.index_path}')
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f'rgb shape={rgb.shape} dtype={rgb.dtype}: expected HxWx3 uint8')
        h, w = rgb.shape[:2]
        for name, arr, dtypes in (('depth_mm', depth_mm, (np.uint16,)),
                                  ('labels', labels, (np.uint8, np.uint16))):
            if arr is not None and (arr.shape != (h, w) or arr.dtype not in dtypes):
                raise ValueError(f'{name} shape={arr.shape} dtype={arr.dtype}: expected ({h}, {w}) '
                                 f'{"/".join(np.dtype(d).name for d in dtypes)}')
        K = np.asarray(K, dtype=np.float64)
        if K.shape != (3, 3):
            raise ValueError(f'K shape={K.shape}: expected (3, 3)')
        entry: Dict[str, Any] = {'id': frame_id, 'rgb': f'rgb/{frame_id}.png', 'depth': None,
                                 'depth_scale': DEPTH_SCALE, 'labels': None,
                                 'K': [float(x) for x in K.reshape(9)], 'width': int(w),
                                 'height': int(h), 'stamp_ns': int(stamp_ns), 'bag': str(bag),
                                 'topics': dict(topics)}
        self._write_png(entry['rgb'], cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        if depth_mm is not None:
            entry['depth'] = f'depth/{frame_id}.png'
            self._write_png(entry['depth'], depth_mm)
        if labels is not None:
            entry['labels'] = f'labels/{frame_id}.png'
            self._write_png(entry['labels'], labels)
        self._index.write(json.dumps(entry, separators=(',', ':')) + '\n')
        self._index.flush()
        os.fsync(self._index.fileno())
        self.entries[frame_id] = entry
        return entry

    def counts(self) -> Dict[str, int]:
        """Frame counts of the whole dataset: frames, with_depth, with_labels."""
        vals = list(self.entries.values())
        return {'frames': len(vals), 'with_depth': sum(e['depth'] is not None for e in vals),
                'with_labels': sum(e['labels'] is not None for e in vals)}

    def write_manifest(self, sources: Sequence[Dict[str, Any]], report: Dict[str, Any]) -> None:
        """Rewrite manifest.json atomically with current counts; ``sources``/``report`` entries
        replace earlier ones of the same bag (keyed by ``source['bag']``)."""
        by_bag: Dict[str, Dict[str, Any]] = {s['bag']: s for s in self.manifest.get('sources', [])}
        by_bag.update({s['bag']: s for s in sources})
        merged_report = dict(self.manifest.get('report', {}))
        merged_report.update(report)
        self.manifest.update({'version': FORMAT_VERSION, 'classes': self.classes.to_dict(),
                              'counts': self.counts(), 'sources': list(by_bag.values()),
                              'report': merged_report})
        tmp = self.manifest_path.with_name('.manifest.json.tmp')
        tmp.write_text(json.dumps(self.manifest, indent=1) + '\n', encoding='utf-8')
        os.replace(tmp, self.manifest_path)

    def close(self) -> None:
        """Close the index file."""
        if not self._index.closed:
            self._index.close()

    def __enter__(self) -> 'DatasetWriter':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_index(root: Path | str) -> List[Dict[str, Any]]:
    """All complete index entries of a dataset directory, in file order (torn last line ignored)."""
    path = Path(root) / 'index.jsonl'
    data = path.read_bytes() if path.is_file() else b''
    data = data[:data.rfind(b'\n') + 1]
    return [json.loads(line) for line in data.splitlines() if line.strip()]
