"""scripts/cross_modal_labels.py: pseudo-labels from the late fusion of a colour model and a
geometry model (docs/levers.md, "Pseudo-labels from the RGB-D late fusion"). With the geometry
weight 0 the kept labels are the colour model's own 2D labels, never void; half of each class is
kept; a geometry set of other frames is refused."""

from __future__ import annotations

import runpy
from pathlib import Path

import cv2
import numpy as np
import torch

from depth3dseg_ros.core.metrics import predict_labels
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset
from depth3dseg_ros.core.classes import ClassSet
from trainutil import make_dataset_dir, perturbed_tiny_model_file

SCRIPTS = Path(__file__).resolve().parents[1] / 'scripts'


def test_labels_are_the_fused_2d_labels_where_kept_and_bad_sets_are_refused(
    real_dir, tmp_path, capsys
):
    xm = runpy.run_path(str(SCRIPTS / 'cross_modal_labels.py'))
    geo = runpy.run_path(str(SCRIPTS / 'geometry_input.py'))
    data = make_dataset_dir(real_dir, tmp_path / 'ds', size=(96, 72), labels=False)
    geo['convert'](data, tmp_path / 'geo', False)
    colour = perturbed_tiny_model_file(tmp_path / 'c.pt', seed=0)
    geometry = perturbed_tiny_model_file(tmp_path / 'g.pt', seed=1)
    args = ['--colour', str(colour), '--geometry', str(geometry), '--data', str(data)]
    args += ['--geometry-data', str(tmp_path / 'geo'), '--portion', '0.5']
    assert xm['main']([*args, '--out', str(tmp_path / 'w0'), '--w', '0']) == 0
    # the colour model's own 2D labels at its input size, resized to the frame (nearest)
    model, meta = load_model(colour)
    classes = ClassSet.from_dict(meta['classes'])
    recs = load_records([data], classes)
    ds = model_dataset(recs, meta, classes)
    kept = total = 0
    for i, r in enumerate(read_index(tmp_path / 'w0')):
        with torch.no_grad():
            seg = model.forward_2d(ds[i]['rgb'][None], ds[i]['K'][None])['seg2d']
        own = predict_labels(seg, classes.void_id)[0].numpy().astype(np.uint8)
        lab = cv2.imread(str(tmp_path / 'w0' / r['labels']), cv2.IMREAD_UNCHANGED)
        own = cv2.resize(own, lab.shape[::-1], interpolation=cv2.INTER_NEAREST)
        on = lab != classes.void_id
        assert (lab[on] == own[on]).all()
        kept, total = kept + on.sum(), total + on.size
    assert 0.45 < kept / total < 0.51  # ties at the threshold may keep a few more
    # w = 1: the geometry model's labels, which differ from the colour model's
    assert xm['main']([*args, '--out', str(tmp_path / 'w1'), '--w', '1']) == 0
    a = cv2.imread(str(tmp_path / 'w0' / r['labels']), cv2.IMREAD_UNCHANGED)
    b = cv2.imread(str(tmp_path / 'w1' / r['labels']), cv2.IMREAD_UNCHANGED)
    assert not np.array_equal(a, b)
    # a geometry set of other frames (one frame fewer)
    index = tmp_path / 'geo' / 'index.jsonl'
    index.write_text(''.join(index.read_text().splitlines(keepends=True)[:-1]))
    capsys.readouterr()
    assert xm['main']([*args, '--out', str(tmp_path / 'w2')]) == 2
    assert 'other frames' in capsys.readouterr().err
