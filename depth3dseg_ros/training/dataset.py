"""torch Dataset over extracted dataset directories, with geometric/colour augmentation and K kept
exact.

Optional camera-true augmentation (``augment.camera``, training.camera_aug: white balance, exposure
and gamma, vignetting, shot/read noise, motion blur, JPEG, colour casts, depth-sensor noise and
holes) runs after the geometric transform and before the colour jitter; it never touches labels or
K. Before it, optional texture randomisation (``augment.texture``, training.texture_rand) and
Fourier domain adaptation towards real images (``augment.fda``, training.fda; frames of the style
directories themselves are not restyled).

Reads the format of docs/ARCHITECTURE.md "Dataset directory" (manifest.json, index.jsonl,
rgb/depth/labels PNGs) through depth3dseg_ros.dataset_format, its one reader. Every sample is
resized to the network input size; label and depth images are resized with nearest neighbour
(core.imageops, C22/C09: no invented ids, no blended depth), and K is adjusted for every resize,
crop and flip (core.geometry, C18; METHOD M2:
"K must be the K of the image the network actually saw"). Frames without depth or labels are kept,
with ``has_depth`` / ``has_labels`` False (METHOD M5: they still train on the terms they have).

Augmentation randomness is drawn from ``numpy.random.default_rng([seed, epoch, index])``: the same
sample gets the same augmentation whatever the worker, the process (DDP) or a resume (exact
resume).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.colour_balance import check_balance, grey_world
from depth3dseg_ros.core.depth import depth_to_meters
from depth3dseg_ros.core.geometry import crop_intrinsics, resize_intrinsics
from depth3dseg_ros.core.image_decode import read_image_file
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.dataset_format import input_kind_problem, read_index, read_manifest
from depth3dseg_ros.training.camera_aug import augment_depth, augment_rgb, resolve_camera
from depth3dseg_ros.training.fda import apply_fda, load_style_pool, resolve_fda
from depth3dseg_ros.training.frame_check import check_frames, skipped_line
from depth3dseg_ros.training.real_pool import load_rgb_pool
from depth3dseg_ros.training.texture_rand import randomize_texture, resolve_texture


def load_classes(spec: str | ClassSet) -> ClassSet:
    """'nyu13' (built-in NYU13), a ClassSet, or the path of a classes YAML (ClassSet.from_yaml)."""
    if isinstance(spec, ClassSet):
        return spec
    if spec.lower() == 'nyu13':
        return NYU13
    return ClassSet.from_yaml(spec)


def read_manifest_classes(directory: str | Path) -> ClassSet | None:
    """The ClassSet stored in ``<directory>/manifest.json`` (None when there is no
    manifest/classes)."""
    data = read_manifest(directory)
    return ClassSet.from_dict(data['classes']) if data and data.get('classes') else None


def load_records(
    dirs: Sequence[str | Path],
    classes: ClassSet,
    input_kind: str | None = None,
    prog: str | None = 'depth3dseg',
) -> list[dict[str, Any]]:
    """Frame records of all ``dirs`` (`read_index`), after checking each manifest's classes and,
    with ``input_kind``, that each holds the images a model of that input takes
    (`input_kind_problem`). Frames whose files cannot be read (training.frame_check, from the
    headers) are left out, one line per directory on stderr starting ``prog`` (None: no line).

    Raises:
        ValueError: a directory's manifest names classes other than ``classes``, or its images
            are not ``input_kind``'s.
    """
    records: list[dict[str, Any]] = []
    for d in dirs:
        found = read_manifest_classes(d)
        if found is not None and found.names != classes.names:
            raise ValueError(
                f'dataset {d} has classes {found.names}, training uses {classes.names}'
            )
        problem = input_kind_problem(d, input_kind) if input_kind else None
        if problem:
            raise ValueError(problem)
        found_records = read_index(d)
        kept, skipped = check_frames(found_records)
        if skipped and prog:
            print(skipped_line(prog, d, len(found_records), skipped), file=sys.stderr)
        records.extend(kept)
    return records


def flip_intrinsics(K: np.ndarray, width: int) -> np.ndarray:
    """K of the horizontally flipped image (u' = W−1−u): cx' = W−1−cx, skew negated; fx, fy, cy
    kept.

    A point (X, Y, Z) seen at u in the original is seen at u' in the flipped image as (−X, Y, Z).
    """
    K = np.asarray(K, dtype=np.float64).copy()
    K[0, 2] = width - 1 - K[0, 2]
    K[0, 1] = -K[0, 1]
    return K


@dataclass
class AugmentParams:
    """One draw of the augmentation: scale the input-sized frame by ``scale`` (to ``scaled_wh``),
    crop ``out_wh`` at (x0, y0), flip if ``flip``; colour factors (1 = unchanged)."""

    scaled_wh: tuple[int, int]
    x0: int
    y0: int
    flip: bool
    brightness: float = 1.0
    contrast: float = 1.0
    saturation: float = 1.0


def sample_params(rng: np.random.Generator, aug: dict, out_wh: Sequence[int]) -> AugmentParams:
    """Draw AugmentParams from the ``augment`` config section (see config.DEFAULTS)."""
    w, h = int(out_wh[0]), int(out_wh[1])
    s = float(rng.uniform(aug['scale'][0], aug['scale'][1]))
    sw, sh = max(w, int(round(w * s))), max(h, int(round(h * s)))
    x0 = int(rng.integers(0, sw - w + 1))
    y0 = int(rng.integers(0, sh - h + 1))
    flip = bool(rng.random() < aug['hflip'])
    f = [
        float(rng.uniform(1 - aug[k], 1 + aug[k]))
        for k in ('brightness', 'contrast', 'saturation')
    ]
    return AugmentParams((sw, sh), x0, y0, flip, *f)


def _resize_rgb(rgb: np.ndarray, wh: tuple[int, int]) -> np.ndarray:
    if (rgb.shape[1], rgb.shape[0]) == tuple(wh):
        return rgb
    shrink = wh[0] < rgb.shape[1] and wh[1] < rgb.shape[0]
    return cv2.resize(rgb, tuple(wh), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def geometric_transform(
    rgb: np.ndarray,
    depth: np.ndarray | None,
    labels: np.ndarray | None,
    K: np.ndarray,
    scaled_wh: Sequence[int],
    crop_xy: Sequence[int] = (0, 0),
    out_wh: Sequence[int] | None = None,
    flip: bool = False,
):
    """Resize to ``scaled_wh``, crop ``out_wh`` at ``crop_xy``, optionally flip; K follows every
    step.

    Args:
        rgb: H×W×3 uint8 RGB. depth: H×W float32 m (NaN no data) or None. labels: H×W int or None.
        K: 3×3 K of the input image. scaled_wh: (W1, H1) after the resize (sx = W1/W, sy = H1/H).
        crop_xy: top-left (x0, y0) of the crop in the resized image. out_wh: crop size (default:
            all).
        flip: horizontal flip after the crop (u' = W−1−u, `flip_intrinsics`).
    Returns:
        (rgb, depth, labels, K) at out_wh; depth/labels nearest-resized (NaN-safe), K float64 3×3.
    Raises:
        ValueError: the crop does not fit in the resized image, or depth/labels size differs from
            rgb.
    """
    h0, w0 = rgb.shape[:2]
    for name, a in (('depth', depth), ('labels', labels)):
        if a is not None and a.shape[:2] != (h0, w0):
            raise ValueError(f'{name} shape={a.shape[:2]} differs from rgb shape={(h0, w0)}')
    sw, sh = int(scaled_wh[0]), int(scaled_wh[1])
    ow, oh = (sw, sh) if out_wh is None else (int(out_wh[0]), int(out_wh[1]))
    x0, y0 = int(crop_xy[0]), int(crop_xy[1])
    if x0 < 0 or y0 < 0 or x0 + ow > sw or y0 + oh > sh:
        raise ValueError(
            f'crop {ow}x{oh} at ({x0}, {y0}) does not fit in the resized {sw}x{sh} image'
        )
    rgb = _resize_rgb(rgb, (sw, sh))[y0 : y0 + oh, x0 : x0 + ow]
    if depth is not None:
        depth = resize_depth(depth, (sw, sh))[y0 : y0 + oh, x0 : x0 + ow]
    if labels is not None:
        labels = resize_labels(labels, (sw, sh))[y0 : y0 + oh, x0 : x0 + ow]
    K = crop_intrinsics(resize_intrinsics(K, (w0, h0), (sw, sh)), x0, y0)
    if flip:
        rgb = rgb[:, ::-1]
        depth = None if depth is None else depth[:, ::-1]
        labels = None if labels is None else labels[:, ::-1]
        K = flip_intrinsics(K, ow)

    def cont(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.ascontiguousarray(a)

    return cont(rgb), cont(depth), cont(labels), np.asarray(K, dtype=np.float64)


def color_jitter(
    rgb: np.ndarray, brightness: float, contrast: float, saturation: float
) -> np.ndarray:
    """Brightness, contrast (about the mean grey) and saturation (about per-pixel grey) factors on
    an H×W×3 uint8 RGB image; returns float32 in [0, 1]."""
    x = rgb.astype(np.float32) / 255.0
    x = x * brightness
    grey = x @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    x = (x - grey.mean()) * contrast + grey.mean()
    grey = (x @ np.array([0.299, 0.587, 0.114], dtype=np.float32))[..., None]
    x = (x - grey) * saturation + grey
    return np.clip(x, 0.0, 1.0)


class FrameDataset(Dataset):
    """Frames of one or more dataset directories at the network input size.

    Item (dict of tensors, collated by the default collate): ``rgb`` 3×H×W float32 normalised
    ((x/255 − mean)/std), ``K`` 3×3 float32 at input size, ``depth`` 1×H×W float32 m (NaN = no
    data, all NaN when the frame has none), ``labels`` H×W int64 (void id where unlabelled / no
    labels), ``has_depth``, ``has_labels``, ``has_geometry`` bool scalars (the last False for a
    record with ``"geometry": false``: 2D segmentation term only, core.train_step), ``index``
    int64.

    Args:
        dirs: dataset directories (or a list of frame records from `read_index`, via ``records``).
        input_size: (W, H) of the network input.
        classes: the ClassSet trained; a directory whose manifest names other classes is refused.
        mean, std: RGB normalisation (0..1 scale), stored in the model file too.
        balance: white balance of the input before that normalisation, after augmentation
            (core.colour_balance: 'none' or 'grey_world'), stored in the model file too.
        augment: the ``augment`` config section, or None for none (validation/evaluation).
        seed: augmentation seed (with the epoch, `set_epoch`, and the item index).
        records: use these frame records instead of reading ``dirs`` (train/val split).
    Raises:
        ValueError: mismatched classes, an empty dataset, label ids >= len(classes), bad image
            sizes.
    """

    def __init__(
        self,
        dirs: Sequence[str | Path] = (),
        input_size: Sequence[int] = (320, 240),
        classes: ClassSet = NYU13,
        mean: Sequence[float] = (0.485, 0.456, 0.406),
        std: Sequence[float] = (0.229, 0.224, 0.225),
        augment: dict | None = None,
        seed: int = 0,
        records: list[dict] | None = None,
        balance: str = 'none',
    ):
        self.classes = classes
        self.balance = check_balance(balance, 'balance')
        given = records is not None
        if not given:
            records = load_records(dirs, classes)
        if not records:
            raise ValueError(
                'no frames in the frame records given (records=[]: an empty split or filter)'
                if given
                else f'no frames in dataset directories {list(map(str, dirs))}'
            )
        self.records = records
        self.input_size = (int(input_size[0]), int(input_size[1]))
        self.mean = np.asarray(mean, dtype=np.float32)
        self.std = np.asarray(std, dtype=np.float32)
        self.augment = augment if (augment and augment.get('enabled', True)) else None
        #: camera-true photometric/depth-sensor ops (training.camera_aug; None = off)
        self.camera = resolve_camera(self.augment.get('camera')) if self.augment else None
        #: label-guided texture/colour randomisation (training.texture_rand; None = off)
        self.texture = resolve_texture(self.augment.get('texture')) if self.augment else None
        #: real frames for photo textures (uint8 N×H×W×3 at input size; None = procedural only)
        self.photo_pool = None
        if self.texture is not None and self.texture['photo']:
            self.photo_pool = load_rgb_pool(
                self.texture['photo'], self.input_size, 'augment.texture.photo'
            )
        #: Fourier domain adaptation towards real images (training.fda; None = off)
        self.fda = resolve_fda(self.augment.get('fda')) if self.augment else None
        self.fda_pool = None
        if self.fda is not None:
            self.fda_pool = load_style_pool(self.fda['style'], self.input_size)
            style_dirs = {Path(d).resolve() for d in self.fda['style']}
            #: per record: restyle it (False for frames of the style directories: real already)
            self.restyle = [Path(r['dir']).resolve() not in style_dirs for r in records]
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the augmentation draw for this epoch (call before building the epoch's
        iterator)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.records)

    def load_raw(
        self, i: int
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]:
        """Frame ``i`` at its stored size: (rgb H×W×3 uint8, depth float32 m NaN | None,
        labels H×W int | None, K 3×3 float64). Raises ValueError/FileNotFoundError naming the
        file."""
        rec = self.records[i]
        d = Path(rec['dir'])
        bgr = read_image_file(str(d / rec['rgb']), cv2.IMREAD_COLOR)
        if bgr is None:
            raise FileNotFoundError(f"rgb image {d / rec['rgb']} missing or unreadable")
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        h, w = rgb.shape[:2]
        if (w, h) != (rec['width'], rec['height']):
            raise ValueError(
                f"{d / rec['rgb']}: size {w}x{h} != index width/height "
                f"{rec['width']}x{rec['height']}"
            )
        depth = None
        if rec.get('depth'):
            raw = read_image_file(str(d / rec['depth']), cv2.IMREAD_UNCHANGED)
            if raw is None or raw.dtype != np.uint16 or raw.ndim != 2:
                raise ValueError(
                    f"depth image {d / rec['depth']} must be a 16-bit single-channel PNG"
                )
            depth = depth_to_meters(raw, '16UC1', rec.get('depth_scale', 0.001))
            if depth.shape != (h, w):  # C20: resample with separate x/y factors
                depth = resize_depth(depth, (w, h))
        labels = None
        if rec.get('labels'):
            labels = read_image_file(str(d / rec['labels']), cv2.IMREAD_UNCHANGED)
            if labels is None or labels.ndim != 2 or labels.dtype.kind != 'u':
                raise ValueError(
                    f"label image {d / rec['labels']} must be an 8/16-bit single-channel PNG"
                )
            if labels.shape != (h, w):
                labels = resize_labels(labels, (w, h))
            if int(labels.max()) >= len(self.classes):
                raise ValueError(
                    f"label image {d / rec['labels']} has id {int(labels.max())} >= "
                    f'{len(self.classes)} classes'
                )
        K = np.asarray(rec['K'], dtype=np.float64).reshape(3, 3)
        return rgb, depth, labels, K

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        rgb, depth, labels, K = self.load_raw(i)
        w, h = self.input_size
        if self.augment is None:
            rgb, depth, labels, K = geometric_transform(rgb, depth, labels, K, (w, h))
            x = rgb.astype(np.float32) / 255.0
        else:
            rng = np.random.default_rng([self.seed, self.epoch, i])
            p = sample_params(rng, self.augment, (w, h))
            rgb, depth, labels, K = geometric_transform(
                rgb, depth, labels, K, p.scaled_wh, (p.x0, p.y0), (w, h), p.flip
            )
            if depth is not None and self.augment.get('scale_depth', False):
                depth = depth * np.float32(h / p.scaled_wh[1])  # zoom s: the scene at 1/s (m)
            # drawn after the geometric params: those stay as without these ops
            if self.texture is not None:  # the scene's appearance first, then the camera
                painted = randomize_texture(rgb, labels, rng, self.texture, self.photo_pool)
                if painted is not rgb and self.photo_pool is not None:
                    if not self.texture['photo_labels']:
                        labels = None  # photo-painted: depth and consistency terms only (M5)
                rgb = painted
            if self.fda is not None and self.restyle[i]:
                rgb = apply_fda(rgb, rng, self.fda, self.fda_pool)  # then the real camera's look
            if self.camera is not None:
                rgb = augment_rgb(rgb, rng, self.camera)
                depth = augment_depth(depth, rng, self.camera)
            x = color_jitter(rgb, p.brightness, p.contrast, p.saturation)
        if self.balance == 'grey_world':
            x = grey_world(x, 1.0)
        x = (x - self.mean) / self.std
        void = self.classes.void_id
        return {
            'rgb': torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1))),
            'K': torch.from_numpy(K.astype(np.float32)),
            'depth': torch.from_numpy(
                depth if depth is not None else np.full((h, w), np.nan, np.float32)
            )[None].float(),
            'labels': torch.from_numpy(
                labels.astype(np.int64) if labels is not None else np.full((h, w), void, np.int64)
            ),
            'has_depth': torch.tensor(depth is not None),
            'has_labels': torch.tensor(labels is not None),
            'has_geometry': torch.tensor(self.records[i].get('geometry', True) is not False),
            'index': torch.tensor(i, dtype=torch.int64),
        }


def split_records(
    records: list[dict], val_split: float, seed: int
) -> tuple[list[dict], list[dict]]:
    """Deterministic train/val split of frame records (a seeded permutation); at least one of each
    when ``val_split > 0`` and there are >= 2 frames. Returns (train, val)."""
    n = len(records)
    if val_split <= 0 or n < 2:
        return list(records), []
    perm = np.random.default_rng(seed).permutation(n)
    n_val = min(n - 1, max(1, int(round(n * val_split))))
    val_idx = set(perm[:n_val].tolist())
    return (
        [r for k, r in enumerate(records) if k not in val_idx],
        [r for k, r in enumerate(records) if k in val_idx],
    )
