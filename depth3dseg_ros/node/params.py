"""Every parameter of ``depth3dseg_node`` in one place: name, default, type, allowed values,
meaning.

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

RELIABILITY = ('best_effort', 'reliable')
STARTUP_ONLY = 'read at start-up: restart the node'
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: ``name``, ``default`` (its type is the parameter type), ``choices`` or range
    (``min``/``max``, inclusive, in the parameter's unit), doc; ``dynamic``: may change at run time
    (applied from the next frame), else read once at start-up (C44)."""

    name: str
    default: Any
    doc: str
    choices: tuple = ()
    min: float | None = None
    max: float | None = None
    dynamic: bool = True


SPECS: tuple[ParamSpec, ...] = (
    ParamSpec(
        'model_file',
        '',
        "model file (.pt, core.modelfile, or .onnx from depth3dseg-export); '' = the "
        'shipped models/depth3dseg_nyu13.pt from the package share dir',
        dynamic=False,
    ),
    ParamSpec(
        'device',
        'auto',
        'torch device; auto = cuda when available, else cpu',
        ('auto', 'cuda', 'cpu'),
        dynamic=False,
    ),
    ParamSpec('half', False, 'fp16 inference (cuda only)', dynamic=False),
    ParamSpec(
        'backend',
        'auto',
        'inference runtime; auto = onnxruntime when model_file is .onnx or an '
        'up-to-date exported .onnx sits beside the .pt and onnxruntime is installed, else torch '
        '(docs/deployment.md)',
        ('auto', 'torch', 'onnxruntime'),
        dynamic=False,
    ),
    ParamSpec(
        'input_width', 0, "network input width in px; 0 = the model's", min=0, dynamic=False
    ),
    ParamSpec(
        'input_height', 0, "network input height in px; 0 = the model's", min=0, dynamic=False
    ),
    ParamSpec(
        'label_source',
        'fused',
        'which prediction is the label image: 2D head, 3D point network, '
        'or their fused probabilities (METHOD M7)',
        ('2d', '3d', 'fused'),
    ),
    ParamSpec(
        'class_palette_file',
        '',
        "YAML with class colours and label groupings (core/palette.py, e.g. "
        "config/palette_navigation.yaml) for ~/labels, ~/overlay, ~/mask, ~/points and ~/classes; "
        "'' = the model's classes and colours",
    ),
    ParamSpec('publish_labels', True, 'publish ~/labels/image (+ ~/labels/camera_info)'),
    ParamSpec('publish_overlay', True, 'publish ~/overlay/image (+ ~/overlay/camera_info)'),
    ParamSpec('publish_depth', True, 'publish ~/depth/image (+ ~/depth/camera_info)'),
    ParamSpec(
        'publish_mask',
        True,
        'publish ~/mask/image, rgb8 class colours, no blending (+ ~/mask/camera_info)',
    ),
    ParamSpec('publish_points', True, 'publish ~/points (needs CameraInfo)'),
    ParamSpec(
        'publish_labels_compressed',
        False,
        'publish ~/labels/image/compressed (sensor_msgs/CompressedImage, lossless PNG)',
    ),
    ParamSpec(
        'publish_overlay_compressed',
        False,
        'publish ~/overlay/image/compressed (CompressedImage, JPEG at jpeg_quality)',
    ),
    ParamSpec(
        'publish_depth_compressed',
        False,
        'publish ~/depth/image/compressedDepth (compressed_depth_image_transport format, PNG; '
        '32FC1 inverse-depth quantised up to max_depth)',
    ),
    ParamSpec('jpeg_quality', 95, 'JPEG quality of ~/overlay/image/compressed', min=1, max=100),
    ParamSpec(
        'png_level',
        3,
        'PNG compression level (zlib) of ~/labels/image/compressed and '
        '~/depth/image/compressedDepth',
        min=0,
        max=9,
    ),
    ParamSpec(
        'overlay_alpha',
        0.5,
        'label colour weight in ~/overlay/image (0 = image only, 1 = labels only)',
        min=0.0,
        max=1.0,
    ),
    ParamSpec(
        'depth_encoding',
        '32FC1',
        '~/depth/image encoding: 32FC1 metres (NaN = no data) or 16UC1 mm (0 = no data)',
        ('32FC1', '16UC1'),
    ),
    ParamSpec(
        'max_depth',
        10.0,
        'depth beyond this (m) is no data in ~/depth/image and ~/points',
        min=1e-6,
    ),
    ParamSpec('cloud_stride', 1, 'keep every n-th row and column in ~/points (C25)', min=1),
    ParamSpec(
        'cloud_organized',
        True,
        'organized cloud (height x width, NaN points kept); false = '
        'unorganized, invalid points dropped (C25)',
    ),
    ParamSpec('cloud_confidence', False, 'add a FLOAT32 confidence field to ~/points'),
    ParamSpec(
        'cloud_rgb',
        'camera',
        "what ~/points' rgb field holds: camera = the image colour, class = the label's class "
        'colour (as ~/mask; RViz RGB8 then shows classes)',
        ('camera', 'class'),
    ),
    ParamSpec(
        'use_rectified', False, "intrinsics from CameraInfo P (rectified image) instead of K"
    ),
    ParamSpec(
        'distortion',
        'rectify',
        'input whose CameraInfo has a non-zero D: rectify it (undistort, as '
        'image_proc; outputs get D = 0), refuse_cloud (no cloud, no 3D branch, error), or ignore '
        '(pinhole K)',
        ('rectify', 'refuse_cloud', 'ignore'),
    ),
    ParamSpec(
        'input_reliability',
        'best_effort',
        'subscription reliability (C24: best_effort matches any publisher)',
        RELIABILITY,
        dynamic=False,
    ),
    ParamSpec(
        'input_depth',
        1,
        'subscription KEEP_LAST depth (1 = newest frame only, C26)',
        min=1,
        dynamic=False,
    ),
    ParamSpec(
        'output_reliability',
        'reliable',
        'publisher reliability (C24: reliable reaches RViz and recorders of both kinds)',
        RELIABILITY,
        dynamic=False,
    ),
    ParamSpec('output_depth', 2, 'publisher KEEP_LAST depth', min=1, dynamic=False),
    ParamSpec(
        'sync_slop',
        0.01,
        'largest image/CameraInfo stamp difference paired, in s (0 = exact)',
        min=0.0,
    ),
    ParamSpec(
        'use_compressed',
        False,
        'subscribe sensor_msgs/CompressedImage on <image>/compressed',
        dynamic=False,
    ),
    ParamSpec(
        'use_measured_depth',
        False,
        'RGB-D cameras: subscribe a depth image registered to the colour '
        'image on depth (16UC1 mm or 32FC1 m, paired by stamp within sync_slop); the cloud and '
        'the 3D branch use it where valid, the prediction fills its holes; ~/depth/image stays '
        'the prediction',
        dynamic=False,
    ),
    ParamSpec(
        'max_image_pixels',
        8192 * 8192,
        'input images with more pixels are refused (compressed ones '
        'from their header, before decoding)',
        min=1,
    ),
    ParamSpec(
        'output_resolution',
        'network',
        'outputs at the network size, or resized to the camera '
        'image size (nearest; K scaled back)',
        ('network', 'camera'),
    ),
    ParamSpec(
        'diagnostics_period',
        2.0,
        'seconds between rate/timing log lines and /diagnostics',
        min=0.1,
    ),
    ParamSpec(
        'torch_threads',
        0,
        'torch CPU threads (0 = the Segmenter default: usable cores - 1, at least 1)',
        min=0,
        dynamic=False,
    ),
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


def declare_and_read(node: Any) -> NodeParams:
    """Declare every parameter on an rclpy ``node`` and return them validated.

    Declared first with the description only, so that a bad start-up value is refused by
    ``validate`` with its message (rclpy's own range check would word it differently); then each
    parameter gets its full ``descriptor()`` (ranges, read_only) with ``node.set_descriptor``.

    Raises:
        ValueError: from ``validate`` (the node's start-up stops with this message).
    """
    from rcl_interfaces.msg import ParameterDescriptor  # installed with rclpy

    values = {}
    for spec in SPECS:
        # float parameters accept integers too (`-p max_depth:=10`); validate() checks the type
        desc = ParameterDescriptor(
            description=spec.doc, dynamic_typing=isinstance(spec.default, float)
        )
        values[spec.name] = node.declare_parameter(spec.name, spec.default, desc).value
    params = validate(values)
    for spec in SPECS:
        node.set_descriptor(spec.name, descriptor(spec))
    return params
