"""The real camera sample frames: which files make each frame, its K, depth scale and NYU label.

22 frames from public RGB-D data (registry in ``samples.registry``; files fetched by
``samples.fetcher``):
11 NYU Depth v2 test frames with the 13-class labels (3 of them with measured depth), and 11
unlabelled NYU / TUM RGB-D frames with measured depth. :func:`load` reads one into arrays at native
size; the real-camera bag (``samples.realbag``) and the tests use it.

Labels are ``new_nyu_class13_NNNN.png`` members of the NYU 13-class test-label archive (0 void, 1
bed … 13 window; NNNN = 1-based index in the 1449-frame labelled set). Where the RGB is a crop of
the 640×480 camera image, ``crop_xy`` = (x0, y0) of the crop; K and the label are cropped with it
(core.geometry.crop_intrinsics). The pairings were found by aligning depth/image edges with label
boundaries; 0464, 0834, 0972 and 1096 are exact (the source repositories' 40-class ground truth
maps onto the 13-class labels pixel for pixel), 1407's crop offset is ±1 px.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import cv2
import numpy as np

from depth3dseg_ros.core.geometry import crop_intrinsics
from depth3dseg_ros.samples.fetcher import fetch

NYU_K = (518.85790117450188, 519.46961112127485, 325.58244941119034, 253.73616633400465)
SLAMBOOK_CH5_K = (518.0, 519.0, 325.5, 253.5)
TUM_FR3_K = (535.4, 539.2, 320.1, 247.6)
TUM_FR2_K = (520.908620, 521.007327, 325.141442, 249.701764)
LABEL_TGZ = 'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz'
_DD = 'densedepth_nyu_test_rgb/examples/'
_LW = 'light_weight_refinenet_nyu/examples/imgs/NYU/'
_MT = 'multi_task_refinenet_nyu/examples/ExpNYUD_joint/'
_M3 = 'metric3d_demo/data/nyu_demo/'
_O3 = 'open3d_testdata_rgbd_other_formats/examples/TestData/RGBD/other_formats/'


@dataclass(frozen=True)
class SampleFrame:
    """One real frame: registry names of its files, K (fx, fy, cx, cy) of the full camera image,
    ``depth_scale`` metres per depth unit, the NYU label index, ``crop_xy`` (x0, y0) when the RGB
    is a crop of the 640×480 camera image, and ``depth_filled`` (an inpainted depth without holes,
    where the source has one; the bag carries the raw ``depth``)."""

    name: str
    rgb: str
    K: tuple
    depth: Optional[str] = None
    depth_scale: Optional[float] = None
    label_idx: Optional[int] = None
    crop_xy: Optional[tuple] = None
    depth_filled: Optional[str] = None


def _metric3d() -> list[SampleFrame]:
    ann = json.loads(fetch(_M3 + 'test_annotations.json').read_text())
    return [
        SampleFrame(
            'metric3d_' + f['rgb'].rsplit('/', 1)[1].split('.')[0],
            'metric3d_demo/' + f['rgb'],
            tuple(f['cam_in']),
            'metric3d_demo/' + f['depth'],
            1.0 / f['depth_scale'],
        )
        for f in ann['files']
    ]


@lru_cache(maxsize=1)
def sample_frames() -> tuple[SampleFrame, ...]:
    """All 22 frames, in the real-camera bag's order (the first 18 are the original demo bag's).

    Raises:
        SampleDataUnavailable: the metric3d annotation file cannot be fetched.
    """
    out = [
        SampleFrame(
            'nyu_0001',
            _DD + '377_image.png',
            NYU_K,
            'depth2hha_nyu_demo/demo/0_raw.png',
            1e-4,
            1,
            depth_filled='depth2hha_nyu_demo/demo/0.png',
        ),
        SampleFrame(
            'nyu_1407_crop',
            'rcnn_depth_nyu_demo/demo-data/images.png',
            NYU_K,
            'rcnn_depth_nyu_demo/demo-data/rawdepth.png',
            1e-3,
            1407,
            crop_xy=(41, 46),
            depth_filled='rcnn_depth_nyu_demo/demo-data/depth.png',
        ),
        *_metric3d(),
        *[
            SampleFrame(
                f'slambook_ch5_{i}',
                f'slambook_rgbd/ch5/joinMap/color/{i}.png',
                SLAMBOOK_CH5_K,
                f'slambook_rgbd/ch5/joinMap/depth/{i}.pgm',
                1e-3,
            )
            for i in range(1, 6)
        ],
        SampleFrame(
            'tum_fr3_open3d', _O3 + 'TUM_color.png', TUM_FR3_K, _O3 + 'TUM_depth.png', 2e-4
        ),
        *[
            SampleFrame(
                f'tum_fr2_slambook_ch7_{i}',
                f'slambook_rgbd/ch7/{i}.png',
                TUM_FR2_K,
                f'slambook_rgbd/ch7/{i}_depth.png',
                2e-4,
            )
            for i in (1, 2)
        ],
        *[
            SampleFrame(f'nyu_{idx:04d}_rgb_label', _DD + rgb, NYU_K, label_idx=idx)
            for rgb, idx in (
                ('1_image.png', 46),
                ('119_image.png', 976),
                ('140_image.png', 1039),
                ('267_image.png', 300),
                ('308_image.png', 1396),
            )
        ],
        SampleFrame('nyu_0464', _MT + '000464.png', NYU_K, _MT + 'depth_gt_000464.png', 2e-4, 464),
        *[
            SampleFrame(
                f'nyu_{idx:04d}_crop', f'{_LW}{idx:06d}.png', NYU_K, label_idx=idx, crop_xy=(7, 6)
            )
            for idx in (834, 972, 1096)
        ],
    ]
    return tuple(out)


def labelled_frames() -> tuple[SampleFrame, ...]:
    """The 11 frames with NYU 13-class labels (the real evaluation set's labelled part)."""
    return tuple(f for f in sample_frames() if f.label_idx is not None)


def read_rgb(name: str) -> np.ndarray:
    """Registry colour image -> H×W×3 uint8 RGB. Raises ValueError naming the file if
    unreadable."""
    bgr = cv2.imread(str(fetch(name)), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f'rgb file {name} could not be read')
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def read_depth_m(name: str, scale: float) -> np.ndarray:
    """16-bit depth PNG/PGM -> H×W float32 metres (value × ``scale``; 0 -> NaN).

    Raises:
        ValueError: the file is not a 16-bit single-channel image.
    """
    raw = cv2.imread(str(fetch(name)), cv2.IMREAD_UNCHANGED)
    if raw is None or raw.dtype != np.uint16 or raw.ndim != 2:
        raise ValueError(f'depth file {name} is not a 16-bit single-channel image')
    m = raw.astype(np.float64) * scale
    m[raw == 0] = np.nan
    return m.astype(np.float32)


@lru_cache(maxsize=1)
def _label_archive() -> tuple[tarfile.TarFile, dict]:
    data = fetch(LABEL_TGZ).read_bytes()
    tar = tarfile.open(fileobj=io.BytesIO(data), mode='r:gz')
    return tar, {m.name.rsplit('/', 1)[-1]: m for m in tar.getmembers() if m.isfile()}


def nyu_label(idx: int) -> np.ndarray:
    """The 640×480 uint8 13-class label image ``new_nyu_class13_<idx>.png``. Raises ValueError if
    absent."""
    tar, members = _label_archive()
    name = f'new_nyu_class13_{idx:04d}.png'
    if name not in members:
        raise ValueError(f'label {name} not in {LABEL_TGZ}')
    buf = np.frombuffer(tar.extractfile(members[name]).read(), np.uint8)
    return cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)


def nyu_label_indices() -> list[int]:
    """The sorted 1-based labelled-set indices of every label image in the archive (NYU's 654
    test frames)."""
    _, members = _label_archive()
    pre, post = 'new_nyu_class13_', '.png'
    return sorted(
        int(n[len(pre) : -len(post)])
        for n in members
        if n.startswith(pre) and n.endswith(post) and n[len(pre) : -len(post)].isdigit()
    )


def load(
    frame: SampleFrame, filled: bool = False
) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    """Read ``frame`` at native size: (rgb H×W×3 uint8 RGB, K 3×3 float64, depth H×W float32 m with
    NaN = no data or None, labels H×W uint8 or None). ``filled``: the inpainted depth where there
    is one.

    Raises:
        ValueError: a depth or label image whose size differs from the RGB (naming the frame).
        SampleDataUnavailable: a file cannot be fetched.
    """
    rgb = read_rgb(frame.rgb)
    h0, w0 = rgb.shape[:2]
    fx, fy, cx, cy = frame.K
    K = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    if frame.crop_xy is not None:
        K = crop_intrinsics(K, *frame.crop_xy)
    dname = frame.depth_filled if filled and frame.depth_filled else frame.depth
    depth = read_depth_m(dname, frame.depth_scale) if dname else None
    lab = None
    if frame.label_idx is not None:
        lab = nyu_label(frame.label_idx)
        if frame.crop_xy is not None:
            x0, y0 = frame.crop_xy
            lab = lab[y0 : y0 + h0, x0 : x0 + w0]
    for what, arr in (('depth', depth), ('labels', lab)):
        if arr is not None and arr.shape != (h0, w0):
            raise ValueError(f'{frame.name}: {what} shape={arr.shape} != rgb {(h0, w0)}')
    return rgb, K, depth, lab
