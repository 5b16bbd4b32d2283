"""Oversampling a small dataset by listing its directory several times in data.train
(docs/levers.md "Real-camera levers": 11 real unlabelled RGB-D frames against 3,000 synthetic
ones; METHOD M5: frames without labels train on the terms they have)."""

from __future__ import annotations

import numpy as np
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.training.config import load_config
from depth3dseg_ros.training.run import build_datasets
from trainutil import make_dataset_dir


def test_repeated_train_directory_oversamples_its_frames(real_dir, tmp_path):
    """A directory listed k times contributes k copies of each of its frames, in list order; each
    copy is its own sample (own index, so its own augmentation draw) and keeps has_labels False."""
    synth = make_dataset_dir(real_dir, tmp_path / 'a', size=(64, 48), names=['nyu0001', 'nyu0046'])
    real = make_dataset_dir(
        real_dir, tmp_path / 'b', size=(64, 48), names=['m3d_rgb_00000'], labels=False
    )
    cfg = load_config(
        sets=[
            f'data.train=[{synth},{real},{real},{real}]',
            f'data.val=[{synth}]',
            'data.input_size=[64,48]',
        ]
    )
    assert cfg['data']['train'] == [str(synth)] + [str(real)] * 3
    train_ds, val_ds = build_datasets(cfg, NYU13)
    assert len(train_ds) == 2 + 3 and len(val_ds) == 2
    assert [r['dir'].name for r in train_ds.records] == ['a', 'a', 'b', 'b', 'b']
    copies = [train_ds[i] for i in (2, 3, 4)]
    assert [int(c['index']) for c in copies] == [2, 3, 4]
    for c in copies:
        assert bool(c['has_depth']) and not bool(c['has_labels'])
        assert torch.isfinite(c['depth']).any()
    # same frame, different sample index: different augmentation draws (not three identical inputs)
    assert not all(np.allclose(copies[0]['rgb'], c['rgb']) for c in copies[1:])
