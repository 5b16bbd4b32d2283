"""Class sets: names, RGB display colours and the void id of a label image (docs/method.md terms).

A label image holds one integer class id per pixel, 0..C-1; ``void_id`` marks "void/unlabelled" and
is the ignore index of the segmentation losses (M5). The network predicts C channels aligned with
the ids.

The default is NYU13 (the 13-class NYU Depth v2 mapping of Couprie et al. 2013, as in
``data/real/nyuv2_meta_data_13class_labels``) plus void at id 0. Users edit
``config/classes_nyu13.yaml`` (the same content) or write their own file with the same layout:

    void_id: 0
    classes:
      - {id: 0, name: void, color: [0, 0, 0]}
      - {id: 1, name: bed, color: [31, 119, 180]}
      ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

import numpy as np
import yaml

from depth3dseg_ros.core.yamlfile import load_yaml_file

__all__ = ['ClassSet', 'NYU13', 'NYU13_NAMES', 'NYU13_COLORS']

NYU13_NAMES: List[str] = [
    'void',
    'bed',
    'books',
    'ceiling',
    'chair',
    'floor',
    'furniture',
    'objects',
    'picture',
    'sofa',
    'table',
    'tv',
    'wall',
    'window',
]

# RGB. Void black; the rest a Tableau-like palette with large pairwise distances (>= 60 in RGB,
# checked in test/test_core_classes.py) so that neighbouring regions stay readable in overlays.
NYU13_COLORS = np.array(
    [
        [0, 0, 0],  # void
        [31, 119, 180],  # bed        blue
        [255, 127, 14],  # books      orange
        [174, 199, 232],  # ceiling    light blue
        [214, 39, 40],  # chair      red
        [140, 86, 75],  # floor      brown
        [148, 103, 189],  # furniture  purple
        [255, 221, 0],  # objects    yellow
        [227, 119, 194],  # picture    pink
        [44, 160, 44],  # sofa       green
        [188, 189, 34],  # table      olive
        [23, 190, 207],  # tv         cyan
        [255, 187, 120],  # wall       light orange
        [152, 251, 152],  # window     pale green
    ],
    dtype=np.uint8,
)


class ClassSet:
    """An ordered set of classes: names[i] is class id i, colors[i] its RGB display colour.

    Args:
        names: C >= 2 unique, non-empty strings.
        colors: C×3 RGB values in 0..255 (converted to uint8).
        void_id: id of the void/unlabelled class (loss ignore index), 0 <= void_id < C.
    Raises:
        ValueError naming the field and value for anything else.
    Attributes:
        label_dtype: numpy dtype for label images: uint8 when C <= 256, else uint16 (C <= 65536).
    """

    def __init__(
        self,
        names: Sequence[str],
        colors: Union[np.ndarray, Sequence[Sequence[int]]],
        void_id: int = 0,
    ) -> None:
        names = list(names)
        if len(names) < 2:
            raise ValueError(f'ClassSet.names needs at least 2 classes (void + one), got {names}')
        if len(names) > 65536:
            raise ValueError(
                f'ClassSet.names has {len(names)} classes; at most 65536 fit a 16-bit label'
            )
        for i, n in enumerate(names):
            if not isinstance(n, str) or not n.strip():
                raise ValueError(f'ClassSet.names[{i}]={n!r} must be a non-empty string')
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f'ClassSet.names has duplicates: {dup}')
        arr = np.asarray(colors)
        if arr.shape != (len(names), 3):
            raise ValueError(f'ClassSet.colors must have shape ({len(names)}, 3), got {arr.shape}')
        if not np.issubdtype(arr.dtype, np.integer) and not np.all(np.mod(arr, 1) == 0):
            raise ValueError(f'ClassSet.colors must be integers 0..255, got {arr.tolist()}')
        if arr.min() < 0 or arr.max() > 255:
            raise ValueError(
                f'ClassSet.colors must be in 0..255, got min={arr.min()} max={arr.max()}'
            )
        if (
            isinstance(void_id, bool)
            or not isinstance(void_id, (int, np.integer))
            or not 0 <= void_id < len(names)
        ):
            raise ValueError(f'ClassSet.void_id={void_id!r} must be an int in [0, {len(names)})')
        self.names: List[str] = names
        self.colors: np.ndarray = arr.astype(np.uint8)
        self.colors.setflags(write=False)
        self.void_id: int = int(void_id)

    # -- basic queries -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.names)

    @property
    def num_classes(self) -> int:
        """C, the number of classes including void (= the network's output channels)."""
        return len(self.names)

    @property
    def label_dtype(self) -> type:
        """np.uint8 when C <= 256, else np.uint16."""
        return np.uint8 if len(self.names) <= 256 else np.uint16

    def index(self, name: str) -> int:
        """Class id of `name`; ValueError if unknown."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f'class name {name!r} not in {self.names}') from None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ClassSet)
            and self.names == other.names
            and self.void_id == other.void_id
            and np.array_equal(self.colors, other.colors)
        )

    def __repr__(self) -> str:
        return f'ClassSet({len(self)} classes, void_id={self.void_id}: {", ".join(self.names)})'

    # -- (de)serialisation -------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON/YAML data: {"void_id": int, "classes": [{"id", "name", "color": [r, g,
        b]}]}."""
        return {
            'void_id': self.void_id,
            'classes': [
                {'id': i, 'name': n, 'color': [int(c) for c in self.colors[i]]}
                for i, n in enumerate(self.names)
            ],
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> 'ClassSet':
        """Inverse of `to_dict`. Ids must be exactly 0..C-1 (any order). ValueError otherwise."""
        if not isinstance(data, dict) or 'classes' not in data:
            raise ValueError(
                f'class set data must be a mapping with a "classes" list, got {data!r:.200}'
            )
        entries = data['classes']
        if not isinstance(entries, list):
            raise ValueError(f'classes must be a list, got {type(entries).__name__}')
        by_id: Dict[int, Dict[str, Any]] = {}
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not {'id', 'name', 'color'} <= set(e):
                raise ValueError(f'classes[{i}]={e!r} must have id, name and color')
            if not isinstance(e['id'], int) or isinstance(e['id'], bool) or e['id'] in by_id:
                raise ValueError(f'classes[{i}].id={e["id"]!r} must be a unique int')
            by_id[e['id']] = e
        if sorted(by_id) != list(range(len(by_id))):
            raise ValueError(
                f'class ids must be 0..{len(by_id) - 1} without gaps, got {sorted(by_id)}'
            )
        ordered = [by_id[i] for i in range(len(by_id))]
        return cls(
            [e['name'] for e in ordered],
            [e['color'] for e in ordered],
            void_id=data.get('void_id', 0),
        )

    @classmethod
    def from_yaml(cls, path: Union[str, Path]) -> 'ClassSet':
        """Load a class-set YAML file (layout in the module docstring).

        Raises:
            FileNotFoundError: no such file. ValueError: core.yamlfile.YamlFileError (one line:
                file, line, column, reason) or a bad class list (the file named).
        """
        data = load_yaml_file(path)
        path = Path(path)
        try:
            return cls.from_dict(data)
        except ValueError as e:
            raise ValueError(f'{path}: {e}') from None

    def to_yaml(self, path: Union[str, Path]) -> None:
        """Write the class set as YAML (one class per line, flow style)."""
        lines = [f'void_id: {self.void_id}', 'classes:']
        for e in self.to_dict()['classes']:
            lines.append(
                f'  - {{id: {e["id"]}, name: {yaml.safe_dump(e["name"]).splitlines()[0]}, '
                f'color: {e["color"]}}}'
            )
        Path(path).write_text('\n'.join(lines) + '\n', encoding='utf-8')


NYU13 = ClassSet(NYU13_NAMES, NYU13_COLORS, void_id=0)
"""Default class set: void (0) + the 13 NYU Depth v2 classes (ids 1..13, alphabetical as in
NYU13)."""
