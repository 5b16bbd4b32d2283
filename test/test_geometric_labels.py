"""training/geometric_labels.py: floor and ceiling from measured depth alone, checked on ray-cast
rooms whose surfaces are known: a table top is not floor, a cupboard top is not floor, a rolled and
pitched camera still finds gravity, sensor noise and holes leave the labels right, and a frame
without structure gets no labels."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from depth3dseg_ros.training.geometric_labels import camera_normals, geometric_labels

IDS = {'floor': 5, 'ceiling': 3}
K = np.array([[260.0, 0, 159.5], [0, 260.0, 119.5], [0, 0, 1]])
FLOOR, CEIL, WALL, TABLE, CUPBOARD = 1, 2, 3, 4, 5
# world: y down (gravity +y), camera at the origin; the room's inside and two solid boxes
ROOM = ((-2.0, 2.0), (-1.2, 1.4), (-1.0, 5.0))  # floor 1.4 m below the camera, ceiling 1.2 above
BOXES = {
    TABLE: ((-0.5, 0.5), (0.65, 0.70), (1.8, 2.8)),  # a table top 0.75 m above the floor
    CUPBOARD: ((0.8, 1.4), (0.2, 1.4), (2.5, 3.0)),  # 1.2 m tall, 2 m in front of the back wall
}


def raycast(pitch_deg: float = 15.0, roll_deg: float = 0.0, size=(320, 240)):
    """(depth H×W m, surface id H×W) of the room seen by a camera pitched down and rolled."""
    w, h = size
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    d = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u, float)], -1)
    p, r = np.radians(pitch_deg), np.radians(roll_deg)
    rx = np.array([[1, 0, 0], [0, np.cos(p), np.sin(p)], [0, -np.sin(p), np.cos(p)]])
    rz = np.array([[np.cos(r), -np.sin(r), 0], [np.sin(r), np.cos(r), 0], [0, 0, 1]])
    dw = d @ (rx @ rz).T
    with np.errstate(divide='ignore'):
        t_axes = [np.where(dw[..., a] > 0, hi, lo) / dw[..., a] for a, (lo, hi) in enumerate(ROOM)]
    t = np.min(t_axes, axis=0)
    kind = np.argmin(t_axes, axis=0)
    surf = np.where(kind == 0, WALL, np.where(kind == 2, WALL, 0))
    surf = np.where(kind == 1, np.where(dw[..., 1] > 0, FLOOR, CEIL), surf)
    for sid, box in BOXES.items():
        with np.errstate(divide='ignore', invalid='ignore'):
            t1 = [(lo - 0) / dw[..., a] for a, (lo, hi) in enumerate(box)]
            t2 = [(hi - 0) / dw[..., a] for a, (lo, hi) in enumerate(box)]
        t_in = np.max(np.minimum(t1, t2), axis=0)
        t_out = np.min(np.maximum(t1, t2), axis=0)
        hit = (t_in < t_out) & (t_in > 0) & (t_in < t)
        t, surf = np.where(hit, t_in, t), np.where(hit, sid, surf)
    return t.astype(np.float32), surf  # z of the camera ray (z = 1) = t


def _recall_precision(lab, surf, cls, sid):
    m, g = lab == cls, surf == sid
    return (m & g).sum() / g.sum(), (m & g).sum() / max(1, m.sum())


@pytest.mark.parametrize(('pitch', 'roll'), [(15.0, 0.0), (30.0, 8.0), (5.0, -5.0)])
def test_floor_and_ceiling_of_a_ray_cast_room(pitch, roll):
    depth, surf = raycast(pitch, roll)
    lab = geometric_labels(depth, K, IDS)
    r, p = _recall_precision(lab, surf, 5, FLOOR)
    assert r > 0.8 and p > 0.97, (r, p)
    if (surf == CEIL).mean() > 0.05:
        r, p = _recall_precision(lab, surf, 3, CEIL)
        assert r > 0.8 and p > 0.97, (r, p)
    assert not (lab[surf == TABLE] == 5).any()  # a table top faces up but is no floor
    assert not (lab[surf == CUPBOARD] == 5).any()
    assert set(np.unique(lab)) <= {0, 3, 5}


def test_sensor_noise_and_holes_keep_the_labels_right():
    depth, surf = raycast(5.0)  # level enough to see the ceiling
    rng = np.random.default_rng(0)
    noisy = depth * (1 + 0.0025 * depth * rng.standard_normal(depth.shape)).astype(np.float32)
    noisy[rng.random(depth.shape) < 0.1] = np.nan
    lab = geometric_labels(noisy, K, IDS)
    for cls, sid in ((5, FLOOR), (3, CEIL)):
        r, p = _recall_precision(lab, surf, cls, sid)
        assert r > 0.4 and p > 0.95, (cls, r, p)  # a normal needs 5 measured pixels


def test_no_structure_no_labels():
    assert (geometric_labels(np.full((240, 320), np.nan, np.float32), K, IDS) == 0).all()
    sphere_ish = 2.0 + 0.3 * np.random.default_rng(1).random((240, 320)).astype(np.float32)
    assert (geometric_labels(sphere_ish, K, IDS, void_id=0) == 0).mean() > 0.95


def test_bad_input_is_named():
    depth, _ = raycast()
    with pytest.raises(ValueError, match='ceiling'):
        geometric_labels(depth, K, {'floor': 5})
    with pytest.raises(ValueError, match='float metres'):
        geometric_labels(depth.astype(np.uint16), K, IDS)
    with pytest.raises(ValueError, match='step'):
        camera_normals(np.zeros((8, 8, 3), np.float32), 0)


def test_normals_face_the_camera():
    depth, surf = raycast(15.0)
    from depth3dseg_ros.core.geometry import backproject_np

    cloud = backproject_np(depth, K)
    n = camera_normals(cloud)
    ok = np.isfinite(n).all(axis=2)
    assert (np.sum(n * cloud, axis=2)[ok] < 0).all()


@pytest.fixture(scope='module')
def unlabelled(tmp_path_factory):
    """A dataset directory of ray-cast RGB-D frames (noisy RGB), no labels; one without depth."""
    import json

    import cv2

    from depth3dseg_ros.core.classes import NYU13
    from depth3dseg_ros.core.depth import meters_to_16uc1

    out = tmp_path_factory.mktemp('geo') / 'ds'
    (out / 'rgb').mkdir(parents=True)
    (out / 'depth').mkdir()
    rng, lines = np.random.default_rng(0), []
    for k, (pitch, roll) in enumerate([(15.0, 0.0), (25.0, 5.0), (10.0, -3.0)]):
        depth, _ = raycast(pitch, roll)
        cv2.imwrite(str(out / 'rgb' / f'{k}.png'), rng.integers(0, 255, (240, 320, 3), np.uint8))
        rec = {'id': str(k), 'rgb': f'rgb/{k}.png', 'depth': None, 'depth_scale': 0.001}
        if k < 2:
            cv2.imwrite(str(out / 'depth' / f'{k}.png'), meters_to_16uc1(depth))
            rec['depth'] = f'depth/{k}.png'
        rec |= {'labels': None, 'K': K.ravel().tolist(), 'width': 320, 'height': 240}
        lines.append(json.dumps(rec | {'stamp_ns': k, 'bag': 'raycast', 'topics': {}}))
    manifest = {'version': 1, 'classes': NYU13.to_dict(), 'counts': {'frames': 3}}
    (out / 'manifest.json').write_text(json.dumps(manifest | {'sources': ['raycast']}))
    (out / 'index.jsonl').write_text(''.join(line + '\n' for line in lines))
    return out


def _script():
    path = Path(__file__).resolve().parents[1] / 'scripts' / 'geometric_labels.py'
    return runpy.run_path(str(path))


@pytest.mark.parametrize('pseudo', [False, True], ids=['geometry', 'geometry+pseudo'])
def test_script_labels_a_dataset_copy(unlabelled, tmp_path, pseudo):
    """scripts/geometric_labels.py writes a labelled copy: floor exactly where the geometry finds
    it; with --pseudo-model the model's other confident labels too, never floor elsewhere."""
    import cv2

    from depth3dseg_ros.dataset_format import read_index
    from depth3dseg_ros.training.dataset import FrameDataset
    from nodeutil import make_tiny_model

    extra = ['--pseudo-model', str(make_tiny_model(tmp_path / 'm.pt'))] if pseudo else []
    assert (
        _script()['main'](['--data', str(unlabelled), '--out', str(tmp_path / 'o')] + extra) == 0
    )
    src, out = read_index(unlabelled), read_index(tmp_path / 'o')
    assert len(out) == len(src) and all(r.get('labels') for r in out)
    frames = FrameDataset(records=src)
    floors = others = 0
    for i, r in enumerate(out):
        _, depth, _, K = frames.load_raw(i)
        lab = cv2.imread(str(tmp_path / 'o' / r['labels']), cv2.IMREAD_UNCHANGED)
        geo = np.zeros_like(lab) if depth is None else geometric_labels(depth, K, IDS)
        assert ((lab == 5) == (geo == 5)).all(), r['id']
        floors += int((geo == 5).sum())
        others += int(((lab != 0) & (geo == 0)).sum())
    assert floors > 0  # the ray-cast frames with depth have floor in view
    assert (others > 0) == pseudo
