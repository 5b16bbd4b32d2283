"""scripts/weight_average.py: the weight average ("model soup") of model files fine-tuned from one
model (docs/levers.md, "Weight averaging"). Every floating-point tensor must be the weighted mean
of the ingredients', integer buffers the first file's; files of another arch or class set are
refused with the key named; the result loads and runs like any model file."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
import yaml

from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import ModelFileError, load_model, save_model
from trainutil import TINY_ARCH

SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'weight_average.py'


def _model(path: Path, seed: int, classes=NYU13, **arch) -> Path:
    torch.manual_seed(seed)
    model = Depth3DSeg(len(classes), **{**yaml.safe_load(TINY_ARCH), **arch})
    with torch.no_grad():  # distinct BatchNorm statistics too (they are averaged like weights)
        for name, buf in model.named_buffers():
            if buf.is_floating_point():
                buf.add_(torch.rand_like(buf))
            elif 'num_batches_tracked' in name:
                buf.fill_(seed + 1)
    save_model(path, model, {'classes': classes, 'input_size': [96, 72]})
    return path


@pytest.fixture(scope='module')
def script():
    return runpy.run_path(str(SCRIPT))


def test_every_float_tensor_is_the_weighted_mean(script, tmp_path):
    paths = [str(_model(tmp_path / f'm{s}.pt', s)) for s in (0, 1, 2)]
    states = [load_model(p)[0].state_dict() for p in paths]
    model, meta = script['average_models'](paths, [1.0, 1.0, 2.0])
    w = [0.25, 0.25, 0.5]
    for k, v in model.state_dict().items():
        if v.is_floating_point():
            want = sum(wi * s[k].double() for wi, s in zip(w, states)).float()
            torch.testing.assert_close(v, want, rtol=1e-6, atol=1e-6, msg=k)
            assert not torch.equal(v, states[0][k]) or torch.equal(states[0][k], states[1][k]), k
        else:
            assert torch.equal(v, states[0][k]), k
    assert meta['training']['weight_average'] == {'models': paths, 'weights': w}


def test_cli_writes_a_model_file_that_runs(script, tmp_path):
    a, b = _model(tmp_path / 'a.pt', 0), _model(tmp_path / 'b.pt', 1)
    out = tmp_path / 'soup' / 'soup.pt'
    assert script['main']([str(a), str(b), '--out', str(out)]) == 0
    model, meta = load_model(out)
    assert meta['training']['weight_average']['weights'] == [0.5, 0.5]
    K = torch.tensor([[[80.0, 0, 48], [0, 80, 36], [0, 0, 1]]])
    with torch.no_grad():
        o = model(torch.zeros(1, 3, 72, 96), K)
    assert o['depth'].shape == (1, 1, 72, 96) and torch.isfinite(o['depth']).all()


def test_different_arch_or_classes_are_refused(script, tmp_path):
    a = str(_model(tmp_path / 'a.pt', 0))
    wide = str(_model(tmp_path / 'wide.pt', 1, p_head=8))
    other = ClassSet(['void', 'x', 'y'], [[0, 0, 0], [255, 0, 0], [0, 255, 0]])
    few = str(_model(tmp_path / 'few.pt', 1, classes=other))
    with pytest.raises(ModelFileError, match=r"wide.pt: meta\['arch'\]"):
        script['average_models']([a, wide])
    with pytest.raises(ModelFileError, match=r"few.pt: meta\['classes'\]"):
        script['average_models']([a, few])


@pytest.mark.parametrize(
    ('argv', 'match'),
    [
        (['a.pt'], 'two or more model files'),
        (['a.pt', 'b.pt', '--weights', '1'], '1 weights for 2 model files'),
        (['a.pt', 'b.pt', '--weights', '1', '-1'], 'must be >= 0'),
        (['a.pt', 'missing.pt'], 'model file not found'),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(script, tmp_path, capsys, argv, match):
    _model(tmp_path / 'a.pt', 0), _model(tmp_path / 'b.pt', 1)
    argv = [str(tmp_path / x) if x.endswith('.pt') else x for x in argv]
    with pytest.raises(SystemExit) as e:
        script['main'](argv + ['--out', str(tmp_path / 'o.pt')])
    assert e.value.code == 2 and match in capsys.readouterr().err


def test_a_different_input_balance_needs_the_soups_named(script, tmp_path, capsys):
    a = str(_model(tmp_path / 'a.pt', 0))
    gw = tmp_path / 'gw.pt'
    model, meta = load_model(_model(tmp_path / 'b.pt', 1))
    save_model(gw, model, {**meta, 'input_balance': 'grey_world'})
    with pytest.raises(ModelFileError, match=r"gw.pt: meta\['input_balance'\]='grey_world'"):
        script['average_models']([a, str(gw)])
    assert (
        script['average_models']([a, str(gw)], input_balance='grey_world')[1]['input_balance']
        == 'grey_world'
    )
    assert script['average_models']([a, a])[1]['input_balance'] == 'none'
    out = tmp_path / 'soup.pt'
    argv = [a, str(gw), '--input-balance', 'grey_world', '--out', str(out)]
    assert script['main'](argv) == 0 and load_model(out)[1]['input_balance'] == 'grey_world'
    with pytest.raises(SystemExit) as e:
        script['main']([a, str(gw), '--out', str(tmp_path / 'o.pt')])
    assert e.value.code == 2 and 'name the soup' in capsys.readouterr().err
