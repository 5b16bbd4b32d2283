"""M6 resumable training: SIGKILL during a run, then ``--resume``, reaches the same final weights
as an uninterrupted run (CPU, deterministic), and the checkpoint on disk is never torn (atomic
replace)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml

from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training import train
from depth3dseg_ros.training.checkpoint import load_checkpoint, save_checkpoint
from trainutil import make_dataset_dir, tiny_train_args

EPOCHS = 4


def _cmd(data, out, *extra):
    args = tiny_train_args(
        data,
        out,
        '--max-steps-per-epoch',
        '2',
        *extra,
        epochs=EPOCHS,
    )
    return [sys.executable, '-m', 'depth3dseg_ros.training.train', *args]


def _env():
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    return env


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


def test_atomic_checkpoint_replaces_never_tears(tmp_path):
    p = tmp_path / 'last.pt'
    save_checkpoint(p, {'model': {'w': torch.zeros(3)}, 'epoch': 1})
    save_checkpoint(p, {'model': {'w': torch.ones(3)}, 'epoch': 2})
    assert load_checkpoint(p)['epoch'] == 2 and not (tmp_path / 'last.pt.tmp').exists()
    (tmp_path / 'junk.pt').write_bytes(torch.zeros(1).numpy().tobytes())
    with pytest.raises(Exception):
        load_checkpoint(tmp_path / 'junk.pt')
    torch.save({'a': 1}, tmp_path / 'other.pt')
    with pytest.raises(ValueError, match='not a depth3dseg training checkpoint'):
        load_checkpoint(tmp_path / 'other.pt')


def test_resume_completes_a_config_written_before_a_key_existed(ds_dir, tmp_path, capsys):
    """A last.pt written before model.init (and early-stop 'metric'/'mode' state) existed resumes:
    missing keys take today's defaults, stored keys keep their values; an unknown stored key is
    still refused."""
    out = tmp_path / 'old'
    assert (
        train.main(
            tiny_train_args(
                ds_dir,
                out,
                '--max-steps-per-epoch',
                '1',
                epochs=1,
            )
        )
        == 0
    )
    ck = load_checkpoint(out / 'last.pt')
    del ck['config']['model']['init']
    for key in ('metric', 'mode'):
        ck['early_stop'].pop(key, None)
    save_checkpoint(out / 'last.pt', ck)
    capsys.readouterr()
    assert train.main(['--out', str(out), '--resume', '--set', 'train.epochs=2']) == 0
    text = capsys.readouterr().out
    assert f'resumed from {out / "last.pt"}: 1 epoch(s) done, epoch 2 from sample 0' in text
    assert 'epoch 2:' in text
    got = load_checkpoint(out / 'last.pt')
    assert got['epoch'] == 2 and got['global_step'] == 2 and len(got['history']) == 2
    cfg = yaml.safe_load((out / 'config.yaml').read_text())
    assert cfg['model']['init'] is None and got['config']['model']['init'] is None
    assert cfg['train']['batch_size'] == 2 and cfg['data']['input_size'] == [
        64,
        48,
    ]  # stored values kept
    # a stored key this version does not know is an error naming it (as in a YAML file), not a
    # crash
    got['config']['train']['old_knob'] = 1
    save_checkpoint(out / 'last.pt', got)
    assert train.main(['--out', str(out), '--resume', '--set', 'train.epochs=3']) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'depth3dseg-train: error: config stored in {out / "last.pt"}: ')
    assert "config key 'train.old_knob' is unknown" in err


def test_a_run_records_every_arch_key_and_old_runs_resume_with_a_warning(ds_dir, tmp_path, capsys):
    """config.yaml and last.pt hold the complete arch (core.arch.DEFAULT_ARCH filled in), so a
    resume rebuilds the same network after a default changes; a checkpoint stored without arch keys
    whose default changed resumes with the new defaults and a warning naming them with their old
    values (none for keys given by --set, none when nothing is missing)."""
    from depth3dseg_ros.core.model import DEFAULT_ARCH

    out = tmp_path / 'run'
    assert (
        train.main(
            tiny_train_args(
                ds_dir,
                out,
                '--max-steps-per-epoch',
                '1',
                epochs=1,
            )
        )
        == 0
    )
    want = {k for k in DEFAULT_ARCH if k != 'num_classes'}
    assert set(yaml.safe_load((out / 'config.yaml').read_text())['model']['arch']) == want
    ck = load_checkpoint(out / 'last.pt')
    assert set(ck['config']['model']['arch']) == want
    for key in ('p_stride', 'p_k'):
        del ck['config']['model']['arch'][key]
    save_checkpoint(out / 'last.pt', ck)
    capsys.readouterr()
    assert (
        train.main(
            [
                '--out',
                str(out),
                '--resume',
                '--set',
                'train.epochs=2',
                '--set',
                'model.arch.p_stride=2',
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert re.search(
        rf"warning: .*does not record model.arch p_k, whose defaults changed on 2026-11-30 "
        rf"\(p_k 6 -> {DEFAULT_ARCH['p_k']}\).*resume it with --set model.arch.p_k=6",
        err,
    ), err
    got = load_checkpoint(out / 'last.pt')['config']['model']['arch']
    assert got['p_stride'] == 2 and got['p_k'] == DEFAULT_ARCH['p_k'] and set(got) == want
    assert (
        train.main(['--out', str(out), '--resume', '--set', 'train.epochs=3']) == 0
    )  # all stored now
    assert 'warning' not in capsys.readouterr().err


def test_a_last_pt_resumed_in_a_new_directory_still_exports_a_model(ds_dir, tmp_path, capsys):
    """models/README.md's "train longer" path: only last.pt is copied to a new run directory; if no
    epoch since beats the stored best, there is no best.pt there, so the last state is exported
    (said so), never nothing."""
    base = tmp_path / 'base'
    assert (
        train.main(
            tiny_train_args(
                ds_dir,
                base,
                '--max-steps-per-epoch',
                '1',
                epochs=1,
            )
        )
        == 0
    )
    new = tmp_path / 'new'
    new.mkdir()
    (new / 'last.pt').write_bytes((base / 'last.pt').read_bytes())
    capsys.readouterr()
    # min_delta 10: no epoch can count as an improvement, so no best.pt is written in `new`
    assert (
        train.main(
            [
                '--out',
                str(new),
                '--resume',
                '--set',
                'train.epochs=2',
                '--set',
                'early_stop.min_delta=10',
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert not (new / 'best.pt').exists()
    assert (
        f'no best.pt in {new} (best epoch 1 was not saved here): exporting the last state (epoch '
        '2)' in text
    )
    summary = json.loads((new / 'summary.json').read_text())
    assert summary['exported'] == 'last state, epoch 2' and summary['model_file'] == str(
        new / 'model.pt'
    )
    model, meta = load_model(new / 'model.pt')
    last = load_checkpoint(new / 'last.pt')['model']
    assert all(torch.equal(model.state_dict()[k], v) for k, v in last.items())
    assert meta['training']['exported'] == 'last state, epoch 2'


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    'extra', [(), ('--set', 'train.mixstyle={p: 1.0}')], ids=['plain', 'mixstyle']
)
def test_sigkill_then_resume_matches_uninterrupted(ds_dir, tmp_path, extra):
    """Also with train.mixstyle, whose draws come from torch's RNG (restored on resume)."""
    ref, run = tmp_path / 'ref', tmp_path / 'run'
    subprocess.run(
        _cmd(ds_dir, ref, *extra), check=True, timeout=300, env=_env(), capture_output=True
    )
    ref_ck = load_checkpoint(ref / 'last.pt')
    assert ref_ck['epoch'] == EPOCHS

    proc = subprocess.Popen(
        _cmd(ds_dir, run, *extra), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 240
        while not (run / 'last.pt').exists():
            assert proc.poll() is None, 'training ended before writing a checkpoint'
            assert time.monotonic() < deadline, 'no checkpoint within 240 s'
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    killed_at = load_checkpoint(run / 'last.pt')['epoch']
    assert 1 <= killed_at < EPOCHS, f'killed too late (checkpoint epoch {killed_at})'

    res = subprocess.run(
        _cmd(ds_dir, run, '--resume'), timeout=300, env=_env(), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert f'resumed from {run / "last.pt"}: {killed_at} epoch(s) done' in res.stdout
    got = load_checkpoint(run / 'last.pt')
    assert got['epoch'] == EPOCHS and got['global_step'] == ref_ck['global_step']
    for k, v in ref_ck['model'].items():
        torch.testing.assert_close(got['model'][k], v, rtol=0, atol=1e-6, msg=k)
    for a, b in zip(ref_ck['history'], got['history']):
        assert a['val_loss'] == pytest.approx(b['val_loss'], abs=1e-6)
