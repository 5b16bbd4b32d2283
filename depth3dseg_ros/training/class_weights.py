"""Class weights for the segmentation losses, from the training labels (``loss.class_weights``).

Median-frequency balancing (Eigen & Fergus, ICCV 2015, the usual NYUv2 recipe): the weight of
class c is ``median(freq) / freq(c)``, where ``freq(c)`` is the number of pixels of class c divided
by the number of pixels of the labelled images in which c appears at all, and the median is taken
over the classes that appear. Frequent classes (wall, floor) get weights below 1, rare ones (tv,
books, chair) above 1, so that mIoU — a mean over classes — is not left to the few classes that
cover most pixels. Weights are capped at :data:`MAX_WEIGHT` (a class seen in a handful of pixels
would otherwise dominate the loss); the void class and classes that never appear get 0 and 1
(neither is ever a target).

The run resolves ``'median_freq'`` once, before the first step, and stores the list in its
``config.yaml``: a resumed run uses the same weights without reading the labels again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import cv2
import numpy as np

from depth3dseg_ros.core.image_decode import read_image_file

#: Upper bound of a median-frequency weight.
MAX_WEIGHT = 10.0


def label_statistics(
    records: Sequence[dict[str, Any]], num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class pixel counts over the labelled frames of ``records`` (dataset index entries with
    ``dir`` and ``labels``), at their stored size.

    Returns (pixels, image_pixels): int64 arrays of length ``num_classes`` — the pixels of each
    class, and the total pixels of the images in which that class appears. Raises ValueError
    naming the file for an unreadable label PNG or an id >= ``num_classes``.
    """
    pixels = np.zeros(num_classes, np.int64)
    image_pixels = np.zeros(num_classes, np.int64)
    for rec in records:
        if not rec.get('labels'):
            continue
        path = Path(rec['dir']) / rec['labels']
        lab = read_image_file(str(path), cv2.IMREAD_UNCHANGED)
        if lab is None or lab.ndim != 2:
            raise ValueError(f'label image {path} missing or not single-channel')
        counts = np.bincount(lab.ravel(), minlength=num_classes)
        if len(counts) > num_classes:
            raise ValueError(f'label image {path} has id {len(counts) - 1} >= {num_classes}')
        pixels += counts
        image_pixels[counts > 0] += lab.size
    return pixels, image_pixels


def median_frequency_weights(
    pixels: np.ndarray, image_pixels: np.ndarray, void_id: int, max_weight: float = MAX_WEIGHT
) -> list[float]:
    """Median-frequency weights (module docstring) from `label_statistics`' arrays: a list of C
    floats, void 0, absent classes 1, others ``min(median / freq, max_weight)``. Raises
    ValueError when no non-void class has a pixel."""
    freq = np.zeros(len(pixels), np.float64)
    present = (pixels > 0) & (np.arange(len(pixels)) != void_id)
    if not present.any():
        raise ValueError(
            'loss.class_weights=median_freq: the training labels have no non-void pixel'
        )
    freq[present] = pixels[present] / image_pixels[present]
    median = float(np.median(freq[present]))
    weights = np.ones(len(pixels), np.float64)
    weights[present] = np.minimum(median / freq[present], max_weight)
    weights[void_id] = 0.0
    return [round(float(w), 4) for w in weights]


def resolve_class_weights(
    loss_cfg: dict[str, Any], records: Sequence[dict[str, Any]], num_classes: int
) -> list[float] | None:
    """The list ``loss_cfg['class_weights']`` stands for: None stays None, a list is returned as
    it is (checked for length ``num_classes``), ``'median_freq'`` is computed from ``records``'
    labels. Raises ValueError for a list of the wrong length."""
    spec = loss_cfg.get('class_weights')
    if spec is None:
        return None
    if isinstance(spec, str):  # LossConfig checked the name
        pixels, image_pixels = label_statistics(records, num_classes)
        return median_frequency_weights(pixels, image_pixels, int(loss_cfg.get('void_id', 0)))
    if len(spec) != num_classes:
        raise ValueError(
            f'config loss.class_weights has {len(spec)} entries, the classes are {num_classes}'
        )
    return [float(w) for w in spec]
