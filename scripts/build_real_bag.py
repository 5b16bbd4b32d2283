#!/usr/bin/env python3
"""Build the bundled real-camera rosbag2 (``demo_data/real_camera``) from the real frames in
``../shared/data/real`` beside the repository (NYU Depth v2, TUM RGB-D, slambook; see each folder's SOURCE.md).

Each frame keeps its real intrinsics and depth scale: depth is converted to 16UC1 millimetres with
core.depth.meters_to_16uc1, NYU 13-class labels go on ``/camera/semantic/labels`` where they exist, and
frames are resized by ``--scale`` (nearest for depth and labels, INTER_AREA for RGB) with K scaled by
core.geometry.resize_intrinsics. Topics/encodings are those of the synthetic bags
(depth3dseg_ros.synth.bagwrite); one frame every 1/15 s from a fixed epoch, so a rebuild gives
identical messages. Usage::

    python scripts/build_real_bag.py --out demo_data/real_camera [--real ../shared/data/real] [--scale 0.5]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import cv2
import numpy as np

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.core.geometry import crop_intrinsics, resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.synth.bagwrite import RgbdBagWriter

DEFAULT_REAL = Path(os.environ.get('DEPTH3DSEG_SHARED', Path(__file__).resolve().parents[2] / 'shared')) \
    / 'data' / 'real'  # ../shared beside the repository, as CI lays it out
START_NS = 1_751_000_000 * 10**9
PERIOD_NS = 10**9 // 15
NYU_K = (518.85790117450188, 519.46961112127485, 325.58244941119034, 253.73616633400465)
SLAMBOOK_CH5_K = (518.0, 519.0, 325.5, 253.5)
TUM_FR3_K = (535.4, 539.2, 320.1, 247.6)
TUM_FR2_K = (520.908620, 521.007327, 325.141442, 249.701764)
LABEL_TGZ = 'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz'
RGB_LABEL_ONLY = (('1_image.png', 46), ('119_image.png', 976), ('140_image.png', 1039),
                  ('267_image.png', 300), ('308_image.png', 1396))


@dataclass
class Source:
    """One real frame: files relative to the real-data folder, K (fx, fy, cx, cy) of the full camera image,
    metres per depth unit, NYU label index, and ``crop_xy`` (x0, y0) when the RGB is a crop of the
    640×480 camera image (K and label are then cropped with it, core.geometry.crop_intrinsics)."""
    name: str
    rgb: str
    K: tuple
    depth: Optional[str] = None
    depth_scale: Optional[float] = None     # metres = value * depth_scale
    label_idx: Optional[int] = None          # NYU labeled-set index (1-based) of new_nyu_class13_NNNN.png
    crop_xy: Optional[tuple] = None          # (x0, y0) of the crop in the 640×480 camera image


def sources(real: Path = DEFAULT_REAL) -> List[Source]:
    """The frames of the bag, in order (see demo_data/README.md)."""
    out = [
        Source('nyu_0001', 'densedepth_nyu_test_rgb/examples/377_image.png', NYU_K,
               'depth2hha_nyu_demo/demo/0_raw.png', 1e-4, 1),
        Source('nyu_1407_crop', 'rcnn_depth_nyu_demo/demo-data/images.png', NYU_K,
               'rcnn_depth_nyu_demo/demo-data/rawdepth.png', 1e-3, 1407, crop_xy=(41, 46)),
    ]
    ann = json.loads((real / 'metric3d_demo/data/nyu_demo/test_annotations.json').read_text())
    for f in ann['files']:
        out.append(Source('metric3d_' + Path(f['rgb']).stem, 'metric3d_demo/' + f['rgb'], tuple(f['cam_in']),
                          'metric3d_demo/' + f['depth'], 1.0 / f['depth_scale']))
    for i in range(1, 6):
        out.append(Source(f'slambook_ch5_{i}', f'slambook_rgbd/ch5/joinMap/color/{i}.png', SLAMBOOK_CH5_K,
                          f'slambook_rgbd/ch5/joinMap/depth/{i}.pgm', 1e-3))
    out.append(Source('tum_fr3_open3d', 'open3d_testdata_rgbd_other_formats/examples/TestData/RGBD/other_formats/'
                      'TUM_color.png', TUM_FR3_K,
                      'open3d_testdata_rgbd_other_formats/examples/TestData/RGBD/other_formats/TUM_depth.png', 2e-4))
    for i in (1, 2):
        out.append(Source(f'tum_fr2_slambook_ch7_{i}', f'slambook_rgbd/ch7/{i}.png', TUM_FR2_K,
                          f'slambook_rgbd/ch7/{i}_depth.png', 2e-4))
    for rgb, idx in RGB_LABEL_ONLY:
        out.append(Source(f'nyu_{idx:04d}_rgb_label', f'densedepth_nyu_test_rgb/examples/{rgb}', NYU_K, label_idx=idx))
    return out


def K_matrix(k: tuple) -> np.ndarray:
    fx, fy, cx, cy = k
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def read_rgb(path: Path) -> np.ndarray:
    """8-bit colour image file -> H×W×3 uint8 RGB. Raises ValueError if unreadable."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f'rgb file {path} could not be read')
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def read_depth_m(path: Path, scale: float) -> np.ndarray:
    """16-bit depth PNG/PGM -> float32 metres (value × scale; 0 -> NaN). Raises ValueError if not uint16."""
    raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if raw is None or raw.dtype != np.uint16 or raw.ndim != 2:
        raise ValueError(f'depth file {path} is not a 16-bit single-channel image')
    m = raw.astype(np.float64) * scale
    m[raw == 0] = np.nan
    return m.astype(np.float32)


class LabelArchive:
    """Reads ``new_nyu_class13_NNNN.png`` members from the NYU 13-class test label tgz."""

    def __init__(self, real: Path):
        self.tar = tarfile.open(real / LABEL_TGZ, 'r:gz')
        self.members = {Path(m.name).name: m for m in self.tar.getmembers() if m.isfile()}

    def get(self, idx: int) -> np.ndarray:
        name = f'new_nyu_class13_{idx:04d}.png'
        if name not in self.members:
            raise ValueError(f'label {name} not in {LABEL_TGZ}')
        buf = np.frombuffer(self.tar.extractfile(self.members[name]).read(), np.uint8)
        return cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)


@dataclass
class RealFrame:
    """A frame ready for the bag: rgb H×W×3 uint8, K 3×3, depth_mm H×W uint16 or None, labels or None."""
    source: Source
    rgb: np.ndarray
    K: np.ndarray
    depth_mm: Optional[np.ndarray]
    labels: Optional[np.ndarray]


def load_frame(src: Source, real: Path, labels: LabelArchive, scale: float) -> RealFrame:
    """Read one source frame and resize it by ``scale`` (K scaled with separate x/y factors)."""
    rgb = read_rgb(real / src.rgb)
    h0, w0 = rgb.shape[:2]
    K = K_matrix(src.K)
    if src.crop_xy is not None:
        K = crop_intrinsics(K, *src.crop_xy)
    depth = read_depth_m(real / src.depth, src.depth_scale) if src.depth else None
    lab = None
    if src.label_idx is not None:
        lab = labels.get(src.label_idx)
        if src.crop_xy is not None:
            x0, y0 = src.crop_xy
            lab = lab[y0:y0 + h0, x0:x0 + w0]
    for name, arr in (('depth', depth), ('labels', lab)):
        if arr is not None and arr.shape != (h0, w0):
            raise ValueError(f'{src.name}: {name} shape={arr.shape} != rgb {(h0, w0)}')
    w1, h1 = int(round(w0 * scale)), int(round(h0 * scale))
    if (w1, h1) != (w0, h0):
        rgb = cv2.resize(rgb, (w1, h1), interpolation=cv2.INTER_AREA)
        K = resize_intrinsics(K, (w0, h0), (w1, h1))
        depth = resize_depth(depth, (w1, h1)) if depth is not None else None
        lab = resize_labels(lab, (w1, h1)) if lab is not None else None
    return RealFrame(src, rgb, K, meters_to_16uc1(depth) if depth is not None else None, lab)


def build(out: Path, real: Path = DEFAULT_REAL, scale: float = 0.5) -> List[RealFrame]:
    """Write the bag to ``out`` (replaced if it exists) and return the frames written."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    arch = LabelArchive(real)
    frames = [load_frame(s, real, arch, scale) for s in sources(real)]
    with RgbdBagWriter(out, storage='mcap', compress=True) as bag:
        for i, f in enumerate(frames):
            bag.write_frame(START_NS + i * PERIOD_NS, f.rgb, f.K, f.depth_mm, f.labels)
    return frames


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', type=Path, default=Path('demo_data/real_camera'))
    ap.add_argument('--real', type=Path, default=DEFAULT_REAL)
    ap.add_argument('--scale', type=float, default=0.5, help='resize factor (1 = native)')
    args = ap.parse_args(argv)
    frames = build(args.out, args.real, args.scale)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f'wrote {len(frames)} frames to {args.out} ({size / 1e6:.2f} MB)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
