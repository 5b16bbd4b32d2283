"""scripts/few_shot.py builds depth3dseg-train arguments that the training config accepts: the
labelled fold repeated, replay directories mixed in, extra --set values last (models/README.md
"Few-shot adaptation")."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from depth3dseg_ros.training.config import load_config

SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'few_shot.py'


@pytest.fixture(scope='module')
def script():
    return runpy.run_path(str(SCRIPT))


def _config(args: list[str]) -> dict:
    assert args[0] == '--config'
    sets = [args[i + 1] for i, a in enumerate(args) if a == '--set']
    return load_config(Path(args[1]), sets)


def test_defaults_fine_tune_the_shipped_model_on_the_fold(script, tmp_path):
    a = script['build_parser']().parse_args([])
    cfg = _config(script['fine_tune_args'](a, tmp_path / 'fold0', tmp_path / 'run'))
    assert cfg['model']['init'] == str(script['MODEL'])
    assert cfg['data']['train'] == [str(tmp_path / 'fold0')]
    assert cfg['data']['val'] == [str(tmp_path / 'fold0')]  # never the held-out fold
    assert cfg['train']['batch_size'] == 4 and cfg['train']['epochs'] == 40
    assert cfg['train']['max_steps_per_epoch'] is None and cfg['train']['freeze_bn'] is False
    assert cfg['early_stop']['patience'] == 40


def test_repeat_replay_steps_and_set_reach_the_config(script, tmp_path):
    a = script['build_parser']().parse_args(
        [
            '--repeat', '3', '--replay', 'data/a', '--replay', 'data/b', '--steps', '20',
            '--batch', '8', '--epochs', '2', '--set', 'train.freeze_bn=true',
            '--set', 'optim.warmup_steps=0',
        ]
    )  # fmt: skip
    fold = tmp_path / 'fold1'
    cfg = _config(script['fine_tune_args'](a, fold, tmp_path / 'run'))
    assert cfg['data']['train'] == [str(fold)] * 3 + ['data/a', 'data/b']
    assert cfg['data']['val'] == [str(fold)]
    assert cfg['train']['max_steps_per_epoch'] == 20 and cfg['train']['batch_size'] == 8
    assert cfg['train']['freeze_bn'] is True
    assert cfg['optim']['warmup_steps'] == 0  # --set comes last, so it wins


@pytest.mark.parametrize('opt', ['--repeat', '--batch', '--steps', '--epochs'])
def test_counts_below_one_are_refused(script, opt, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        script['main']([opt, '0', '--out', str(tmp_path / 'o')])
    assert e.value.code == 2
    assert f'{opt} 0 must be at least 1' in capsys.readouterr().err
    assert not (tmp_path / 'o').exists()
