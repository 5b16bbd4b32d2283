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


def test_a_fine_tune_distils_from_the_teacher_file_and_refuses_a_mismatched_one(
    ds_dir, tmp_path, capsys
):
    """The run loads the teacher, says so, trains with the term (its TensorBoard scalar exists)
    and exports a model; a teacher whose normalisation differs from the run's is refused before
    any run directory is made, naming the key."""
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds_dir, base, epochs=1)) == 0
    teacher = base / 'model.pt'
    kd = ['--set', f'model.init={teacher}', '--set', f'model.teacher={teacher}']
    kd += ['--set', 'loss.w_distill=1.0', '--set', 'log.tensorboard=true']
    out = tmp_path / 'ft'
    assert train.main(tiny_train_args(ds_dir, out, *kd, epochs=1)) == 0
    assert f'distilling from {teacher}' in capsys.readouterr().out
    assert (out / 'model.pt').exists()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(out / 'tb'))
    ea.Reload()
    vals = [e.value for e in ea.Scalars('train/distill')]
    assert vals and all(v >= 0 for v in vals) and any(v > 0 for v in vals)

    model, meta = load_model(teacher)
    odd = tmp_path / 'odd.pt'
    save_model(odd, model, dict(meta, mean=[0.5, 0.5, 0.5]))
    bad = tmp_path / 'bad'
    args = kd[:2] + ['--set', f'model.teacher={odd}', '--set', 'loss.w_distill=1.0']
    assert train.main(tiny_train_args(ds_dir, bad, *args, epochs=1)) == 2
    assert 'model.teacher' in capsys.readouterr().err and not bad.exists()

    cfg = load_config(None, [f'model.teacher={teacher}', 'loss.w_distill=1'])
    frozen = load_teacher(cfg, ClassSet.from_dict(meta['classes']))
    assert not frozen.training and not any(p.requires_grad for p in frozen.parameters())


def test_teacher_and_weight_go_together():
    with pytest.raises(ValueError, match=r'model.teacher=None and loss.w_distill=0.5 go together'):
        load_config(None, ['loss.w_distill=0.5'])
    with pytest.raises(ValueError, match=r"teacher='t.pt' and loss.w_distill=0.0 go together"):
        load_config(None, ['model.teacher=t.pt'])
    with pytest.raises(ValueError, match=r'model.teacher=3 must be null or the path'):
        load_config(None, ['model.teacher=3', 'loss.w_distill=1'])
