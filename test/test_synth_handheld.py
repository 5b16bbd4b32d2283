"""Hand-held views of dense rooms (``depth3dseg-synth --layout dense --camera handheld``).

The NYU-like mode of the synthetic generator: smaller, fuller rooms (room.LAYOUTS['dense']) seen
from the room's edge at chest-to-eye height (camera.handheld_poses). Checked: every pose keeps its
clearance from walls and furniture footprints and looks across the room; rendered depth
back-projects (M2, the render's K) onto the room's planes; labels cover the placed classes; same
seed -> same bytes; the default sparse rooms are unchanged by the option (they trained the shipped
model); bad options are refused with the value named.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import yaml

from depth3dseg_ros.synth import cli
from depth3dseg_ros.synth.camera import _exit_distance, handheld_poses
from depth3dseg_ros.synth.render import Renderer
from depth3dseg_ros.synth.room import make_scene
from depth3dseg_ros.synth.scene import CLS
from synthutil import plane_residuals, read_all


def test_handheld_poses_keep_clearance_and_look_across_the_room():
    for seed in range(6):
        rng = np.random.default_rng([seed, 0, 0])
        scene = make_scene(rng, 'dense')
        lx, ly, _ = scene.size
        poses = handheld_poses(rng, scene.size, scene.footprints, 40)
        assert len(poses) == 40
        for p in poses:
            x, y, z = p.eye
            assert 0.3 <= x <= lx - 0.3 and 0.3 <= y <= ly - 0.3
            assert 1.1 <= z <= 1.7
            assert math.radians(-30) <= p.pitch <= math.radians(5)
            assert abs(p.roll) <= math.radians(3)
            for a0, b0, a1, b1 in scene.footprints:
                assert not (a0 - 0.3 < x < a1 + 0.3 and b0 - 0.3 < y < b1 + 0.3)
            assert _exit_distance(x, y, p.yaw, lx, ly) >= 2.5
            # towards the centre ± 50°
            to_centre = math.atan2(ly / 2 - y, lx / 2 - x)
            assert abs(math.remainder(p.yaw - to_centre, 2 * math.pi)) <= math.radians(50) + 1e-9


def test_exit_distance():
    assert _exit_distance(1.0, 1.0, 0.0, 4.0, 3.0) == pytest.approx(3.0)
    assert _exit_distance(1.0, 1.0, math.pi / 2, 4.0, 3.0) == pytest.approx(2.0)
    assert _exit_distance(1.0, 1.0, math.pi, 4.0, 3.0) == pytest.approx(1.0)
    assert _exit_distance(1.0, 1.0, math.pi / 4, 4.0, 3.0) == pytest.approx(2.0 * math.sqrt(2))


def test_handheld_errors_name_the_problem():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match='n_frames=0'):
        handheld_poses(rng, (4.0, 4.0, 2.5), [], 0)
    full = [(0.0, 0.0, 4.0, 4.0)]  # one footprint covers the floor
    with pytest.raises(ValueError, match='no hand-held eye position.*1 footprints'):
        handheld_poses(rng, (4.0, 4.0, 2.5), full, 1, tries=50)
    with pytest.raises(ValueError, match="layout='bogus'"):
        make_scene(rng, 'bogus')


def _digest(layout: str) -> str:
    h = hashlib.sha256()
    for s in range(5):
        sc = make_scene(np.random.default_rng([1, s, 0]), layout)
        spec = (sc.size, sc.free_zone, sc.light, sc.fov_y_deg, [repr(o) for o in sc.objects])
        h.update(repr(spec).encode())
    return h.hexdigest()


def test_sparse_and_dense_layouts_unchanged():
    """The default rooms (the shipped model's training set, docs/synthetic.md) draw exactly what
    they drew before the layout option existed, and the dense and cluttered rooms what they drew
    when their levers were measured (docs/levers.md): digests of 5 rooms' specs recorded then."""
    assert _digest('sparse') == 'be4259690be8217d00d4b9e3496bd8ed1feb56b3f85e2fcc2ee3980e124d9e7f'
    assert _digest('dense') == '0d56ae2cce647ea18b7f599ee498b0e463fbdaa4da5c492a72f2b786bc4a66b1'
    assert _digest('cluttered') == (
        'bd2536778b84117cbcdc0284e88fc42a2e4c6a924643046063266595e3ce2c45'
    )


def _parts(scene, cls):
    return [p for obj in scene.objects if isinstance(obj, list) for p in obj if p.class_id == cls]


def test_cluttered_rooms_have_more_objects_and_upper_cabinets():
    """'cluttered' = 'dense' + more and larger small objects + wall-mounted cabinets that hang
    between the low cabinet's top and the ceiling."""
    n_dense = n_clut = uppers = 0
    for s in range(10):
        dense = make_scene(np.random.default_rng([4, s, 0]), 'dense')
        clut = make_scene(np.random.default_rng([4, s, 0]), 'cluttered')
        n_dense += len(_parts(dense, CLS['objects']))
        n_clut += len(_parts(clut, CLS['objects']))
        hc = clut.size[2]
        for p in _parts(clut, CLS['furniture']):
            # a cabinet body (half height >= 0.25 m) with its bottom above 1 m: hanging
            if p.shape == 'box' and p.size[2] >= 0.25 and p.pos[2] - p.size[2] > 1.0:
                uppers += 1
                assert p.pos[2] + p.size[2] <= hc - 0.05 + 1e-9
    assert n_clut > 1.5 * n_dense
    assert uppers > 0


def test_dense_rooms_are_smaller_and_fuller():
    """Over 20 rooms: items per m² of floor 0.49 sparse, 0.75 dense; floor covered 33 % / 45 %."""

    def per_m2(layout):
        items = covered = 0.0
        for s in range(20):
            sc = make_scene(np.random.default_rng([2, s, 0]), layout)
            area = sc.size[0] * sc.size[1]
            if layout == 'dense':
                assert 3.5 <= sc.size[0] <= 6.0 and 3.5 <= sc.size[1] <= 6.0
            items += len(sc.footprints) / area
            covered += sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in sc.footprints) / area
        return items / 20, covered / 20

    (n_s, c_s), (n_d, c_d) = per_m2('sparse'), per_m2('dense')
    assert n_d > 1.3 * n_s and c_d > 1.2 * c_s


@pytest.mark.parametrize('layout', ['dense', 'nyu'])
def test_handheld_frames_backproject_onto_room_planes_and_cover_classes(layout):
    """M2 with the render's K: floor and wall pixels of hand-held frames land on their planes;
    the labels see the placed classes and no void (a closed room)."""
    with Renderer(160, 120) as renderer:
        placed_all, seen_all = set(), set()
        for seed in range(2):
            rng = np.random.default_rng([seed, 0, 0])
            scene = make_scene(rng, layout)
            renderer.load(scene)
            seen = set()
            for pose in handheld_poses(rng, scene.size, scene.footprints, 25):
                f = renderer.render(pose)
                res = plane_residuals(f, scene.size)
                for name in ('floor', 'wall'):
                    if res[name].size:
                        assert res[name].max() < 5e-3, (name, res[name].max())
                seen |= set(np.unique(f.labels).tolist())
            assert 0 not in seen
            assert seen <= scene.class_ids()
            placed_all |= scene.class_ids()
            seen_all |= seen
        assert len(placed_all - seen_all) <= 1, placed_all - seen_all


def test_same_seed_same_bytes_and_options_recorded(tmp_path):
    args = dict(scenes=2, frames_per_scene=3, width=64, height=48, noise=True, progress=False)
    cli.generate(tmp_path / 'a', seed=5, layout='dense', camera='handheld', **args)
    cli.generate(tmp_path / 'b', seed=5, layout='dense', camera='handheld', **args)
    cli.generate(tmp_path / 'c', seed=5, **args)
    a, b, c = ([m[3] for m in read_all(tmp_path / n)] for n in 'abc')
    assert len(a) == 2 * 3 * 4 and a == b and a != c
    info = yaml.safe_load((tmp_path / 'a' / 'metadata.yaml').read_text())
    custom = json.loads(info['rosbag2_bagfile_information']['custom_data']['depth3dseg.synth'])
    assert (custom['layout'], custom['camera']) == ('dense', 'handheld')


def test_cli_refuses_unknown_layout_and_camera(tmp_path, capsys):
    base = ['--out', str(tmp_path / 'x'), '--scenes', '1', '--frames-per-scene', '1']
    with pytest.raises(SystemExit):
        cli.main(base + ['--camera', 'drone'])
    assert "invalid choice: 'drone'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--layout 'bogus'"):
        cli.generate(tmp_path / 'y', 1, 1, layout='bogus')
    with pytest.raises(ValueError, match="--camera 'drone'"):
        cli.generate(tmp_path / 'y', 1, 1, camera='drone')
