"""Every parameter of ``depth3dseg_node`` in one place: the table (name, default, type, allowed
values, meaning) is ``SPECS`` in node/param_specs.py, re-exported here with the rules below.

``config/depth3dseg.yaml`` carries the same defaults under ``/**:`` (test_params checks they agree,
and that docs/node.md documents each one). ``validate()`` turns raw values into a typed
``NodeParams``; a bad value raises ``ValueError`` naming the parameter, the value and what is
allowed, and the node stops start-up with that message (docs/ros_conventions.md "Parameters and
launch").

Run time (docs/cases.md C44): parameters marked ``dynamic`` can be changed with ``set_parameters``
(``ros2 param set``, the ``~/set_parameters`` service); ``updated()`` checks a change with the same
rules as start-up and returns the new ``NodeParams``, which the node applies from the next frame.
The others (model, device, precision, backend, input size, QoS, compressed input, torch threads)
are read once at start-up: a change is refused with the reason ``STARTUP_ONLY`` and their
descriptors are read-only. ``descriptor()`` builds each parameter's
``rcl_interfaces/ParameterDescriptor`` (description, range, read_only).

This module does not import rclpy; ``declare_and_read(node)`` only calls Node methods.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable

from depth3dseg_ros.node.param_specs import (  # noqa: F401 - re-exported (API)
    INT64_MAX,
    INT64_MIN,
    RELIABILITY,
    SPECS,
    STARTUP_ONLY,
    ParamSpec,
)

SPEC_BY_NAME = {s.name: s for s in SPECS}


@dataclass(frozen=True)
class NodeParams:
    """Validated parameters (field per ``SPECS`` entry, same name and type)."""

    model_file: str
    device: str
    half: bool
    backend: str
    input_width: int
    input_height: int
    label_source: str
    class_palette_file: str
    publish_labels: bool
    publish_overlay: bool
    publish_depth: bool
    publish_mask: bool
    publish_points: bool
    publish_labels_compressed: bool
    publish_overlay_compressed: bool
    publish_depth_compressed: bool
    lazy_outputs: bool
    jpeg_quality: int
    png_level: int
    overlay_alpha: float
    depth_encoding: str
    max_depth: float
    cloud_stride: int
    cloud_organized: bool
    cloud_confidence: bool
    cloud_rgb: str
    use_rectified: bool
    distortion: str
    input_reliability: str
    input_depth: int
    output_reliability: str
    output_depth: int
    sync_slop: float
    use_compressed: bool
    use_measured_depth: bool
    geometry_model: str
    geometry_weight: float
    max_image_pixels: int
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
    default (allowed values), meaning, and ``[start-up only]`` for those not changeable at run
    time."""
    specs = SPECS + tuple(extra)
    width = max(len(s.name) for s in specs) + 1
    lines = []
    for spec in specs:
        bounds = [
            f'>= {spec.min:g}' if spec.min is not None else '',
            f'<= {spec.max:g}' if spec.max is not None else '',
        ]
        allowed = '|'.join(spec.choices) or ' '.join(b for b in bounds if b)
        default = _yaml_value(spec.default) + (f' ({allowed})' if allowed else '')
        lines.append(
            f'  {spec.name:<{width}} {default:<35} {spec.doc}'
            + ('' if spec.dynamic else ' [start-up only]')
        )
    return lines


def unknown_names(given: Iterable[str], known: Iterable[str]) -> list[tuple[str, str | None]]:
    """The names in ``given`` that are not in ``known``, sorted, each with the closest known name
    (difflib, similarity >= 0.6) or None, e.g. ``[('lable_source', 'label_source')]``."""
    known = sorted(set(known))
    return [
        (name, next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.6)), None))
        for name in sorted(set(given) - set(known))
    ]


def _coerce(spec: ParamSpec, value: Any) -> Any:
    kind = type(spec.default)
    if value is None:  # NOT_SET: e.g. `-p name:=[]` (an empty list has no type) or unset
        kind_name = {bool: 'bool', int: 'integer', float: 'number', str: 'string'}[kind]
        raise ValueError(
            f'parameter {spec.name} has no value (an empty list `[]` or an unset value?): it '
            f'must be a {kind_name}'
        )
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
        ValueError: an unknown name, a wrong type, a value outside its choices (listing them) or
            range, or input_width/input_height where only one is set; the message names the
            parameter.
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
        raise ValueError(
            f"parameters input_width={out['input_width']} and input_height="
            f"{out['input_height']} must both be 0 (model's size) or both > 0"
        )
    assert [f.name for f in fields(NodeParams)] == [s.name for s in SPECS]
    return NodeParams(**out)


def updated(current: NodeParams, changes: dict[str, Any]) -> NodeParams:
    """``current`` with ``changes`` (``{name: raw value}``) applied, checked like start-up (C44).

    Returns ``current`` itself when nothing changes. Raises:
        ValueError: an unknown name; a parameter that is not ``dynamic`` (message: "parameter
            <name> is read at start-up: restart the node to change it", ``STARTUP_ONLY``); or any
            value ``validate`` refuses, with ``validate``'s message (the one start-up would print).
    """
    for name in changes:
        spec = SPEC_BY_NAME.get(name)
        if spec is None:
            raise ValueError(f'unknown parameter {name!r}; known: {sorted(SPEC_BY_NAME)}')
        if not spec.dynamic:
            raise ValueError(f'parameter {name} is {STARTUP_ONLY} to change it')
    if not changes:
        return current
    return validate(dict(asdict(current), **changes))


def _range_text(spec: ParamSpec) -> str:
    bounds = [
        f'>= {spec.min:g}' if spec.min is not None else '',
        f'<= {spec.max:g}' if spec.max is not None else '',
    ]
    return ' and '.join(b for b in bounds if b)


def descriptor(spec: ParamSpec) -> Any:
    """The ``rcl_interfaces/ParameterDescriptor`` of ``spec``: ``description`` = ``spec.doc``;
    ``additional_constraints`` the allowed values or range and when a change applies; a
    ``FloatingPointRange`` (float) or ``IntegerRange`` (int, step 1) from ``min``/``max`` (an open
    end is +-inf, or the int64 limit); ``read_only`` for start-up-only parameters;
    ``dynamic_typing`` for float parameters, so an integer (``-p max_depth:=10``) is accepted and
    used as a float (C39).
    """
    from rcl_interfaces.msg import (
        FloatingPointRange,
        IntegerRange,
        ParameterDescriptor,
        ParameterType,
    )

    kind = type(spec.default)
    ptype = {
        bool: ParameterType.PARAMETER_BOOL,
        int: ParameterType.PARAMETER_INTEGER,
        float: ParameterType.PARAMETER_DOUBLE,
        str: ParameterType.PARAMETER_STRING,
    }[kind]
    allowed = f'one of {list(spec.choices)}' if spec.choices else _range_text(spec)
    when = (
        'changeable at run time (applies from the next frame)'
        if spec.dynamic
        else STARTUP_ONLY + ' to change it'
    )
    d = ParameterDescriptor(
        name=spec.name,
        type=ptype,
        description=spec.doc,
        additional_constraints='; '.join(x for x in (allowed, when) if x),
        read_only=not spec.dynamic,
        dynamic_typing=kind is float,
    )
    if kind is float and (spec.min is not None or spec.max is not None):
        d.floating_point_range = [
            FloatingPointRange(
                from_value=float('-inf') if spec.min is None else float(spec.min),
                to_value=float('inf') if spec.max is None else float(spec.max),
                step=0.0,
            )
        ]
    elif kind is int and (spec.min is not None or spec.max is not None):
        d.integer_range = [
            IntegerRange(
                from_value=INT64_MIN if spec.min is None else int(spec.min),
                to_value=INT64_MAX if spec.max is None else int(spec.max),
                step=1,
            )
        ]
    return d


def declare_parameters(node: Any, any_type: bool = False) -> None:
    """Declare every parameter on an rclpy ``node`` (default and description; no range, not
    read-only), so that a bad value is refused by ``validate`` with its message (rclpy's own checks
    would word it differently). Float parameters accept integers (``-p max_depth:=10``, C39);
    ``any_type`` lets every parameter take any type until ``validate`` reads it (the managed node:
    a wrong type fails the configure transition instead of the constructor)."""
    from rcl_interfaces.msg import ParameterDescriptor  # installed with rclpy

    for spec in SPECS:
        desc = ParameterDescriptor(
            description=spec.doc, dynamic_typing=any_type or isinstance(spec.default, float)
        )
        node.declare_parameter(spec.name, spec.default, desc)


def read_parameters(node: Any) -> NodeParams:
    """The declared parameters of ``node``, validated.

    Raises:
        ValueError: from ``validate``, naming the parameter and its value.
    """
    return validate({s.name: _value(node, s.name) for s in SPECS})


def _value(node: Any, name: str) -> Any:
    """The parameter's value; None when it has none (``-p name:=[]``: rclpy then raises
    ParameterUninitializedException on get_parameter; validate names the parameter)."""
    try:
        return node.get_parameter(name).value
    except Exception as err:
        if type(err).__name__ != 'ParameterUninitializedException':
            raise
        return None


def declare_and_read(node: Any) -> NodeParams:
    """Declare every parameter on an rclpy ``node`` (``declare_parameters``) and return them
    validated; then each parameter gets its full ``descriptor()`` (ranges, read_only) with
    ``node.set_descriptor``.

    Raises:
        ValueError: from ``validate`` (the node's start-up stops with this message).
    """
    declare_parameters(node)
    params = read_parameters(node)
    for spec in SPECS:
        node.set_descriptor(spec.name, descriptor(spec))
    return params
