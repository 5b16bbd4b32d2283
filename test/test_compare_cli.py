"""depth3dseg-eval's per-frame counts and frame bootstrap intervals, and depth3dseg-compare's
paired intervals between two reports on the same frames."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import yaml

from depth3dseg_ros.core.bootstrap import miou_of
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import save_model
from depth3dseg_ros.training import compare, evaluate
from depth3dseg_ros.training.frame_stats import level_label, load_frames
from trainutil import TINY_ARCH, copy_dataset_with, make_dataset_dir

SIZE = (64, 48)


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


def _model(tmp_path_factory, seed):
    torch.manual_seed(seed)
    model = Depth3DSeg(num_classes=len(NYU13), **yaml.safe_load(TINY_ARCH))
    with torch.no_grad():  # make the untrained depth head depend on the image
        torch.nn.init.normal_(model.net.depth_head[-1].weight, std=20.0)
    path = tmp_path_factory.mktemp(f'm{seed}') / 'model.pt'
    return save_model(path, model, {'classes': NYU13.to_dict(), 'input_size': list(SIZE)})


@pytest.fixture(scope='module')
def reports(ds_dir, tmp_path_factory):
    """Two untrained models (seeds 0, 1) evaluated on the same frames."""
    out = []
    for seed in (0, 1):
        d = tmp_path_factory.mktemp(f'e{seed}')
        m = _model(tmp_path_factory, seed)
        argv = ['--model', str(m), '--data', str(ds_dir), '--out', str(d), '--resamples', '300']
        assert evaluate.main(argv) == 0
        out.append(d)
    return out


def test_eval_writes_per_frame_counts_and_intervals(reports, ds_dir):
    d = reports[0]
    rep = json.loads((d / 'report.json').read_text())
    ids, fr = load_frames(d)
    index = [json.loads(line)['id'] for line in (ds_dir / 'index.jsonl').read_text().splitlines()]
    assert ids == index and fr['void_id'] == NYU13.void_id
    for k, sec in (('2d', 'seg2d'), ('3d', 'seg3d'), ('fused', 'fused')):
        np.testing.assert_array_equal(fr[f'conf_{k}'].sum(0), rep[sec]['confusion'])
        assert miou_of(fr[f'conf_{k}'].sum(0)) == pytest.approx(rep[f'miou_{k}'])
    assert fr['depth_pixels'].sum() == rep['depth']['pixels']
    assert fr['absrel_sum'].sum() / fr['depth_pixels'].sum() == pytest.approx(rep['absrel'])
    for key in ('miou_fused', 'miou_2d', 'miou_3d', 'absrel'):
        ci = rep['ci'][key]
        assert ci['value'] == pytest.approx(rep[key]) and ci['resamples'] == 300
        assert ci['lo'] <= ci['value'] <= ci['hi'] and ci['level'] == 0.95
    assert rep['ci']['absrel']['frames'] == int((fr['depth_pixels'] > 0).sum()) == 5
    assert '95 % frame bootstrap intervals' in (d / 'report.txt').read_text()


def test_resamples_zero_writes_counts_without_intervals(ds_dir, reports, tmp_path, capsys):
    m = json.loads((reports[0] / 'report.json').read_text())['model']
    argv = ['--model', m, '--data', str(ds_dir), '--out', str(tmp_path / 'e')]
    assert evaluate.main(argv + ['--resamples', '0']) == 0
    assert 'ci' not in json.loads((tmp_path / 'e' / 'report.json').read_text())
    assert (tmp_path / 'e' / 'frames.npz').is_file()
    for bad in ('-1', '5'):
        assert evaluate.main(argv + ['--resamples', bad]) == 2
        assert f'--resamples={bad} must be 0 (no intervals) or >= 100' in capsys.readouterr().err


def test_compare_a_report_with_itself_and_with_another_model(reports, tmp_path, capsys):
    a, b = reports
    assert compare.main([str(a), str(a), '--resamples', '200']) == 0
    out = capsys.readouterr().out
    assert 'mIoU fused' in out and '+0.000' in out and 'p(not better)' in out
    res_json = tmp_path / 'c.json'
    assert compare.main([str(a), str(b), '--resamples', '200', '--json', str(res_json)]) == 0
    res = json.loads(res_json.read_text())
    ra, rb = (json.loads((d / 'report.json').read_text()) for d in (a, b))
    for key in ('miou_fused', 'miou_2d', 'miou_3d', 'absrel'):
        r = res[key]
        assert r['value'] == pytest.approx(rb[key] - ra[key])
        assert r['lo'] <= r['value'] <= r['hi'] and 0.0 <= r['p_not_better'] <= 1.0
    assert f"model {ra['model']}" in capsys.readouterr().out


def test_compare_refuses_reports_on_different_frames(reports, tmp_path, capsys):
    a, b = reports
    other = tmp_path / 'other'
    shutil.copytree(b, other)
    ids, fr = load_frames(other)
    np.savez(
        other / 'frames.npz',
        ids=np.asarray(ids[::-1]),
        void_id=np.int64(fr['void_id']),
        **{k: v for k, v in fr.items() if k != 'void_id'},
    )
    assert compare.main([str(a), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith('depth3dseg-compare: error: the two reports were made on different')
    assert f'frame 0: {ids[0]!r} against {ids[-1]!r}' in err
    (other / 'frames.npz').unlink()
    assert compare.main([str(a), str(other)]) == 2
    assert 'frames.npz not found' in capsys.readouterr().err


def test_damaged_frames_file_and_unwritable_json_are_one_line_errors(reports, tmp_path, capsys):
    a, b = reports
    bad = tmp_path / 'bad'
    shutil.copytree(b, bad)
    data = (bad / 'frames.npz').read_bytes()
    (bad / 'frames.npz').write_bytes(data[: len(data) // 2])  # a copy cut short
    assert compare.main([str(a), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith('depth3dseg-compare: error:') and 'cannot be read' in err
    assert 'Traceback' not in err and str(bad / 'frames.npz') in err
    assert compare.main([str(a), str(b), '--json', str(tmp_path / 'no' / 'dir' / 'c.json')]) == 2
    assert '--json' in capsys.readouterr().err
    for flags, msg in ((['--level', '1.2'], 'level=1.2'), (['--resamples', '0'], 'resamples=0')):
        assert compare.main([str(a), str(b), *flags]) == 2
        assert msg in capsys.readouterr().err


def test_same_ids_with_other_ground_truth_are_refused(reports, tmp_path, capsys):
    """The same bag extracted another way (or relabelled) keeps its frame ids: the per-frame
    ground truth, not the ids alone, decides whether two reports hold the same frames."""
    a, b = reports
    ids, fr = load_frames(b)
    for what, change in (
        ('labels', lambda f: f['conf_2d'].__setitem__((3, 5, 5), f['conf_2d'][3, 5, 5] + 7)),
        ('valid depth pixels', lambda f: f['depth_pixels'].__setitem__(0, 1)),
    ):
        other = tmp_path / what.replace(' ', '_')
        shutil.copytree(b, other)
        f = {k: (v.copy() if hasattr(v, 'copy') else v) for k, v in fr.items()}
        change(f)
        np.savez(
            other / 'frames.npz',
            ids=np.asarray(ids),
            void_id=np.int64(f['void_id']),
            **{k: v for k, v in f.items() if k != 'void_id'},
        )
        assert compare.main([str(a), str(other)]) == 2
        err = capsys.readouterr().err
        assert 'the same frames but their ground truth differs' in err and what in err


def test_repeated_frames_are_warned_about(ds_dir, reports, tmp_path, capsys):
    m = json.loads((reports[0] / 'report.json').read_text())['model']
    out = tmp_path / 'twice'
    argv = ['--model', m, '--data', str(ds_dir), str(ds_dir), '--out', str(out)]
    assert evaluate.main(argv + ['--resamples', '100']) == 0
    err = capsys.readouterr().err
    assert 'depth3dseg-eval: warning: 10 frame ids occur more than once' in err
    assert compare.main([str(out), str(out), '--resamples', '100']) == 0
    assert 'depth3dseg-compare: warning: 10 frame ids occur more than once' in (
        capsys.readouterr().err
    )


def test_unlabelled_frames_and_missing_reports_are_said_plainly(ds_dir, reports, tmp_path, capsys):
    m = json.loads((reports[0] / 'report.json').read_text())['model']
    nolab = copy_dataset_with(ds_dir, tmp_path / 'nolab', labels=None)
    out = tmp_path / 'e'
    assert evaluate.main(['--model', m, '--data', str(nolab), '--out', str(out)]) == 0
    table = (out / 'report.txt').read_text()
    assert 'mIoU fused  -  (no labelled frames)' in table and 'AbsRel' in table
    assert compare.main([str(reports[0]), str(tmp_path / 'nowhere')]) == 2
    assert f'report directory {tmp_path / "nowhere"} not found' in capsys.readouterr().err
    assert compare.main([str(reports[0]), str(reports[0] / 'report.json')]) == 2
    err = capsys.readouterr().err
    assert 'report.json cannot be read as a depth3dseg-eval frames file' in err
    np.save(tmp_path / 'a.npy', np.arange(3))
    assert compare.main([str(reports[0]), str(tmp_path / 'a.npy')]) == 2
    assert 'a.npy cannot be read as a depth3dseg-eval frames file' in capsys.readouterr().err
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'empty' / 'index.jsonl').write_text('')
    argv = ['--model', m, '--data', str(tmp_path / 'empty'), '--out', str(tmp_path / 'x')]
    assert evaluate.main(argv) == 2
    assert f'no frames in {tmp_path / "empty"}' in capsys.readouterr().err


def test_interval_levels_are_named_rounded():
    assert level_label(0.95) == '95 %' and level_label(0.58) == '58 %'
    assert level_label(0.999) == '99.9 %'


def test_reports_of_other_class_sets_are_refused(reports):
    ids, fr = load_frames(reports[0])
    small = {k: (v[:, :5, :5] if k.startswith('conf_') else v) for k, v in fr.items()}
    with pytest.raises(ValueError, match='other class sets \\(14 classes against 5\\)'):
        compare.compare_frames((ids, fr), (ids, small), resamples=100)
