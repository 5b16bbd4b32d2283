"""train.mixstyle: feature-statistics mixing in the 2D encoder while training (mixstyle.py)."""

from __future__ import annotations

import pytest
import torch

from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training import train
from depth3dseg_ros.training.config import load_config
from depth3dseg_ros.training.mixstyle import (
    DEFAULTS,
    attach_mixstyle,
    check_mixstyle,
    mix_statistics,
)
from trainutil import make_dataset_dir, tiny_model, tiny_train_args


def test_mix_statistics_moves_each_frame_to_the_mixed_channel_statistics():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 6, 7) * torch.tensor([1.0, 3.0, 0.5]).view(3, 1, 1, 1) + 2.0
    perm = torch.tensor([2, 0, 1])
    assert torch.allclose(mix_statistics(x, torch.ones(3), perm), x, atol=1e-4)
    # lam 0: frame i takes frame perm[i]'s per-channel mean and std, its own normalised content
    y = mix_statistics(x, torch.zeros(3), perm)
    assert torch.allclose(y.mean(dim=(2, 3)), x[perm].mean(dim=(2, 3)), atol=1e-4)
    assert torch.allclose(y.std(dim=(2, 3)), x[perm].std(dim=(2, 3)), atol=1e-3)
    z = (x - x.mean(dim=(2, 3), keepdim=True)) / x.std(dim=(2, 3), keepdim=True)
    zy = (y - y.mean(dim=(2, 3), keepdim=True)) / y.std(dim=(2, 3), keepdim=True)
    assert torch.allclose(z, zy, atol=1e-3)
    # lam 0.25: mean and std are the convex mixes
    y = mix_statistics(x, torch.full((3,), 0.25), perm)
    want = 0.25 * x.mean(dim=(2, 3)) + 0.75 * x[perm].mean(dim=(2, 3))
    assert torch.allclose(y.mean(dim=(2, 3)), want, atol=1e-4)


def test_hooks_change_training_forwards_only_and_follow_the_seed():
    """Eval mode: the identity. Training mode (whose outputs use batch statistics, so running
    statistics moving between calls do not matter): p 1 changes the output, the same seed gives
    the same mix, p 0 and a batch of one frame change nothing."""
    model = tiny_model()
    x = torch.randn(4, 3, 48, 64)
    model.eval()
    ref_eval = model.net(x)['seg2d']
    handles = attach_mixstyle(model, check_mixstyle({'p': 1.0}))
    assert len(handles) == len(DEFAULTS['stages'])
    assert torch.equal(model.net(x)['seg2d'], ref_eval)
    model.train()
    torch.manual_seed(1)
    mixed = model.net(x)['seg2d']
    torch.manual_seed(1)
    assert torch.equal(model.net(x)['seg2d'], mixed)
    one = model.net(x[:1])['seg2d']
    for h in handles:
        h.remove()
    assert torch.equal(model.net(x[:1])['seg2d'], one)
    plain = model.net(x)['seg2d']
    assert (mixed - plain).abs().max() > 1e-3
    never = attach_mixstyle(model, check_mixstyle({'p': 0.0}))
    assert torch.equal(model.net(x)['seg2d'], plain)
    for h in never:
        h.remove()
    assert attach_mixstyle(model, None) == []


def test_config_validation_names_the_key_and_value():
    cfg = load_config(None, ['train.mixstyle={alpha: 0.3}'])
    assert cfg['train']['mixstyle'] == dict(DEFAULTS, alpha=0.3)
    assert load_config(None, [])['train']['mixstyle'] is None
    for bad, match in [
        ('train.mixstyle=0.5', r'train.mixstyle=0.5 must be null or a mapping'),
        ('train.mixstyle={p: 2}', r'train.mixstyle.p=2 must be a probability'),
        ('train.mixstyle={alpha: 0}', r'train.mixstyle.alpha=0 must be a number > 0'),
        ('train.mixstyle={stages: [9]}', r'train.mixstyle.stages=\[9\] must be'),
        ('train.mixstyle={stages: []}', r'train.mixstyle.stages=\[\] must be'),
        ('train.mixstyle={beta: 1}', r"unknown key\(s\) \['beta'\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            load_config(None, [bad])


@pytest.mark.slow
def test_a_run_with_mixstyle_trains_and_exports_an_unchanged_model_format(real_dir, tmp_path):
    """A run with ``train.mixstyle`` writes it into config.yaml and exports a model file whose
    arch is the plain one (the hooks are training-only)."""
    ds = make_dataset_dir(real_dir, tmp_path / 'd', size=(80, 60))
    out = tmp_path / 'run'
    args = ['--set', 'train.mixstyle={p: 1.0, stages: [1, 2]}']
    assert train.main(tiny_train_args(ds, out, *args, epochs=1)) == 0
    assert 'mixstyle:\n    p: 1.0' in (out / 'config.yaml').read_text()
    model, meta = load_model(out / 'model.pt')
    assert 'mixstyle' not in str(meta)
    assert not any(m._forward_hooks for m in model.modules())
