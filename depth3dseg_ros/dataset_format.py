"""The dataset directory format (docs/ARCHITECTURE.md "Dataset directory"): the one place that
reads it.

``depth3dseg-extract`` (bags.dataset_writer) writes it, training and evaluation read it. Layout::

    <dir>/manifest.json   classes, counts, sources, label statistics (written atomically)
    <dir>/index.jsonl     one JSON line per complete frame: written as one ``line + "\\n"`` after
                          the frame's files are in place
    <dir>/rgb|depth|labels/<id>.png

**Torn last line.** A line is complete only with its newline. A last line without one is a frame
being appended (or a write cut by a kill): every reader here ignores it, the writer truncates it
when it reopens the directory. Any other line that is not a JSON object is an error naming the file
and line.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Optional

INDEX = 'index.jsonl'
MANIFEST = 'manifest.json'
#: Keys every frame record carries.
INDEX_KEYS = ('id', 'rgb', 'depth', 'labels', 'K', 'width', 'height')


def complete_index_bytes(directory: str | Path) -> tuple[bytes, int]:
    """(the complete lines of ``<directory>/index.jsonl`` as bytes, the file's full size); (b'', 0)
    when there is no index. The bytes after the last newline (a torn line) are left out."""
    path = Path(directory) / INDEX
    data = path.read_bytes() if path.is_file() else b''
    return data[: data.rfind(b'\n') + 1], len(data)


def read_index(directory: str | Path, check_keys: bool = True) -> list[dict[str, Any]]:
    """The frame records of a dataset directory, in file order, each with ``dir`` added (its Path).

    A torn last line is skipped with a UserWarning (module docstring).

    Args:
        directory: a dataset directory.
        check_keys: require INDEX_KEYS and a 9-value K in every record (readers that train on it).
    Raises:
        FileNotFoundError: no index.jsonl (naming the path).
        ValueError: a complete line that is not a JSON object, or (check_keys) a record that lacks
            keys or whose K is not 9 values, naming file and line.
    """
    d = Path(directory)
    path = d / INDEX
    if not path.is_file():
        raise FileNotFoundError(
            f'dataset index {path} not found (is {d} a depth3dseg-extract directory?)'
        )
    data, size = complete_index_bytes(d)
    if len(data) < size:
        warnings.warn(
            f'{path}: incomplete last line skipped ({size - len(data)} bytes without a newline: a '
            'frame being appended, or a write cut short)',
            stacklevel=2,
        )
    out = []
    for no, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f'{path}:{no}: not valid JSON ({exc})') from None
        if not isinstance(rec, dict):
            raise ValueError(f'{path}:{no}: not a JSON object')
        if check_keys:
            missing = [k for k in INDEX_KEYS if k not in rec]
            if missing:
                raise ValueError(f'{path}:{no}: frame record lacks keys {missing}')
            if len(rec['K']) != 9:
                raise ValueError(f"{path}:{no}: K has {len(rec['K'])} values, expected 9")
        rec['dir'] = d
        out.append(rec)
    return out


def read_manifest(directory: str | Path) -> Optional[dict[str, Any]]:
    """``<directory>/manifest.json`` as a dict, or None when there is none.

    Raises:
        ValueError: the manifest is not valid JSON (naming it).
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding='utf-8'))
    except json.JSONDecodeError as exc:
        raise ValueError(f'{path}: not valid JSON ({exc})') from None
