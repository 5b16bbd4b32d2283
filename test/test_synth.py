"""Synthetic labelled RGB-D bags (depth3dseg_ros.synth, depth3dseg-synth).

Geometry: rendered depth back-projected with core.geometry.backproject_np (M2) and the render's K,
moved to the world with the camera pose, must lie on the room's planes (floor z = 0, ceiling z =
Hc, walls x ∈ {0, Lx}, y ∈ {0, Ly}); labels must cover the placed classes; same seed -> same bytes;
the bag must be readable with rosbags AnyReader and by depth3dseg-extract with its default topics.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.synth import bagwrite, cli
from depth3dseg_ros.synth.camera import CameraPose, camera_path, tinyrenderer_K
from depth3dseg_ros.synth.noise import axial_sigma, kinect_noise
from depth3dseg_ros.synth.render import Renderer, depth_buffer_to_z
from depth3dseg_ros.synth.room import make_scene
from depth3dseg_ros.synth.scene import CLS
from synthutil import TS, plane_residuals, read_all, world_points


@pytest.fixture(scope='module')
def renderer():
    with Renderer(160, 120) as r:
        yield r


def test_tinyrenderer_K_backprojects_onto_room_planes(renderer):
    """M2 with the render's K: floor/ceiling/wall pixels land on their planes within 5 mm (max)."""
    rng = np.random.default_rng(7)
    scene = make_scene(rng)
    renderer.load(scene)
    seen = 0
    for pose in camera_path(rng, scene.free_zone, 6):
        frame = renderer.render(pose)
        res = plane_residuals(frame, scene.size)
        for name, r in res.items():
            if r.size:
                seen += 1
                assert r.max() < 5e-3, (name, r.max())
                assert r.mean() < 1e-3, (name, r.mean())
    assert seen >= 6


def test_K_choice_is_measured_not_assumed(renderer):
    """The alternative principal points ((W-1)/2, (H-1)/2) and (W/2, H/2) misplace the floor by
    more."""
    rng = np.random.default_rng(3)
    scene = make_scene(rng)
    renderer.load(scene)
    pose = CameraPose(
        (scene.free_zone[0] + 0.2, scene.free_zone[1] + 0.2, 1.2), yaw=0.7, pitch=-0.45, roll=0.03
    )
    frame = renderer.render(pose)
    fl = frame.labels == CLS['floor']
    assert fl.mean() > 0.2
    errors = {}
    w, h = 160, 120
    for name, (cx, cy) in {
        'used': (w / 2, h / 2 - 1),
        'centre_minus_half': ((w - 1) / 2, (h - 1) / 2),
        'centre': (w / 2, h / 2),
    }.items():
        K = frame.K.copy()
        K[0, 2], K[1, 2] = cx, cy
        frame.K = K
        errors[name] = float(np.abs(world_points(frame)[fl][:, 2]).mean())
    assert errors['used'] < 5e-4
    assert (
        errors['centre_minus_half'] > 2 * errors['used'] and errors['centre'] > 2 * errors['used']
    )


def test_K_formula_and_errors():
    K = tinyrenderer_K(320, 240, 60.0)
    assert K[0, 0] == K[1, 1] == pytest.approx(120 / math.tan(math.radians(30)))
    assert (K[0, 2], K[1, 2]) == (160.0, 119.0)
    with pytest.raises(ValueError, match='fov_y_deg=0'):
        tinyrenderer_K(320, 240, 0)
    with pytest.raises(ValueError, match='width=0'):
        tinyrenderer_K(0, 240, 50)


def test_depth_buffer_to_metric_z():
    near, far = 0.05, 20.0
    z = depth_buffer_to_z(np.array([[0.0, 0.5, 1.0]]), near, far)
    assert z[0, 0] == pytest.approx(near)
    assert z[0, 1] == pytest.approx(far * near / (far - (far - near) * 0.5))
    assert np.isnan(z[0, 2])


def test_camera_pose_is_right_handed_optical_frame():
    R = CameraPose((0, 0, 1), yaw=0.0, pitch=0.0).rotation()
    np.testing.assert_allclose(R[:, 2], [1, 0, 0], atol=1e-12)  # forward = +x
    np.testing.assert_allclose(R[:, 0], [0, -1, 0], atol=1e-12)  # right = -y (z up)
    np.testing.assert_allclose(R[:, 1], [0, 0, -1], atol=1e-12)  # down
    assert np.linalg.det(CameraPose((0, 0, 1), 1.0, 0.3, 0.05).rotation()) == pytest.approx(1.0)


def test_camera_path_stays_in_free_zone_at_robot_height():
    rng = np.random.default_rng(0)
    zone = (1.0, 2.0, 3.0, 3.5)
    poses = camera_path(rng, zone, 50)
    e = np.array([p.eye for p in poses])
    assert (e[:, 0] >= 1.0 - 1e-9).all() and (e[:, 0] <= 3.0 + 1e-9).all()
    assert (e[:, 1] >= 2.0 - 1e-9).all() and (e[:, 1] <= 3.5 + 1e-9).all()
    assert (e[:, 2] >= 0.3).all() and (e[:, 2] <= 1.5).all()
    assert np.max(np.linalg.norm(np.diff(e, axis=0), axis=1)) < 0.3  # smooth
    with pytest.raises(ValueError, match='n_frames=0'):
        camera_path(rng, zone, 0)


def test_class_ids_are_nyu13():
    assert CLS == {n: i for i, n in enumerate(NYU13.names) if n != 'void'}


def test_labels_cover_placed_classes(renderer):
    """Every class placed in a room is seen in some frame of its path; floor and wall in most
    frames."""
    all_placed, all_seen = set(), set()
    for seed in range(3):
        rng = np.random.default_rng([seed, 0, 0])
        scene = make_scene(rng)
        renderer.load(scene)
        placed = scene.class_ids()
        seen, floor_wall = set(), 0
        frames = [renderer.render(p) for p in camera_path(rng, scene.free_zone, 30)]
        for f in frames:
            u = set(np.unique(f.labels).tolist())
            seen |= u
            floor_wall += {CLS['floor'], CLS['wall']} <= u
        assert seen <= placed | {0}
        assert len(placed - seen) <= 1, (seed, placed - seen)
        assert floor_wall >= 0.6 * len(frames)
        assert 0 not in seen  # closed room: every pixel hits a labelled surface
        all_placed |= placed
        all_seen |= seen
    assert {CLS[n] for n in ('floor', 'wall', 'ceiling', 'table', 'chair', 'picture')} <= all_seen


def test_noise_model_statistics():
    rng = np.random.default_rng(0)
    K = tinyrenderer_K(320, 240, 50.0)
    for z0 in (1.0, 3.0):
        depth = np.full((240, 320), z0, np.float32)
        noisy = kinect_noise(depth, K, rng)
        ok = np.isfinite(noisy)
        assert 0.95 < ok.mean() < 1.0
        std = float(np.std(noisy[ok] - z0))
        assert 0.5 * axial_sigma(z0) < std < 2.5 * axial_sigma(z0) + 0.004  # + quantisation step
    assert axial_sigma(3.0) > 4 * axial_sigma(1.0)  # ∝ z² growth
    near = kinect_noise(np.full((20, 20), 0.3, np.float32), K, rng)
    far = kinect_noise(np.full((20, 20), 6.5, np.float32), K, rng)
    assert np.isnan(near).all() and np.isnan(far).all()
    step = np.full((60, 80), 3.0, np.float32)
    step[:, 40:] = 1.0  # a near object edge at column 40
    noisy = kinect_noise(step, K, rng)
    assert np.isnan(noisy[:, 38:42]).mean() > 0.3 > np.isnan(noisy[:, 10:30]).mean()
    with pytest.raises(ValueError, match='depth.shape'):
        kinect_noise(np.zeros(5, np.float32), K, rng)


def test_same_seed_same_bytes(tmp_path):
    args = dict(scenes=2, frames_per_scene=3, width=64, height=48, noise=True, progress=False)
    cli.generate(tmp_path / 'a', seed=5, **args)
    cli.generate(tmp_path / 'b', seed=5, **args)
    cli.generate(tmp_path / 'c', seed=6, **args)
    a, b, c = (read_all(tmp_path / n) for n in 'abc')
    assert len(a) == 2 * 3 * 4
    assert a == b
    assert [m[3] for m in a] != [m[3] for m in c]


def test_bag_topics_types_encodings_and_stamps(tmp_path):
    out = tmp_path / 'bag'
    assert (
        cli.main(
            [
                '--out',
                str(out),
                '--scenes',
                '1',
                '--frames-per-scene',
                '4',
                '--width',
                '80',
                '--height',
                '60',
                '--seed',
                '3',
                '--no-progress',
            ]
        )
        == 0
    )
    assert list(out.glob('*.mcap'))
    msgs = {}
    with AnyReader([out], default_typestore=TS) as r:
        conns = {c.topic: c.msgtype for c in r.connections}
        assert conns == {
            bagwrite.TOPIC_RGB: 'sensor_msgs/msg/Image',
            bagwrite.TOPIC_INFO: 'sensor_msgs/msg/CameraInfo',
            bagwrite.TOPIC_DEPTH: 'sensor_msgs/msg/Image',
            bagwrite.TOPIC_LABELS: 'sensor_msgs/msg/Image',
        }
        for c, t, raw in r.messages(connections=r.connections):
            m = r.deserialize(raw, c.msgtype)
            assert t == m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            assert m.header.frame_id == 'camera_color_optical_frame'
            msgs.setdefault(c.topic, []).append((t, m))
    assert all(len(v) == 4 for v in msgs.values())
    stamps = [t for t, _ in msgs[bagwrite.TOPIC_RGB]]
    np.testing.assert_allclose(np.diff(stamps), 1e9 / 30, atol=1)
    enc = {
        topic: {m.encoding for _, m in v}
        for topic, v in msgs.items()
        if topic != bagwrite.TOPIC_INFO
    }
    assert enc == {
        bagwrite.TOPIC_RGB: {'rgb8'},
        bagwrite.TOPIC_DEPTH: {'16UC1'},
        bagwrite.TOPIC_LABELS: {'mono8'},
    }
    _, info = msgs[bagwrite.TOPIC_INFO][0]
    np.testing.assert_allclose(
        info.k.reshape(3, 3),
        tinyrenderer_K(80, 60, make_scene(np.random.default_rng([3, 0, 0])).fov_y_deg),
    )
    assert (info.width, info.height) == (80, 60)
    # exact depth (no --noise) is the render in mm; labels are NYU13 ids
    frames = list(cli.render_frames(1, 4, 80, 60, 3, False))
    _, depth_msg = msgs[bagwrite.TOPIC_DEPTH][2]
    mm = depth_msg.data.view(np.uint16).reshape(60, 80)
    np.testing.assert_array_equal(mm, np.floor(frames[2][1].depth.astype(np.float64) * 1000 + 0.5))
    _, lab = msgs[bagwrite.TOPIC_LABELS][2]
    np.testing.assert_array_equal(lab.data.reshape(60, 80), frames[2][1].labels)
    assert lab.step == 80 and depth_msg.step == 160 and msgs[bagwrite.TOPIC_RGB][0][1].step == 240


def test_sqlite3_storage_and_out_dir_errors(tmp_path):
    out = tmp_path / 'db'
    assert (
        cli.main(
            [
                '--out',
                str(out),
                '--scenes',
                '1',
                '--frames-per-scene',
                '2',
                '--width',
                '32',
                '--height',
                '24',
                '--storage',
                'sqlite3',
                '--no-progress',
            ]
        )
        == 0
    )
    assert list(out.glob('*.db3'))
    assert len(read_all(out)) == 8
    assert (
        cli.main(['--out', str(out), '--scenes', '1', '--frames-per-scene', '2', '--no-progress'])
        == 2
    )
    with pytest.raises(ValueError, match='frames_per_scene=0'):
        cli.generate(tmp_path / 'x', 1, 0)


def test_extract_reads_synth_bag_with_defaults(tmp_path):
    """depth3dseg-extract's default topics match the synthetic bag: every frame has rgb, depth,
    labels, K."""
    from depth3dseg_ros.bags import extract

    bag = tmp_path / 'bag'
    cli.generate(bag, scenes=1, frames_per_scene=5, width=64, height=48, seed=1, progress=False)
    assert extract.main([str(bag), '-o', str(tmp_path / 'ds'), '-q']) == 0
    rows = [
        json.loads(line) for line in (tmp_path / 'ds' / 'index.jsonl').read_text().splitlines()
    ]
    assert len(rows) == 5
    assert all(r['depth'] and r['labels'] and r['width'] == 64 for r in rows)
    np.testing.assert_allclose(
        np.reshape(rows[0]['K'], (3, 3)),
        tinyrenderer_K(64, 48, make_scene(np.random.default_rng([1, 0, 0])).fov_y_deg),
    )
