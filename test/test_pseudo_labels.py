"""training.pseudo_labels: class-balanced confident pseudo-labels for unlabelled real frames.

Per class the most confident ``portion`` is kept (small classes keep their share instead of losing
every pixel to the large ones), the floor applies, the rest is void; the written directory trains
(labels present, K/depth/RGB as in the source), labelled frames and the source stay as they were.
"""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from depth3dseg_ros.dataset_format import read_index, read_manifest
from depth3dseg_ros.training import pseudo_labels as pl
from depth3dseg_ros.training.dataset import FrameDataset
from trainutil import make_dataset_dir


def test_each_class_keeps_its_most_confident_portion():
    # class 1: confidences 0.9..1.0 (confident, large); class 2: 0.1..0.3 (unsure, small)
    lab = np.ones((10, 10), np.int64)
    lab[:2] = 2
    conf = np.where(lab == 1, 0.9, 0.1) + np.linspace(0, 0.1, 100).reshape(10, 10)
    conf[:2] = 0.1 + np.linspace(0, 0.2, 20).reshape(2, 10)
    keep = pl.class_balanced_keep([lab], [conf], portion=0.25)[0]
    for c, n in ((1, 80), (2, 20)):
        kept = conf[(lab == c) & keep]
        assert len(kept) == n // 4
        assert kept.min() >= conf[(lab == c) & ~keep].max()
    # a global threshold would have dropped class 2 entirely; the floor does
    floor = pl.class_balanced_keep([lab], [conf], portion=0.25, min_confidence=0.5)[0]
    assert not floor[lab == 2].any() and floor[lab == 1].sum() == 20


def test_portion_spans_frames_and_errors_named():
    labs = [np.full((2, 2), 3), np.full((2, 2), 3)]
    confs = [np.full((2, 2), 0.2), np.full((2, 2), 0.8)]
    keep = pl.class_balanced_keep(labs, confs, portion=0.5)
    assert not keep[0].any() and keep[1].all()
    with pytest.raises(ValueError, match=r'portion=0.0 must be in \(0, 1\]'):
        pl.class_balanced_keep(labs, confs, 0.0)
    with pytest.raises(ValueError, match=r'frame 1: labels shape=\(2, 2\) != confidence \(2, 3\)'):
        pl.class_balanced_keep(labs, [confs[0], np.zeros((2, 3))], 0.5)


def test_written_directory_trains_and_source_untouched(real_dir, tmp_path):
    src = make_dataset_dir(real_dir, tmp_path / 'real', size=(64, 48), labels=False)
    before = (src / 'index.jsonl').read_bytes()
    seen = []

    def predict(rgb, K, depth):
        seen.append((rgb.shape, K.shape, None if depth is None else depth.dtype))
        h, w = rgb.shape[:2]
        lab = np.where(np.arange(w)[None, :] < w // 2, 12, 5).repeat(h, 0)  # wall | floor
        conf = np.tile(np.linspace(0.0, 1.0, w, dtype=np.float32), (h, 1))
        return lab[::2, ::2], conf[::2, ::2]  # at half size: resized to the frame

    out = tmp_path / 'pseudo'
    entry = pl.write_pseudo_labelled(src, out, predict, portion=0.5, provenance={'model': 'm'})
    assert (src / 'index.jsonl').read_bytes() == before
    assert entry['model'] == 'm' and entry['frames'] == len(seen) > 0
    assert set(entry['kept_fraction']) == {5, 12}
    assert read_manifest(out)['pseudo_labels']['portion'] == 0.5
    recs = read_index(out)
    for r in recs:
        lab = cv2.imread(str(out / r['labels']), cv2.IMREAD_UNCHANGED)
        assert lab.shape == (48, 64) and set(np.unique(lab)) <= {0, 5, 12}
        assert (lab[:, :16] == 0).all() and (lab[:, 28:32] == 12).all()  # the confident half
        assert (lab[:, -4:] == 5).all() and r['label_max'] == 12
    orig = {r['id']: r for r in read_index(src)}
    for r in recs:
        assert r['K'] == orig[r['id']]['K'] and r['rgb'] == orig[r['id']]['rgb']
    ds = FrameDataset([out], input_size=(64, 48))
    assert all(bool(ds[i]['has_labels']) for i in range(len(ds)))
    json.dumps(entry)  # plain data
    with pytest.raises(ValueError, match='must not be the source directory'):
        pl.write_pseudo_labelled(out, out, predict, 0.5)
    # frames that have labels keep them and are not predicted
    n = len(seen)
    again = pl.write_pseudo_labelled(out, tmp_path / 'again', predict, 0.5)
    assert again['frames'] == 0 and len(seen) == n
    for r in read_index(tmp_path / 'again'):
        a = cv2.imread(str(tmp_path / 'again' / r['labels']), cv2.IMREAD_UNCHANGED)
        assert np.array_equal(a, cv2.imread(str(out / r['labels']), cv2.IMREAD_UNCHANGED))


def test_script_refuses_bad_settings_in_one_line(tmp_path, capsys):
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / 'scripts' / 'pseudo_labels.py'
    main = runpy.run_path(str(script))['main']
    args = ['--data', str(tmp_path / 'none'), '--out', str(tmp_path / 'o')]
    assert main(args + ['--portion', '1.5']) == 2
    assert 'portion=1.5 must be in (0, 1]' in capsys.readouterr().err
    assert main(args) == 2
    assert 'index.jsonl not found' in capsys.readouterr().err
