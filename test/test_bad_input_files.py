"""Bad model files, checkpoints and --set values: one error line naming the file or value, exit 2,
no traceback, never torch's advice to retry with weights_only=False (depth3dseg-train --resume,
depth3dseg-eval, core.modelfile as the node loads it, training.config --set)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from depth3dseg_ros.core.modelfile import ModelFileError, load_model
from depth3dseg_ros.training import evaluate, train

BIN = Path(sys.executable).parent


class _Payload:
    """Unpickling this would create ``target`` (open(path, 'w')): proof that a loader ran it."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, 'w'))


def _write(kind: str, path: Path, target: Path) -> Path:
    """A bad .pt file: 'malicious' (pickle payload), 'truncated' (first 100 bytes of a real
    checkpoint), 'empty' (0 bytes), 'garbage' (text)."""
    if kind == 'malicious':
        torch.save(
            {'model': {'w': torch.zeros(3)}, 'epoch': 1, 'config': {'x': _Payload(target)}}, path
        )
    elif kind == 'truncated':
        torch.save({'model': {'w': torch.zeros(1000)}, 'epoch': 1, 'config': {}}, path)
        path.write_bytes(path.read_bytes()[:100])
    elif kind == 'empty':
        path.write_bytes(b'')
    else:
        path.write_bytes(b'hello, not a torch file\n')
    return path


WHY = {
    'malicious': r'object other than tensors and plain containers \((io|builtins)\.open\).*never '
    r'run',
    'truncated': r'truncated or corrupt',
    'empty': r'empty file, 0 bytes',
    'garbage': r'not a depth3dseg',
}


def _check_line(err: str, prog: str, path: Path, why: str) -> None:
    assert err.count('\n') == 1 and err.startswith(f'{prog}: error: {path}: not a depth3dseg'), err
    assert 'Traceback' not in err and 'weights_only=False' not in err
    assert __import__('re').search(why, err), err


@pytest.mark.parametrize('kind', ['malicious', 'truncated', 'empty', 'garbage'])
def test_resume_bad_last_pt_is_one_line_exit_2(kind, tmp_path, capsys):
    run = tmp_path / 'run'
    run.mkdir()
    target = tmp_path / 'pwned.txt'
    last = _write(kind, run / 'last.pt', target)
    assert train.main(['--out', str(run), '--resume']) == 2
    _check_line(capsys.readouterr().err, 'depth3dseg-train', last, WHY[kind])
    assert not target.exists()  # the payload never ran
    assert sorted(p.name for p in run.iterdir()) == ['last.pt']  # nothing written


def test_resume_malicious_last_pt_console_script(tmp_path):
    """The installed console script: exit 2, one stderr line (was a 21-line traceback ending in
    torch's advice to retry with weights_only=False)."""
    run = tmp_path / 'run'
    run.mkdir()
    target = tmp_path / 'pwned.txt'
    last = _write('malicious', run / 'last.pt', target)
    env = dict(os.environ, PYTHONWARNINGS='ignore')
    p = subprocess.run(
        [str(BIN / 'depth3dseg-train'), '--out', str(run), '--resume'],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 2, p.stderr
    _check_line(p.stderr, 'depth3dseg-train', last, WHY['malicious'])
    assert not target.exists()


@pytest.mark.parametrize('kind', ['malicious', 'truncated', 'empty', 'garbage'])
def test_eval_bad_model_file_is_one_line_exit_2(kind, tmp_path, capsys):
    target = tmp_path / 'pwned.txt'
    model = _write(kind, tmp_path / 'model.pt', target)
    rc = evaluate.main(
        ['--model', str(model), '--data', str(tmp_path / 'ds'), '--out', str(tmp_path / 'ev')]
    )
    assert rc == 2
    _check_line(capsys.readouterr().err, 'depth3dseg-eval', model, WHY[kind])
    assert not target.exists() and not (tmp_path / 'ev').exists()


def test_eval_empty_model_file_console_script(tmp_path):
    """Was an IndexError traceback (an exception with an empty message)."""
    model = _write('empty', tmp_path / 'model.pt', tmp_path / 'x')
    p = subprocess.run(
        [
            str(BIN / 'depth3dseg-eval'),
            '--model',
            str(model),
            '--data',
            str(tmp_path),
            '--out',
            str(tmp_path / 'ev'),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONWARNINGS='ignore'),
    )
    assert p.returncode == 2, p.stderr
    assert (
        p.stderr
        == f'depth3dseg-eval: error: {model}: not a depth3dseg model file (the model.pt that '
        'depth3dseg-train exports) (empty file, 0 bytes)\n'
    )


@pytest.mark.parametrize('kind', ['empty', 'truncated', 'malicious'])
def test_node_model_loading_names_the_file(kind, tmp_path):
    """core.modelfile as the node's Segmenter loads it: one-line ModelFileError (was 'list index
    out of range' for an empty file)."""
    from depth3dseg_ros.core.inference import Segmenter

    model = _write(kind, tmp_path / 'm.pt', tmp_path / 'pwned.txt')
    with pytest.raises(ModelFileError) as err:
        Segmenter(str(model), device='cpu')
    msg = str(err.value)
    assert '\n' not in msg and msg.startswith(f'{model}: not a depth3dseg model file')
    assert 'weights_only=False' not in msg and 'list index' not in msg
    with pytest.raises(ModelFileError, match=WHY[kind]):
        load_model(model)


@pytest.mark.parametrize(
    'value,want',
    [
        (
            'train.epochs=[1,',
            r"--set 'train.epochs=\[1,': the value '\[1,' is not valid YAML \(.* at column \d+\)",
        ),
        ('optim.lr={a: 1', r"--set 'optim.lr=\{a: 1': the value '\{a: 1' is not valid YAML"),
        ('=3', r"--set '=3' has no key"),
    ],
)
def test_set_yaml_error_is_one_line_exit_2(value, want, tmp_path, capsys):
    assert train.main(['--set', value, '--out', str(tmp_path / 'run')]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'Traceback' not in err, err
    assert __import__('re').search('^depth3dseg-train: error: ' + want, err), err
    assert not (tmp_path / 'run').exists()


def test_set_yaml_error_console_script(tmp_path):
    p = subprocess.run(
        [str(BIN / 'depth3dseg-train'), '--set', 'train.epochs=[1,', '--out', str(tmp_path / 'r')],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONWARNINGS='ignore'),
    )
    assert p.returncode == 2 and p.stderr.count('\n') == 1 and 'Traceback' not in p.stderr, (
        p.stderr
    )
    assert p.stderr.startswith(
        "depth3dseg-train: error: --set 'train.epochs=[1,': the value '[1,' is not valid YAML"
    )
