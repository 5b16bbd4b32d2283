"""training.forward_variants: a model scored under replaced forward passes (the inference-time
lever scripts of docs/levers.md). The identity variant must give depth3dseg-eval's figures, the
model's own method must come back after a variant (also one that fails), and the table must show
each variant's figures."""

from __future__ import annotations

import pytest

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.training.evaluate import evaluate_model
from depth3dseg_ros.training.forward_variants import (
    KEYS,
    evaluate_variants,
    load_labelled,
    markdown_table,
)
from trainutil import make_dataset_dir, perturbed_tiny_model_file


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('variants')
    data = make_dataset_dir(real_dir, tmp / 'ds', size=(96, 72))
    return perturbed_tiny_model_file(tmp / 'tiny.pt'), data


def identity(model):
    base = model.forward

    def forward(self, *args, **kwargs):
        return base(*args, **kwargs)

    return forward


def broken(model):
    def forward(self, *args, **kwargs):
        raise RuntimeError('variant failed')

    return forward


def test_identity_variant_is_depth3dseg_eval_and_method_is_restored(setup):
    path, data = setup
    model, classes, ds = load_labelled(str(path), [str(data)])
    assert classes.names == NYU13.names and not model.training
    res = evaluate_variants(model, classes, ds, {'same': identity, 0.5: identity})
    ref = evaluate_model(model, ds, classes)
    for k in KEYS:
        assert res['same'][k] == pytest.approx(ref[k], abs=1e-9), k
    assert res[0.5] == res['same'] and res['same']['frames'] == len(ds)
    assert 'forward' not in vars(model)  # the class's forward again
    with pytest.raises(RuntimeError, match='variant failed'):
        evaluate_variants(model, classes, ds, {'bad': broken})
    assert 'forward' not in vars(model)
    table = markdown_table('v', res).splitlines()
    assert table[0] == '| v | frames | ' + ' | '.join(KEYS) + ' |'
    assert table[2].startswith(f'| same | {len(ds)} | {res["same"]["miou_2d"]:.3f} |')
    assert table[3].startswith('| 0.5 |')


def test_no_labelled_frame_is_refused(setup, real_dir, tmp_path):
    path, _ = setup
    unlabelled = make_dataset_dir(real_dir, tmp_path / 'u', size=(96, 72), labels=False)
    with pytest.raises(ValueError, match='no labelled frame'):
        load_labelled(str(path), [str(unlabelled)])


def test_model_arg_defaults_to_the_shipped_model():
    from depth3dseg_ros.paths import share_file
    from depth3dseg_ros.training.forward_variants import model_arg

    assert model_arg(None) == str(share_file('models', 'depth3dseg_nyu13.pt'))
    assert model_arg('x.pt') == 'x.pt'
