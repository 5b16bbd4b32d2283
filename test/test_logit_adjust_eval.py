"""scripts/logit_adjust_eval.py: post-hoc logit adjustment by the training label prior
(docs/levers.md, "Logit adjustment by the training prior"). τ = 0 must be the model as
depth3dseg-eval scores it; the prior must count the label images' pixels, void excluded; a
larger τ must move predictions towards the rarer classes."""

from __future__ import annotations

import types
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import evaluate_model, model_dataset
from trainutil import make_dataset_dir, script_with_tiny_model


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('logit_adjust')
    return script_with_tiny_model('logit_adjust_eval.py', real_dir, tmp)


def test_prior_counts_label_pixels_without_void(setup):
    script, _, data = setup
    counts = np.zeros(len(NYU13))
    for rec in read_index(data):
        if rec.get('labels'):
            lab = cv2.imread(str(Path(rec['dir']) / rec['labels']), cv2.IMREAD_UNCHANGED)
            counts += np.bincount(lab.ravel(), minlength=len(NYU13))
    counts[NYU13.void_id] = 0
    prior = script['label_prior']([str(data)], NYU13)
    np.testing.assert_allclose(prior, counts / counts.sum())
    assert prior[NYU13.void_id] == 0 and prior.sum() == pytest.approx(1.0)


def test_tau_zero_is_depth3dseg_eval_and_tau_moves_towards_rare_classes(setup):
    script, path, data = setup
    prior = np.full(len(NYU13), 0.5 / (len(NYU13) - 2))
    prior[NYU13.void_id], prior[12] = 0.0, 0.5  # wall common, every other class rare
    res = script['evaluate_taus'](str(path), [str(data)], prior, [0.0, 5.0])
    model, meta = load_model(path, map_location='cpu')
    records = [r for r in load_records([data], NYU13) if r.get('labels')]
    ref = evaluate_model(model, model_dataset(records, meta, NYU13), NYU13)
    for k in script['KEYS']:
        assert res[0.0][k] == pytest.approx(ref[k], abs=1e-9), k
    assert res[5.0]['absrel'] == pytest.approx(ref['absrel'], abs=1e-9)  # depth is untouched
    # the shifted logits: wall loses τ·log(0.5 / p_rare) against every other class
    model.eval()
    x, K = torch.randn(1, 3, 72, 96), torch.tensor([[[80.0, 0, 48], [0, 80, 36], [0, 0, 1]]])
    with torch.no_grad():
        a = model(x, K)
        shift = script["logit_shift"](prior, 5.0, NYU13)
        model.forward = types.MethodType(script["adjusted_forward"](model, shift), model)
        b = model(x, K)
    gap = (a['seg2d'] - b['seg2d'])[:, 12] - (a['seg2d'] - b['seg2d'])[:, 1]
    torch.testing.assert_close(gap, torch.full_like(gap, 5.0 * np.log(0.5 / prior[1])))
    assert torch.equal(a['depth'], b['depth'])


def test_bad_inputs_are_refused(setup, real_dir, tmp_path):
    script, path, data = setup
    unlabelled = make_dataset_dir(real_dir, tmp_path / 'u', size=(96, 72), labels=False)
    with pytest.raises(ValueError, match='no labelled frame to count a prior'):
        script['label_prior']([str(unlabelled)], NYU13)
    with pytest.raises(ValueError, match='prior has 3 classes, the model 14'):
        script['evaluate_taus'](str(path), [str(data)], np.ones(3) / 3, [0.0])
    with pytest.raises(ValueError, match='no labelled frame'):
        script['evaluate_taus'](str(path), [str(unlabelled)], np.ones(14) / 14, [0.0])


def test_a_class_missing_from_the_prior_or_a_bad_tau_is_refused(setup):
    script, path, data = setup
    prior = np.full(len(NYU13), 1.0 / 12)
    prior[NYU13.void_id], prior[NYU13.names.index('tv')] = 0.0, 0.0
    with pytest.raises(ValueError, match='the prior data has no pixels of tv: log 0'):
        script['logit_shift'](prior, 1.0, NYU13)
    assert not script['logit_shift'](prior, 0.0, NYU13).any()  # τ = 0 shifts nothing
    with pytest.raises(ValueError, match='the prior data has no pixels of tv'):  # before any frame
        script['evaluate_taus'](str(path), [str(data)], prior, [0.0, 1.0])
    with pytest.raises(ValueError, match='tau=nan must be a finite number'):
        script['logit_shift'](np.full(len(NYU13), 1 / 13), float('nan'), NYU13)
    with pytest.raises(ValueError, match='every=0 must be >= 1'):
        script['label_prior']([str(data)], NYU13, every=0)


def test_command_line_reports_bad_paths_as_usage_errors(setup, tmp_path, capsys):
    script, path, data = setup
    cases = [
        ['--model', str(tmp_path / 'none.pt'), '--prior-data', str(data)],
        ['--model', str(path), '--prior-data', str(tmp_path / 'no_dir')],
        ['--model', str(path), '--prior-data', str(data), '--data', str(tmp_path)],
        ['--model', str(path), '--prior-data', str(data), '--every', '0'],
    ]
    for argv in cases:
        with pytest.raises(SystemExit) as e:
            script['main'](argv)
        assert e.value.code == 2, argv
        err = capsys.readouterr().err
        assert 'error:' in err and 'Traceback' not in err, err
    assert (
        script['main'](
            ['--model', str(path), '--prior-data', str(data), '--data', str(data), '--taus', '0']
        )
        == 0
    )
    assert '| 0 | ' in capsys.readouterr().out
