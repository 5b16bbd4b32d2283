"""scripts/camera_zoom.py: a dataset directory as a camera with a k times longer focal length
saw it (central 1/k crop resized back; K, depth and labels follow), for the depth-versus-camera
figures of docs/levers.md ("Depth for the robot's camera")."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training.dataset import FrameDataset
from trainutil import make_dataset_dir

SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'camera_zoom.py'


@pytest.fixture(scope='module')
def script():
    return runpy.run_path(str(SCRIPT))


def test_zoomed_frames_keep_geometry(real_dir, tmp_path, script):
    src = make_dataset_dir(real_dir, tmp_path / 'src', size=(160, 120))
    assert script['main'](['--data', str(src), '--zoom', '1.5', '--out', str(tmp_path / 'z')]) == 0
    a, b = FrameDataset([src]), FrameDataset([tmp_path / 'z'])
    assert len(a) == len(b) == len(read_index(src))
    for i in range(len(a)):
        rgb0, d0, l0, K0 = a.load_raw(i)
        rgb1, d1, l1, K1 = b.load_raw(i)
        assert rgb1.shape == rgb0.shape
        np.testing.assert_allclose(K1[[0, 1], [0, 1]], K0[[0, 1], [0, 1]] * 1.5, rtol=0.01)
        if l0 is not None:  # the centre pixel's label stays the centre pixel's label
            assert l1[60, 80] == l0[60, 80]
        if d0 is not None:
            # the same scene: depth values unchanged, and the centre back-projects with the new K
            # onto the original cloud, within one original pixel's footprint (nearest resampling
            # keeps the depth of a pixel around; a K that missed the crop would be 26 px off)
            ok = np.isfinite(d1)
            assert np.isin(np.round(d1[ok], 3), np.round(d0[np.isfinite(d0)], 3)).mean() > 0.99
            p1 = backproject_np(d1, K1)[60, 80]
            near = backproject_np(d0, K0)[58:63, 78:83].reshape(-1, 3)
            if np.isfinite(p1).all() and np.isfinite(near).all():
                assert np.linalg.norm(near - p1, axis=1).min() < p1[2] / K0[0, 0]


def test_zoom_below_one_refused(tmp_path, script, capsys):
    d = tmp_path / 'none'
    assert script['main'](['--data', str(d), '--zoom', '1.2', '--out', str(tmp_path / 'o')]) == 2
    assert 'camera_zoom:' in capsys.readouterr().err
    with pytest.raises(ValueError, match='--zoom 0.5 must be >= 1'):
        script['zoom_frame'](np.zeros((4, 4, 3), np.uint8), None, None, np.eye(3), 0.5)
