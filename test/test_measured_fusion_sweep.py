"""scripts/measured_fusion_sweep.py: fused labels with S3D weighted by w on the pixels whose depth
is measured (docs/levers.md, "A geometry-only 3D net for RGB-D cameras"). Its w = 0.5 is the
shipped fusion rule (METHOD M7), so it must reproduce depth3dseg-eval --measured-depth."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
import yaml

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import load_model, save_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import evaluate_model, model_dataset
from trainutil import TINY_ARCH, make_dataset_dir

SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'measured_fusion_sweep.py'


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('sweep')
    data = make_dataset_dir(real_dir, tmp / 'ds', size=(96, 72))
    torch.manual_seed(0)
    path = tmp / 'tiny.pt'
    model = Depth3DSeg(len(NYU13), **yaml.safe_load(TINY_ARCH)).eval()
    save_model(path, model, {'classes': NYU13, 'input_size': [96, 72]})
    return runpy.run_path(str(SCRIPT)), path, data


def test_half_weight_is_the_shipped_fusion_of_depth3dseg_eval(setup):
    script, path, data = setup
    res = script['sweep'](str(path), str(data), [0.0, 0.5, 1.0])
    model, meta = load_model(path, map_location='cpu')
    records = [r for r in load_records([data], NYU13) if r.get('depth') and r.get('labels')]
    assert len(records) == 2  # NYU 0001 and 1407
    ds = model_dataset(records, meta, NYU13)
    ref = evaluate_model(model, ds, NYU13, measured_depth=True, full=True)
    assert res[0.5]['miou'] == pytest.approx(ref['miou_fused'], abs=1e-9)
    assert res[0.5]['pixel_acc'] == pytest.approx(ref['pixel_acc_fused'], abs=1e-9)
    assert res[0.0] != res[1.0]  # the weight acts on the measured pixels


def test_bad_input_is_refused(setup, real_dir, tmp_path):
    script, path, data = setup
    with pytest.raises(ValueError, match=r'\[1\.5\] must lie in \[0, 1\]'):
        script['sweep'](str(path), str(data), [0.5, 1.5])
    unlabelled = make_dataset_dir(real_dir, tmp_path / 'u', size=(96, 72), labels=False)
    with pytest.raises(ValueError, match='no frame has both labels and depth'):
        script['sweep'](str(path), str(unlabelled), [0.5])


def test_everywhere_at_the_models_own_weight_is_depth3dseg_eval(setup, tmp_path):
    """--everywhere without measured depth scores every labelled frame on its predicted cloud;
    at the weight in the model file (arch fusion_w3d) it is the fused figure depth3dseg-eval
    reports for that file, and another weight gives other labels."""
    script, path, data = setup
    model, meta = load_model(path, map_location='cpu')
    model25 = model.with_arch(fusion_w3d=0.25)
    p25 = tmp_path / 'w25.pt'
    save_model(p25, model25, {k: v for k, v in meta.items() if k != 'arch'})
    res = script['sweep'](str(p25), str(data), [0.25, 0.5, 1.0], everywhere=True)
    records = [r for r in load_records([data], NYU13) if r.get('labels')]
    assert len(records) > 2  # every labelled frame, with or without depth
    ref = evaluate_model(model25.eval(), model_dataset(records, meta, NYU13), NYU13, full=True)
    assert res[0.25]['miou'] == pytest.approx(ref['miou_fused'], abs=1e-9)
    assert res[0.25]['pixel_acc'] == pytest.approx(ref['pixel_acc_fused'], abs=1e-9)
    assert res[0.25]['pixel_acc'] != res[0.5]['pixel_acc']  # the weight changes the labels
