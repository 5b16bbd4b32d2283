"""scripts/set_arch.py: a model file's arch keys that size no tensor, changed in a copy."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch

from depth3dseg_ros.core.modelfile import load_model
from trainutil import perturbed_tiny_model_file

SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'set_arch.py'


def test_set_a_key_keeps_the_weights_and_refuses_what_cannot_work(tmp_path, capsys):
    script = runpy.run_path(str(SCRIPT))
    src = perturbed_tiny_model_file(tmp_path / 'tiny.pt')
    out = tmp_path / 'w25.pt'
    assert (
        script['main'](['--model', str(src), '--set', 'fusion_w3d=0.25', '--out', str(out)]) == 0
    )
    assert 'fusion_w3d: 0.5 -> 0.25' in capsys.readouterr().out
    (m0, meta0), (m1, meta1) = load_model(src), load_model(out)
    assert meta1['arch'] == dict(meta0['arch'], fusion_w3d=0.25)
    assert meta1['classes'] == meta0['classes'] and meta1['mean'] == meta0['mean']
    for k, v in m0.state_dict().items():
        assert torch.equal(m1.state_dict()[k], v), k
    bad = tmp_path / 'bad.pt'
    cases = [
        (['--set', 'fusion_w3d=0'], "fusion_w3d']=0.0 must be in (0, 1]"),
        (['--set', 'depth_gain=2'], 'fit it with depth3dseg-calibrate'),
        (['--set', 'width=1.0'], 'changes the shape of the weights'),
        (['--set', 'widht=1.0'], 'unknown keys'),
        (['--set', 'num_classes=5'], 'num_classes=5: it sizes the heads'),
        (['--set', 'fusion_w3d'], 'must be KEY=VALUE'),
    ]
    for args, msg in cases:
        with pytest.raises(SystemExit) as ex:
            script['main'](['--model', str(src), *args, '--out', str(bad)])
        assert ex.value.code == 2 and msg in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script['main'](['--model', str(src), '--set', 'p_k=6', '--out', str(src)])
    assert 'is the input model file' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script['main'](['--model', str(src), '--set', 'p_k=6', '--out', str(out)])
    assert f'--out {out} exists' in capsys.readouterr().err
    assert not bad.exists()
    # integers for float keys become floats; the file's top-level max_depth follows the network's;
    # YAML 1.1's string 1e-1 is the number
    depth = tmp_path / 'depth8.pt'
    args = ['--set', 'max_depth=8', '--set', 'fusion_w3d=1e-1', '--out', str(depth)]
    assert script['main'](['--model', str(src), *args]) == 0
    meta = load_model(depth)[1]
    assert meta['arch']['max_depth'] == 8.0 and type(meta['arch']['max_depth']) is float
    assert meta['max_depth'] == 8.0 and meta['arch']['fusion_w3d'] == 0.1


def test_input_balance_changes_only_the_preprocessing(tmp_path, capsys):
    script = runpy.run_path(str(SCRIPT))
    src = perturbed_tiny_model_file(tmp_path / 'tiny.pt')
    out = tmp_path / 'gw.pt'
    args = ['--model', str(src), '--input-balance', 'grey_world', '--out', str(out)]
    assert script['main'](args) == 0
    assert "input_balance: 'none' -> 'grey_world'" in capsys.readouterr().out
    (m0, meta0), (m1, meta1) = load_model(src), load_model(out)
    assert meta0['input_balance'] == 'none' and meta1['input_balance'] == 'grey_world'
    assert meta1['arch'] == meta0['arch']
    for k, v in m0.state_dict().items():
        assert torch.equal(m1.state_dict()[k], v), k
    for args, msg in [
        (['--input-balance', 'grey'], "invalid choice: 'grey'"),
        ([], 'nothing to change'),
    ]:
        with pytest.raises(SystemExit) as ex:
            script['main'](['--model', str(src), *args, '--out', str(tmp_path / 'bad.pt')])
        assert ex.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / 'bad.pt').exists()
