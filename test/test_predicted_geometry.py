"""scripts/predicted_geometry.py and scripts/normal_error_eval.py (docs/levers.md, "The geometry
model on predicted depth" and "A surface-normal term on the depth"): the code written for each
frame is the geometry code of the colour model's own depth; the late fusion then scores every
labelled frame; the normal error is an angle per pixel with defined normals."""

from __future__ import annotations

import runpy
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset
from trainutil import make_dataset_dir, perturbed_tiny_model_file

SCRIPTS = Path(__file__).resolve().parents[1] / 'scripts'


def test_the_code_is_that_of_the_models_depth_and_late_fusion_scores_every_labelled_frame(
    real_dir, tmp_path
):
    pg = runpy.run_path(str(SCRIPTS / 'predicted_geometry.py'))
    gi = runpy.run_path(str(SCRIPTS / 'geometry_input.py'))
    lf = runpy.run_path(str(SCRIPTS / 'late_fusion_eval.py'))
    data = make_dataset_dir(real_dir, tmp_path / 'ds', size=(96, 72))
    colour = perturbed_tiny_model_file(tmp_path / 'c.pt', seed=0)
    assert pg['convert'](data, tmp_path / 'pgeo', str(colour)) == len(read_index(data))
    model, meta = load_model(colour)
    classes = ClassSet.from_dict(meta['classes'])
    recs = load_records([data], classes)
    ds = model_dataset(recs, meta, classes)
    r = read_index(tmp_path / 'pgeo')[0]
    with torch.no_grad():
        d = model.forward_2d(ds[0]['rgb'][None], ds[0]['K'][None])['depth']
    d = F.interpolate(d, size=(r['height'], r['width']), mode='bilinear', align_corners=False)
    want = gi['geometry_image'](d[0, 0].double().numpy(), np.asarray(r['K']).reshape(3, 3))
    got = cv2.cvtColor(cv2.imread(str(tmp_path / 'pgeo' / r['rgb'])), cv2.COLOR_BGR2RGB)
    assert np.array_equal(got, want) and want.any()
    labelled = sum(1 for x in recs if x.get('labels'))
    with_depth = sum(1 for x in recs if x.get('labels') and x.get('depth'))
    assert labelled > with_depth > 0
    args = (str(colour), str(colour), str(data), str(tmp_path / 'pgeo'), [0.0, 0.5])
    n_all, summaries = lf['late_fusion'](*args, need_depth=False)
    n_depth, _ = lf['late_fusion'](*args)
    assert (n_all, n_depth) == (labelled, with_depth)
    assert all(0.0 <= s['miou'] <= 1.0 for s in summaries)


def test_normal_error_is_an_angle_per_pixel_with_both_normals(real_dir, tmp_path):
    ne = runpy.run_path(str(SCRIPTS / 'normal_error_eval.py'))
    data = make_dataset_dir(real_dir, tmp_path / 'ds', size=(96, 72))
    colour = perturbed_tiny_model_file(tmp_path / 'c.pt', seed=0)
    e = ne['normal_errors'](str(colour), str(data))
    assert e.numel() > 1000 and float(e.min()) >= 0.0 and float(e.max()) <= 180.0
    assert torch.isfinite(e).all()
