"""depth3dseg-train: config (defaults, --set, validation), a 2-epoch run that checkpoints, resumes,
exports a model file that depth3dseg-eval reads; stopping rules (M6: early stopping, max epochs,
time-limit chunks)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training import evaluate, run, train
from depth3dseg_ros.training.checkpoint import load_checkpoint
from depth3dseg_ros.training.config import DEFAULTS, load_config
from depth3dseg_ros.training.early_stop import update_early_stop
from cliutil import one_error_line
from trainutil import make_dataset_dir, tiny_train_args

REPO = Path(__file__).resolve().parents[1]
DEPTH_ONLY = ['nyu0001', 'nyu1407', 'm3d_rgb_00000', 'm3d_rgb_00050', 'm3d_rgb_00100']
CKPT_KEYS = {
    'model',
    'optimizer',
    'scheduler',
    'scaler',
    'weighting',
    'epoch',
    'step_in_epoch',
    'samples_in_epoch',
    'batch_size',
    'world_size',
    'sampler_seed',
    'train_samples',
    'global_step',
    'early_stop',
    'history',
    'rng',
    'config',
}


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


def _one_error_line(capsys) -> str:
    """The CLI's stderr: exactly one 'depth3dseg-train: error: ...' line, no traceback."""
    return one_error_line(capsys, 'depth3dseg-train')


def test_shipped_config_lists_the_defaults():
    assert yaml.safe_load((REPO / 'config' / 'train.yaml').read_text()) == DEFAULTS
    assert load_config(REPO / 'config' / 'train.yaml') == load_config(None)


def test_set_overrides_and_validation_errors(tmp_path):
    cfg = load_config(
        None,
        [
            'train.epochs=3',
            'data.train=[a, b]',
            'train.time_limit_min=null',
            'model.arch={width: 0.5}',
            'loss.consistency=js',
        ],
    )
    assert cfg['train']['epochs'] == 3 and cfg['data']['train'] == ['a', 'b']
    assert cfg['model']['arch'] == {'width': 0.5} and cfg['loss']['consistency'] == 'js'
    with pytest.raises(ValueError, match=r"--set key 'train.epoch' is unknown"):
        load_config(None, ['train.epoch=3'])
    with pytest.raises(
        ValueError, match=r'config train.batch_size=0 must be an integer in \[1, 4096\]'
    ):
        load_config(None, ['train.batch_size=0'])
    with pytest.raises(ValueError, match=r'data.input_size=\[320\]'):
        load_config(None, ['data.input_size=[320]'])
    with pytest.raises(ValueError, match=r'config loss: .*consistency'):
        load_config(None, ['loss.consistency=cosine'])
    with pytest.raises(ValueError, match=r'model.arch=.*unknown keys'):
        load_config(None, ['model.arch={wdth: 1}'])
    with pytest.raises(ValueError, match=r"train.amp='fp8'"):
        load_config(None, ['train.amp=fp8'])
    bad = tmp_path / 'c.yaml'
    bad.write_text('optim:\n  learning_rate: 0.1\n')
    with pytest.raises(ValueError, match=r"config key 'optim.learning_rate' is unknown"):
        load_config(bad)


def test_two_epochs_checkpoint_resume_export_eval(ds_dir, tmp_path, capsys):
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--set', 'log.tensorboard=true', epochs=2)
    assert train.main(args) == 0
    assert 'stopped: max epochs (2)' in capsys.readouterr().out
    for name in ('last.pt', 'best.pt', 'model.pt', 'summary.json', 'config.yaml'):
        assert (out / name).is_file(), name
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = EventAccumulator(str(out / 'tb')).Reload().Tags()
    assert {'train/total', 'train/seg3d', 'train/lr', 'val/miou_fused', 'val/val_loss'} <= set(
        tb['scalars']
    )
    assert 'val/samples' in tb['images']
    ck = torch.load(
        out / 'last.pt', weights_only=True
    )  # safe unpickler: plain data + tensors only
    assert set(ck) == CKPT_KEYS and ck['epoch'] == 2 and ck['step_in_epoch'] == 0
    assert ck['config']['train']['epochs'] == 2 and len(ck['history']) == 2
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['stop_reason'] == 'max epochs (2)' and summary['epochs_done'] == 2
    steps_2 = ck['global_step']
    capsys.readouterr()
    assert (
        train.main(tiny_train_args(ds_dir, out, epochs=2)) == 2
    )  # never clobber a run by accident
    assert 'pass --resume' in _one_error_line(capsys)
    assert (
        steps_2 == 2 * 4
    )  # 7 training frames, batch 2 -> steps of 2, 2, 2, 1: every frame once (C34)

    # resume with a raised epoch cap: continues at epoch 3, keeps the history
    assert train.main(['--out', str(out), '--resume', '--set', 'train.epochs=3']) == 0
    text = capsys.readouterr().out
    assert 'resumed from' in text and 'epoch 3:' in text and 'epoch 1:' not in text
    ck = load_checkpoint(out / 'last.pt')
    assert ck["epoch"] == 3 and ck["global_step"] == steps_2 + 4 and len(ck["history"]) == 3

    # the exported model file: best epoch's weights + the metadata the node needs
    model, meta = load_model(out / 'model.pt', map_location='cpu')
    best = load_checkpoint(out / 'best.pt')
    for k, v in best['model'].items():
        assert torch.equal(model.state_dict()[k], v), k
    assert meta['input_size'] == [64, 48] and ClassSet.from_dict(meta['classes']) == NYU13
    assert meta['arch']['width'] == 0.25 and meta['max_depth'] == 10.0 and len(meta['mean']) == 3
    assert meta['training']['stop_reason'] == 'max epochs (3)'

    rep = tmp_path / 'eval'
    assert (
        evaluate.main(
            [
                '--model',
                str(out / 'model.pt'),
                '--data',
                str(ds_dir),
                '--out',
                str(rep),
                '--batch-size',
                '4',
            ]
        )
        == 0
    )
    report = json.loads((rep / 'report.json').read_text())
    for key in evaluate.FLAT_KEYS + ('frames', 'frames_per_s', 'seg2d', 'seg3d', 'fused', 'depth'):
        assert key in report, key
    assert report['frames'] == 10 and report['frames_per_s'] > 0
    assert (
        0.0 <= report['miou_fused'] <= 1.0 and report['absrel'] > 0 and 0 <= report['delta1'] <= 1
    )
    assert 'mIoU' in (rep / 'report.txt').read_text()


def test_early_stopping_says_why(ds_dir, tmp_path, capsys):
    """M6: a metric that cannot improve by min_delta stops after `patience` epochs, not at the
    cap."""
    out = tmp_path / 'run'
    args = tiny_train_args(
        ds_dir,
        out,
        '--set',
        'early_stop.patience=1',
        '--set',
        'early_stop.min_delta=1e9',
        '--set',
        'early_stop.metric=val_loss',
        '--set',
        'early_stop.mode=min',
        '--set',
        'data.num_workers=1',
        '--set',
        'train.amp=bf16',
        '--max-steps-per-epoch',
        '1',
        epochs=6,
    )
    assert train.main(args) == 0
    text = capsys.readouterr().out
    assert "train.amp='bf16' ignored on cpu (AMP is CUDA-only)" in text
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['stop_reason'].startswith(
        'early stopping: val_loss did not improve for 1 epochs'
    )
    assert summary['epochs_done'] == 2 and summary['best_epoch'] == 1
    assert f"stopped: {summary['stop_reason']}" in text
    # resuming a converged run trains no further and says so again
    assert train.main(['--out', str(out), '--resume']) == 0
    assert f"stopped: {summary['stop_reason']}" in capsys.readouterr().out
    assert load_checkpoint(out / 'last.pt')['global_step'] == 2


def test_time_limit_chunk_saves_and_resumes(ds_dir, tmp_path, capsys):
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--time-limit-min', '0', epochs=1)
    assert train.main(args) == 0
    assert 'stopped: time limit (resume with --resume)' in capsys.readouterr().out
    ck = load_checkpoint(out / 'last.pt')
    assert (ck['epoch'], ck['step_in_epoch'], ck['global_step']) == (0, 1, 1)
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['stop_reason'] == 'time limit (resume with --resume)'
    # the next chunk, without a time limit, finishes the epoch from step 1
    assert train.main(['--out', str(out), '--resume', '--set', 'train.time_limit_min=null']) == 0
    assert 'stopped: max epochs (1)' in capsys.readouterr().out
    ck = load_checkpoint(out / 'last.pt')
    assert (ck['epoch'], ck['step_in_epoch'], ck['global_step']) == (1, 0, 4)


def test_fine_tune_from_a_model_file(ds_dir, tmp_path, capsys):
    """model.init: the run starts from the file's weights with the file's arch and normalisation; a
    model.arch key that sizes no tensor (p_stride) overrides the file's, one that does (width) is
    refused naming it; a file trained for other classes is refused."""
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds_dir, base, epochs=1)) == 0
    init_model, init_meta = load_model(base / 'model.pt')
    ft = tmp_path / 'ft'
    # lr 0: the parameters cannot move, so the exported model must carry the file's parameters
    # exactly
    assert (
        train.main(
            tiny_train_args(
                ds_dir,
                ft,
                '--set',
                f'model.init={base / "model.pt"}',
                '--set',
                'model.arch={p_stride: 2}',
                '--set',
                'optim.lr=0.0',
                epochs=1,
            )
        )
        == 0
    )
    assert f'initialised from {base / "model.pt"}' in capsys.readouterr().out
    cfg = yaml.safe_load((ft / 'config.yaml').read_text())
    assert cfg['model']['arch']['width'] == init_meta['arch']['width'] == 0.25
    assert init_meta['arch']['p_stride'] != 2
    model, meta = load_model(ft / 'model.pt')
    assert meta['arch']['p_stride'] == cfg['model']['arch']['p_stride'] == 2
    for name, p in init_model.named_parameters():
        assert torch.equal(model.state_dict()[name], p), name
    assert (
        train.main(
            tiny_train_args(
                ds_dir,
                tmp_path / 'ft1',
                '--set',
                f'model.init={base / "model.pt"}',
                '--set',
                'model.arch={p_stride: 2, width: 0.5}',
                epochs=1,
            )
        )
        == 2
    )
    # names the shape-changing key only
    assert re.search(
        r"model.arch \{'width': 0.5\} changes the shape .*has \{'width': 0.25\}\)",
        _one_error_line(capsys),
    )
    assert not (tmp_path / 'ft1').exists()
    # a model file for another class set is refused, naming both
    other = ClassSet(['void', 'a', 'b'], [[0, 0, 0], [255, 0, 0], [0, 255, 0]], void_id=0)
    from depth3dseg_ros.core.modelfile import save_model

    odd = save_model(
        tmp_path / 'odd.pt',
        type(init_model).from_arch(meta['arch'] | {'num_classes': 3}),
        {'classes': other.to_dict(), 'input_size': [64, 48]},
    )
    capsys.readouterr()
    assert (
        train.main(
            tiny_train_args(ds_dir, tmp_path / 'ft2', '--set', f'model.init={odd}', epochs=1)
        )
        == 2
    )
    assert re.search(r"model.init=.*odd.pt.*classes \['void', 'a', 'b'\]", _one_error_line(capsys))
    with pytest.raises(ValueError, match=r'model.init=3 must be null or the path'):
        load_config(None, ['model.init=3'])


@pytest.mark.parametrize(
    'case',
    [
        'no dataset',
        'no data.train',
        'no config file',
        'resume without run',
        'set without =',
        'unknown key',
        'bad value',
        'missing init file',
        'init not a model file',
    ],
)
def test_user_errors_are_one_line_and_leave_no_run_dir(case, ds_dir, tmp_path, capsys):
    """Ordinary mistakes: exit status 2, one 'depth3dseg-train: error: <message>' line naming the
    problem, no traceback, and no run directory left behind (it is created only once the data is
    loaded)."""
    out, junk = tmp_path / 'run', tmp_path / 'junk.pt'
    junk.write_bytes(b'not a model file')
    argv, want = {
        'no dataset': (
            tiny_train_args(tmp_path / 'nope', out),
            r'dataset index .*nope.*index.jsonl not found',
        ),
        'no data.train': (
            tiny_train_args(ds_dir, out, '--set', 'data.train=[]'),
            r'data.train=\[\] must name',
        ),
        'no config file': (
            ['--config', str(tmp_path / 'c.yaml'), '--out', str(out)],
            r'config file .*c.yaml',
        ),
        'resume without run': (
            ['--out', str(out), '--resume'],
            r'--resume: checkpoint .*last.pt not found',
        ),
        'set without =': (
            tiny_train_args(ds_dir, out, '--set', 'train.epochs'),
            r"'train.epochs' must look",
        ),
        'unknown key': (
            tiny_train_args(ds_dir, out, '--set', 'train.epoch=3'),
            r"'train.epoch' is unknown",
        ),
        'bad value': (
            tiny_train_args(ds_dir, out, '--set', 'optim.lr=-1'),
            r'config optim.lr=-1 must be',
        ),
        'missing init file': (
            tiny_train_args(ds_dir, out, '--set', f'model.init={tmp_path / "m.pt"}'),
            r'model file not found: .*m.pt',
        ),
        'init not a model file': (
            tiny_train_args(ds_dir, out, '--set', f'model.init={junk}'),
            r'junk.pt: not a .*model file',
        ),
    }[case]
    assert train.main(argv) == 2
    assert re.search(want, _one_error_line(capsys))
    assert not out.exists()


def test_unexpected_errors_keep_their_traceback(ds_dir, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError('a bug, not a user error')

    from depth3dseg_ros.training import run

    monkeypatch.setattr(run, 'build_datasets', broken)
    with pytest.raises(RuntimeError, match='a bug'):
        train.main(tiny_train_args(ds_dir, tmp_path / 'run'))


def test_unlabelled_validation_selects_by_val_loss_and_exports(real_dir, tmp_path, capsys):
    """No labelled validation frame: miou_fused is undefined, so the best epoch is chosen by
    val_loss (said once, recorded in summary.json and the checkpoint) and model.pt is written;
    patience 1 must not stop the run for 'no improvement' of a metric that has no value."""
    ds = make_dataset_dir(
        real_dir, tmp_path / 'unlabelled', size=(80, 60), names=DEPTH_ONLY, labels=False
    )
    out = tmp_path / 'run'
    args = tiny_train_args(ds, out, '--set', 'early_stop.patience=1', epochs=2)
    assert train.main(args) == 0
    text = capsys.readouterr().out
    note = (
        'early_stop.metric miou_fused unavailable (no labelled validation frames): selecting the '
        'best epoch by val_loss'
    )
    assert text.count(note) == 1 and 'stopped: max epochs (2)' in text
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['best_metric'] == 'val_loss' and summary['early_stop_metric'] == 'miou_fused'
    assert summary['best_epoch'] >= 1 and summary['best_value'] > 0
    model, meta = load_model(out / 'model.pt')
    assert meta['training']['best_metric'] == 'val_loss'
    # the fallback holds for the rest of the run: a resumed chunk does not announce it again
    assert train.main(['--out', str(out), '--resume', '--set', 'train.epochs=3']) == 0
    text = capsys.readouterr().out
    assert note not in text and 'epoch 3:' in text
    assert json.loads((out / 'summary.json').read_text())['best_metric'] == 'val_loss'


def test_early_stop_fallback_rules():
    cfg = load_config(None, ['early_stop.metric=absrel', 'early_stop.mode=min'])
    es = {'best': None, 'best_epoch': -1, 'bad_epochs': 0}  # as stored by older checkpoints
    improved, note = update_early_stop(es, {'absrel': None, 'val_loss': 2.0}, cfg, 1)
    assert improved and 'absrel unavailable (no validation frames with depth)' in note
    assert es == {
        'best': 2.0,
        'best_epoch': 1,
        'bad_epochs': 0,
        'metric': 'val_loss',
        'mode': 'min',
    }
    # a metric that had a value keeps being the one used: a missing value is an epoch without
    # improvement
    es = {'best': 0.3, 'best_epoch': 1, 'bad_epochs': 0}
    assert update_early_stop(es, {'absrel': float('nan'), 'val_loss': 1.0}, cfg, 2) == (
        False,
        None,
    )
    assert es['metric'] == 'absrel' and es['bad_epochs'] == 1 and es['best'] == 0.3


def test_freeze_bn_keeps_the_running_statistics(ds_dir, tmp_path):
    """train.freeze_bn: a fine-tune moves the weights but leaves every BatchNorm layer's running
    mean/var as the start file had them (small-batch fine-tuning, models/README.md "Few-shot");
    without it the same run updates them. A non-bool value is refused naming the key."""
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds_dir, base, epochs=1)) == 0
    init_model, _ = load_model(base / 'model.pt')
    init = init_model.state_dict()
    bn_buffers = [k for k in init if k.endswith(('running_mean', 'running_var'))]
    assert bn_buffers
    moved = {}
    for freeze in (True, False):
        out = tmp_path / f'ft_{freeze}'
        args = ['--set', f'model.init={base / "model.pt"}', '--set', f'train.freeze_bn={freeze}']
        assert train.main(tiny_train_args(ds_dir, out, *args, epochs=1)) == 0
        sd = load_model(out / 'model.pt')[0].state_dict()
        moved[freeze] = [k for k in bn_buffers if not torch.equal(sd[k], init[k])]
        assert any(not torch.equal(sd[k], init[k]) for k in init if k.endswith('weight')), (
            'the weights should train'
        )
    assert moved[True] == []
    assert len(moved[False]) == len(bn_buffers)
    with pytest.raises(ValueError, match=r"config train.freeze_bn=2 must be true or false"):
        load_config(None, ['train.freeze_bn=2'])


def test_channels_last_trains_the_same_model(ds_dir, tmp_path):
    """train.channels_last: NHWC convolutions change only the memory layout, so a run gives the
    validation figures of the default layout to float tolerance, and its model file loads and
    runs like any other. A non-bool value is refused naming the key."""
    summaries, outputs = {}, {}
    x = torch.rand(1, 3, 48, 64)
    K = torch.tensor([[[50.0, 0, 32], [0, 50, 24], [0, 0, 1]]])
    for cl in (False, True):
        out = tmp_path / f'cl_{cl}'
        assert train.main(tiny_train_args(ds_dir, out, '--set', f'train.channels_last={cl}')) == 0
        summaries[cl] = json.loads((out / 'summary.json').read_text())
        model, _ = load_model(out / 'model.pt')
        assert all(p.is_contiguous() for p in model.parameters())
        with torch.no_grad():
            outputs[cl] = model.eval()(x, K)['seg2d']
    assert summaries[True]['best_epoch'] == summaries[False]['best_epoch']
    assert summaries[True]['best_value'] == pytest.approx(summaries[False]['best_value'], abs=0.02)
    assert torch.allclose(outputs[True], outputs[False], atol=5e-2)
    with pytest.raises(ValueError, match=r"config train.channels_last=1 must be true or false"):
        load_config(None, ['train.channels_last=1'])


def test_the_exported_model_carries_the_runs_input_balance(ds_dir, tmp_path):
    """model.input_balance reaches the exported file: grey_world when set, none by default."""
    for balance, want in (('grey_world', 'grey_world'), (None, 'none')):
        out = tmp_path / f'run_{want}'
        extra = ['--set', f'model.input_balance={balance}'] if balance else []
        args = tiny_train_args(
            ds_dir,
            out,
            *extra,
            '--max-steps-per-epoch',
            '1',
            epochs=1,
        )
        assert train.main(args) == 0
        assert load_model(out / 'model.pt')[1]['input_balance'] == want
        assert yaml.safe_load((out / 'config.yaml').read_text())['model']['input_balance'] == want


def test_no_progress_is_the_log_progress_key_and_wins_over_an_earlier_set():
    """--no-progress, as depth3dseg-extract and -eval have it: log.progress false, also after an
    explicit --set log.progress=true."""
    args = train.parse_args(['--out', 'r', '--set', 'log.progress=true', '--no-progress'])
    assert load_config(None, args.set)['log']['progress'] is False
    assert load_config(None, train.parse_args(['--out', 'r']).set)['log']['progress'] is True


def test_validation_frames_that_also_train_are_warned_about(ds_dir, tmp_path, capsys):
    """data.val naming training frames (the same directory, or the same bag extracted twice:
    the same frame ids): trained and exported anyway, with one warning naming how many and one
    id; a separate validation set gets none."""
    args = tiny_train_args(ds_dir, tmp_path / 'r', '--set', f'data.val=[{ds_dir}]', epochs=1)
    assert train.main(args) == 0
    err = capsys.readouterr().err
    n = len(run.load_records([ds_dir], NYU13))
    assert f'warning: {n} of the {n} validation frames (data.val) are training frames too' in err
    assert (tmp_path / 'r' / 'model.pt').exists()
    assert run.shared_frames([{'id': 'a'}, {'id': 'b'}], [{'id': 'b'}, {'id': 'c'}]) == ['b']
    assert run.shared_frames([{'id': 'a'}], [{'id': 'c'}]) == []
