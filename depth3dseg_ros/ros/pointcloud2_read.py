"""Reading sensor_msgs/PointCloud2 into numpy: the reader half of ros.pointcloud2 (re-exported
there).

The dtype always carries explicit ``offsets`` and ``itemsize = point_step`` and rows are cut at
``row_step`` (C12). :func:`read_points` returns a structured array; :func:`read_points_numpy` a
plain N×k array of fields that share one datatype (as
``sensor_msgs_py.point_cloud2.read_points_numpy``), ValueError naming the fields and their
datatypes otherwise. ``skip_nans`` drops points whose x, y or z is NaN or ±inf (the same rule that
makes a cloud non-dense, REP 118).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from depth3dseg_ros.ros.msgutil import as_uint8

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

    The array keeps the message's layout (each field at its offset, ``itemsize = point_step``,
    padding bytes zero), as sensor_msgs_py's ``read_points`` does, so that
    ``create_cloud_from_array(header, read_points(msg))`` writes the same fields, offsets and
    point_step back (C12: a driver's padded layout, e.g. 48-byte points, survives a round trip).

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
    out = np.zeros((h, w), dtype=_with_byteorder(dt, '=', names))
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


def _with_byteorder(dt: np.dtype, order: str, names: Sequence[str] | None = None) -> np.dtype:
    """Structured ``dt`` (its fields ``names``, default all) with every field in byte ``order``
    ('<', '>', '='), offsets and itemsize kept: the layout of a cloud's points. A structured
    dtype's own byteorder is '|' whatever its fields are, so each field is converted."""
    names = list(dt.names) if names is None else list(names)
    return np.dtype(
        {
            'names': names,
            'formats': [dt.fields[n][0].newbyteorder(order) for n in names],
            'offsets': [dt.fields[n][1] for n in names],
            'itemsize': dt.itemsize,
        }
    )


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
