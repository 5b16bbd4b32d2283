"""depth3dseg-eval: metrics over a dataset directory at network resolution against nearest-resized
ground truth (M7/M8; C22 labels, NaN-safe depth), the JSON report and table, PNG grids, and a bag
as input."""

from __future__ import annotations

import json
import re

import cv2
import numpy as np
import pytest
import torch
import yaml

from bagutil import make_frames, write_bag
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import load_model, save_model
from depth3dseg_ros.training import evaluate
from depth3dseg_ros.training.dataset import FrameDataset
from trainutil import TINY_ARCH, copy_dataset_with, make_dataset_dir

SIZE = (64, 48)


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


@pytest.fixture(scope='module')
def model_file(tmp_path_factory):
    torch.manual_seed(0)
    model = Depth3DSeg(num_classes=len(NYU13), **yaml.safe_load(TINY_ARCH))
    with (
        torch.no_grad()
    ):  # the untrained depth head is constant (zero weights): make depth depend on the image
        torch.nn.init.normal_(model.net.depth_head[-1].weight, std=20.0)
    path = tmp_path_factory.mktemp('m') / 'model.pt'
    return save_model(path, model, {'classes': NYU13.to_dict(), 'input_size': list(SIZE)})


def _run(model_file, out, *src):
    assert (
        evaluate.main(['--model', str(model_file), *src, '--out', str(out), '--batch-size', '3'])
        == 0
    )
    return json.loads((out / 'report.json').read_text())


def test_report_keys_and_ground_truth_at_network_size(ds_dir, model_file, tmp_path, capsys):
    rep = _run(model_file, tmp_path / 'e', '--data', str(ds_dir), '--grids', '2')
    for key in evaluate.FLAT_KEYS + (
        'frames',
        'frames_per_s',
        'wall_frames_per_s',
        'batch_size',
        'device',
        'input_size',
    ):
        assert key in rep, key
    for part in ('seg2d', 'seg3d', 'fused'):
        assert set(rep[part]) >= {'miou', 'miou_gt', 'pixel_acc', 'iou', 'pixels', 'confusion'}
        assert set(rep[part]['iou']) == set(NYU13.names[1:])  # per-class IoU, void excluded
        conf = np.asarray(rep[part]['confusion'])
        assert conf.shape == (len(NYU13), len(NYU13)) and conf.sum() == rep[part]['pixels']
    assert rep['miou_gt_fused'] == rep['fused']['miou_gt'] >= rep['miou_fused'] - 1e-12
    assert 'fused labels: % of each class' in (tmp_path / 'e' / 'report.txt').read_text()
    assert rep['frames'] == 10 and rep['frames_per_s'] > 0 and rep['input_size'] == list(SIZE)
    # ground truth counted at the network size, resized with nearest neighbour (C22 / NaN-safe
    # depth)
    ds = FrameDataset([ds_dir], SIZE)
    n_lab = n_dep = 0
    for i in range(len(ds)):
        _, depth, labels, _ = ds.load_raw(i)
        if labels is not None:
            n_lab += int((resize_labels(labels, SIZE) != NYU13.void_id).sum())
        if depth is not None:
            d = resize_depth(depth, SIZE)
            n_dep += int((np.isfinite(d) & (d > 0) & (d <= 10.0)).sum())
    assert rep['seg2d']['pixels'] == rep['fused']['pixels'] == n_lab > 0
    assert 0 < rep['seg3d']['pixels'] <= n_lab  # pixels with a valid 3D point only
    assert rep['depth']['pixels'] == n_dep > 0
    for k in ('absrel', 'rmse', 'delta1', 'delta2', 'delta3'):
        assert rep[k] is not None and rep[k] >= 0
    assert rep['delta1'] <= rep['delta2'] <= rep['delta3'] <= 1
    table = (tmp_path / 'e' / 'report.txt').read_text()
    assert 'mIoU' in table and 'absrel' in table and 'with loading+metrics' in table
    assert table.strip() in capsys.readouterr().out
    # grids: rgb | ground truth | prediction | depth, 4 frames per grid, then the key: the depth
    # colour bar (0 to the model's max depth) and the class legend (issue 54)
    from depth3dseg_ros.core import visual
    from depth3dseg_ros.core.modelfile import read_model_file

    max_depth = read_model_file(model_file)['meta']['max_depth']
    key = visual.colour_bar(4 * SIZE[0], max_depth)
    for g in range(2):
        img = cv2.imread(str(tmp_path / 'e' / f'grid_{g:03d}.png'))
        assert img.shape[1] == 4 * SIZE[0] and img.shape[0] > 4 * SIZE[1] + key.shape[0]
        bar = img[4 * SIZE[1] + visual.GAP : 4 * SIZE[1] + visual.GAP + key.shape[0], :, ::-1]
        assert (bar == key).all()  # the same colour bar as the demo's pictures
    assert rep['grids'] == 2


def test_grids_stop_when_the_frames_run_out_and_say_how_many(ds_dir, model_file, tmp_path, capsys):
    """--grids N is at most N grids of 4 frames: as many as the frames fill, reported."""
    rep = _run(model_file, tmp_path / 'e', '--data', str(ds_dir), '--grids', '50')
    want = -(-rep['frames'] // 4)
    assert rep['grids'] == want < 50
    assert len(list((tmp_path / 'e').glob('grid_*.png'))) == want
    assert f'({want} grid_*.png)' in capsys.readouterr().out


def test_bag_input_is_extracted_and_evaluated(real_dir, model_file, tmp_path):
    bag = write_bag(tmp_path / 'bag', make_frames(real_dir, 4), storage='mcap')
    rep = _run(model_file, tmp_path / 'e', '--bag', str(bag))
    assert rep['frames'] == 4 and rep['data'] == [str(bag)]
    assert (
        rep['seg2d']['pixels'] > 0 and rep['depth']['pixels'] > 0
    )  # nyu0001 is labelled, all have depth


def test_a_preset_naming_absent_topics_is_refused(real_dir, model_file, tmp_path, capsys):
    """--preset realsense on a bag recorded with other depth/labels topics: nothing to score, so
    exit 2 with one line naming the preset, not an empty report."""
    bag = write_bag(tmp_path / 'bag', make_frames(real_dir, 2))
    out = tmp_path / 'e'
    argv = ['--model', str(model_file), '--out', str(out), '--bag', str(bag)]
    assert evaluate.main(argv + ['--preset', 'realsense', '--no-progress']) == 2
    err = capsys.readouterr().err
    assert err.startswith('depth3dseg-eval: error: none of the 2 frames of ')
    assert err.count('\n') == 1
    assert 'has labels or depth: nothing to evaluate' in err and '--preset realsense' in err
    assert not (out / 'report.json').exists()


def test_frames_with_depth_but_no_labels_are_evaluated_with_a_warning(
    real_dir, model_file, tmp_path, capsys
):
    """Depth alone is worth scoring (an RGB-D bag without labels): a warning, exit 0."""
    bag = write_bag(tmp_path / 'bag', make_frames(real_dir, 2))
    ex = tmp_path / 'x.yaml'
    ex.write_text('labels_topic: /nothing/here\n')
    rep = _run(model_file, tmp_path / 'e', '--bag', str(bag), '--extract-config', str(ex))
    err = capsys.readouterr().err
    assert rep['frames'] == 2 and rep['depth']['pixels'] > 0 and rep['seg2d']['pixels'] == 0
    assert 'none of the 2 frames has labels' in err


@pytest.mark.parametrize(
    'case',
    [
        'no index',
        'batch size',
        'grids',
        'no model file',
        'not a model file',
        'no bag',
        'model directory',
    ],
)
def test_bad_inputs_are_one_line_errors(case, model_file, tmp_path, capsys):
    """Ordinary mistakes: exit status 2 and one 'depth3dseg-eval: error: <message>' line, no
    traceback, and no --out directory."""
    junk = tmp_path / 'junk.pt'
    junk.write_bytes(b'not a model file')
    out = ['--out', str(tmp_path / 'e')]
    argv, want = {
        'no index': (
            ['--model', str(model_file), '--data', str(tmp_path)],
            r'index.jsonl not found',
        ),
        'batch size': (
            ['--model', str(model_file), '--data', str(tmp_path), '--batch-size', '0'],
            r'--batch-size=0 must be >= 1',
        ),
        'grids': (
            ['--model', str(model_file), '--data', str(tmp_path), '--grids', '-1'],
            r'--grids=-1 must be >= 0',
        ),
        'no model file': (
            ['--model', str(tmp_path / 'm.pt'), '--data', str(tmp_path)],
            r'model file not found: .*m.pt',
        ),
        'not a model file': (
            ['--model', str(junk), '--data', str(tmp_path)],
            r'junk.pt: not a .*model file',
        ),
        'no bag': (['--model', str(model_file), '--bag', str(tmp_path / 'nobag')], r'nobag'),
        'model directory': (
            ['--model', str(model_file.parent), '--data', str(tmp_path)],
            r'model file .* is a directory, not a model file: give the model file in it, .*pt',
        ),
    }[case]
    assert evaluate.main(argv + out) == 2
    err = capsys.readouterr().err
    assert err.startswith('depth3dseg-eval: error: ') and err.count('\n') == 1, err
    assert re.search(want, err), err
    assert not (tmp_path / 'e').exists()  # a run that fails to start leaves no --out behind


def test_unexpected_eval_errors_keep_their_traceback(ds_dir, model_file, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError('a bug, not a user error')

    monkeypatch.setattr(evaluate, 'evaluate_model', broken)
    with pytest.raises(RuntimeError, match='a bug'):
        evaluate.main(
            ['--model', str(model_file), '--data', str(ds_dir), '--out', str(tmp_path / 'e')]
        )


def test_eval_preprocessing_matches_the_node_segmenter(ds_dir, model_file):
    """Train/serve parity: the frames depth3dseg-eval (and training validation) feed the model are
    the ones core.inference.Segmenter (the node) makes from the stored RGB + K: same resize,
    normalisation and scaled K, so the same depth and 2D/3D labels (M7/M8)."""
    from depth3dseg_ros.core.inference import Segmenter
    from depth3dseg_ros.core.metrics import predict_labels
    from depth3dseg_ros.core.modelfile import load_model

    seg = Segmenter(model_file, device='cpu')
    model, meta = load_model(model_file)
    ds = FrameDataset([ds_dir], meta['input_size'], mean=meta['mean'], std=meta['std'])
    model.eval()
    for i in (0, 2, 7):
        rgb, _, _, K = ds.load_raw(i)
        b = ds[i]
        with torch.no_grad():
            out = model(b['rgb'][None], b['K'][None])
        r2d, r3d = seg.infer(rgb, K, label_source='2d'), seg.infer(rgb, K, label_source='3d')
        np.testing.assert_allclose(b['K'].numpy(), r2d.K, rtol=1e-6)
        assert (
            out['depth'].std() > 0.01
        )  # an image-dependent depth, so the comparison means something
        np.testing.assert_allclose(out['depth'][0, 0].numpy(), r2d.depth, atol=1e-4)
        assert (predict_labels(out['seg2d'])[0].numpy() == r2d.labels).mean() > 0.999
        s3 = torch.where(out['valid'], out['seg3d'], out['seg2d'])
        assert (predict_labels(s3)[0].numpy() == r3d.labels).mean() > 0.999


def test_measured_depth_and_only_with_depth(model_file, ds_dir, tmp_path):
    base = _run(model_file, tmp_path / 'a', '--data', str(ds_dir), '--only-with-depth')
    meas = _run(
        model_file, tmp_path / 'b', '--data', str(ds_dir), '--only-with-depth', '--measured-depth'
    )
    assert base['frames'] == meas['frames'] == 5  # NYU 0001, 1407 + 3 Metric3D frames
    assert (
        base['measured_depth'] is False
        and meas['measured_depth'] is True
        and meas['only_with_depth']
    )
    assert meas['absrel'] == pytest.approx(base['absrel'])  # depth metrics score the prediction
    assert meas['miou_2d'] == pytest.approx(base['miou_2d'])  # the 2D head never sees the depth
    model, meta = load_model(model_file)
    seen = []

    class Spy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, rgb, K, measured=None):
            seen.append(measured)
            return self.inner(rgb, K, measured)

    ds = FrameDataset([ds_dir], input_size=SIZE, classes=NYU13, augment=None)
    evaluate.evaluate_model(Spy(), ds, NYU13, measured_depth=True, batch_size=4)
    assert len(seen) == 3 and all(m is not None and m.shape[1:] == (1, 48, 64) for m in seen)
    assert (
        sum(int(torch.isfinite(m).sum()) for m in seen) > 0
    )  # the frames' sensor depth reached it


def test_only_with_depth_on_frames_without_depth_is_one_named_error(
    model_file, ds_dir, tmp_path, capsys
):
    """--only-with-depth where no frame has depth (e.g. a --bag preset whose depth topic the bag
    lacks): one error line naming the frames and the flag, not an empty dataset error."""
    rgb_only = copy_dataset_with(ds_dir, tmp_path / 'rgb_only', depth=None)
    n = len((rgb_only / 'index.jsonl').read_text().splitlines())
    rc = evaluate.main(
        [
            '--model',
            str(model_file),
            '--data',
            str(rgb_only),
            '--only-with-depth',
            '--out',
            str(tmp_path / 'e'),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2
    assert err == (
        f'depth3dseg-eval: error: --only-with-depth: none of the {n} frames of {rgb_only} '
        'has depth (for --bag, check the depth topic: --preset / --extract-config)'
    )
