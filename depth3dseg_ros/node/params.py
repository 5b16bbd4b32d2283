"""Every parameter of ``depth3dseg_node`` in one place: name, default, type, allowed values, meaning.

``config/depth3dseg.yaml`` carries the same defaults under ``/**:`` (test_params checks they agree,
and that docs/node.md documents each one). ``validate()`` turns raw values into a typed
``NodeParams``; a bad value raises ``ValueError`` naming the parameter, the value and what is allowed,
and the node stops start-up with that message (docs/ros_conventions.md "Parameters and launch").

This module does not import rclpy; ``declare_and_read(node)`` only calls Node methods.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any, Iterable

RELIABILITY = ('best_effort', 'reliable')


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: ``name``, ``default`` (its type is the parameter type), ``choices`` or range, doc."""

    name: str
    default: Any
    doc: str
    choices: tuple = ()
    min: float | None = None
    max: float | None = None


SPECS: tuple[ParamSpec, ...] = (
    ParamSpec('model_file', '', "model file (.pt, core.modelfile); '' = the shipped models/depth3dseg_nyu13.pt "
              'from the package share dir'),
    ParamSpec('device', 'auto', 'torch device; auto = cuda when available, else cpu', ('auto', 'cuda', 'cpu')),
    ParamSpec('half', False, 'fp16 inference (cuda only)'),
    ParamSpec('input_width', 0, "network input width in px; 0 = the model's", min=0),
    ParamSpec('input_height', 0, "network input height in px; 0 = the model's", min=0),
    ParamSpec('label_source', 'fused', 'which prediction is the label image: 2D head, 3D point network, '
              'or their fused probabilities (METHOD M7)', ('2d', '3d', 'fused')),
    ParamSpec('publish_labels', True, 'publish ~/labels (+ camera_info)'),
    ParamSpec('publish_overlay', True, 'publish ~/overlay (+ camera_info)'),
    ParamSpec('publish_depth', True, 'publish ~/depth (+ camera_info)'),
    ParamSpec('publish_points', True, 'publish ~/points (needs CameraInfo)'),
    ParamSpec('overlay_alpha', 0.5, 'label colour weight in ~/overlay (0 = image only, 1 = labels only)',
              min=0.0, max=1.0),
    ParamSpec('depth_encoding', '32FC1', '~/depth encoding: 32FC1 metres (NaN = no data) or 16UC1 mm '
              '(0 = no data)', ('32FC1', '16UC1')),
    ParamSpec('max_depth', 10.0, 'depth beyond this (m) is no data in ~/depth and ~/points', min=1e-6),
    ParamSpec('cloud_stride', 1, 'keep every n-th row and column in ~/points (C25)', min=1),
    ParamSpec('cloud_organized', True, 'organized cloud (height x width, NaN points kept); false = '
              'unorganized, invalid points dropped (C25)'),
    ParamSpec('cloud_confidence', False, 'add a FLOAT32 confidence field to ~/points'),
    ParamSpec('use_rectified', False, "intrinsics from CameraInfo P (rectified image) instead of K"),
    ParamSpec('input_reliability', 'best_effort', 'subscription reliability (C24: best_effort matches '
              'any publisher)', RELIABILITY),
    ParamSpec('input_depth', 1, 'subscription KEEP_LAST depth (1 = newest frame only, C26)', min=1),
    ParamSpec('output_reliability', 'reliable', 'publisher reliability (C24: reliable reaches RViz '
              'and recorders of both kinds)', RELIABILITY),
    ParamSpec('output_depth', 2, 'publisher KEEP_LAST depth', min=1),
    ParamSpec('sync_slop', 0.01, 'largest image/CameraInfo stamp difference paired, in s (0 = exact)',
              min=0.0),
    ParamSpec('use_compressed', False, 'subscribe sensor_msgs/CompressedImage on <image>/compressed'),
    ParamSpec('output_resolution', 'network', 'outputs at the network size, or resized to the camera '
              'image size (nearest; K scaled back)', ('network', 'camera')),
    ParamSpec('diagnostics_period', 2.0, 'seconds between rate/timing log lines and /diagnostics', min=0.1),
    ParamSpec('torch_threads', 0, 'torch CPU threads (0 = the Segmenter default: usable cores - 1, at least 1)', min=0),
)

SPEC_BY_NAME = {s.name: s for s in SPECS}


@dataclass(frozen=True)
class NodeParams:
    """Validated parameters (field per ``SPECS`` entry, same name and type)."""

    model_file: str
    device: str
    half: bool
    input_width: int
    input_height: int
    label_source: str
    publish_labels: bool
    publish_overlay: bool
    publish_depth: bool
    publish_points: bool
    overlay_alpha: float
    depth_encoding: str
    max_depth: float
    cloud_stride: int
    cloud_organized: bool
    cloud_confidence: bool
    use_rectified: bool
    input_reliability: str
    input_depth: int
    output_reliability: str
    output_depth: int
    sync_slop: float
    use_compressed: bool
    output_resolution: str
    diagnostics_period: float
    torch_threads: int

    @property
    def input_size(self) -> tuple[int, int] | None:
        """(width, height) for the network, or None for the model's own size."""
        if self.input_width and self.input_height:
            return (self.input_width, self.input_height)
        return None


def defaults() -> dict[str, Any]:
    """{name: default} for every parameter."""
    return {s.name: s.default for s in SPECS}


def _yaml_value(value: Any) -> str:
    """A default as written after ``-p name:=`` or in the YAML file (true, 0.5, fused, '')."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return "''" if value == '' else str(value)


def usage_lines(extra: Iterable[ParamSpec] = ()) -> list[str]:
    """One line per parameter (``SPECS``, then ``extra``) for ``depth3dseg_node --help``: name,
    default (allowed values), meaning."""
    specs = SPECS + tuple(extra)
    width = max(len(s.name) for s in specs) + 1
    lines = []
    for spec in specs:
        bounds = [f'>= {spec.min:g}' if spec.min is not None else '',
                  f'<= {spec.max:g}' if spec.max is not None else '']
        allowed = '|'.join(spec.choices) or ' '.join(b for b in bounds if b)
        default = _yaml_value(spec.default) + (f' ({allowed})' if allowed else '')
        lines.append(f'  {spec.name:<{width}} {default:<35} {spec.doc}')
    return lines


def unknown_names(given: Iterable[str], known: Iterable[str]) -> list[tuple[str, str | None]]:
    """The names in ``given`` that are not in ``known``, sorted, each with the closest known name
    (difflib, similarity >= 0.6) or None, e.g. ``[('lable_source', 'label_source')]``."""
    known = sorted(set(known))
    return [(name, next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.6)), None))
            for name in sorted(set(given) - set(known))]


def _coerce(spec: ParamSpec, value: Any) -> Any:
    kind = type(spec.default)
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f'parameter {spec.name}={value!r} must be a bool (true|false)')
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f'parameter {spec.name}={value!r} must be an integer')
        return int(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f'parameter {spec.name}={value!r} must be a number')
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f'parameter {spec.name}={value!r} must be a string')
    return value


def validate(values: dict[str, Any]) -> NodeParams:
    """Check and type raw parameter values (missing names take their defaults).

    Raises:
        ValueError: an unknown name, a wrong type, a value outside its choices (listing them) or range,
            or input_width/input_height where only one is set; the message names the parameter.
    """
    unknown = sorted(set(values) - set(SPEC_BY_NAME))
    if unknown:
        raise ValueError(f'unknown parameter(s) {unknown}; known: {sorted(SPEC_BY_NAME)}')
    out = {}
    for spec in SPECS:
        v = _coerce(spec, values.get(spec.name, spec.default))
        if spec.choices and v not in spec.choices:
            raise ValueError(f'parameter {spec.name}={v!r} is not one of {list(spec.choices)}')
        if spec.min is not None and not v >= spec.min:
            raise ValueError(f'parameter {spec.name}={v!r} must be >= {spec.min}')
        if spec.max is not None and not v <= spec.max:
            raise ValueError(f'parameter {spec.name}={v!r} must be <= {spec.max}')
        out[spec.name] = v
    if bool(out['input_width']) != bool(out['input_height']):
        raise ValueError(f"parameters input_width={out['input_width']} and input_height="
                         f"{out['input_height']} must both be 0 (model's size) or both > 0")
    assert [f.name for f in fields(NodeParams)] == [s.name for s in SPECS]
    return NodeParams(**out)


def declare_and_read(node: Any) -> NodeParams:
    """Declare every parameter on an rclpy ``node`` (with its description) and return them validated.

    Raises:
        ValueError: from ``validate`` (the node's start-up stops with this message).
    """
    from rcl_interfaces.msg import ParameterDescriptor  # installed with rclpy

    values = {}
    for spec in SPECS:
        extra = f' One of {list(spec.choices)}.' if spec.choices else ''
        # float parameters accept integers too (`-p max_depth:=10`); validate() checks the type
        desc = ParameterDescriptor(description=spec.doc + extra, dynamic_typing=isinstance(spec.default, float))
        values[spec.name] = node.declare_parameter(spec.name, spec.default, desc).value
    return validate(values)
