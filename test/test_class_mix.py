"""ClassMix onto real RGB-D frames (training.class_mix, config train.class_mix)."""

import copy

import pytest
import torch

from depth3dseg_ros.training.class_mix import (
    check_class_mix,
    class_mix,
    startup_line,
    step_generator,
)
from depth3dseg_ros.training.config import DEFAULTS, validate

VOID = 0


def _batch():
    """Frame 0: synthetic, labels 3 | 5 | 7 | void in four column bands; frame 1: real RGB-D
    (no labels); frame 2: a painted layout frame without geometry (labels, no real scene);
    frame 3: real colour without depth."""
    b, h, w = 4, 6, 8
    labels = torch.full((b, h, w), VOID, dtype=torch.int64)
    labels[0, :, 0:2], labels[0, :, 2:4], labels[0, :, 4:6] = 3, 5, 7
    labels[2] = 9
    depth = torch.full((b, 1, h, w), float('nan'))
    depth[0] = 1.0
    depth[1] = 4.0
    depth[1, 0, 0, 0] = float('nan')
    rgb = torch.stack([torch.full((3, h, w), float(i)) for i in range(b)])
    return {
        'rgb': rgb,
        'K': torch.eye(3).expand(b, 3, 3).clone(),
        'depth': depth,
        'labels': labels,
        'has_labels': torch.tensor([True, False, True, False]),
        'has_depth': torch.tensor([True, True, False, False]),
        'has_geometry': torch.tensor([True, True, False, True]),
        'index': torch.arange(b),
    }


def test_a_real_rgbd_frame_takes_half_the_classes_of_a_labelled_one():
    batch = _batch()
    before = {k: v.clone() for k, v in batch.items()}
    out, n = class_mix(batch, 1.0, VOID, step_generator(0, 0))
    assert n == 1
    lab = out['labels'][1]
    pasted = lab != VOID
    chosen = set(torch.unique(lab[pasted]).tolist())
    assert len(chosen) == 2 and chosen <= {3, 5, 7}  # half of 3 classes, rounded up; never void
    src = torch.isin(before['labels'][0], torch.tensor(sorted(chosen)))
    assert torch.equal(pasted, src)  # exactly the donor's pixels of those classes
    assert torch.all(out['rgb'][1][:, pasted] == 0.0)  # the donor's colour
    assert torch.all(out['rgb'][1][:, ~pasted] == 1.0)  # the real frame's colour
    assert torch.all(out['depth'][1][0][pasted] == 1.0)  # the donor's depth
    kept = out['depth'][1][0][~pasted]
    assert torch.all((kept == 4.0) | torch.isnan(kept))  # the measured depth, holes kept
    assert bool(out['has_labels'][1])
    # the other frames, and the input batch, are untouched
    for k in before:
        assert torch.equal(batch[k].nan_to_num(-1), before[k].nan_to_num(-1)), k
        for i in (0, 2, 3):
            assert torch.equal(out[k][i].nan_to_num(-1), before[k][i].nan_to_num(-1)), (k, i)
    assert torch.equal(out['K'], before['K'])


def test_p_zero_and_batches_without_a_pair_come_back_unchanged():
    batch = _batch()
    out, n = class_mix(batch, 0.0, VOID, step_generator(0, 0))
    assert n == 0 and out['labels'] is batch['labels']
    only_real = {k: v[1:2] for k, v in _batch().items()}
    out, n = class_mix(only_real, 1.0, VOID, step_generator(0, 0))
    assert n == 0 and out is only_real
    # a donor whose labels are all void gives nothing to paste
    b = _batch()
    b['labels'][0] = VOID
    out, n = class_mix(b, 1.0, VOID, step_generator(0, 0))
    assert n == 0 and not bool(out['has_labels'][1])


def test_the_draws_are_a_function_of_seed_and_step():
    def labels(seed, step):
        return class_mix(_batch(), 1.0, VOID, step_generator(seed, step))[0]['labels'][1]

    assert torch.equal(labels(3, 10), labels(3, 10))
    assert any(not torch.equal(labels(3, 10), labels(3, s)) for s in range(11, 20))


def test_the_config_key_is_checked():
    assert check_class_mix(None) is None
    assert check_class_mix({}) == {'p': 0.5}
    assert check_class_mix({'p': 1}) == {'p': 1.0}
    for bad, word in (
        ({'p': 1.5}, 'train.class_mix.p=1.5'),
        ({'p': True}, 'train.class_mix.p=True'),
        ({'q': 0.1}, "unknown key(s) ['q']"),
        (0.5, 'train.class_mix=0.5 must be null or a mapping'),
    ):
        with pytest.raises(ValueError) as err:
            check_class_mix(bad)
        assert word in str(err.value)
    cfg = copy.deepcopy(DEFAULTS)
    cfg['train']['class_mix'] = {'p': 0.25}
    assert validate(cfg)['train']['class_mix'] == {'p': 0.25}
    cfg['train']['class_mix'] = {'p': -1}
    with pytest.raises(ValueError, match=r'train\.class_mix\.p=-1'):
        validate(cfg)


def test_the_startup_line_warns_when_nothing_can_be_mixed():
    real = {'rgb': 'r.png', 'depth': 'd.png'}
    synth = {'rgb': 'r.png', 'depth': 'd.png', 'labels': 'l.png'}
    painted = {'rgb': 'r.png', 'labels': 'l.png', 'geometry': False}
    line, ok = startup_line({'p': 0.5}, [real, real, synth, painted])
    assert ok and '2 real RGB-D frames' in line and '1 labelled' in line
    for records, counts in (([synth, synth], '0 RGB-D frames'), ([real, painted], '0 labelled')):
        line, ok = startup_line({'p': 0.5}, records)
        assert not ok and 'mixes nothing' in line and counts in line, line


@pytest.mark.slow
def test_a_run_with_class_mix_mixes_its_real_rgbd_frames(real_dir, tmp_path, monkeypatch, capsys):
    """depth3dseg-train with ``train.class_mix`` mixes the real RGB-D frames of its batches (the
    3 unlabelled NYU-raw frames of the test set), stores the key in config.yaml and exports a
    model."""
    from depth3dseg_ros.training import train
    from trainutil import make_dataset_dir, tiny_train_args

    seen = []

    def counting(batch, p, void_id, gen):
        out, n = class_mix(batch, p, void_id, gen)
        seen.append(n)
        return out, n

    monkeypatch.setattr(train, 'class_mix', counting)
    ds = make_dataset_dir(real_dir, tmp_path / 'd', size=(80, 60))
    out = tmp_path / 'run'
    args = ['--set', 'train.class_mix={p: 1.0}', '--set', 'train.batch_size=4']
    assert train.main(tiny_train_args(ds, out, *args, epochs=2)) == 0
    assert 'class_mix:\n    p: 1.0' in (out / 'config.yaml').read_text()
    assert (out / 'model.pt').is_file()
    assert len(seen) >= 2 and sum(seen) >= 1
    out = capsys.readouterr().out
    assert 'train.class_mix p=1: 3 real RGB-D frames' in out, out
    assert f'epoch 2: train.class_mix mixed {sum(seen[len(seen) // 2 :])} frames' in out, out
