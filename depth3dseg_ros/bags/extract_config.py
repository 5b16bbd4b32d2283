"""depth3dseg-extract's configuration as plain data: topic presets of common camera drivers, the
`ExtractConfig` dataclass (validated on construction), `load_extract_config` (YAML file, preset
and command-line overrides merged, in that order) and `flag_problem` (the same checks on the CLI's
flags, named as typed). See docs/extraction.md.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from depth3dseg_ros.bags.dataset_writer import PNG_STRATEGIES
from depth3dseg_ros.bags.frames import ROLES
from depth3dseg_ros.bags.label_policy import LABEL_POLICIES
from depth3dseg_ros.bags.pairing import DEFAULT_TOLERANCE_NS
from depth3dseg_ros.bags.reader import DEFAULT_TYPESTORE, resolve_typestore
from depth3dseg_ros.bags.topic_check import ALLOWABLE, parse_allow_missing, split_roles
from depth3dseg_ros.core.image_decode import DEFAULT_MAX_PIXELS
from depth3dseg_ros.core.yamlfile import load_yaml_file

#: Topic names of common camera drivers (role -> topic). 'depth3dseg' is the package's synthetic
#: bags.
PRESETS: Dict[str, Dict[str, Optional[str]]] = {
    'depth3dseg': {
        'rgb': '/camera/color/image_raw',
        'depth': '/camera/depth/image_raw',
        'camera_info': '/camera/color/camera_info',
        'labels': '/camera/semantic/labels',
    },
    'realsense': {
        'rgb': '/camera/color/image_raw',
        'depth': '/camera/aligned_depth_to_color/image_raw',
        'camera_info': '/camera/color/camera_info',
        'labels': None,
    },
    'azure_kinect': {
        'rgb': '/rgb/image_raw',
        'depth': '/depth_to_rgb/image_raw',
        'camera_info': '/rgb/camera_info',
        'labels': None,
    },
    'zed': {
        'rgb': '/zed/zed_node/rgb/image_rect_color',
        'depth': '/zed/zed_node/depth/depth_registered',
        'camera_info': '/zed/zed_node/rgb/camera_info',
        'labels': None,
    },
}


@dataclass
class ExtractConfig:
    """Extraction settings (CLI flags override the YAML file, which overrides these defaults).

    Attributes:
        rgb_topic, depth_topic, camera_info_topic, labels_topic: topics; None/'' disables a role.
        tolerance_ms: max |stamp difference| for pairing (ms). typestore: rosbags distro for bags
        without definitions (C28). every: keep every N-th RGB frame. max_frames: total frame limit.
        png_level: PNG compression 0..9: 0 (default) = stored PNGs (bags.png_stored: fastest, as
            large as the pixels), 1..9 = zlib via cv2 (1 with strategy rle: ~1/3 of the size, ~8x
            slower extraction; docs/extraction.md). classes: ClassSet YAML path (None = NYU13).
        depth_scale: metres per unit of integer depth (None = mm). use_rectified: K from P.
        workers: PNG encoding/writing threads (default min(4, CPUs)). png_strategy: zlib strategy.
        out_of_range_labels: what to do with label ids outside the class set (>= len(classes), e.g.
            255 = ignore; C43): 'void' (default) maps those pixels to the void id and counts them;
            'refuse' skips the whole frame, counted in the per-topic table as
            ``label ids outside 0..C-1 (refused)``.
        allow_missing: roles (``'depth'``, ``'labels'``) a bag may lack although a topic is
            configured for them; any other requested role a bag lacks is an error before anything
            is written (:class:`bags.topic_check.MissingTopics`, issue 15). YAML list or
            ``'depth,labels'``. ``None`` (the library default, kept for callers such as
            ``depth3dseg-eval --bag``) skips the check: missing roles are only reported
            (``missing_roles``). The ``depth3dseg-extract`` CLI always checks (``[]`` unless
            ``--allow-missing`` or the YAML key says otherwise).
        max_image_pixels: an image message declaring more pixels (a compressed image's header,
            an Image's width × height) is refused before it is decoded and counted as skipped
            (``over max_image_pixels``), as the node's parameter of that name does (issue 55).
    """

    rgb_topic: Optional[str] = PRESETS['depth3dseg']['rgb']
    depth_topic: Optional[str] = PRESETS['depth3dseg']['depth']
    camera_info_topic: Optional[str] = PRESETS['depth3dseg']['camera_info']
    labels_topic: Optional[str] = PRESETS['depth3dseg']['labels']
    tolerance_ms: float = DEFAULT_TOLERANCE_NS / 1e6
    typestore: str = DEFAULT_TYPESTORE
    every: int = 1
    max_frames: Optional[int] = None
    png_level: int = 0
    png_strategy: str = 'rle'
    classes: Optional[str] = None
    depth_scale: Optional[float] = None
    use_rectified: bool = False
    workers: int = min(4, os.cpu_count() or 1)
    out_of_range_labels: str = 'void'
    allow_missing: Optional[List[str]] = None
    max_image_pixels: int = DEFAULT_MAX_PIXELS

    def topics(self) -> Dict[str, Optional[str]]:
        """role -> topic (None when disabled)."""
        return {r: (getattr(self, f'{r}_topic') or None) for r in ROLES}

    def validate(self) -> None:
        """Raises ValueError naming the field and the value (``every=0 must be >= 1``)."""
        if not self.rgb_topic:
            raise ValueError('rgb_topic is empty: an RGB topic is required')
        for key, (whole, _, _) in BOUNDS.items():
            value = getattr(self, key)
            problem = setting_problem(key, value)
            if problem:
                shown = repr(value) if isinstance(value, str) else value
                raise ValueError(f'{key}={shown} {problem}')
            if value is not None:  # 3.0 from a YAML file is the count 3
                setattr(self, key, int(value) if whole else float(value))
        if self.png_strategy not in PNG_STRATEGIES:
            raise ValueError(
                f'png_strategy={self.png_strategy!r} is not one of {sorted(PNG_STRATEGIES)}'
            )
        if self.out_of_range_labels not in LABEL_POLICIES:
            raise ValueError(
                f'out_of_range_labels={self.out_of_range_labels!r} is not one of '
                f'{list(LABEL_POLICIES)}'
            )
        resolve_typestore(self.typestore)
        if self.allow_missing is not None:
            self.allow_missing = parse_allow_missing(self.allow_missing)


#: Numeric settings with a valid range: key -> (whole numbers only, test of the range, the range
#: in words). One rule for :meth:`ExtractConfig.validate` (``every=0 must be >= 1``) and the CLI,
#: which names the flag instead (``--every 0 must be >= 1``, bags.extract). A value of another type
#: (a string or a bool in a YAML file, a fraction where a count is meant, inf or nan) is refused
#: as such (``png_level=3.7 must be a whole number``). None is valid where the default is None.
BOUNDS: Dict[str, Tuple[bool, Callable[[float], bool], str]] = {
    'tolerance_ms': (False, lambda v: v >= 0, '>= 0'),
    'every': (True, lambda v: v >= 1, '>= 1'),
    'max_frames': (True, lambda v: v >= 0, '>= 0'),
    'png_level': (True, lambda v: 0 <= v <= 9, 'in 0..9'),
    'workers': (True, lambda v: v >= 1, '>= 1'),
    'depth_scale': (False, lambda v: v > 0, '> 0 (metres per unit of 16UC1 depth)'),
    'max_image_pixels': (True, lambda v: v >= 1, '>= 1'),
}
#: the settings of BOUNDS whose default is None (no limit; millimetres)
NONE_ALLOWED = ('max_frames', 'depth_scale')


def setting_problem(key: str, value: Any) -> Optional[str]:
    """What is wrong with ``value`` for the numeric setting ``key`` of :data:`BOUNDS` (e.g.
    ``'must be >= 1'``, ``'must be a whole number'``, ``'must be a finite number'``), or None
    when it is valid (or ``key`` has no bound)."""
    rule = BOUNDS.get(key)
    if rule is None or (value is None and key in NONE_ALLOWED):
        return None
    whole, in_range, words = rule
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value):
        return f'must be a finite number {words}'
    if whole and not float(value).is_integer():
        return f'must be a whole number {words}'
    return None if in_range(value) else f'must be {words}'


def load_extract_config(
    path: Optional[str], preset: Optional[str] = None, overrides: Optional[Dict[str, Any]] = None
) -> ExtractConfig:
    """Defaults <- preset <- YAML file <- overrides (None values in ``overrides`` are ignored).

    Raises:
        ValueError: unknown preset, unknown YAML key, or invalid value.
    """
    cfg = ExtractConfig()
    names = {f.name for f in fields(ExtractConfig)}
    if preset:
        if preset not in PRESETS:
            raise ValueError(f'preset={preset!r} is not one of {sorted(PRESETS)}')
        for role, topic in PRESETS[preset].items():
            setattr(cfg, f'{role}_topic', topic)
    if path:
        data = load_yaml_file(path) or {}  # one-line parse errors (core.yamlfile)
        if not isinstance(data, dict):
            raise ValueError(f'{path}: expected a mapping of extract settings')
        if 'preset' in data:
            return load_extract_config(
                None,
                data.pop('preset'),
                {**data, **{k: v for k, v in (overrides or {}).items() if v is not None}},
            )
        for key, value in data.items():
            if key not in names:
                raise ValueError(f'{path}: unknown key {key!r} (known: {sorted(names)})')
            setattr(cfg, key, value)
    for key, value in (overrides or {}).items():
        if value is not None:
            if key not in names:
                raise ValueError(f'unknown setting {key!r}')
            setattr(cfg, key, value)
    cfg.validate()
    return cfg


def config_error_line(err: Exception, option: str, path: Optional[str]) -> str:
    """The one line for an error of :func:`load_extract_config` in a CLI, naming the option that
    gave the YAML file (``--config extract.yaml:3:1: not valid YAML: ...``, ``--extract-config
    x.yaml: every=0 must be >= 1``); errors not from the file (a bad preset) are left as they
    are."""
    text = ' '.join(str(err).split())
    if not path or text.startswith('preset='):
        return text
    return f'{option} {text}' if path in text else f'{option} {path}: {text}'


def flag_problem(values: Mapping[str, Any], flags: Mapping[str, str]) -> Optional[str]:
    """The first command-line setting that :meth:`ExtractConfig.validate` would refuse, as an
    error naming the flag as typed (``--every 0 must be >= 1``), or None; needs no bag or file.

    Args:
        values: the parsed arguments by setting name (None: flag not given).
        flags: setting name -> its flag (``'every'`` -> ``'--every'``).
    """
    for key in BOUNDS:
        value = values.get(key)
        problem = None if value is None else setting_problem(key, value)
        if problem:
            shown = f'{value:g}' if isinstance(value, float) else value
            return f'{flags.get(key, key)} {shown} {problem}'
    if values.get('rgb_topic') == '':
        return f"{flags.get('rgb_topic', 'rgb_topic')} '': an RGB topic is required"
    typestore = values.get('typestore')
    if typestore is not None:
        try:
            resolve_typestore(typestore)
        except ValueError as err:  # 'typestore=... is not one of: <the valid names>'
            typed = f'{flags.get("typestore", "typestore")} {typestore}'
            return str(err).replace(f'typestore={typestore!r}', typed)
    allow = values.get('allow_missing')
    if allow is not None:
        bad = [r for r in split_roles(allow) if r not in ALLOWABLE]
        if bad:
            what = 'is not a role' if len(bad) == 1 else 'are not roles'
            typed = allow if isinstance(allow, str) else ','.join(map(str, allow))
            return (
                f'{flags.get("allow_missing", "allow_missing")} {typed}: '
                f'{", ".join(map(repr, bad))} {what} that may be missing: must be among '
                f'{", ".join(ALLOWABLE)} (rgb and camera_info are always required)'
            )
    return None
