"""scripts/guided_refine_eval.py: the guided filter (He et al. 2013) and its scoring as a forward
variant (docs/levers.md, "Edge-aware refinement by a guided filter")."""

from __future__ import annotations

import types

import pytest
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import evaluate_model, model_dataset
from depth3dseg_ros.training.forward_variants import KEYS
from trainutil import script_with_tiny_model


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('guided')
    return script_with_tiny_model('guided_refine_eval.py', real_dir, tmp)


def test_guided_filter_keeps_constants_and_linear_functions_of_the_guide(setup):
    gf = setup[0]['guided_filter']
    g = torch.rand(2, 1, 30, 40, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(
        gf(torch.full((2, 3, 30, 40), 0.25), g, 4, 1e-3), torch.full((2, 3, 30, 40), 0.25)
    )
    lin = torch.cat([2 * g + 0.5, -g], 1)
    torch.testing.assert_close(gf(lin, g, 3, 1e-8), lin, atol=1e-3, rtol=0)


def test_guided_filter_follows_an_edge_that_a_box_filter_blurs(setup):
    s = setup[0]
    guide = torch.zeros(1, 1, 20, 20)
    guide[..., 10:] = 1.0  # a step edge between columns 9 and 10
    p = torch.zeros(1, 1, 20, 20)
    p[..., 9:] = 1.0  # the class map is one column off the edge
    q = s['guided_filter'](p, guide, 4, 1e-4)
    box = s['box_mean'](p, 4)
    assert q[0, 0, 10, 14] > 0.99 and q[0, 0, 10, 3] < 0.2  # flat sides kept
    assert box[0, 0, 10, 12] < 0.95  # the box filter smears across the edge; the guide's does not
    assert q[0, 0, 10, 12] > 0.99


def test_bad_arguments_are_refused(setup):
    s = setup[0]
    p, g = torch.rand(1, 3, 8, 8), torch.rand(1, 1, 8, 8)
    with pytest.raises(ValueError, match='eps=0 must be > 0'):
        s['guided_filter'](p, g, 2, 0)
    with pytest.raises(ValueError, match='r=-1 must be >= 0'):
        s['guided_filter'](p, g, -1, 1e-3)
    with pytest.raises(ValueError, match='differ in H×W'):
        s['guided_filter'](p, torch.rand(1, 1, 8, 9), 2, 1e-3)
    with pytest.raises(ValueError, match='guide must be B×1×H×W'):
        s['guided_filter'](p, torch.rand(1, 3, 8, 8), 2, 1e-3)


def test_r0_is_depth3dseg_eval_and_a_filter_keeps_distributions_and_depth(setup):
    script, path, data = setup
    model, meta = load_model(path, map_location='cpu')
    model.eval()
    records = [r for r in load_records([data], NYU13) if r.get('labels')]
    ds = model_dataset(records, meta, NYU13)
    ref = evaluate_model(model, ds, NYU13)
    res = script['evaluate_variants'](
        model, NYU13, ds, {'none': lambda m: script['refined_forward'](m, 0, 1.0)}
    )
    for k in KEYS:
        assert res['none'][k] == pytest.approx(ref[k], abs=1e-9), k
    x, K = torch.randn(1, 3, 72, 96), torch.tensor([[[80.0, 0, 48], [0, 80, 36], [0, 0, 1]]])
    with torch.no_grad():
        a = model(x, K)
        model.forward = types.MethodType(script['refined_forward'](model, 4, 1e-2), model)
        b = model(x, K)
    for key in ('seg2d', 'seg3d'):
        prob = b[key].exp()
        assert torch.all(prob[:, NYU13.void_id] == 0)
        torch.testing.assert_close(prob.sum(1), torch.ones(1, 72, 96), atol=1e-4, rtol=0)
    assert torch.equal(a['depth'], b['depth'])


def test_command_line(setup, tmp_path, capsys):
    script, path, data = setup
    with pytest.raises(SystemExit) as e:
        script['main'](['--model', str(path), '--data', str(data), '--radii', '0'])
    assert e.value.code == 2 and 'must be >= 1' in capsys.readouterr().err
    argv = ['--model', str(path), '--data', str(data), '--radii', '2', '--eps', '0.01']
    assert script['main'](argv) == 0
    out = capsys.readouterr().out
    assert '| none | ' in out and '| r 2, eps 0.01 | ' in out
