"""train.trainable: a fine-tune that updates only the named parameters (training/trainable.py)."""

from __future__ import annotations

import re

import pytest
import torch

from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training import train
from depth3dseg_ros.training.config import load_config
from depth3dseg_ros.training.trainable import freeze_frozen_batchnorm, select_trainable
from trainutil import make_dataset_dir, tiny_model, tiny_train_args


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('tr') / 'd', size=(80, 60))


def test_depth_head_only_fine_tune_leaves_everything_else_bit_identical(ds_dir, tmp_path):
    """``train.trainable=[net.depth_head]``: the depth head's weights move; every other weight and
    every BatchNorm running statistic outside it (the 2D segmentation and the point network) is
    exactly as the start file had it."""
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds_dir, base, epochs=1)) == 0
    init = load_model(base / 'model.pt')[0].state_dict()
    out = tmp_path / 'ft'
    init_arg = f'model.init={base / "model.pt"}'
    args = ['--set', init_arg, '--set', 'train.trainable=[net.depth_head]']
    assert train.main(tiny_train_args(ds_dir, out, *args, epochs=1)) == 0
    sd = load_model(out / 'model.pt')[0].state_dict()
    moved = {k for k in init if not torch.equal(sd[k], init[k])}
    assert moved and all(k.startswith('net.depth_head.') for k in moved), sorted(moved)
    assert any(k.endswith('weight') for k in moved)


def test_select_trainable_names_and_errors():
    model = tiny_model()
    params = select_trainable(model, ['pointnet', 'net.seg_head'])
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names and all(n.startswith(('pointnet.', 'net.seg_head.')) for n in names)
    assert len(params) == len(names)
    model.train()
    assert freeze_frozen_batchnorm(model) > 0
    bn = torch.nn.modules.batchnorm._BatchNorm
    assert all(not m.training for m in model.net.encoder.modules() if isinstance(m, bn))
    assert all(m.training for m in model.net.seg_head.modules() if isinstance(m, bn))
    assert len(select_trainable(model, None)) == len(list(model.parameters()))
    with pytest.raises(ValueError, match=r"'net.depth' names no parameter.*net.depth_head"):
        select_trainable(model, ['net.depth'])  # a prefix matches at a dot boundary only
    with pytest.raises(ValueError, match=r'train.trainable=\[\] trains nothing'):
        select_trainable(model, [])
    with pytest.raises(ValueError, match=r'config train.trainable=.*prefixes'):
        load_config(None, ['train.trainable=net.depth_head'])


def test_resume_refuses_a_changed_trainable_and_the_run_says_what_trains(ds_dir, tmp_path, capsys):
    """The optimiser state of a ``train.trainable`` run belongs to its trainable parameters, so
    ``--resume`` with another list (or null) is refused naming the key (found by a fresh-clone
    check: torch's own error, a traceback, or silently the wrong Adam moments); the run prints how
    many parameters train and warns when no model.init gives the frozen part trained weights."""
    out = tmp_path / 'run'
    args = ['--set', 'train.trainable=[net.depth_head]']
    assert train.main(tiny_train_args(ds_dir, out, *args, epochs=1)) == 0
    err = capsys.readouterr()
    assert re.search(r"train.trainable \['net.depth_head'\]: [\d,]+ of [\d,]+ parameters", err.out)
    assert 'without model.init' in err.err
    resume = ['--out', str(out), '--resume', '--set', 'train.epochs=2']
    for new in ('null', '[net.seg_head]'):
        assert train.main([*resume, '--set', f'train.trainable={new}']) == 2
        assert 'train.trainable' in capsys.readouterr().err
    assert train.main(resume) == 0
