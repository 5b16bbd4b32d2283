"""depth3dseg-calibrate (training/calibrate.py): fit a model's depth_gain to a camera's RGB-D
frames and write a calibrated copy of the model file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.calibrate import depth_scale, frame_scales, main
from trainutil import copy_dataset_with, make_dataset_dir, perturbed_tiny_model_file


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('calibrate')
    data = make_dataset_dir(real_dir, tmp / 'ds', size=(96, 72))
    return perturbed_tiny_model_file(tmp / 'tiny.pt'), data, tmp


def test_calibrated_model_has_no_median_scale_error(setup, capsys):
    torch.set_num_threads(1)
    model_path, data, tmp = setup
    out = tmp / 'calibrated.pt'
    assert main(['--model', str(model_path), '--data', str(data), '--out', str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('| data | frames | skipped | AbsRel') and 'wrote' in lines[-1]
    model, meta = load_model(model_path)
    rows, skipped = frame_scales(model.eval(), meta, str(data))
    assert len(rows) >= 3 and not skipped
    want = float(np.median([r[1] for _, r in rows]))
    cal, cal_meta = load_model(out)
    assert cal_meta['arch']['depth_gain'] == pytest.approx(want, rel=1e-9)
    assert cal_meta['depth_calibration']['frames'] == len(rows)
    assert cal_meta['depth_calibration']['previous_gain'] == 1.0
    assert cal_meta['depth_calibration']['skipped'] == 0
    assert cal_meta['depth_calibration']['model'] == model_path.name
    # everything but the gain is the input model's
    for k, v in model.state_dict().items():
        assert torch.equal(cal.state_dict()[k], v), k
    assert {k: v for k, v in cal_meta['arch'].items() if k != 'depth_gain'} == {
        k: v for k, v in meta['arch'].items() if k != 'depth_gain'
    }
    after = depth_scale(cal.eval(), cal_meta, str(data))
    assert after['scale'] == pytest.approx(1.0, abs=1e-3)
    assert after['absrel'] != pytest.approx(depth_scale(model, meta, str(data))['absrel'])
    # calibrating again changes (almost) nothing: the gain composes with the one already there
    again = tmp / 'again.pt'
    assert main(['--model', str(out), '--data', str(data), '--out', str(again)]) == 0
    assert load_model(again)[1]['arch']['depth_gain'] == pytest.approx(want, rel=1e-3)


def test_user_errors_are_one_line_and_write_nothing(setup, capsys):
    model_path, data, tmp = setup
    (tmp / 'a_dir.pt').mkdir(exist_ok=True)
    (tmp / 'a_file').write_text('x')
    x = str(tmp / 'x.pt')
    cases = [
        (['--data', str(data), '--out', str(model_path)], 'is the input model file'),
        (['--data', str(tmp / 'nope'), '--out', x], '--data ' + str(tmp / 'nope')),
        (['--data', str(data), str(tmp / 'nope'), '--out', x], 'no such dataset directory'),
        (['--data', str(data), f'{data}/../{data.name}', '--out', x], 'twice'),
        (['--data', str(data), '--out', x, '--min-frames', '99'], 'at least 99'),
        (['--data', str(data), '--out', x, '--max-frames', '0'], 'max-frames=0'),
        (['--data', str(data), '--out', x, '--min-frames', '0'], 'min-frames=0'),
        (['--data', str(data), '--out', str(tmp / 'a_dir.pt')], 'not a directory'),
        (['--data', str(data), '--out', ''], "--out '' must be a model file path"),
        (['--data', str(data), '--out', str(tmp / 'a_file' / 'x.pt')], 'a parent of it is a file'),
    ]
    for args, msg in cases:
        assert main(['--model', str(model_path), *args]) == 2
        out, err = capsys.readouterr()
        err = err.strip().splitlines()[-1]
        assert err.startswith('depth3dseg-calibrate: error: ') and msg in err, err
        assert 'Traceback' not in err
    assert not (tmp / 'x.pt').exists() and not any((tmp / 'a_dir.pt').iterdir())


def test_a_depth_unit_mix_up_is_named(setup, tmp_path, capsys):
    """16UC1 millimetres read as metres (a dataset depth_scale of 1 instead of 0.001): no pixel
    is left in 0.1-10 m, and the error names the unit, not the topic."""
    import json
    import shutil

    model_path, data, _ = setup
    mm = tmp_path / 'mm'
    shutil.copytree(data, mm)
    idx = mm / 'index.jsonl'
    recs = [json.loads(line) for line in idx.read_text().splitlines() if line.strip()]
    assert {r['depth_scale'] for r in recs if r.get('depth')} == {0.001}
    idx.write_text(''.join(json.dumps(dict(r, depth_scale=1.0)) + '\n' for r in recs))
    out = tmp_path / 'x.pt'
    assert main(['--model', str(model_path), '--data', str(mm), '--out', str(out)]) == 2
    o, err = capsys.readouterr()
    n = sum(1 for r in recs if r.get('depth'))
    assert f'none of the {n} frames with depth of {mm} has a pixel in 0.1-10 m' in err
    assert 'check the depth unit (16UC1 is mm, 32FC1 m)' in err and not out.exists()
    assert f'| {mm} | 0 | {n} | - | - | - |' in o


def test_a_bag_is_extracted_first_with_its_topics(setup, real_bag, capsys):
    """--bag: the depth3dseg-extract code path into a temporary directory (labels off); a bag
    without the requested depth topic is a one-line error, not an empty calibration."""
    torch.set_num_threads(1)
    model_path, data, tmp = setup
    out = tmp / 'from_bag.pt'
    assert main(['--model', str(model_path), '--bag', str(real_bag), '--out', str(out)]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith(f'| {real_bag} | 14 | 0 |')  # the 14 frames of the bag with depth
    meta = load_model(out)[1]
    assert meta['depth_calibration']['data'] == [str(real_bag)]
    assert meta['depth_calibration']['frames'] == 14
    bad = tmp / 'bad.pt'
    args = ['--model', str(model_path), '--bag', str(real_bag), '--out', str(bad)]
    assert main([*args, '--preset', 'realsense']) == 2
    err = capsys.readouterr().err
    assert "no depth topic '/camera/aligned_depth_to_color/image_raw'" in err
    assert 'calibration needs depth' in err and 'allow-missing' not in err and not bad.exists()
    assert main([*args, '--preset', 'realsense', '--depth-topic', '/camera/depth/image_raw']) == 0
    assert load_model(bad)[1]['depth_calibration']['frames'] == 14


def test_frames_without_depth_are_named_not_fitted(setup, tmp_path, capsys):
    model_path, data, _ = setup
    rgb_only = copy_dataset_with(data, tmp_path / 'rgb_only', depth=None)
    out = tmp_path / 'x.pt'
    assert main(['--model', str(model_path), '--data', str(rgb_only), '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f'no frame of {rgb_only} has depth: calibration needs RGB-D frames')
    assert not out.exists()
    assert (
        main(
            ['--model', str(model_path), '--data', str(data), '--preset', 'zed', '--out', str(out)]
        )
        == 2
    )
    assert 'apply to --bag only' in capsys.readouterr().err
