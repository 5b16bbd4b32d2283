"""What the node is wired from: its output topic names (image_transport layout), QoS profiles, the
model file it loads and the Segmenter built for its parameters. Plain functions and constants, so
tools and tests can name the node's topics without starting it.
"""

from __future__ import annotations

import os
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from depth3dseg_ros.node.outputs import COMPRESSED_KEYS
from depth3dseg_ros.node.params import NodeParams
from depth3dseg_ros.paths import share_file

SHIPPED_MODEL = ('models', 'depth3dseg_nyu13.pt')
IMAGE_OUTPUTS = ('labels', 'overlay', 'mask', 'depth')
OUTPUTS = IMAGE_OUTPUTS + ('points',)


def image_topic(name: str) -> str:
    """The private topic of image output ``name``: ``~/<name>/image``."""
    return f'~/{name}/image'


def info_topic(name: str) -> str:
    """The camera_info beside image output ``name``: ``~/<name>/camera_info`` (image_transport's
    rule: the image topic's namespace + ``/camera_info``)."""
    return f'~/{name}/camera_info'


def compressed_topic(name: str, transport: str) -> str:
    """The image_transport sub-topic ``~/<name>/image/<transport>`` (``compressed`` for PNG/JPEG,
    ``compressedDepth`` for compressed_depth_image_transport's format)."""
    return f'{image_topic(name)}/{transport}'


def key_topic(key: str) -> str:
    """The topic of publisher key ``key`` (node/outputs.py): ``labels`` -> ``~/labels/image``,
    ``labels/compressed`` -> ``~/labels/image/compressed``, ``labels/camera_info`` ->
    ``~/labels/camera_info``, ``points`` -> ``~/points``.

    Raises:
        ValueError: an unknown key.
    """
    name, _, sub = key.partition('/')
    if name in IMAGE_OUTPUTS and sub == '':
        return image_topic(name)
    if name in IMAGE_OUTPUTS and sub == 'camera_info':
        return info_topic(name)
    if COMPRESSED_KEYS.get(name) == key:  # labels/compressed, depth/compressedDepth, ...
        return compressed_topic(name, sub)
    if key in ('points', 'classes'):
        return f'~/{key}'
    raise ValueError(f'publisher key={key!r} names no output topic')


#: every output topic (relative to the node) -> message type name, with the default switches
#: (the compressed outputs, off by default, are ``COMPRESSED_TOPICS``)
OUTPUT_TOPICS = {
    **{image_topic(n): 'sensor_msgs/msg/Image' for n in IMAGE_OUTPUTS},
    **{info_topic(n): 'sensor_msgs/msg/CameraInfo' for n in IMAGE_OUTPUTS},
    '~/points': 'sensor_msgs/msg/PointCloud2',
    '~/classes': 'std_msgs/msg/String',
}
#: the optional compressed outputs (issue 14; publish_<name>_compressed)
COMPRESSED_TOPICS = {
    key_topic(key): 'sensor_msgs/msg/CompressedImage' for key in COMPRESSED_KEYS.values()
}


def resolve_model_file(model_file: str) -> str:
    """``model_file`` or, when empty, the shipped model from the share dir.

    Raises:
        FileNotFoundError: naming the parameter and the path(s) looked at.
    """
    if model_file:
        if not os.path.isfile(model_file):
            raise FileNotFoundError(f'parameter model_file={model_file!r}: no such file')
        return model_file
    try:
        return str(share_file(*SHIPPED_MODEL))
    except FileNotFoundError as err:
        raise FileNotFoundError(f"parameter model_file='' (the shipped model): {err}") from None


def resolve_geometry_model(p: NodeParams) -> str | None:
    """The geometry model file the Segmenter gets: ``p.geometry_model`` when it is set and
    ``p.use_measured_depth`` is on (it labels the measured depth), else None.

    Raises:
        FileNotFoundError: naming the parameter, for a path that is not a file.
    """
    if not p.geometry_model or not p.use_measured_depth:
        return None
    if os.path.isdir(p.geometry_model):
        raise FileNotFoundError(
            f'parameter geometry_model={p.geometry_model!r} is a directory: give the model file '
            'in it'
        )
    if not os.path.isfile(p.geometry_model):
        raise FileNotFoundError(f'parameter geometry_model={p.geometry_model!r}: no such file')
    return p.geometry_model


def make_qos(reliability: str, depth: int, transient_local: bool = False) -> QoSProfile:
    """KEEP_LAST ``depth`` QoS with ``reliability`` in {'reliable', 'best_effort'} (C24)."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=int(depth),
        reliability=(
            ReliabilityPolicy.RELIABLE
            if reliability == 'reliable'
            else ReliabilityPolicy.BEST_EFFORT
        ),
        durability=(
            DurabilityPolicy.TRANSIENT_LOCAL if transient_local else DurabilityPolicy.VOLATILE
        ),
    )


def default_segmenter(p: NodeParams, model_file: str) -> Any:
    """The real ``core.inference.Segmenter`` for these parameters."""
    from depth3dseg_ros.core.inference import Segmenter

    return Segmenter(
        model_file,
        device=p.device,
        half=p.half,
        input_size=p.input_size,
        num_threads=p.torch_threads or None,
        backend=p.backend,
        geometry_model=resolve_geometry_model(p),
        geometry_weight=p.geometry_weight,
    )
