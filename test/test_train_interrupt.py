"""Ctrl-C / SIGTERM during depth3dseg-train (training.interrupt): the first signal stops the run
after the step in progress with last.pt at that sample (resumable, C34), the best model so far
exported, one line and exit 128 + signal; a second stops at once; DataLoader workers survive a
terminal's Ctrl-C to the process group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depth3dseg_ros.training import train
from depth3dseg_ros.training.checkpoint import load_checkpoint
from depth3dseg_ros.training.interrupt import StopNow, StopAtStep
from trainutil import make_dataset_dir, tiny_train_args


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


def test_stop_signals_first_requests_second_stops_now_and_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    lines: list[str] = []

    class Out:
        write, flush = lines.append, staticmethod(lambda: None)

    with StopAtStep('prog', stream=Out()) as stop:
        assert not stop.requested and stop.exit_code == 0 and stop.name == ''
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs in the main thread between bytecodes
        assert stop.requested and stop.name == 'SIGTERM' and stop.exit_code == 143
        assert 'prog: SIGTERM received: stopping after the current step' in ''.join(lines)
        with pytest.raises(StopNow) as err:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert err.value.signum == signal.SIGINT
    assert signal.getsignal(signal.SIGTERM) is before


def _signal_at_step(monkeypatch, step: int, signals: tuple[int, ...]) -> list[int]:
    """Make the ``step``-th optimiser step send ``signals`` to this process as it starts (once);
    returns the list that counts the steps."""
    calls: list[int] = []
    fired: list[int] = []
    real = train.compute_losses

    def spy(*a, **k):
        calls.append(1)
        if len(calls) == step and not fired:
            fired.append(1)
            for s in signals:
                os.kill(os.getpid(), s)
                time.sleep(0.02)
        return real(*a, **k)

    monkeypatch.setattr(train, 'compute_losses', spy)
    return calls


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_first_signal_saves_the_step_exports_and_resumes_from_that_sample(
    sig, ds_dir, tmp_path, monkeypatch, capsys
):
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, epochs=3)
    calls = _signal_at_step(monkeypatch, 6, (sig,))  # epoch 2 (4 steps per epoch), its 2nd step
    assert train.main(args) == 128 + sig
    cap = capsys.readouterr()
    name = signal.Signals(sig).name
    assert f'depth3dseg-train: {name} received: stopping after the current step' in cap.err
    reason = f'interrupted by {name} at epoch 2, step 2 (resume with --resume)'
    assert f'stopped: {reason}' in cap.out and 'Traceback' not in cap.err
    assert len(calls) == 6  # the step in progress finished, no further one started
    ck = load_checkpoint(out / 'last.pt')
    assert (ck['epoch'], ck['step_in_epoch'], ck['samples_in_epoch'], ck['global_step']) == (
        1,
        2,
        4,
        6,
    )
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['stop_reason'] == reason and summary['exported'] == 'best epoch 1'
    assert (out / 'model.pt').is_file()  # the best model so far
    calls.clear()
    assert train.main(['--out', str(out), '--resume']) == 0  # no signal this time
    assert 'resumed from' in capsys.readouterr().out
    assert len(calls) == 2 + 4  # the rest of epoch 2, then epoch 3
    assert load_checkpoint(out / 'last.pt')['global_step'] == 12
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_second_signal_stops_at_once_without_saving(ds_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, epochs=1)
    _signal_at_step(monkeypatch, 2, (signal.SIGINT, signal.SIGINT))
    assert train.main(args) == 130
    err = capsys.readouterr().err
    assert 'SIGINT again: stopped at once, nothing more saved' in err and 'Traceback' not in err
    assert not (out / 'last.pt').exists()  # nothing was saved before: nothing now either


@pytest.mark.timeout(240)
def test_ctrl_c_to_the_process_group_with_dataloader_workers(ds_dir, tmp_path):
    """A terminal's Ctrl-C reaches every process of the group, DataLoader workers included: they
    ignore it, the trainer saves its step and exits 130 without a traceback."""
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--set', 'data.num_workers=1', epochs=200)
    proc = subprocess.Popen(
        [sys.executable, '-m', 'depth3dseg_ros.training.train', *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=dict(os.environ, OMP_NUM_THREADS='1'),
    )
    lines = []
    try:
        for line in proc.stdout:  # wait for the first validation: training is under way
            lines.append(line)
            if line.startswith('epoch 2:'):
                break
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = ''.join(lines) + rest
    assert proc.returncode == 130, text
    assert 'SIGINT received' in text and 'stopped: interrupted by SIGINT' in text, text
    assert 'Traceback' not in text and 'KeyboardInterrupt' not in text, text
    ck = load_checkpoint(Path(out) / 'last.pt')
    assert ck['epoch'] >= 2 and ck['global_step'] >= 8
