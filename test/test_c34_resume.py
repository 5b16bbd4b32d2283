"""C34: a mid-epoch resume after the batch size or the number of processes changed trains every
sample of the interrupted epoch exactly once across both chunks (training.sampling,
train.resume_position)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from depth3dseg_ros.training import train
from depth3dseg_ros.training.checkpoint import load_checkpoint, save_checkpoint
from depth3dseg_ros.training.sampling import EpochBatchSampler, epoch_order, step_sizes
from trainutil import make_dataset_dir, tiny_train_args


def _epoch(n, bs, world, start=0, steps=None, seed=3, epoch=1):
    """Indices each step takes over all ranks, first ``steps`` steps; and the position after
    them."""
    ranks = [EpochBatchSampler(n, bs, world, r, seed, epoch, start) for r in range(world)]
    batches = [list(s) for s in ranks]
    steps = len(ranks[0]) if steps is None else steps
    taken = [i for k in range(steps) for b in batches for i in b[k]]
    assert len({len(b) for b in batches}) == 1  # every rank takes the same number of steps
    return taken, ranks[0].positions_after(steps)


def test_c34_world_size_2_to_1_and_batch_2_to_5_trains_each_sample_once():
    n = 23
    first, pos = _epoch(n, bs=2, world=2, steps=3)  # 3 steps of 2 x 2 processes, then stopped
    assert pos == 12 and len(first) == 12
    rest, end = _epoch(n, bs=5, world=1, start=pos)  # resumed: 1 process, batch 5 -> 5 + 5 + 1
    assert end == n and step_sizes(n, 5, 1, pos) == [5, 5, 1]
    assert Counter(first + rest) == Counter(range(n))  # every sample exactly once
    assert first + rest == epoch_order(n, 3, 1).tolist()  # in the epoch's one global order


def test_c34_order_is_independent_of_the_batch_shape():
    whole, _ = _epoch(18, bs=4, world=1)
    split, _ = _epoch(18, bs=2, world=2)
    assert sorted(whole) == sorted(split) == list(range(18)) and whole == split


def test_c34_last_partial_step_is_shared_out_and_only_less_than_world_is_left():
    assert step_sizes(8, 2, 3) == [6]  # 2 left < 3 processes: left out of the epoch
    assert step_sizes(10, 2, 3) == [6, 4]  # 4 left: slices of 2, 1, 1
    taken, _ = _epoch(10, bs=2, world=3)
    assert Counter(taken) == Counter(range(10))
    assert step_sizes(7, 3, 1, max_steps=2) == [3, 3]  # --max-steps-per-epoch caps the epoch
    with pytest.raises(ValueError, match='samples_in_epoch=9 outside 0..7'):
        step_sizes(7, 3, 1, start=9)


def _record_indices(monkeypatch) -> list[list[int]]:
    """The sample indices of every optimiser step from now on, one list per step."""
    seen: list[list[int]] = []
    real = train.compute_losses

    def spy(model, batch, *a, **k):
        seen.append(batch['index'].tolist())
        return real(model, batch, *a, **k)

    monkeypatch.setattr(train, 'compute_losses', spy)
    return seen


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


def test_c34_resume_with_batch_size_2_then_5_end_to_end(ds_dir, tmp_path, monkeypatch, capsys):
    seen = _record_indices(monkeypatch)
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--time-limit-min', '0', epochs=1)
    assert train.main(args) == 0  # stops after its first step (time limit)
    ck = load_checkpoint(out / 'last.pt')
    assert (ck['samples_in_epoch'], ck['batch_size'], ck['world_size']) == (2, 2, 1)
    assert seen == [seen[0]] and len(seen[0]) == 2
    assert (
        train.main(
            [
                '--out',
                str(out),
                '--resume',
                '--set',
                'train.time_limit_min=null',
                '--set',
                'train.batch_size=5',
            ]
        )
        == 0
    )
    assert 'batch size 2 x 1 process(es) then, 5 x 1 now' in capsys.readouterr().out
    assert [len(b) for b in seen] == [2, 5]  # 7 training frames: 2, then the other 5
    assert Counter(i for b in seen for i in b) == Counter(range(7))


def test_c34_old_mid_epoch_checkpoint_is_refused_naming_it(ds_dir, tmp_path, capsys):
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--time-limit-min', '0', epochs=1)
    assert train.main(args) == 0
    ck = load_checkpoint(out / 'last.pt')
    for key in ('samples_in_epoch', 'batch_size', 'world_size', 'sampler_seed'):
        del ck[key]  # as written before positions were recorded
    save_checkpoint(out / 'last.pt', ck)
    capsys.readouterr()
    assert train.main(['--out', str(out), '--resume']) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and 'stops mid-epoch (epoch 0, step 1)' in err
        and 'samples' in err
    )
    after = load_checkpoint(out / 'last.pt')
    assert 'samples_in_epoch' not in after and all(
        torch.equal(after['model'][k], v) for k, v in ck['model'].items()
    )  # nothing overwritten


def test_c34_resume_with_another_seed_finishes_the_epoch_in_its_own_order(
    ds_dir, tmp_path, monkeypatch, capsys
):
    """A mid-epoch resume with another train.seed: the interrupted epoch's remaining samples are
    those of the order it began in (the stored sampler seed), each trained once; the next epoch
    follows the new seed. Before, the rest of the epoch was drawn from the new seed's order:
    some samples twice, others never."""
    seen = _record_indices(monkeypatch)
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--time-limit-min', '0', epochs=2)
    assert train.main(args) == 0  # one step of batch 2 with seed 0, then the time limit
    resumed = ['--out', str(out), '--resume', '--set', 'train.time_limit_min=null']
    assert train.main([*resumed, '--set', 'train.seed=4']) == 0
    assert 'its remaining samples follow seed 0, later epochs seed 4' in capsys.readouterr().out
    flat = [i for b in seen for i in b]
    assert Counter(flat[:7]) == Counter(range(7))  # epoch 1: every frame once
    assert Counter(flat[7:]) == Counter(range(7))  # epoch 2 (seed 4): every frame once
    assert flat[:7] == epoch_order(7, 0, 0).tolist()  # all of epoch 1 in seed 0's order
    assert flat[7:] == epoch_order(7, 4, 1).tolist()


def test_c34_mid_epoch_resume_on_changed_training_data_is_refused(
    ds_dir, real_dir, tmp_path, capsys
):
    out = tmp_path / 'run'
    args = tiny_train_args(ds_dir, out, '--time-limit-min', '0', epochs=1)
    assert train.main(args) == 0
    more = make_dataset_dir(real_dir, tmp_path / 'more', size=(80, 60))
    capsys.readouterr()
    code = train.main(['--out', str(out), '--resume', '--set', f'data.train=[{ds_dir},{more}]'])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert 'stops mid-epoch (sample 2 of 7) but the training data now has' in err
