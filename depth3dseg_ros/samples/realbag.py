"""The real-camera bag (``make demo``, the real evaluation set), built at run time from the sample
files.

:func:`real_camera_bag` returns a rosbag2 (MCAP, zstd chunks) of the 22 frames of
``samples.frames`` on the synthetic bags' topics (``synth.bagwrite``): ``/camera/color/image_raw``
rgb8, ``/camera/color/camera_info`` (the frame's real K scaled to the stored size, D = 0),
``/camera/depth/image_raw`` 16UC1 mm (0 = no data, raw sensor holes kept) and
``/camera/semantic/labels`` mono8 13-class ids where the frame has them. Every frame is stored at
``scale`` × its native size (RGB INTER_AREA, depth and labels nearest: core.imageops; K by
core.geometry.resize_intrinsics), one frame every 1/15 s from a fixed epoch, so a rebuild gives
identical messages. The bag is built once into the sample cache (``samples.fetcher.cache_dir()``)
and reused; it is never committed (third-party content).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

import cv2
import numpy as np

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.core.geometry import resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.samples.fetcher import cache_dir
from depth3dseg_ros.samples.frames import SampleFrame, load, sample_frames

START_NS = 1_751_000_000 * 10**9
PERIOD_NS = 10**9 // 15
#: Bumped whenever the frame list or the encoding changes, so a cached bag of an older layout is
#: rebuilt.
BAG_VERSION = 3  # 3: 16UC1 depth rounded in float32 as depth_image_proc (C08)
_STAMP = '.complete'


@dataclass
class RealFrame:
    """A frame as stored in the bag: rgb H×W×3 uint8, K 3×3, depth_mm H×W uint16 (0 = no data) or
    None, labels H×W uint8 or None, and the SampleFrame it came from."""

    source: SampleFrame
    rgb: np.ndarray
    K: np.ndarray
    depth_mm: Optional[np.ndarray]
    labels: Optional[np.ndarray]


def load_scaled(frame: SampleFrame, scale: float) -> RealFrame:
    """Read ``frame`` and resize it by ``scale`` (K scaled with separate x/y factors, C18).

    Raises:
        ValueError: ``scale`` not in (0, 1], or a frame whose files disagree in size.
    """
    if not 0 < scale <= 1:
        raise ValueError(f'scale={scale} must be in (0, 1]')
    rgb, K, depth, lab = load(frame)
    h0, w0 = rgb.shape[:2]
    w1, h1 = int(round(w0 * scale)), int(round(h0 * scale))
    if (w1, h1) != (w0, h0):
        rgb = cv2.resize(rgb, (w1, h1), interpolation=cv2.INTER_AREA)
        K = resize_intrinsics(K, (w0, h0), (w1, h1))
        depth = resize_depth(depth, (w1, h1)) if depth is not None else None
        lab = resize_labels(lab, (w1, h1)) if lab is not None else None
    return RealFrame(frame, rgb, K, meters_to_16uc1(depth) if depth is not None else None, lab)


def build(
    out: Path, scale: float = 0.5, frames: Optional[Sequence[SampleFrame]] = None
) -> List[RealFrame]:
    """Write the bag to ``out`` (replaced if it exists); return the frames written.

    Raises:
        SampleDataUnavailable: a sample file cannot be fetched (nothing is left at ``out``).
    """
    from depth3dseg_ros.synth.bagwrite import RgbdBagWriter

    out = Path(out)
    data = [load_scaled(f, scale) for f in (frames if frames is not None else sample_frames())]
    if out.exists():
        shutil.rmtree(out)
    with RgbdBagWriter(out, storage='mcap', compress=True) as bag:
        for i, f in enumerate(data):
            bag.write_frame(START_NS + i * PERIOD_NS, f.rgb, f.K, f.depth_mm, f.labels)
    return data


def real_camera_bag(scale: float = 0.5) -> Path:
    """Path of the real-camera bag in the sample cache, built on first use (about 2 s).

    The bag is written into a temporary folder beside its final place and renamed when complete, so
    a killed build never leaves a half bag that looks finished.

    Raises:
        SampleDataUnavailable: the sample files are neither cached, nor in a local copy, nor
            downloadable.
    """
    final = cache_dir() / f'real_camera_v{BAG_VERSION}_s{scale:g}'
    if (final / _STAMP).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix='.build_'))
    try:
        build(tmp / 'bag', scale)
        (tmp / 'bag' / _STAMP).write_text(f'{len(sample_frames())} frames\n')
        if final.exists():
            shutil.rmtree(final)
        (tmp / 'bag').rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
