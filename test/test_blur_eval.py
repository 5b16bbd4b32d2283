"""scripts/blur_eval.py: the input low-pass lever measured at test time (docs/levers.md, "A
low-pass of the input image"). σ 0 must be the model as depth3dseg-eval scores it, and a σ must
score exactly what a model file with arch input_blur = σ (the form the lever ships in) scores."""

from __future__ import annotations

import pytest
import torch

from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import load_model, save_model
from depth3dseg_ros.training.evaluate import evaluate_model
from depth3dseg_ros.training.forward_variants import KEYS, evaluate_variants, load_labelled
from trainutil import make_dataset_dir, script_with_tiny_model


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('blur_eval')
    return script_with_tiny_model('blur_eval.py', real_dir, tmp)


def test_sigma_is_the_model_file_with_that_input_blur(setup, tmp_path):
    script, path, data = setup
    model, classes, ds = load_labelled(str(path), [str(data)])
    variants = {s: (lambda m, s=s: script['blur_forward_2d'](m, s)) for s in (0.0, 2.0)}
    res = evaluate_variants(model, classes, ds, variants, 'forward_2d')
    ref = evaluate_model(model, ds, classes)
    for k in KEYS:
        assert res[0.0][k] == pytest.approx(ref[k], abs=1e-9), k
    # σ 2 at 320 px is σ 0.6 at the tiny model's 96 px input
    _, meta = load_model(path, map_location='cpu')
    blurred = Depth3DSeg(**dict(meta['arch'], input_blur=2.0 * 96 / 320)).eval()
    blurred.load_state_dict(model.state_dict())
    save_model(tmp_path / 'b.pt', blurred, {k: meta[k] for k in ('classes', 'input_size')})
    bmodel, _, bds = load_labelled(str(tmp_path / 'b.pt'), [str(data)])
    want = evaluate_model(bmodel, bds, classes)
    for k in KEYS:
        assert res[2.0][k] == pytest.approx(want[k], abs=1e-6), k
    assert res[2.0]['absrel'] != pytest.approx(res[0.0]['absrel'], abs=1e-6)


def test_cli_scores_unlabelled_frames_by_depth(setup, real_dir, tmp_path, capsys):
    script, path, _ = setup
    unlabelled = make_dataset_dir(real_dir, tmp_path / 'u', size=(96, 72), labels=False)
    torch.set_num_threads(1)
    assert (
        script['main'](['--model', str(path), '--data', str(unlabelled), '--sigmas', '0', '1'])
        == 0
    )
    out = capsys.readouterr().out
    rows = [r for r in out.splitlines() if r.startswith('| 0 ') or r.startswith('| 1 ')]
    assert len(rows) == 2 and all('| - |' in r for r in rows)  # no labels: no mIoU
    with pytest.raises(SystemExit):
        script['main'](['--model', str(path), '--data', str(unlabelled), '--sigmas', '-1'])
