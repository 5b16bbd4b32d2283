"""Display palette and label groupings of the node's outputs (issue 14): a YAML file names colours
per class and, optionally, groups of the model's classes shown as one class (one output id, one
name, one colour), as MIT semantic_inference does with its colormap and label-grouping files (a
group lists the model labels it merges; the label image is remapped with an index array).

Pure (numpy + yaml). ``load_palette(path, model_classes)`` -> :class:`ClassPalette`; '' (no file)
is the model's own class set and colours, ids unchanged. File layout (every key optional)::

    colors:                    # colour per output class name: [r, g, b] 0..255 or '#rrggbb'
      void: [0, 0, 0]
    groups:                    # output classes 1..G in this order (void stays id 0)
      - {name: floor, classes: [floor], color: [140, 86, 75]}
      - {name: structure, classes: [wall, ceiling, window], color: '#ffbb78'}
    ungrouped: keep            # model classes in no group: keep (own class, after the groups)
                               # or void (shown as void)

Without ``groups`` the output classes are the model's (same ids and names), only recoloured.
With them, output id 0 is the model's void class (its name; its colour unless ``colors`` names
it), then the groups in file order, then (``ungrouped: keep``) each remaining model class in id
order. A class's colour is ``colors[<its output name>]`` when given, else (a group) its
``color``, else its first model class's colour. The model's void class always maps to output 0
and cannot be in a group.

Every error is a ValueError naming the file, the field and the value, e.g.
``palette.yaml: groups[1].classes[2]='sofaa' is not a model class (known: ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.yamlfile import load_yaml_file

UNGROUPED = ('keep', 'void')
_KEYS = ('colors', 'groups', 'ungrouped')
_GROUP_KEYS = ('name', 'classes', 'color')


@dataclass(frozen=True)
class ClassPalette:
    """The output class set of the node and how model labels map onto it.

    Attributes:
        classes: output ClassSet (names, RGB colours, void_id); ``~/classes`` publishes it.
        lut: (C_model,) int array, ``lut[model id]`` = output id (dtype ``classes.label_dtype``).
        groups: per output id, the model class names it shows (identity: one name each).
        source: the file it came from ('' = the model's classes).
    """

    classes: ClassSet
    lut: np.ndarray
    groups: list[list[str]] = field(default_factory=list)
    source: str = ''

    @property
    def identity(self) -> bool:
        """True when labels need no remapping (output id = model id)."""
        return len(self.lut) == len(self.classes) and bool(
            np.array_equal(self.lut, np.arange(len(self.lut)))
        )

    @property
    def colors(self) -> np.ndarray:
        """(C_out, 3) uint8 RGB palette of the output ids (core.imageops.colorize_labels)."""
        return np.asarray(self.classes.colors, np.uint8)

    def relabel(self, labels: np.ndarray) -> np.ndarray:
        """Model ids (H×W int) -> output ids (H×W ``classes.label_dtype``); returned unchanged when
        :attr:`identity` and the dtype already fits.

        Raises:
            ValueError: an id outside 0..C_model-1 (named with the count of model classes).
        """
        lab = np.asarray(labels)
        if self.identity and lab.dtype == self.classes.label_dtype:
            return lab
        if lab.size and (int(lab.min()) < 0 or int(lab.max()) >= len(self.lut)):
            raise ValueError(
                f'label ids {int(lab.min())}..{int(lab.max())} outside the model classes '
                f'0..{len(self.lut) - 1}'
            )
        return self.lut[lab]

    def to_dict(self) -> dict[str, Any]:
        """``ClassSet.to_dict()`` plus, for a file, ``palette_file`` and per class
        ``model_classes`` (the model classes it shows): what ``~/classes`` publishes as JSON."""
        d = self.classes.to_dict()
        if self.source:
            d['palette_file'] = self.source
            for entry, members in zip(d['classes'], self.groups):
                entry['model_classes'] = list(members)
        return d


def model_palette(model: ClassSet) -> ClassPalette:
    """The default: the model's classes and colours, ids unchanged."""
    lut = np.arange(len(model), dtype=model.label_dtype)
    return ClassPalette(model, lut, [[n] for n in model.names], '')


def parse_color(value: Any, where: str) -> list[int]:
    """``[r, g, b]`` ints 0..255 or ``'#rrggbb'`` -> [r, g, b].

    Raises:
        ValueError: naming ``where`` and the value.
    """
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 7 and text[0] == '#':
            try:
                return [int(text[i : i + 2], 16) for i in (1, 3, 5)]
            except ValueError:
                pass
        raise ValueError(f"{where}={value!r} must be [r, g, b] (0..255) or '#rrggbb'")
    if (
        isinstance(value, (list, tuple))
        and len(value) == 3
        and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in value)
    ):
        return [int(c) for c in value]
    raise ValueError(f"{where}={value!r} must be [r, g, b] (0..255) or '#rrggbb'")


def palette_from_dict(data: Any, model: ClassSet, source: str = '<dict>') -> ClassPalette:
    """Build the palette of ``data`` (the file layout in the module docstring) for ``model``.

    Raises:
        ValueError: '<source>: <field>=<value> ...' for an unknown key, a bad colour, an unknown
            or repeated class name, a group without classes or with a repeated or empty name,
            the void class in a group, ``ungrouped`` not keep|void, or too many output classes.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f'{source}: the file must be a mapping with {list(_KEYS)}, got {data!r}')
    try:
        return _build(data, model, source)
    except ValueError as err:
        raise ValueError(f'{source}: {err}') from None


def _build(data: dict, model: ClassSet, source: str) -> ClassPalette:
    unknown = sorted(set(map(str, data)) - set(_KEYS))
    if unknown:
        raise ValueError(f'unknown key(s) {unknown}; allowed: {list(_KEYS)}')
    colors = data.get('colors') or {}
    if not isinstance(colors, dict):
        raise ValueError(f'colors={colors!r} must be a mapping class name -> [r, g, b]')
    ungrouped = data.get('ungrouped', 'keep')
    if ungrouped not in UNGROUPED:
        raise ValueError(f'ungrouped={ungrouped!r} must be one of {list(UNGROUPED)}')
    groups = data.get('groups')
    void = model.names[model.void_id]
    if groups is None:  # recolour only: the model's ids and names
        names = list(model.names)
        members = [[n] for n in names]
        lut = np.arange(len(model))
        base = [list(map(int, c)) for c in model.colors]
    else:
        names, members, base, lut = _grouped(groups, model, ungrouped, colors)
    for key in colors:
        if key not in names:
            raise ValueError(f'colors.{key}: {key!r} is not an output class (known: {names})')
    rgb = [
        parse_color(colors[n], f'colors.{n}') if n in colors else base[i]
        for i, n in enumerate(names)
    ]
    void_out = 0 if groups is not None else model.void_id
    if len(names) > 65536:
        raise ValueError(f'{len(names)} output classes; at most 65536 fit a 16-bit label')
    out = ClassSet(names, rgb, void_id=void_out)
    assert names[void_out] == void
    return ClassPalette(out, np.asarray(lut, dtype=out.label_dtype), members, source)


def _grouped(
    groups: Any, model: ClassSet, ungrouped: str, colors: dict
) -> tuple[list[str], list[list[str]], list[list[int]], np.ndarray]:
    if not isinstance(groups, list) or not groups:
        raise ValueError(f'groups={groups!r} must be a non-empty list of {{name, classes}}')
    void = model.names[model.void_id]
    names, members, base = [void], [[void]], [list(map(int, model.colors[model.void_id]))]
    lut = np.full(len(model), -1, np.int64)
    lut[model.void_id] = 0
    owner: dict[str, str] = {}
    for g, grp in enumerate(groups):
        where = f'groups[{g}]'
        if not isinstance(grp, dict):
            raise ValueError(f'{where}={grp!r} must be a mapping with name and classes')
        bad = sorted(set(map(str, grp)) - set(_GROUP_KEYS))
        if bad:
            raise ValueError(f'{where}: unknown key(s) {bad}; allowed: {list(_GROUP_KEYS)}')
        name = grp.get('name')
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f'{where}.name={name!r} must be a non-empty string')
        if name in names:
            raise ValueError(f'{where}.name={name!r} is used twice (or is the void class)')
        cls = grp.get('classes')
        if not isinstance(cls, list) or not cls:
            raise ValueError(f'{where}.classes={cls!r} must be a non-empty list of class names')
        out_id = len(names)
        for k, c in enumerate(cls):
            at = f'{where}.classes[{k}]={c!r}'
            if c not in model.names:
                raise ValueError(f'{at} is not a model class (known: {model.names})')
            if c == void:
                raise ValueError(f'{at} is the void class: it always stays void (output id 0)')
            if c in owner:
                raise ValueError(f'{at} is already in group {owner[c]!r}')
            owner[c] = name
            lut[model.index(c)] = out_id
        if 'color' in grp:
            color = parse_color(grp['color'], f'{where}.color')
        else:
            color = list(map(int, model.colors[model.index(cls[0])]))
        names.append(name)
        members.append(list(cls))
        base.append(color)
    for i, n in enumerate(model.names):
        if lut[i] >= 0:
            continue
        if ungrouped == 'void':
            lut[i] = 0
            members[0].append(n)
        else:
            if n in names:
                raise ValueError(
                    f'ungrouped class {n!r} has the name of a group: rename the group'
                )
            lut[i] = len(names)
            names.append(n)
            members.append([n])
            base.append(list(map(int, model.colors[i])))
    return names, members, base, lut


def load_palette(path: str | Path, model: ClassSet) -> ClassPalette:
    """The palette for parameter ``class_palette_file``: '' -> :func:`model_palette`, else the
    YAML file at ``path`` (:func:`palette_from_dict`).

    Raises:
        ValueError: a missing or unreadable file or bad YAML, naming the path; the
            :func:`palette_from_dict` errors.
    """
    if not str(path):
        return model_palette(model)
    p = Path(path)
    if not p.is_file():
        raise ValueError(f'class_palette_file={str(path)!r}: no such file')
    try:
        data = load_yaml_file(p)
    except ValueError as err:  # core.yamlfile.YamlFileError: one line, file, line, column
        raise ValueError(f'class_palette_file: {err}') from None
    return palette_from_dict(data, model, str(path))
