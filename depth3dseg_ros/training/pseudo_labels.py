"""Confident pseudo-labels for unlabelled real frames (self-training; METHOD M5; real rooms).

A model's own fused labels (M7) on unlabelled real frames become training labels where it is
confident, so the segmentation terms, not only depth and consistency, train on real images.
Confidence alone would keep mostly the easy large classes (wall, floor), so the threshold is
chosen per class (class-balanced self-training, Zou et al. 2018, "Unsupervised Domain Adaptation
for Semantic Segmentation via Class-Balanced Self-Training", ECCV): for each class, the pixels
predicted as that class over all frames are ranked by confidence and the top ``portion`` are kept
(and only those at or above ``min_confidence``); every other pixel becomes void, which the
cross-entropies ignore. Labels, depth and K of the frames are otherwise untouched.

Only frames that no evaluation set scores may be pseudo-labelled (models/README.md lists which
trained).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Callable, Sequence

import cv2
import numpy as np

from depth3dseg_ros.core.imageops import resize_labels
from depth3dseg_ros.dataset_format import MANIFEST, read_index, read_manifest, write_index
from depth3dseg_ros.training.dataset import FrameDataset

#: predict(rgb H×W×3 uint8, K 3×3, depth H×W float32 m NaN or None) -> (labels, confidence).
Predict = Callable[[np.ndarray, np.ndarray, 'np.ndarray | None'], tuple[np.ndarray, np.ndarray]]


def class_balanced_keep(
    labels: Sequence[np.ndarray],
    confidence: Sequence[np.ndarray],
    portion: float,
    min_confidence: float = 0.0,
) -> list[np.ndarray]:
    """Which pixels to keep as pseudo-labels (module docstring): per class over all frames, the
    ``portion`` most confident of the pixels predicted as that class, if >= ``min_confidence``.

    Args:
        labels: per frame an H×W integer label image (predicted ids).
        confidence: per frame an H×W float array (probability of the predicted id), same shapes.
        portion: fraction in (0, 1] kept per class.
        min_confidence: absolute floor in [0, 1].
    Returns: per frame an H×W bool mask.
    Raises: ValueError for mismatched shapes or counts, portion / min_confidence out of range.
    """
    if not 0.0 < portion <= 1.0:
        raise ValueError(f'portion={portion} must be in (0, 1]')
    if not 0.0 <= min_confidence <= 1.0:
        raise ValueError(f'min_confidence={min_confidence} must be in [0, 1]')
    if len(labels) != len(confidence):
        raise ValueError(f'{len(labels)} label images but {len(confidence)} confidence images')
    for i, (lab, c) in enumerate(zip(labels, confidence)):
        if lab.shape != c.shape:
            raise ValueError(f'frame {i}: labels shape={lab.shape} != confidence {c.shape}')
    if not labels:
        return []
    all_lab = np.concatenate([np.asarray(x).ravel() for x in labels])
    all_conf = np.concatenate([np.asarray(x, np.float32).ravel() for x in confidence])
    threshold = {}
    for c in np.unique(all_lab):
        conf_c = all_conf[all_lab == c]
        # the top `portion`: at or above the (1 - portion) quantile (ties kept)
        threshold[int(c)] = max(float(np.quantile(conf_c, 1.0 - portion)), min_confidence)
    out = []
    for lab, conf in zip(labels, confidence):
        thr = np.zeros(lab.shape, np.float32)
        for c, t in threshold.items():
            thr[lab == c] = t
        out.append(np.asarray(conf, np.float32) >= thr)
    return out


def fit_to_frame(
    labels: np.ndarray, confidence: np.ndarray, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and confidence (e.g. at the network input size) resized with nearest neighbour to
    the frame's ``shape`` = (H, W); returned unchanged when they already have it."""
    if labels.shape == tuple(shape):
        return labels, confidence
    h, w = shape
    conf = cv2.resize(np.asarray(confidence, np.float32), (w, h), interpolation=cv2.INTER_NEAREST)
    return resize_labels(labels, (w, h)), conf


def write_pseudo_labelled(
    src: str | Path,
    out: str | Path,
    predict: Predict,
    portion: float,
    min_confidence: float = 0.0,
    void_id: int = 0,
    provenance: dict | None = None,
) -> dict:
    """Copy dataset directory ``src`` to ``out`` (replaced) with pseudo-label images added to every
    frame that has none (frames with labels keep theirs and are not predicted).

    ``predict`` gives (labels, confidence) at any size (resized to the frame, nearest); the kept
    pixels follow `class_balanced_keep`, the rest is ``void_id``. The manifest gains a
    ``pseudo_labels`` entry (``provenance``, portion, min_confidence, kept fraction per class).
    Returns that entry. Raises FileNotFoundError / ValueError from reading ``src``, ValueError
    when ``out`` is ``src``.
    """
    src, out = Path(src), Path(out)
    if out.resolve() == src.resolve():
        raise ValueError(f'out={out} must not be the source directory')
    class_balanced_keep([], [], portion, min_confidence)  # bad settings refused before any work
    records = read_index(src)
    todo = [r for r in records if not r.get('labels')]
    labs, confs = [], []
    frames = FrameDataset(records=todo) if todo else None  # the one reader of a frame's files
    for i in range(len(todo)):
        rgb, depth, _, K = frames.load_raw(i)
        lab, conf = fit_to_frame(*predict(rgb, K, depth), rgb.shape[:2])
        labs.append(lab.astype(np.int64))
        confs.append(conf)
    keep = class_balanced_keep(labs, confs, portion, min_confidence)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    (out / 'labels').mkdir(exist_ok=True)
    kept: dict[int, list[int]] = {}
    for r, lab, k in zip(todo, labs, keep):
        img = np.where(k, lab, void_id).astype(np.uint8)
        r['labels'] = f"labels/{r['id']}.png"
        r['label_max'] = int(img.max())
        if not cv2.imwrite(str(out / r['labels']), img):
            raise OSError(f"could not write {out / r['labels']}")
        for c in np.unique(lab):
            m = lab == c
            tot = kept.setdefault(int(c), [0, 0])
            tot[0] += int((k & m).sum())
            tot[1] += int(m.sum())
    write_index(out, records)
    entry = {
        **(provenance or {}),
        'portion': portion,
        'min_confidence': min_confidence,
        'frames': len(todo),
        'kept_fraction': {c: round(a / b, 4) for c, (a, b) in sorted(kept.items()) if b},
    }
    manifest = read_manifest(out) or {}
    manifest['pseudo_labels'] = entry
    counts = manifest.setdefault('counts', {})
    counts['with_labels'] = sum(1 for r in records if r.get('labels'))
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return entry


def write_and_report(prog: str, *args, **kwargs) -> int:
    """The pseudo-labelling scripts' last step: `write_pseudo_labelled` (same arguments), its
    manifest entry printed as JSON on stdout; returns the exit status, 0, or 2 after printing a bad
    input's error on stderr as ``prog: message``."""
    try:
        entry = write_pseudo_labelled(*args, **kwargs)
    except (ValueError, FileNotFoundError) as err:
        print(f'{prog}: {err}', file=sys.stderr)
        return 2
    print(json.dumps(entry, indent=1))
    return 0
