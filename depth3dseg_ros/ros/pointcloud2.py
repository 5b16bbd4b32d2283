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
from typing import Any, Callable

import numpy as np

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.core.imageops import check_same_hw
from depth3dseg_ros.ros.msgutil import (
    alloc_uint8_field,
    build,
    convert_header,
    is_rosbags_cls,
    rclpy_cls,
    uint8_field,
)

# The reader half (and the PointField datatype tables both halves use), re-exported here.
from depth3dseg_ros.ros.pointcloud2_read import (  # noqa: F401 - re-exported API
    FLOAT32,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    UINT8,
    UINT16,
    UINT32,
    _FROM_NP,
    _finite_xyz,
    _with_byteorder,
    dtype_from_fields,
    read_points,
    read_points_numpy,
    unpack_rgb,
)


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


def _cloud_msg(cls: type, header: Any, pts: np.ndarray, data: Any, is_dense: bool) -> Any:
    """A PointCloud2 of class ``cls`` for the H×W structured array ``pts`` whose bytes are ``data``
    (little-endian, point_step = itemsize, row_step = width × point_step)."""
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
        data=data,
        is_dense=bool(is_dense),
    )


def create_cloud_from_array(
    header: Any, points: np.ndarray, is_dense: bool | None = None, msg_cls: type | None = None
) -> Any:
    """Structured array (H×W organized or N unorganized) -> PointCloud2 (sensor_msgs_py
    ``create_cloud``).

    point_step = ``points.dtype.itemsize`` (trailing padding kept), field offsets those of the
    dtype, row_step = width*point_step, little-endian (fields of a big-endian dtype are converted,
    values kept).

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
    pts = np.ascontiguousarray(pts, dtype=_with_byteorder(pts.dtype, '<'))  # '>' fields' values
    n_bad = int(pts.size - np.count_nonzero(_finite_xyz(pts)))
    if is_dense is None:
        is_dense = n_bad == 0
    elif is_dense and n_bad:
        raise ValueError(
            f'is_dense=True but {n_bad} of {pts.size} points have a non-finite x, y or z '
            '(NaN or inf); pass is_dense=None to compute it'
        )
    cls = msg_cls or rclpy_cls('sensor_msgs/msg/PointCloud2')
    return _cloud_msg(cls, header, pts, uint8_field(pts.view(np.uint8), cls), is_dense)


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
        rgb: H×W×3 uint8 RGB (else ValueError naming shape and dtype); labels: H×W integer ids
            (< 2**32, or < 2**16 for uint16);
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
    if rgb is not None:
        c = np.asarray(rgb)
        if c.ndim != 3 or c.shape[2] != 3 or c.dtype != np.uint8:  # C05/C20: no mono or RGBA
            raise ValueError(
                f'rgb shape={c.shape} dtype={c.dtype} must be H×W×3 uint8 (convert mono or '
                'four-channel images to RGB first: ros.image.to_rgb)'
            )
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
    return _cloud_msg(cls, header, pts, field[0], dense)


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
