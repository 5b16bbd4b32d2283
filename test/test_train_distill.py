"""model.teacher + loss.w_distill: a depth3dseg-train fine-tune that distils a frozen model's
segmentation (core.distill; training.checkpoint.load_teacher)."""

from __future__ import annotations

import pytest

from depth3dseg_ros.core.modelfile import load_model, save_model
from depth3dseg_ros.training import train
from depth3dseg_ros.training.checkpoint import load_teacher
from depth3dseg_ros.training.config import load_config
from depth3dseg_ros.core.classes import ClassSet
from trainutil import make_dataset_dir, tiny_train_args


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('kd') / 'd', size=(80, 60))


def test_a_fine_tune_distils_from_the_teacher_file_and_resumes_with_it(ds_dir, tmp_path, capsys):
    """The run loads the teacher, says so, trains with the term (its TensorBoard scalar exists),
    exports a model, and ``--resume`` continues with the teacher its config names."""
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds_dir, base, epochs=1)) == 0
    teacher = base / 'model.pt'
    kd = ['--set', f'model.init={teacher}', '--set', f'model.teacher={teacher}']
    kd += ['--set', 'loss.w_distill=1.0', '--set', 'log.tensorboard=true']
    out = tmp_path / 'ft'
    assert train.main(tiny_train_args(ds_dir, out, *kd, epochs=1)) == 0
    said = capsys.readouterr().out
    assert f'distilling from {teacher} (model.teacher, loss.w_distill=1)' in said
    assert (out / 'model.pt').exists()
    assert train.main(['--out', str(out), '--resume', '--set', 'train.epochs=2']) == 0
    assert f'distilling from {teacher}' in capsys.readouterr().out
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(out / 'tb'))
    ea.Reload()
    steps = [e.step for e in ea.Scalars('train/distill')]
    vals = [e.value for e in ea.Scalars('train/distill')]
    assert all(v >= 0 for v in vals) and any(v > 0 for v in vals)
    assert len(set(steps)) == len(steps) and max(steps) > len(steps) // 2  # both epochs logged


def test_a_teacher_that_does_not_fit_the_run_is_refused_naming_the_key(ds_dir, tmp_path, capsys):
    """Another normalisation, input size or class set, or a missing file: refused before any
    data is read and before a run directory exists, naming ``model.teacher`` and the key."""
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds_dir, base, epochs=1)) == 0
    model, meta = load_model(base / 'model.pt')
    odd = tmp_path / 'odd.pt'
    save_model(odd, model, dict(meta, mean=[0.5, 0.5, 0.5]))
    bad = tmp_path / 'bad'
    args = ['--set', f'model.teacher={odd}', '--set', 'loss.w_distill=1.0']
    assert train.main(tiny_train_args(ds_dir, bad, *args, epochs=1)) == 2
    err = capsys.readouterr().err
    assert 'model.teacher=' in err and 'trained with mean [0.5, 0.5, 0.5]' in err
    assert not bad.exists()

    classes = ClassSet.from_dict(meta['classes'])
    # a run of the teacher's (MobileNetV2-style) encoder, so of its normalisation
    ok = load_config(
        None, ['model.arch={}', f'model.teacher={base / "model.pt"}', 'loss.w_distill=1']
    )
    ok['data']['input_size'] = list(meta['input_size'])
    frozen = load_teacher(ok, classes)
    assert not frozen.training and not any(p.requires_grad for p in frozen.parameters())
    with pytest.raises(ValueError, match=r'with input_size \[64, 48\] but the run has data.input'):
        load_teacher(dict(ok, data=dict(ok['data'], input_size=[80, 60])), classes)
    renamed = dict(meta['classes'])
    renamed['classes'] = [dict(c, name=f'x{c["id"]}') for c in renamed['classes']]
    with pytest.raises(ValueError, match=r'model.teacher=.*trained for classes'):
        load_teacher(ok, ClassSet.from_dict(renamed))
    missing = dict(ok, model=dict(ok['model'], teacher=str(tmp_path / 'no.pt')))
    with pytest.raises(ValueError, match=r'model.teacher=.*no.pt'):
        load_teacher(missing, classes)


def test_teacher_and_weight_go_together():
    with pytest.raises(ValueError, match=r'model.teacher=None and loss.w_distill=0.5 / loss'):
        load_config(None, ['loss.w_distill=0.5'])
    with pytest.raises(ValueError, match=r'teacher=None .* loss.w_distill_depth=1 go together'):
        load_config(None, ['loss.w_distill_depth=1'])
    with pytest.raises(ValueError, match=r"teacher='t.pt' and loss.w_distill=0.0 / "):
        load_config(None, ['model.teacher=t.pt'])
    cfg = load_config(None, ['model.teacher=t.pt', 'loss.w_distill_depth=1'])
    assert cfg['loss']['w_distill_depth'] == 1
    with pytest.raises(ValueError, match=r'model.teacher=3 must be null or the path'):
        load_config(None, ['model.teacher=3', 'loss.w_distill=1'])


def test_the_progress_bar_names_every_loss_term_apart():
    """Each logged term gets its own name on the progress bar ('distill' and 'distill_depth'
    once both read 'disti')."""
    names = [train.BAR_NAMES.get(k, k) for k in train.LOSS_KEYS]
    assert len(set(names)) == len(names) and 'distill_depth' in train.LOSS_KEYS
