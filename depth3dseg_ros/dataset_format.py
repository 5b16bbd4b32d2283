"""The dataset directory format (docs/ARCHITECTURE.md "Dataset directory"): the one place that
reads it, and the one spelling of an index line (`index_line`, used by every writer).

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from depth3dseg_ros.core.classes import ClassSet

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
        bag = d.is_file() or (d / 'metadata.yaml').is_file() or any(d.glob('*.mcap'))
        bag = bag or any(d.glob('*.db3')) or d.suffix in ('.bag', '.mcap', '.db3')
        hint = (
            f'{d} looks like a bag: extract it first, depth3dseg-extract {d} -o DATASET_DIR'
            if bag
            else f'is {d} a depth3dseg-extract directory?'
        )
        raise FileNotFoundError(f'dataset index {path} not found ({hint})')
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


def index_line(record: Mapping[str, Any]) -> str:
    """One index.jsonl line for a frame record: compact JSON with its newline, without the
    ``dir`` key that `read_index` adds."""
    return (
        json.dumps({k: v for k, v in record.items() if k != 'dir'}, separators=(',', ':')) + '\n'
    )


def write_index(directory: str | Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Write ``<directory>/index.jsonl`` with one `index_line` per record, in order (replaced)."""
    (Path(directory) / INDEX).write_text(''.join(map(index_line, records)), encoding='utf-8')


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


def check_label_range(
    records: Sequence[Mapping[str, Any]], classes: 'ClassSet', workers: int = 4
) -> Dict[str, Any]:
    """Check, before training or evaluation starts, that every label image holds only ids of
    ``classes`` (0..len(classes)-1; case C43: e.g. 255 = ignore written by another tool), so a bad
    id stops the run up front instead of mid-epoch in a DataLoader worker.

    Args:
        records: frame records as ``dataset_format.read_index`` returns them (index entries plus
            ``dir``, the dataset directory). Entries written by this writer carry ``label_max``
            (the frame's largest id): those are checked from the index alone. Labelled entries
            without it (datasets extracted before it was recorded) are decoded (cv2, ``workers``
            threads).
        classes: the run's class set.
    Returns:
        {'frames': labelled frames checked, 'from_index': checked by label_max, 'decoded': PNGs
         read, 'max_id': largest id found (None without labels)}.
    Raises:
        ValueError: one line naming how many label images hold ids >= len(classes), the largest id,
            the first such file and what to do (re-extract: ids outside the class set are mapped to
            void by default); or a label PNG that cannot be read.
    """
    from depth3dseg_ros.core.image_decode import read_image_file  # reading an index needs no cv2

    n = len(classes)
    labelled = [r for r in records if r.get('labels')]
    need = [r for r in labelled if r.get('label_max') is None]

    def top(r: Mapping[str, Any]) -> int:
        path = Path(r.get('dir', '.')) / r['labels']
        img = read_image_file(path)
        if img is None:
            raise ValueError(f'label image {path} is missing or unreadable')
        return int(img.max()) if img.size else 0

    tops: Dict[int, int] = {
        id(r): int(r['label_max']) for r in labelled if r.get('label_max') is not None
    }
    if need:
        with ThreadPoolExecutor(max(1, int(workers))) as pool:  # cv2 decodes without the GIL
            for r, t in zip(need, pool.map(top, need)):
                tops[id(r)] = t
    bad = [r for r in labelled if tops[id(r)] >= n]
    if bad:
        worst = max(tops[id(r)] for r in bad)
        first = Path(bad[0].get('dir', '.')) / bad[0]['labels']
        raise ValueError(
            f'{len(bad)} of {len(labelled)} label images hold ids outside the class set '
            f'0..{n - 1} ({n} classes; largest id {worst}, first {first}): re-extract the bags '
            'with depth3dseg-extract, which maps such ids to void (--out-of-range-labels void, '
            'the default) or refuses the frame (refuse); or use a class set that has these ids '
            '(C43)'
        )
    return {
        'frames': len(labelled),
        'from_index': len(labelled) - len(need),
        'decoded': len(need),
        'max_id': max(tops.values()) if tops else None,
    }


def dataset_input_kind(directory: str | Path) -> str:
    """What a dataset's ``rgb`` images are (core.modelfile INPUT_KINDS): 'depth_code' for one
    written by scripts/geometry_input.py (its manifest has a ``geometry_input`` entry), else
    'rgb'."""
    data = read_manifest(directory)
    return 'depth_code' if data and 'geometry_input' in data else 'rgb'


def input_kind_problem(directory: str | Path, kind: str) -> str | None:
    """None when dataset ``directory`` holds the images a model of input ``kind`` takes, else
    the sentence saying what differs and what to do."""
    found = dataset_input_kind(directory)
    if found == kind:
        return None
    if kind == 'depth_code':
        return (
            f'dataset {directory} holds colour images but the model takes geometry codes (model '
            'input depth_code): write its code images with scripts/geometry_input.py'
        )
    return (
        f'dataset {directory} holds geometry codes (written by scripts/geometry_input.py) but the '
        'model takes colour images (model input rgb): a geometry model is trained with --set '
        'model.input=depth_code'
    )
