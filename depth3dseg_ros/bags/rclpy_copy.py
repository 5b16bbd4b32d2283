"""rosbags message objects to rclpy messages, for ``depth3dseg-replay`` (bags.replay): the rclpy
class of a ``pkg/msg/Name`` type, and a field-by-field copy of a decoded message (a ROS 1 bag's,
whose spellings differ: ``Header.seq``, CameraInfo ``K``/``k``) into it.

Imports nothing heavy at module level (numpy where used; rclpy packages by name), so the replay
CLI can install its signal handlers first (C40).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ['ros_msg_class', 'to_rclpy']


def ros_msg_class(msgtype: str) -> type:
    """``'sensor_msgs/msg/Image'`` -> the rclpy class ``sensor_msgs.msg.Image``.

    Raises:
        ValueError: the name is not ``pkg/msg/Name`` or the package/type is not installed.
    """
    parts = msgtype.split('/')
    if len(parts) != 3 or parts[1] != 'msg':
        raise ValueError(f'message type {msgtype!r} is not of the form pkg/msg/Name')
    try:
        return getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])
    except (ImportError, AttributeError):
        raise ValueError(f'message type {msgtype!r} is not installed for rclpy') from None


def to_rclpy(obj: Any, cls: type) -> Any:
    """Copy a rosbags message object (e.g. decoded from a ROS 1 bag) into the rclpy class ``cls``.

    Fields are matched by the rclpy name, then its upper-case ROS 1 spelling (CameraInfo
    ``K``/``k``); fields the rclpy type lacks (ROS 1 ``Header.seq``) are dropped, nested messages
    are copied recursively.

    Raises:
        ValueError: a field of ``cls`` is missing from ``obj`` (naming the type and field).
    """
    import numpy as np

    out = cls()
    for name, ftype in cls.get_fields_and_field_types().items():
        src = name if hasattr(obj, name) else name.upper()
        if not hasattr(obj, src):
            raise ValueError(
                f'{cls.__name__}.{name}: no such field in the bag message {type(obj).__name__}'
            )
        value = getattr(obj, src)
        current = getattr(out, name)
        if hasattr(current, 'get_fields_and_field_types'):
            value = to_rclpy(value, type(current))
        elif ftype.startswith('sequence<') and '/' in ftype:
            elem = ros_msg_class(ftype[len('sequence<') : -1].replace('/', '/msg/', 1))
            value = [to_rclpy(v, elem) for v in value]
        elif isinstance(value, np.ndarray) and ftype in ('sequence<uint8>', 'uint8[]'):
            value = value.tobytes()
        setattr(out, name, value)
    return out
