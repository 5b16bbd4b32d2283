"""Cases C31, C32, C33, C35, C36 with the exact values of docs/cases.md (metrics, checkpoints,
sampler order, augmentation draws). C35 is checked on training.sampling's global order without
processes; the DDP run itself is test_train_ddp.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.metrics import ConfusionMatrix
from depth3dseg_ros.training import train
from depth3dseg_ros.training.checkpoint import load_checkpoint, save_checkpoint
from depth3dseg_ros.training.config import DEFAULTS
from depth3dseg_ros.training.dataset import FrameDataset, read_index
from depth3dseg_ros.training.sampling import EpochBatchSampler
from trainutil import make_dataset_dir, tiny_train_args


@pytest.mark.parametrize('as_torch', [False, True])
def test_c31_class_absent_from_gt_and_prediction_is_left_out(as_torch):
    def cm_of(pred, gt):
        cm = ConfusionMatrix(4, void_id=0)
        conv = torch.tensor if as_torch else np.array
        cm.update(conv(pred), conv(gt))
        return cm

    same = cm_of([[1, 1], [2, 2]], [[1, 1], [2, 2]])
    assert same.miou() == 1.0  # class 3: in neither, left out
    cm = cm_of([1, 3, 2, 2], [1, 1, 2, 2])
    np.testing.assert_allclose(cm.iou()[1:], [0.5, 1.0, 0.0])  # class 3 only predicted: IoU 0
    assert cm.miou() == pytest.approx(0.5)
    void = cm_of([1, 2, 3, 1], [0, 0, 0, 0])
    assert void.total == 0 and math.isnan(void.miou())
    assert json.loads(json.dumps(void.summary()))['miou'] is None  # null in JSON


def test_c32_no_index_overflow_and_int64_accumulation():
    cm = ConfusionMatrix(17, void_id=None)
    x = np.full((4, 4), 16, np.uint8)
    cm.update(x, x)
    assert cm.mat[16, 16] == 16 and cm.mat[1, 15] == 0  # 16*17+16 computed without wrapping
    for dt in (np.uint16, np.int16):
        big = ConfusionMatrix(300, void_id=None)
        big.update(np.array([299, 5], dt), np.array([299, 299], dt))
        assert big.mat[299, 299] == 1 and big.mat[299, 5] == 1
    acc = ConfusionMatrix(2, void_id=None)
    acc.mat[1, 1] = 2**31 - 1
    acc.update(np.array([1]), np.array([1]))
    assert int(acc.mat[1, 1]) == 2_147_483_648
    other = ConfusionMatrix(2, void_id=None)
    other.mat[1, 1] = 2**32
    acc += other
    assert int(acc.mat[1, 1]) == 6_442_450_944 and acc.mat.dtype == np.int64


def _plain(obj, path='ckpt'):
    """Every leaf is a tensor or a plain Python value: no numpy scalar or array anywhere."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _plain(v, f'{path}.{k}')
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _plain(v, f'{path}[{i}]')
    else:
        assert not isinstance(obj, (np.generic, np.ndarray)), f'{path} is {type(obj).__name__}'


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


def test_c33_checkpoints_load_weights_only_with_no_numpy_inside(ds_dir, tmp_path):
    out = tmp_path / 'run'
    args = tiny_train_args(
        ds_dir,
        out,
        '--set',
        'loss.uncertainty_weighting=true',
        epochs=2,
    )
    assert train.main(args) == 0
    for name in ('last.pt', 'best.pt', 'model.pt'):
        state = torch.load(out / name, weights_only=True)  # the safe unpickler accepts every file
        _plain(state, name)
    json.loads((out / 'summary.json').read_text())  # plain JSON


def test_c33_save_checkpoint_makes_numpy_and_paths_plain_and_names_what_it_cannot(tmp_path):
    """Whatever a caller puts in (a metric as np.float64, a flag as np.bool_, an array, a Path),
    save_checkpoint writes what the weights-only loader accepts, with the same values."""
    state = {
        'model': {'w': torch.ones(2)},
        'epoch': np.int64(3),
        'early_stop': {'best': np.float32(0.25), 'stale': np.bool_(True), 'hist': np.arange(3)},
        'out': Path('/tmp/run'),
        'shape': (np.int32(2), 4),
    }
    save_checkpoint(tmp_path / 'c.pt', state)
    got = load_checkpoint(tmp_path / 'c.pt')
    _plain(got, 'c.pt')
    assert got['epoch'] == 3 and type(got['epoch']) is int
    assert got['early_stop']['best'] == 0.25 and got['early_stop']['stale'] is True
    assert torch.equal(got['early_stop']['hist'], torch.arange(3)) and got['out'] == '/tmp/run'
    assert got['shape'] == (2, 4)
    with pytest.raises(TypeError, match=r"checkpoint\['early_stop'\]\['fn'\] is a function"):
        save_checkpoint(tmp_path / 'd.pt', {'model': {}, 'early_stop': {'fn': lambda: 0}})
    assert not (tmp_path / 'd.pt').exists()


def test_c35_each_epoch_has_its_own_order_and_ranks_are_disjoint():
    orders = []
    for epoch in (0, 1):
        ranks = [list(EpochBatchSampler(10, 2, 2, r, seed=0, epoch=epoch)) for r in (0, 1)]
        flat = [[i for b in batches for i in b] for batches in ranks]
        assert not set(flat[0]) & set(flat[1])  # disjoint per epoch
        assert sorted(flat[0] + flat[1]) == list(range(10))
        orders.append(flat[0] + flat[1])
    assert orders[0] != orders[1]  # epoch 1's order differs from epoch 0's


def test_c36_augmentation_draws_differ_per_index_and_epoch_and_ignore_workers(ds_dir):
    rec = read_index(ds_dir)[0]
    aug = dict(DEFAULTS['augment'])  # the default augmentation
    ds = FrameDataset(
        records=[dict(rec) for _ in range(8)], input_size=(64, 48), augment=aug, seed=3
    )

    def draws(epoch, workers):
        ds.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=workers)
        return [b['rgb'][i].numpy().tobytes() for b in loader for i in range(len(b['rgb']))]

    e0, e1 = draws(0, 0), draws(1, 0)
    assert len(set(e0)) == 8  # 8 distinct draws of the same frame
    assert all(a != b for a, b in zip(e0, e1))  # an index draws anew each epoch
    assert draws(0, 2) == e0  # the same with 2 workers (reproducible)
