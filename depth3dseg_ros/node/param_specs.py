"""The table of ``depth3dseg_node``'s parameters: name, default (its type is the parameter's),
allowed values or range, meaning, and whether it changes at run time (docs/cases.md C44).

node/params.py validates, documents and declares them (and re-exports these names); docs/node.md
and config/depth3dseg.yaml carry the same defaults and text (test_params checks they agree).
No rclpy here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    ParamSpec(
        'lazy_outputs',
        True,
        'build and publish each output only while its topic has subscribers (an image: the '
        'raw or compressed topic; its camera_info: the image or the camera_info), as '
        'image_transport does; false = publish every switched-on output each frame (recorders '
        'that subscribe late)',
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
        'depth beyond this (m) is no data in ~/depth/image and ~/points (finite: it also '
        'scales compressedDepth)',
        min=1e-6,
        max=1000.0,
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
        'geometry_model',
        '',
        "with use_measured_depth: a geometry model file (meta input depth_code) whose 2D labels "
        "of the measured depth are averaged with the colour model's (RGB-D late fusion); '' = "
        'none',
        dynamic=False,
    ),
    ParamSpec(
        'geometry_weight',
        0.5,
        "the geometry model's weight in the fused 2D labels",
        min=0.0,
        max=1.0,
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
