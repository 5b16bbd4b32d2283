"""What one frame publishes, as pure functions (no rclpy import; the ros converters build rclpy
messages by default): the class palette applied to the labels, the image messages of every
switched-on output (raw and compressed, issue 14) and the cloud's colour.

The node (node/node.py) creates a publisher per :func:`publisher_specs` entry and publishes each
``(key, message)`` of :func:`image_messages` on the publisher of that key, then the cloud.

Keys (publisher and topic, topics in node/wiring.py):

====================== ===================================== ===========================
key                    topic                                 switch
====================== ===================================== ===========================
labels                 ~/labels/image                        publish_labels
labels/compressed      ~/labels/image/compressed (PNG)       publish_labels_compressed
overlay                ~/overlay/image                       publish_overlay
overlay/compressed     ~/overlay/image/compressed (JPEG)     publish_overlay_compressed
mask                   ~/mask/image                          publish_mask
depth                  ~/depth/image                         publish_depth
depth/compressedDepth  ~/depth/image/compressedDepth         publish_depth_compressed
<name>/camera_info     ~/<name>/camera_info                  the raw or compressed switch
points                 ~/points                              publish_points
====================== ===================================== ===========================

A compressed switch is independent of the raw one (``publish_overlay: false`` with
``publish_overlay_compressed: true`` sends only the JPEG, e.g. over a radio link); the
camera_info beside an image goes out when either does.

Lazy outputs (``lazy_outputs``, default true): of the switched-on keys, a frame builds and
publishes only those whose publisher has subscribers (:func:`wanted_outputs`), as image_transport
and image_proc nodes do.
"""

from __future__ import annotations

from typing import Any, Callable, Container, Mapping

import numpy as np

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.core.imageops import colorize_labels, overlay
from depth3dseg_ros.core.palette import ClassPalette
from depth3dseg_ros.node.params import NodeParams
from depth3dseg_ros.ros.compressed_out import depth_compressed_depth, labels_png, overlay_jpeg
from depth3dseg_ros.ros.image import cv2_to_imgmsg

IMAGE_OUTPUTS = ('labels', 'overlay', 'mask', 'depth')
#: compressed output -> its key (the sub-topic of ``~/<name>/image``: image_transport's names)
COMPRESSED_KEYS = {
    'labels': 'labels/compressed',
    'overlay': 'overlay/compressed',
    'depth': 'depth/compressedDepth',
}
IMAGE_TYPE = 'sensor_msgs/msg/Image'
COMPRESSED_TYPE = 'sensor_msgs/msg/CompressedImage'
INFO_TYPE = 'sensor_msgs/msg/CameraInfo'
CLOUD_TYPE = 'sensor_msgs/msg/PointCloud2'


def compressed_on(p: NodeParams, name: str) -> bool:
    """``publish_<name>_compressed`` (False for outputs without a compressed form)."""
    return name in COMPRESSED_KEYS and bool(getattr(p, f'publish_{name}_compressed'))


def publisher_specs(p: NodeParams) -> list[tuple[str, str]]:
    """``(key, message type)`` of every publisher the switches in ``p`` need (table above)."""
    specs = []
    for name in IMAGE_OUTPUTS:
        raw, comp = bool(getattr(p, f'publish_{name}')), compressed_on(p, name)
        if raw:
            specs.append((name, IMAGE_TYPE))
        if comp:
            specs.append((COMPRESSED_KEYS[name], COMPRESSED_TYPE))
        if raw or comp:
            specs.append((f'{name}/camera_info', INFO_TYPE))
    if p.publish_points:
        specs.append(('points', CLOUD_TYPE))
    return specs


def wanted_outputs(
    p: NodeParams, subscribers: Mapping[str, int], have: Container[str]
) -> frozenset[str]:
    """The keys (table above) one frame builds and publishes, from the switches in ``p``, the
    subscriber count of each publisher and the keys that have a publisher.

    With ``lazy_outputs`` false: every switched-on key in ``have`` (always publish; for recorders
    that subscribe late). With it true (default), the "lazy" rule of image_transport: a
    ``CameraPublisher``/plugin publisher builds and sends a transport's message only when that
    transport has subscribers (``getNumSubscribers()``), and image_proc / depth_image_proc nodes
    do no work for outputs nobody subscribes. Here, per key:

    * an image key (raw ``<name>`` or its compressed ``COMPRESSED_KEYS[name]``): switched on and
      ``subscribers[key] > 0`` (the image array itself is computed once when either form is
      wanted, node/outputs.py ``image_messages``);
    * ``<name>/camera_info``: the image is switched on (raw or compressed) and either form of the
      image is wanted or the camera_info itself has subscribers (CameraInfo is cheap);
    * ``points``: ``publish_points`` and ``subscribers['points'] > 0``.

    ``~/classes`` and ``/diagnostics`` are not keys here: they are always published.

    Args:
        p: this frame's parameters (``publish_*`` switches, ``lazy_outputs``).
        subscribers: ``{key: Publisher.get_subscription_count()}`` (a key missing counts 0).
        have: the keys that have a publisher (others are never wanted).
    Returns:
        the wanted keys (empty when nothing is subscribed: the frame publishes nothing).
    Raises:
        nothing (a key in ``subscribers`` that is not an output is ignored).
    """
    on = [key for key, _ in publisher_specs(p) if key in have]
    if not p.lazy_outputs:
        return frozenset(on)

    def subscribed(key: str) -> bool:
        return key in on and subscribers.get(key, 0) > 0

    wanted = {key for key in on if not key.endswith('/camera_info') and subscribed(key)}
    for name in IMAGE_OUTPUTS:
        info = f'{name}/camera_info'
        image_wanted = name in wanted or COMPRESSED_KEYS.get(name) in wanted
        if info in on and (image_wanted or subscribed(info)):
            wanted.add(info)
    return frozenset(wanted)


def cloud_colors(
    p: NodeParams, rgb: np.ndarray, class_colors: Callable[[], np.ndarray]
) -> np.ndarray:
    """The cloud's ``rgb`` field source (H×W×3 uint8 RGB) by ``cloud_rgb``: ``camera`` = ``rgb``
    (the image the labels belong to), ``class`` = ``class_colors()``, each pixel's class colour
    (``colorize_labels(output labels, palette.colors)``, the same array as ~/mask/image)."""
    return class_colors() if p.cloud_rgb == 'class' else rgb


def image_messages(
    p: NodeParams,
    header: Any,
    labels: np.ndarray,
    depth: np.ndarray,
    rgb: np.ndarray,
    info: Any,
    palette: ClassPalette,
    have: Container[str],
    mask: Callable[[], np.ndarray] | None = None,
) -> list[tuple[str, Any]]:
    """The image messages of one frame, in publishing order, for the switched-on keys in ``have``
    (the node passes :func:`wanted_outputs`: a key not in it is neither built nor published).

    Args:
        p: this frame's parameters (switches, alpha, encodings, quality, level, max_depth).
        header: the input image's header (copied into every message).
        labels: (h, w) uint8/uint16 output class ids (after ``palette.relabel``).
        depth: (h, w) float32 metres, NaN = no data.
        rgb: (h, w, 3) uint8 RGB at the same size (the overlay's background).
        info: the CameraInfo for (w, h), or None (then no camera_info is published).
        palette: the output palette (colours of the overlay and mask).
        have: the keys to publish (others are skipped and not built).
        mask: optional cached ``colorize_labels(labels, palette.colors)``.
    Returns:
        ``[(key, message)]``; a camera_info entry follows each output whose camera_info key is in
        ``have`` (with ``wanted_outputs``: the image is sent or the camera_info is subscribed).
    Raises:
        ValueError: from the converters/encoders (bad arrays), never for valid frame outputs.
    """
    out: list[tuple[str, Any]] = []
    colors = palette.colors
    cache: dict[str, np.ndarray] = {}

    def overlay_rgb() -> np.ndarray:
        if 'overlay' not in cache:
            cache['overlay'] = overlay(rgb, labels, colors, p.overlay_alpha)
        return cache['overlay']

    def depth_pair() -> tuple[np.ndarray, str]:
        if p.depth_encoding == '16UC1':
            return meters_to_16uc1(depth), '16UC1'
        return depth, '32FC1'

    label_enc = 'mono8' if labels.dtype == np.uint8 else '16UC1'
    raw: dict[str, Callable[[], Any]] = {
        'labels': lambda: cv2_to_imgmsg(labels, label_enc, header),
        'overlay': lambda: cv2_to_imgmsg(overlay_rgb(), 'rgb8', header),
        'mask': lambda: cv2_to_imgmsg(
            mask() if mask else colorize_labels(labels, colors), 'rgb8', header
        ),
        'depth': lambda: cv2_to_imgmsg(*depth_pair(), header),
    }
    compressed: dict[str, Callable[[], Any]] = {
        'labels': lambda: labels_png(labels, header, p.png_level),
        'overlay': lambda: overlay_jpeg(overlay_rgb(), header, p.jpeg_quality),
        'depth': lambda: depth_compressed_depth(
            *depth_pair(), header, depth_max=p.max_depth, png_level=p.png_level
        ),
    }
    for name in IMAGE_OUTPUTS:
        raw_on = bool(getattr(p, f'publish_{name}'))
        comp_on = compressed_on(p, name)
        if raw_on and name in have:
            out.append((name, raw[name]()))
        if comp_on and COMPRESSED_KEYS[name] in have:
            out.append((COMPRESSED_KEYS[name], compressed[name]()))
        if (raw_on or comp_on) and info is not None and f'{name}/camera_info' in have:
            out.append((f'{name}/camera_info', info))
    return out
