"""Class-weighted segmentation losses (loss.class_weights): core.losses.seg_ce's weighted mean,
LossConfig's checks, median-frequency balancing (training.class_weights) and its resolution in a
training run (stored in config.yaml, used on resume)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml

from depth3dseg_ros.core.losses import seg_ce
from depth3dseg_ros.core.train_step import LossConfig, losses_from_outputs
from depth3dseg_ros.training import train
from depth3dseg_ros.training.class_weights import (
    MAX_WEIGHT,
    label_statistics,
    median_frequency_weights,
    resolve_class_weights,
)
from trainutil import make_dataset_dir, tiny_train_args


def _logits_labels(seed: int = 0, c: int = 4):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, c, 5, 6, generator=g)
    labels = torch.randint(0, c, (2, 5, 6), generator=g)
    return logits, labels


def test_weighted_ce_is_the_weighted_mean_of_pixel_terms():
    logits, labels = _logits_labels()
    w = torch.tensor([0.0, 1.0, 3.0, 0.5])
    term = seg_ce(logits, labels, ignore_index=0, class_weights=w)
    per_pixel = F.cross_entropy(logits, labels, reduction='none')
    keep = labels != 0
    wp = w[labels][keep]
    expected = (per_pixel[keep] * wp).sum() / wp.sum()
    assert torch.allclose(term.value, expected) and term.count == int(keep.sum())
    # equal weights give the plain mean
    plain = seg_ce(logits, labels, ignore_index=0)
    same = seg_ce(logits, labels, ignore_index=0, class_weights=torch.full((4,), 2.5))
    assert torch.allclose(plain.value, same.value)


def test_weighted_ce_rejects_a_wrong_length_and_handles_all_zero_weights():
    logits, labels = _logits_labels()
    with pytest.raises(ValueError, match='class_weights has 3 entries, expected C=4'):
        seg_ce(logits, labels, class_weights=torch.ones(3))
    only = torch.where(labels == 0, labels, torch.full_like(labels, 2))  # void and class 2 only
    term = seg_ce(logits, only, class_weights=torch.tensor([0.0, 1.0, 0.0, 1.0]))
    assert term.count == 0 and float(term.value) == 0.0


@pytest.mark.parametrize(
    'value, match',
    [
        ('inverse', "one of \\('median_freq',\\)"),
        ([], 'non-empty list'),
        ([0, 0], 'not all 0'),
        ([1.0, -1.0], 'finite numbers >= 0'),
        ([1.0, float('nan')], 'finite numbers >= 0'),
        ([1.0, True], 'finite numbers >= 0'),
    ],
)
def test_loss_config_checks_class_weights(value, match):
    with pytest.raises(ValueError, match=match):
        LossConfig(class_weights=value)
    assert LossConfig(class_weights='median_freq').class_weights == 'median_freq'


def test_losses_refuse_an_unresolved_preset():
    logits, labels = _logits_labels()
    out = {
        'seg2d': logits,
        'seg3d': logits,
        'depth': torch.ones(2, 1, 5, 6),
        'valid': torch.ones(2, 1, 5, 6, dtype=torch.bool),
    }
    with pytest.raises(ValueError, match='resolved from the training labels'):
        losses_from_outputs(out, {'labels': labels}, LossConfig(class_weights='median_freq'))
    res = losses_from_outputs(out, {'labels': labels}, LossConfig(class_weights=[0, 1, 2, 1]))
    assert torch.isfinite(res['total'])


def test_median_frequency_weights_by_hand():
    # class 1: 600 px over 2 images of 1000 (freq .3); class 2: 100 px in 1 image (.1);
    # class 3: 5 px in 1 image (.005); class 4 absent; class 0 void
    pixels = np.array([50, 600, 100, 5, 0])
    image_pixels = np.array([1000, 2000, 1000, 1000, 0])
    w = median_frequency_weights(pixels, image_pixels, void_id=0)
    # median of (.3, .1, .005) = .1 -> 1/3, 1, min(20, cap)
    assert w == [0.0, round(0.1 / 0.3, 4), 1.0, MAX_WEIGHT, 1.0]
    with pytest.raises(ValueError, match='no non-void pixel'):
        median_frequency_weights(np.array([9, 0]), np.array([9, 0]), void_id=0)


def test_label_statistics_reads_the_label_pngs(tmp_path):
    a = np.zeros((4, 5), np.uint8)
    a[:2] = 2
    b = np.full((4, 5), 1, np.uint8)
    b[0, 0] = 3
    cv2.imwrite(str(tmp_path / 'a.png'), a)
    cv2.imwrite(str(tmp_path / 'b.png'), b)
    recs = [
        {'dir': str(tmp_path), 'labels': 'a.png'},
        {'dir': str(tmp_path), 'labels': 'b.png'},
        {'dir': str(tmp_path), 'labels': None},  # an unlabelled frame counts nothing
    ]
    pixels, image_pixels = label_statistics(recs, 4)
    assert pixels.tolist() == [10, 19, 10, 1] and image_pixels.tolist() == [20, 20, 20, 20]
    with pytest.raises(ValueError, match='has id 3 >= 3'):
        label_statistics(recs, 3)
    assert resolve_class_weights({'class_weights': None}, recs, 4) is None
    with pytest.raises(ValueError, match='has 2 entries, the classes are 4'):
        resolve_class_weights({'class_weights': [1, 1]}, recs, 4)


@pytest.mark.slow  # a training run
def test_training_run_resolves_median_freq_into_its_config(real_dir, tmp_path):
    ds = make_dataset_dir(real_dir, tmp_path / 'ds', size=(80, 60))
    out = tmp_path / 'run'
    args = tiny_train_args(ds, out, '--set', 'loss.class_weights=median_freq', epochs=1)
    assert train.main(args) == 0
    saved = yaml.safe_load((out / 'config.yaml').read_text())['loss']['class_weights']
    assert isinstance(saved, list) and len(saved) == 14 and saved[0] == 0.0
    assert all(0 < w <= MAX_WEIGHT for w in saved[1:])
    assert max(saved) > 1.0 > min(saved[1:])  # rare classes up, frequent ones down
    # a resumed chunk reads the list back, not the labels
    assert train.main(['--resume', '--out', str(out), '--set', 'train.epochs=2']) == 0
    again = yaml.safe_load((out / 'config.yaml').read_text())['loss']['class_weights']
    assert again == saved
