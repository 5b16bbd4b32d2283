"""training/layout_paint.py and scripts/layout_frames.py: images painted over real label layouts.
Their frames are marked ``"geometry": false`` and reach the loss as ``has_geometry`` False.

The painting must follow the labels (edges where the label changes, not inside a segment), say
nothing about the class through colour (one class's colour varies over seeds), be reproducible from
the seed, and the script must keep every evaluation frame and its neighbours out."""

from __future__ import annotations

import runpy
from pathlib import Path

import cv2
import numpy as np
import pytest

from depth3dseg_ros.training.layout_paint import layout_shading, paint_layout


def room_labels(w: int = 160, h: int = 120) -> np.ndarray:
    """A label image like a room: wall (12) above floor (5), a bed (1), a picture (8), void."""
    lab = np.full((h, w), 12, np.uint8)
    lab[h * 2 // 3 :] = 5
    lab[h // 2 : h - 10, 20:90] = 1
    lab[15:40, 100:140] = 8
    lab[:, :3] = 0
    return lab


def boundary(lab: np.ndarray, width: int) -> np.ndarray:
    """Pixels within ``width`` px of a label change."""
    edge = np.zeros(lab.shape, np.uint8)
    edge[:, 1:] |= lab[:, 1:] != lab[:, :-1]
    edge[1:, :] |= lab[1:, :] != lab[:-1, :]
    return cv2.dilate(edge, np.ones((2 * width + 1,) * 2, np.uint8)) > 0


def test_same_seed_same_bytes_and_seeds_differ():
    lab = room_labels()
    a = paint_layout(lab, np.random.default_rng(3))
    b = paint_layout(lab, np.random.default_rng(3))
    c = paint_layout(lab, np.random.default_rng(4))
    assert a.shape == (120, 160, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_edges_follow_the_label_boundaries():
    """Colour changes where the label does: the mean gradient on label boundaries is several
    times the mean inside the segments, over many paintings."""
    lab = room_labels()
    near = boundary(lab, 2)
    inside = ~boundary(lab, 6)
    ratios = []
    for seed in range(12):
        rgb = paint_layout(lab, np.random.default_rng(seed)).astype(np.float32)
        gx = cv2.Sobel(rgb, cv2.CV_32F, 1, 0)
        gy = cv2.Sobel(rgb, cv2.CV_32F, 0, 1)
        g = np.sqrt(gx**2 + gy**2).sum(axis=2)
        ratios.append(g[near].mean() / max(g[inside].mean(), 1e-6))
    assert np.median(ratios) > 2.0, ratios


def test_colour_does_not_name_a_class():
    """The floor's mean colour over seeds spreads over the colour range (std of each channel's
    mean > 25 of 255), as does the wall's: no class keeps a colour."""
    lab = room_labels()
    means = {5: [], 12: []}
    for seed in range(30):
        rgb = paint_layout(lab, np.random.default_rng(seed)).astype(np.float32)
        for c in means:
            means[c].append(rgb[lab == c].mean(axis=0))
    for c, m in means.items():
        assert (np.std(m, axis=0) > 25).all(), (c, np.std(m, axis=0))


def test_shading_darkens_boundaries_and_stays_in_range():
    lab = room_labels()
    near, inside = boundary(lab, 1), ~boundary(lab, 8)
    darker = 0
    for seed in range(20):
        lum = layout_shading(lab, np.random.default_rng(seed))
        assert lum.dtype == np.float32 and lum.min() >= 0.05 and lum.max() <= 1.0
        darker += lum[near].mean() < lum[inside].mean()
    assert darker >= 15


def test_photos_texture_segments():
    """With a pool of photographs, some segments carry their detail: the painting differs from
    the one without a pool, and the bad pool size is named."""
    lab = room_labels()
    photos = np.random.default_rng(0).integers(0, 255, (2, 120, 160, 3), np.uint8)
    a = paint_layout(lab, np.random.default_rng(1))
    b = paint_layout(lab, np.random.default_rng(1), photos)
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError, match='photo pool size'):
        paint_layout(lab, np.random.default_rng(1), photos[:, :60])


def test_bad_labels_are_named():
    with pytest.raises(ValueError, match=r'labels shape=\(5,\)'):
        layout_shading(np.zeros(5, np.uint8), np.random.default_rng(0))


def _script():
    path = Path(__file__).resolve().parents[1] / 'scripts' / 'layout_frames.py'
    return runpy.run_path(str(path))


def test_kept_indices_leave_out_the_margin():
    kept = _script()['kept_indices'](list(range(1, 101)), [10, 50], 3)
    assert kept == [i for i in range(1, 101) if not (7 <= i <= 13 or 47 <= i <= 53)]


def test_script_writes_labelled_frames_without_the_evaluation_rooms(real_dir, tmp_path):
    """The dataset holds every NYU test label image but those within the margin of an
    evaluation frame, each at the size asked with K scaled, labels as NYU's (nearest), no
    depth; the manifest names what was left out."""
    import json

    from depth3dseg_ros.core.imageops import resize_labels
    from depth3dseg_ros.dataset_format import read_index
    from depth3dseg_ros.samples.frames import labelled_frames, nyu_label, nyu_label_indices
    from depth3dseg_ros.training.dataset import FrameDataset

    out = tmp_path / 'lay'
    assert _script()['main'](['--out', str(out), '--variants', '1', '--size', '80', '60']) == 0
    recs = read_index(out)
    idx = sorted({int(r['id'].split('_')[2]) for r in recs})
    evals = [f.label_idx for f in labelled_frames()]
    assert len(evals) == 11 and idx
    assert all(abs(i - e) > 25 for i in idx for e in evals)
    assert set(idx) | set(
        json.loads((out / 'manifest.json').read_text())['report']['layout_frames']['excluded']
    ) == set(nyu_label_indices())
    r = recs[0]
    assert r['depth'] is None and (r['width'], r['height']) == (80, 60)
    assert all(rec['geometry'] is False for rec in recs)  # the 2D term only (core.train_step)
    item = FrameDataset([out], input_size=(80, 60))[0]
    assert item['has_labels'] and not item['has_depth'] and not item['has_geometry']
    assert np.allclose(np.reshape(r['K'], (3, 3))[0, 0], 518.8579 / 8, atol=1e-3)
    lab = cv2.imread(str(out / r['labels']), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(lab, resize_labels(nyu_label(idx[0]), (80, 60)))
