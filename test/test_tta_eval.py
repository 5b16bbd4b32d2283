"""scripts/tta_eval.py: test-time augmentation of the 2D+depth net (docs/levers.md, "Test-time
augmentation"). The single view '1' must be the model as depth3dseg-eval scores it; a mirrored
view must undo its mirror (a mirrored image under '1f' gives the mirrored outputs)."""

from __future__ import annotations

import types

import pytest
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import evaluate_model, model_dataset
from trainutil import make_dataset_dir, script_with_tiny_model


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    return script_with_tiny_model('tta_eval.py', real_dir, tmp_path_factory.mktemp('tta'))


def test_single_view_is_depth3dseg_eval(setup):
    script, path, data = setup
    res = script['evaluate_views'](str(path), [str(data)], ['1', '1f+0.5'])
    model, meta = load_model(path, map_location='cpu')
    records = [r for r in load_records([data], NYU13) if r.get('labels')]
    ref = evaluate_model(model, model_dataset(records, meta, NYU13), NYU13)
    for k in script['KEYS']:
        assert res['1'][k] == pytest.approx(ref[k], abs=1e-9), k
    assert res['1']['frames'] == len(records)
    assert res['1f+0.5']['absrel'] != pytest.approx(res['1']['absrel'], abs=1e-6)


def test_mirrored_view_is_mapped_back(setup):
    script, path, _ = setup
    model, _ = load_model(path, map_location='cpu')
    model.eval()
    torch.manual_seed(1)
    x = torch.randn(1, 3, 48, 64)
    tta = types.MethodType(script['tta_forward_2d'](model, script['parse_views']('1f')), model)
    with torch.no_grad():
        a, b = tta(x), tta(torch.flip(x, [-1]))
        ref = model.forward_2d(x)
    for k in ('seg2d', 'depth'):
        assert a[k].shape == ref[k].shape
        torch.testing.assert_close(torch.flip(b[k], [-1]), a[k], rtol=1e-4, atol=1e-5)
    # the mean of the image and its mirror, not the image alone
    assert not torch.allclose(a['seg2d'], ref['seg2d'])


def test_views_parse_and_bad_specs_are_refused(setup, real_dir, tmp_path):
    script, path, data = setup
    assert script['parse_views']('0.75+1f') == [(0.75, False), (1.0, False), (1.0, True)]
    with pytest.raises(ValueError, match=r"view '1\+x': 'x' is not a scale"):
        script['parse_views']('1+x')
    with pytest.raises(ValueError, match=r"view '0': scale 0.0 must lie in \(0, 4\]"):
        script['parse_views']('0')
    unlabelled = make_dataset_dir(real_dir, tmp_path / 'u', size=(96, 72), labels=False)
    with pytest.raises(ValueError, match='no labelled frame'):
        script['evaluate_views'](str(path), [str(unlabelled)], ['1'])


def test_command_line_reports_bad_paths_as_usage_errors(setup, tmp_path, capsys):
    script, path, data = setup
    for argv in (
        ['--model', str(tmp_path / 'none.pt'), '--data', str(data)],
        ['--model', str(path), '--data', str(tmp_path / 'no_dir')],
    ):
        with pytest.raises(SystemExit) as e:
            script['main'](argv)
        assert e.value.code == 2, argv
        err = capsys.readouterr().err
        assert 'error:' in err and 'Traceback' not in err, err
    assert script['main'](['--model', str(path), '--data', str(data), '--views', '1']) == 0
    assert '| 1 | ' in capsys.readouterr().out
