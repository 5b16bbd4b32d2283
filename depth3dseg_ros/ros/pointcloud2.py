"""sensor_msgs/PointCloud2 <-> numpy structured arrays, in sensor_msgs_py's vocabulary, plus a PLY
writer.

sensor_msgs_py is not on pip (docs/pip_ros_stack.md §4), and its reader once ignored trailing
padding (docs/cases.md C12). Here the dtype always carries explicit ``offsets`` and ``itemsize =
point_step``, rows are cut at ``row_step``, and the writer sets point_step/row_step explicitly. The
labelled cloud (docs/method.md M9) has fields x, y, z FLOAT32, rgb FLOAT32 holding packed
0x00RRGGBB bits (built as uint32 and bit-viewed, never through a Python float: C14, C15), label
UINT32 or UINT16, optional confidence FLOAT32. Every operation is vectorised numpy (no per-point
Python loop).

Rules every writer and reader here follows:

* ``is_dense`` is True only when every x, y and z of the cloud is finite: a NaN or a ±inf
  coordinate makes the cloud non-dense (REP 118 / sensor_msgs/PointCloud2: "True if there are no
  invalid points"). That holds for the clouds built from images (:func:`create_cloud`,
  :func:`create_cloud_from_depth`) and from a ready structured array
  (:func:`create_cloud_from_array`, which refuses ``is_dense=True`` for a cloud with a non-finite
  point). ``skip_nans`` drops the same points (NaN or ±inf in x, y, z).
* :func:`read_points` returns a structured array; :func:`read_points_numpy` returns a plain N×k
  array of the asked fields when they share one datatype, whatever other fields the cloud has (as
  ``sensor_msgs_py.point_cloud2.read_points_numpy``), and raises ValueError naming the fields and
  their datatypes otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.core.imageops import check_same_hw
from depth3dseg_ros.ros.msgutil import (
    alloc_uint8_field,
    as_uint8,
    build,
    convert_header,
    is_rosbags_cls,
    rclpy_cls,
    uint8_field,
)

# sensor_msgs/PointField datatype constants.
INT8, UINT8, INT16, UINT16, INT32, UINT32, FLOAT32, FLOAT64 = range(1, 9)
_TO_NP = {
    INT8: 'i1',
    UINT8: 'u1',
    INT16: 'i2',
    UINT16: 'u2',
    INT32: 'i4',
    UINT32: 'u4',
    FLOAT32: 'f4',
    FLOAT64: 'f8',
}
_FROM_NP = {np.dtype(v).newbyteorder('<').str[1:]: k for k, v in _TO_NP.items()}


def pack_rgb(rgb: np.ndarray) -> np.ndarray:
    """Pack ...×3 uint8 RGB into float32 whose bits are 0x00RRGGBB (PCL / RViz RGB8 layout, C14).

    The uint32 is built in numpy and *viewed* as float32, so signalling-NaN bit patterns survive
    (r=130 stays 0x82, never 0xC2).
    """
    c = np.asarray(rgb)
    if c.shape[-1:] != (3,) or c.dtype != np.uint8:
        raise ValueError(f'rgb shape={c.shape} dtype={c.dtype} must be ...×3 uint8')
    c = c.astype(np.uint32)
    return ((c[..., 0] << 16) | (c[..., 1] << 8) | c[..., 2]).view(np.float32)


def unpack_rgb(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_rgb`: float32 (or uint32) packed colours -> ...×3 uint8 RGB."""
    u = np.ascontiguousarray(packed).view(np.uint32)
    return np.stack([(u >> 16) & 0xFF, (u >> 8) & 0xFF, u & 0xFF], axis=-1).astype(np.uint8)


def dtype_from_fields(
    fields: Sequence[Any], point_step: int, is_bigendian: bool = False
) -> np.dtype:
    """Structured dtype of a cloud: names, formats, explicit offsets and ``itemsize = point_step``
    (C12).

    A field with count > 1 becomes a sub-array. Raises ValueError for an unknown datatype, a field
    that does not fit in point_step, or overlapping/duplicate names (field named).
    """
    order = '>' if is_bigendian else '<'
    names, formats, offsets = [], [], []
    for f in fields:
        if int(f.datatype) not in _TO_NP:
            raise ValueError(f'PointField {f.name!r} datatype={f.datatype} is not 1..8')
        base = np.dtype(order + _TO_NP[int(f.datatype)])
        count = max(int(f.count), 1)
        fmt = base if count == 1 else np.dtype((base, (count,)))
        if int(f.offset) + fmt.itemsize > int(point_step):
            raise ValueError(
                f'PointField {f.name!r} offset={f.offset} size={fmt.itemsize} '
                f'exceeds point_step={point_step}'
            )
        if f.name in names:
            raise ValueError(f'PointField name {f.name!r} appears twice')
        names.append(f.name), formats.append(fmt), offsets.append(int(f.offset))
    return np.dtype(
        {'names': names, 'formats': formats, 'offsets': offsets, 'itemsize': int(point_step)}
    )


def read_points(
    msg: Any,
    field_names: Sequence[str] | None = None,
    skip_nans: bool = False,
    organized: bool = False,
) -> np.ndarray:
    """PointCloud2 -> structured array (native byte order), honouring offsets, padding and
    row_step.

    Args:
        msg: PointCloud2 (rclpy or rosbags): fields, point_step, row_step, height, width,
            is_bigendian, data.
        field_names: fields to keep (default all, in the message's field order).
        skip_nans: drop points where any of x, y, z is non-finite (NaN or ±inf; result is flat).
        organized: return height×width instead of flat (ignored with skip_nans).
    Returns:
        structured ndarray (N,) or (height, width); a copy, safe to modify.
    Raises:
        ValueError: len(data) != height*row_step, row_step < width*point_step, bad fields, unknown
            names.
    """
    view, dt = _cloud_view(msg)
    names = _check_names(dt, field_names)
    h, w = view.shape
    out_dt = np.dtype([(n, dt.fields[n][0].newbyteorder('=')) for n in names])
    out = np.empty((h, w), dtype=out_dt)
    for n in names:
        out[n] = view[n]
    if skip_nans and {'x', 'y', 'z'} <= set(dt.names):
        return out[_finite_xyz(view)]
    return out if organized else out.reshape(-1)


def read_points_numpy(
    msg: Any,
    field_names: Sequence[str] | None = None,
    skip_nans: bool = False,
    organized: bool = False,
) -> np.ndarray:
    """PointCloud2 -> plain array of the asked fields, one column per field (``sensor_msgs_py``'s
    ``read_points_numpy``).

    The asked fields must share one PointField datatype; the cloud's *other* fields may be anything
    (e.g. ``field_names=['x', 'y', 'z']`` of a cloud x, y, z FLOAT32 + rgb FLOAT32 + label UINT32
    gives N×3 float32). A field with count > 1 contributes count columns.

    Args:
        msg: PointCloud2 (rclpy or rosbags), as for :func:`read_points`.
        field_names: fields in the wanted column order (default all the cloud's fields).
        skip_nans: drop points with a non-finite x, y or z (NaN or ±inf); the result is flat.
        organized: return height×width×k instead of N×k (ignored with skip_nans).
    Returns:
        ndarray (N, k) or (height, width, k), N = height*width (fewer with skip_nans), of the
        fields' common dtype in native byte order (e.g. float32 for FLOAT32); a copy, safe to
        modify.
    Raises:
        ValueError: the asked fields have different datatypes (message names each field and its
            datatype, e.g. ``x FLOAT32, label UINT32``), unknown names, or a malformed cloud (as
            :func:`read_points`).
    """
    view, dt = _cloud_view(msg)
    names = _check_names(dt, field_names)
    bases = {
        n: (dt.fields[n][0].base if dt.fields[n][0].shape else dt.fields[n][0]) for n in names
    }
    if len({b.newbyteorder('<') for b in bases.values()}) > 1:
        desc = ', '.join(
            f'{n} {_DATATYPE_NAMES[_FROM_NP[b.newbyteorder("<").str[1:]]]}'
            for n, b in bases.items()
        )
        raise ValueError(
            f'PointCloud2 fields of different datatypes cannot form one plain array: {desc}; '
            'ask for fields of one datatype or use read_points (structured array)'
        )
    h, w = view.shape
    base = next(iter(bases.values())).newbyteorder('=') if names else np.dtype(np.float32)
    cols = [np.asarray(view[n]).reshape(h, w, -1) for n in names]
    out = (
        np.concatenate(cols, axis=2).astype(base, copy=False)
        if cols
        else np.zeros((h, w, 0), base)
    )
    out = np.ascontiguousarray(out, dtype=base)
    if skip_nans and {'x', 'y', 'z'} <= set(dt.names):
        return out[_finite_xyz(view)]
    return out if organized else out.reshape(h * w, -1)


_DATATYPE_NAMES = {
    INT8: 'INT8',
    UINT8: 'UINT8',
    INT16: 'INT16',
    UINT16: 'UINT16',
    INT32: 'INT32',
    UINT32: 'UINT32',
    FLOAT32: 'FLOAT32',
    FLOAT64: 'FLOAT64',
}


def _cloud_view(msg: Any) -> tuple[np.ndarray, np.dtype]:
    """(height×width structured view of the message's points in its own byte order, that dtype)."""
    h, w, ps, rs = int(msg.height), int(msg.width), int(msg.point_step), int(msg.row_step)
    dt = dtype_from_fields(msg.fields, ps, bool(msg.is_bigendian))
    buf = as_uint8(msg.data)
    if rs < w * ps:
        raise ValueError(f'PointCloud2.row_step={rs} < width*point_step={w * ps}')
    if buf.size != h * rs:
        raise ValueError(f'PointCloud2 len(data)={buf.size} != height*row_step={h * rs}')
    rows = (
        np.ascontiguousarray(buf.reshape(h, rs)[:, : w * ps])
        if h * w
        else np.zeros((h, 0), np.uint8)
    )
    return rows.view(dt).reshape(h, w), dt


def _check_names(dt: np.dtype, field_names: Sequence[str] | None) -> list[str]:
    names = list(dt.names) if field_names is None else list(field_names)
    missing = [n for n in names if n not in dt.names]
    if missing:
        raise ValueError(f'PointCloud2 has no field(s) {missing}; fields are {list(dt.names)}')
    return names


def _finite_xyz(points: np.ndarray) -> np.ndarray:
    """Bool mask (points' shape): x, y and z all finite (NaN and ±inf are invalid; integer fields
    are finite)."""
    keep = np.ones(points.shape, bool)
    for n in ('x', 'y', 'z'):
        if points.dtype.names and n in points.dtype.names:
            v = np.asarray(points[n])
            if v.dtype.kind == 'f':
                fin = np.isfinite(v)
                keep &= fin if fin.ndim == keep.ndim else fin.reshape(*keep.shape, -1).all(axis=-1)
    return keep


def cloud_dtype(
    rgb: bool = True,
    labels: bool = True,
    confidence: bool = False,
    label_dtype: Any = np.uint32,
    point_step: int | None = None,
) -> np.dtype:
    """Packed little-endian dtype x, y, z (f4) [, rgb (f4)] [, label (u4/u2)] [, confidence (f4)].

    ``point_step`` larger than the packed size adds trailing padding (C12).
    """
    names, formats = ['x', 'y', 'z'], ['<f4'] * 3
    if rgb:
        names.append('rgb'), formats.append('<f4')
    if labels:
        ld = np.dtype(label_dtype)
        if ld not in (np.dtype(np.uint32), np.dtype(np.uint16)):
            raise ValueError(f'label_dtype={ld} must be uint32 or uint16 (C15)')
        names.append('label'), formats.append(ld.newbyteorder('<'))
    if confidence:
        names.append('confidence'), formats.append('<f4')
    offsets = np.cumsum([0] + [np.dtype(f).itemsize for f in formats])
    size = int(offsets[-1]) if point_step is None else int(point_step)
    if size < offsets[-1]:
        raise ValueError(f'point_step={point_step} < packed size {offsets[-1]}')
    return np.dtype(
        {'names': names, 'formats': formats, 'offsets': offsets[:-1].tolist(), 'itemsize': size}
    )


def fields_from_dtype(dt: np.dtype, msg_cls: type | None = None) -> list:
    """PointField list (name, offset, datatype, count) describing structured dtype ``dt``."""
    cls = _pointfield_cls(msg_cls)
    out = []
    for name in dt.names:
        fdt, off = dt.fields[name][:2]
        base, count = (fdt.base, int(np.prod(fdt.shape))) if fdt.shape else (fdt, 1)
        key = base.newbyteorder('<').str[1:]
        if key not in _FROM_NP:
            raise ValueError(f'field {name!r} dtype={base} has no PointField datatype')
        out.append(cls(name=name, offset=int(off), datatype=_FROM_NP[key], count=count))
    return out


def _pointfield_cls(msg_cls: type | None) -> type:
    if msg_cls is not None and is_rosbags_cls(msg_cls):
        return getattr(sys.modules[msg_cls.__module__], 'sensor_msgs__msg__PointField')
    return rclpy_cls('sensor_msgs/msg/PointField')


def create_cloud_from_array(
    header: Any, points: np.ndarray, is_dense: bool | None = None, msg_cls: type | None = None
) -> Any:
    """Structured array (H×W organized or N unorganized) -> PointCloud2 (sensor_msgs_py
    ``create_cloud``).

    point_step = ``points.dtype.itemsize`` (trailing padding kept), row_step = width*point_step,
    little-endian.

    ``is_dense``: None (default) = True exactly when every x, y, z is finite (no NaN, no ±inf; a
    cloud without x, y, z fields or with integer ones is dense); False is kept as given; True for a
    cloud with a non-finite x, y or z raises ValueError naming how many points are invalid (REP
    118: dense means no invalid points).
    Raises:
        ValueError: points not a 1-D/2-D structured array, a field dtype with no PointField
            datatype, or ``is_dense=True`` with non-finite coordinates.
    """
    pts = np.asarray(points)
    if pts.dtype.names is None or pts.ndim not in (1, 2):
        raise ValueError(
            f'points dtype={pts.dtype} shape={pts.shape} must be a 1-D or 2-D structured array'
        )
    if pts.ndim == 1:
        pts = pts.reshape(1, -1)
    h, w = pts.shape
    le = pts.dtype.newbyteorder('<') if pts.dtype.byteorder == '>' else pts.dtype
    pts = np.ascontiguousarray(pts, dtype=le)
    n_bad = int(pts.size - np.count_nonzero(_finite_xyz(pts)))
    if is_dense is None:
        is_dense = n_bad == 0
    elif is_dense and n_bad:
        raise ValueError(
            f'is_dense=True but {n_bad} of {pts.size} points have a non-finite x, y or z '
            '(NaN or inf); pass is_dense=None to compute it'
        )
    cls = msg_cls or rclpy_cls('sensor_msgs/msg/PointCloud2')
    return build(
        cls,
        header=convert_header(header, cls),
        height=h,
        width=w,
        fields=fields_from_dtype(pts.dtype, cls),
        is_bigendian=False,
        point_step=pts.dtype.itemsize,
        row_step=w * pts.dtype.itemsize,
        data=uint8_field(pts.view(np.uint8), cls),
        is_dense=bool(is_dense),
    )


def pack_cloud(
    xyz: np.ndarray,
    rgb: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
    organized: bool = True,
    stride: int = 1,
    label_dtype: Any = np.uint32,
    alloc: Callable[[int], np.ndarray] | None = None,
) -> tuple[np.ndarray, bool]:
    """Fill the labelled-cloud structured array from H×W images (M9); no message involved.

    Args:
        xyz: H×W×3 float32 organized cloud in metres, NaN where invalid
            (core.geometry.backproject_np).
        rgb: H×W×3 uint8 RGB; labels: H×W integer ids (< 2**32, or < 2**16 for uint16);
        confidence: H×W float. All must share H×W (C20: else ValueError naming both sizes).
        organized: keep H×W with NaN x, y, z for invalid points; else drop them (height 1).
        stride: keep every stride-th row and column (decimation, C25).
        alloc: optional ``nbytes -> writable 1-D uint8 array`` giving the memory to fill (e.g. the
            message's own data buffer); default a new numpy array.
    Returns:
        (points structured array (h, w) or (1, N), is_dense): is_dense True only when every kept
        x, y, z is finite (organized: no input point had a NaN/±inf coordinate; unorganized:
        always, the non-finite points are dropped).
    """
    if int(stride) < 1:
        raise ValueError(f'stride={stride} must be >= 1')
    p = np.asarray(xyz)
    if p.ndim != 3 or p.shape[2] != 3:
        raise ValueError(f'xyz shape={p.shape} must be H×W×3')
    check_same_hw(xyz=p, rgb=rgb, labels=labels, confidence=confidence)
    s = int(stride)
    if s > 1:
        p, rgb, labels, confidence = (
            None if a is None else np.asarray(a)[::s, ::s] for a in (p, rgb, labels, confidence)
        )
    valid = np.isfinite(p[..., 0]) & np.isfinite(p[..., 1]) & np.isfinite(p[..., 2])
    dt = cloud_dtype(rgb is not None, labels is not None, confidence is not None, label_dtype)
    if labels is not None:
        lab = np.asarray(labels)
        if lab.dtype.kind not in 'iu' or (
            lab.size and (lab.min() < 0 or lab.max() > np.iinfo(dt['label']).max)
        ):
            raise ValueError(
                f'labels dtype={lab.dtype} must be ids in 0..{np.iinfo(dt["label"]).max}'
            )
    if not organized:
        keep = valid.reshape(-1)

        def sel(
            a, c
        ):  # the valid points of a per-pixel array (c channels, 0 = none), None stays None
            return None if a is None else np.asarray(a).reshape(-1, *([c] if c else []))[keep]

        p, rgb, labels, confidence = sel(p, 3), sel(rgb, 3), sel(labels, 0), sel(confidence, 0)
        p = p.reshape(1, -1, 3)
        rgb, labels, confidence = (
            None if a is None else a.reshape(1, -1, *a.shape[1:])
            for a in (rgb, labels, confidence)
        )
    h, w = p.shape[:2]
    buf = np.empty(h * w * dt.itemsize, np.uint8) if alloc is None else alloc(h * w * dt.itemsize)
    out = buf.view(dt).reshape(h, w)
    raw = buf.reshape(h, w, dt.itemsize)
    src = np.ascontiguousarray(p, dtype=np.float32)
    raw[:, :, :12].view('V12')[..., 0] = src.view('V12')[..., 0]  # one 12-byte copy per point
    if organized and not valid.all():
        raw.reshape(h * w, dt.itemsize)[:, :12].view(np.float32)[np.flatnonzero(~valid)] = np.nan
    if rgb is not None:
        c = np.asarray(rgb)
        if c.dtype != np.uint8:
            raise ValueError(f'rgb dtype={c.dtype} must be uint8')
        # little-endian uint32 0x00RRGGBB = bytes (b, g, r, 0): written as bytes, never as a float
        # (C14)
        raw[:, :, 12], raw[:, :, 13], raw[:, :, 14], raw[:, :, 15] = (
            c[..., 2],
            c[..., 1],
            c[..., 0],
            0,
        )
    if labels is not None:
        out['label'] = labels
    if confidence is not None:
        out['confidence'] = confidence
    return out, bool(valid.all()) if organized else True


def create_cloud(
    header: Any,
    xyz: np.ndarray,
    rgb: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
    organized: bool = True,
    stride: int = 1,
    label_dtype: Any = np.uint32,
    msg_cls: type | None = None,
) -> Any:
    """Labelled PointCloud2 (M9) from an organized H×W×3 cloud and per-pixel
    colour/label/confidence.

    Fields x, y, z FLOAT32 (offsets 0/4/8), rgb FLOAT32 (12, packed 0x00RRGGBB bits), label UINT32
    or UINT16, confidence FLOAT32; point_step = packed size (20 for x,y,z,rgb,label); row_step =
    width*point_step; is_dense True only when every x, y, z is finite (an organized cloud stores a
    point with a NaN or ±inf coordinate as NaN, NaN, NaN and is not dense; an unorganized one drops
    it). See :func:`pack_cloud` for the arguments (C09 invalid never (0,0,0); C14/C15 rgb; C20
    sizes; C25 stride/unorganized). msg_cls None = rclpy sensor_msgs.msg.PointCloud2, or a rosbags
    typestore class.
    """
    cls = msg_cls or rclpy_cls('sensor_msgs/msg/PointCloud2')
    field: list = []

    def alloc(nbytes: int) -> np.ndarray:  # pack straight into the message's data buffer
        value, view = alloc_uint8_field(nbytes, cls)
        field.append(value)
        return view

    pts, dense = pack_cloud(
        xyz, rgb, labels, confidence, organized, stride, label_dtype, alloc=alloc
    )
    h, w = pts.shape
    return build(
        cls,
        header=convert_header(header, cls),
        height=h,
        width=w,
        fields=fields_from_dtype(pts.dtype, cls),
        is_bigendian=False,
        point_step=pts.dtype.itemsize,
        row_step=w * pts.dtype.itemsize,
        data=field[0],
        is_dense=bool(dense),
    )


def create_cloud_from_depth(
    header: Any,
    depth_m: np.ndarray,
    K: np.ndarray,
    rgb: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
    organized: bool = True,
    stride: int = 1,
    label_dtype: Any = np.uint32,
    msg_cls: type | None = None,
) -> Any:
    """Back-project H×W depth (float32 m, NaN/0 invalid) with K (core.geometry, M2) and pack the
    cloud."""
    check_same_hw(depth=depth_m, rgb=rgb, labels=labels, confidence=confidence)
    return create_cloud(
        header,
        backproject_np(depth_m, K),
        rgb,
        labels,
        confidence,
        organized,
        stride,
        label_dtype,
        msg_cls,
    )


def write_ply(
    path: str | Path,
    xyz: np.ndarray,
    rgb: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    drop_invalid: bool = True,
) -> int:
    """Write a labelled cloud as binary little-endian PLY: float x y z, uchar red green blue, uint
    label.

    Args:
        xyz: N×3 or H×W×3 float (m); rgb: matching uint8 RGB; labels: matching integer ids (>= 0).
        drop_invalid: leave out points with a non-finite coordinate.
    Returns:
        number of vertices written.
    """
    p = np.asarray(xyz, dtype=np.float32).reshape(-1, 3)
    cols = [('x', '<f4'), ('y', '<f4'), ('z', '<f4')]
    if rgb is not None:
        c = np.asarray(rgb)
        if c.dtype != np.uint8 or c.size != p.size:
            raise ValueError(
                f'rgb shape={c.shape} dtype={c.dtype} must be uint8 with one colour per point'
            )
        cols += [('red', 'u1'), ('green', 'u1'), ('blue', 'u1')]
    if labels is not None:
        lab = np.asarray(labels).reshape(-1)
        if lab.size != len(p) or lab.dtype.kind not in 'iu' or (lab.size and lab.min() < 0):
            raise ValueError(
                f'labels shape={np.shape(labels)} dtype={lab.dtype} must be one id >= 0 per point'
            )
        cols += [('label', '<u4')]
    keep = np.isfinite(p).all(axis=1) if drop_invalid else np.ones(len(p), bool)
    out = np.empty(int(keep.sum()), dtype=cols)
    out['x'], out['y'], out['z'] = p[keep, 0], p[keep, 1], p[keep, 2]
    if rgb is not None:
        c = np.asarray(rgb).reshape(-1, 3)[keep]
        out['red'], out['green'], out['blue'] = c[:, 0], c[:, 1], c[:, 2]
    if labels is not None:
        out['label'] = lab[keep]
    ply_types = {'<f4': 'float', 'u1': 'uchar', '<u4': 'uint'}
    head = ['ply', 'format binary_little_endian 1.0', f'element vertex {len(out)}']
    head += [f'property {ply_types[t]} {n}' for n, t in cols] + ['end_header']
    with open(path, 'wb') as fh:
        fh.write(('\n'.join(head) + '\n').encode('ascii'))
        fh.write(out.tobytes())
    return len(out)
