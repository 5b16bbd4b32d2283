"""Duck-typed helpers shared by the message adapters (rclpy messages and rosbags messages alike).

rclpy gives ``data`` as ``array.array('B')`` and ``k``/``d`` as numpy arrays; rosbags gives
``data`` as a numpy ``uint8`` array and builds messages as dataclasses whose constructor wants
every field. Both kinds are read here through the buffer protocol, and built with the one fast path
each kind allows (measured in bench/bench_msgs.py: ``array('B').frombytes(memoryview)`` is ~0.7 ms
for a 6 MB frame, whereas assigning ``bytes`` to an rclpy field walks every element, ~1.6 ms per
100 kB).
"""

from __future__ import annotations

import array
import dataclasses
import importlib
import sys
from typing import Any

import numpy as np


def as_uint8(data: Any) -> np.ndarray:
    """Return ``data`` (bytes, bytearray, memoryview, array('B'), numpy uint8, list of ints) as a
    1-D uint8 view.

    Zero-copy for every buffer-protocol object; a list/tuple of ints is copied.

    Raises:
        ValueError: ``data`` is a numpy array whose dtype is not 1 byte wide.
    """
    if isinstance(data, np.ndarray):
        if data.dtype.itemsize != 1:
            raise ValueError(f'data dtype={data.dtype} is not a byte array')
        return data.reshape(-1).view(np.uint8)
    if isinstance(data, (list, tuple)):
        return np.asarray(data, dtype=np.uint8)
    return np.frombuffer(data, dtype=np.uint8)


def is_rosbags_cls(msg_cls: type) -> bool:
    """True for a rosbags typestore class (a dataclass with ``__msgtype__``), False for rclpy
    classes."""
    return dataclasses.is_dataclass(msg_cls) and hasattr(msg_cls, '__msgtype__')


def rclpy_cls(msgtype: str) -> type:
    """Import an rclpy message class by ROS name, e.g. ``'sensor_msgs/msg/Image'`` (lazy
    import)."""
    pkg, _, name = msgtype.split('/')
    return getattr(importlib.import_module(f'{pkg}.msg'), name)


def _rosbags_nested_cls(msg_cls: type, field: str) -> type:
    """The rosbags class of the nested-message field ``field`` of ``msg_cls`` (e.g. Header of
    Image)."""
    ftype = {f.name: f.type for f in dataclasses.fields(msg_cls)}[field]
    if isinstance(ftype, str):
        name = ftype.removeprefix('list[').removesuffix(']')
        return getattr(sys.modules[msg_cls.__module__], name)
    return ftype


def convert_header(header: Any, msg_cls: type) -> Any:
    """Return a std_msgs/Header usable in a ``msg_cls`` message, copied from ``header`` (any kind)
    or empty.

    Stamp (sec, nanosec) and frame_id are copied; a header of the right kind is used as is.
    """
    if is_rosbags_cls(msg_cls):
        hcls = _rosbags_nested_cls(msg_cls, 'header')
        tcls = _rosbags_nested_cls(hcls, 'stamp')
        if isinstance(header, hcls):
            return header
    else:
        hcls = rclpy_cls('std_msgs/msg/Header')
        tcls = rclpy_cls('builtin_interfaces/msg/Time')
        if header is not None and isinstance(header, hcls):
            return header
    if header is None:
        return hcls(stamp=tcls(sec=0, nanosec=0), frame_id='')
    stamp = header.stamp
    return hcls(
        stamp=tcls(sec=int(stamp.sec), nanosec=int(stamp.nanosec)), frame_id=str(header.frame_id)
    )


def uint8_field(arr: np.ndarray, msg_cls: type) -> Any:
    """The bytes of C-contiguous ``arr`` in the form ``msg_cls``'s uint8[] field wants (one copy).

    rclpy: ``array.array('B')`` filled from a memoryview (the setter keeps it without checking
    elements);
    rosbags: a 1-D numpy uint8 array.
    """
    arr = np.ascontiguousarray(arr)
    if is_rosbags_cls(msg_cls):
        return arr.reshape(-1).view(np.uint8).copy()
    out = array.array('B')
    if arr.size:
        out.frombytes(memoryview(arr.reshape(-1).view(np.uint8)))
    return out


def alloc_uint8_field(nbytes: int, msg_cls: type) -> tuple[Any, np.ndarray]:
    """A zeroed uint8[] field value of ``nbytes`` for ``msg_cls`` and a writable numpy view of it.

    Lets a writer fill the message's own buffer in place (no extra copy of a large cloud): rclpy
    gets an ``array('B')`` (the view shares its memory), rosbags a numpy array (the view is the
    array).
    """
    if is_rosbags_cls(msg_cls):
        arr = np.zeros(int(nbytes), dtype=np.uint8)
        return arr, arr
    field = array.array('B', b'\0') * int(nbytes)
    return field, np.frombuffer(field, dtype=np.uint8)


def float64_field(values: Any, msg_cls: type) -> Any:
    """A float64[] / float64[N] field value for ``msg_cls``: a fresh 1-D float64 numpy array.

    Both kinds accept it (rclpy converts an unbounded ``d`` to ``array('d')`` itself).
    """
    return np.array(values, dtype=np.float64).reshape(-1)


def build(msg_cls: type, **fields: Any) -> Any:
    """Construct ``msg_cls`` from keyword fields (rosbags dataclasses need all of them, rclpy takes
    any).

    For rclpy, ``data`` is assigned after construction: the generated constructor runs
    ``array.array('B', data)``, an element-by-element copy (~10 ms for 6 MB), whereas the setter
    keeps an ``array('B')`` as is.
    """
    if is_rosbags_cls(msg_cls):
        return msg_cls(**fields)
    data = fields.pop('data', None)
    msg = msg_cls(**fields)
    if data is not None:
        msg.data = data
    return msg
