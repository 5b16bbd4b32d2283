"""What the node is wired from: its output topic names (image_transport layout), QoS profiles, the
model file it loads and the Segmenter built for its parameters. Plain functions and constants, so
tools and tests can name the node's topics without starting it.
"""

from __future__ import annotations

import os
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

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


#: every output topic (relative to the node) -> message type name
OUTPUT_TOPICS = {
    **{image_topic(n): 'sensor_msgs/msg/Image' for n in IMAGE_OUTPUTS},
    **{info_topic(n): 'sensor_msgs/msg/CameraInfo' for n in IMAGE_OUTPUTS},
    '~/points': 'sensor_msgs/msg/PointCloud2',
    '~/classes': 'std_msgs/msg/String',
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
    )
