"""The shipped default model: it loads, produces outputs of the right shapes on a real frame, and
reproduces on the real-camera sample bag (depth3dseg_ros.samples) the real-data figures its model
card states (models/model_card.json, the machine-readable copy of models/README.md's tables).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.training import evaluate

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / 'models' / 'depth3dseg_nyu13.pt'
CARD = json.loads((REPO / 'models' / 'model_card.json').read_text())


def test_the_card_measured_this_model_file():
    """The card's figures belong to the shipped file's arch: its depth_gain (depth3dseg-calibrate)
    and fusion_w3d change the figures without changing the weights, so a file whose arch differs
    from the one the card recorded has not been re-measured (python scripts/model_card.py)."""
    from depth3dseg_ros.core.modelfile import load_model

    arch = load_model(MODEL, map_location='cpu')[1]['arch']
    assert arch == CARD['arch']
    assert arch['depth_gain'] != 1.0 and arch['fusion_w3d'] != 0.5  # both levers shipped


def test_shipped_model_is_small_and_describes_itself():
    assert MODEL.stat().st_size <= 20 * 2**20
    seg = Segmenter(str(MODEL), device='cpu')
    assert seg.input_size == (320, 240)
    assert [c for c in seg.classes.names][:3] == ['void', 'bed', 'books'] and len(
        seg.classes.names
    ) == 14


def test_shipped_model_outputs_on_a_real_frame(real_dir):
    import cv2

    rgb = cv2.cvtColor(
        cv2.imread(str(real_dir / 'densedepth_nyu_test_rgb/examples/377_image.png')),
        cv2.COLOR_BGR2RGB,
    )
    K = np.array([[518.8579, 0, 325.5824], [0, 519.4696, 253.7362], [0, 0, 1]])
    res = Segmenter(str(MODEL), device='cpu').infer(rgb, K, label_source='fused')
    assert res.labels.shape == (240, 320) and res.labels.dtype == np.uint8
    assert res.labels.min() >= 1 and res.labels.max() <= 13  # never void
    assert res.depth.shape == (240, 320) and res.depth.dtype == np.float32
    finite = res.depth[np.isfinite(res.depth)]
    assert finite.size > 0.9 * res.depth.size and finite.min() > 0 and finite.max() <= 10.0
    assert res.points.shape == (240, 320, 3)
    np.testing.assert_allclose(res.K[0, 0], 518.8579 / 2, rtol=1e-6)
    assert res.confidence.shape == (240, 320) and float(res.confidence.min()) > 0


@pytest.mark.timeout(300)
def test_shipped_model_reproduces_its_model_card_on_the_real_sample_bag(tmp_path, real_bag):
    out = tmp_path / 'eval'
    assert (
        evaluate.main(
            ['--model', str(MODEL), '--bag', str(real_bag), '--out', str(out), '--device', 'cpu']
        )
        == 0
    )
    report = json.loads((out / 'report.json').read_text())
    want = CARD['real_bag']
    for key in ('absrel', 'rmse', 'delta1', 'miou_2d', 'miou_3d', 'miou_fused'):
        assert report[key] == pytest.approx(want[key], abs=0.01), key
    # the card's 95 % frame bootstrap intervals (same frames, same resampling seed)
    for key in ('miou_fused', 'absrel'):
        got, card = report['ci'][key], want['ci'][key]
        assert got['frames'] == card['frames'] == (11 if key == 'miou_fused' else 14)
        for end in ('lo', 'hi'):
            assert got[end] == pytest.approx(card[end], abs=0.01), (key, end)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    'section,flags',
    [
        ('real_with_depth', ['--only-with-depth']),
        ('real_with_depth_measured', ['--only-with-depth', '--measured-depth']),
    ],
)
def test_shipped_model_reproduces_its_card_on_real_frames_with_depth(
    tmp_path, real_bag, section, flags
):
    out = tmp_path / 'eval'
    assert (
        evaluate.main(
            [
                '--model',
                str(MODEL),
                '--bag',
                str(real_bag),
                '--out',
                str(out),
                '--device',
                'cpu',
                *flags,
            ]
        )
        == 0
    )
    report = json.loads((out / 'report.json').read_text())
    want = CARD[section]
    assert report['frames'] == want['frames'] == 14
    for key in ('absrel', 'miou_2d', 'miou_3d', 'miou_fused', 'pixel_acc_fused'):
        assert report[key] == pytest.approx(want[key], abs=0.01), key


@pytest.mark.timeout(300)
def test_shipped_model_reproduces_its_held_out_real_depth_figures(tmp_path, real_bag):
    """Card section (c): the labelled real frames with depth, which never trained (the 11 real
    frames of ``trained_on_real`` are the bag's unlabelled ones; scripts/real_depth_split.py)."""
    import sys

    sys.path.insert(0, str(REPO / 'scripts'))
    from real_depth_split import split

    train, labelled, _ = split(real_bag, tmp_path / 'train', tmp_path / 'labelled')
    assert len(CARD['trained_on_real']) == len(train) == 11
    assert all(not r.get('labels') for r in train) and len(labelled) == 11
    out = tmp_path / 'eval'
    args = ['--model', str(MODEL), '--data', str(tmp_path / 'labelled'), '--only-with-depth']
    assert evaluate.main([*args, '--out', str(out), '--device', 'cpu']) == 0
    report = json.loads((out / 'report.json').read_text())
    want = CARD['real_labelled_with_depth']
    assert report['frames'] == want['frames'] == 3
    for key in ('absrel', 'delta1', 'miou_fused'):
        assert report[key] == pytest.approx(want[key], abs=0.01), key
