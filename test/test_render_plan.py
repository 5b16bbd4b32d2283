"""Render plans (depth3dseg_ros.synth.render_plan): the rooms of the pybullet generator as plain
data for the Cycles renderer's own process. Pure checks (no renderer): URDF visuals, poses, the
JSON layout, emissive window panes."""

from __future__ import annotations

import json
import math

import numpy as np
import pybullet_data
import pytest

from depth3dseg_ros.synth.camera import camera_path, centred_K
from depth3dseg_ros.synth.render_plan import make_plan, pose_matrix, urdf_visuals, write_plan
from depth3dseg_ros.synth.room import make_scene
from depth3dseg_ros.synth.scene import CLS, SURFACE_TEXTURES, UrdfObject


def test_pose_matrix_is_urdf_rpy():
    """R = Rz(yaw)·Ry(pitch)·Rx(roll), translation in the last column."""
    T = pose_matrix((1, 2, 3), (0.0, 0.0, math.pi / 2))
    np.testing.assert_allclose(T[:3, :3] @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(T[:3, 3], [1, 2, 3])
    R = pose_matrix((0, 0, 0), (0.3, -0.2, 1.1))[:3, :3]
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0)
    roll = pose_matrix((0, 0, 0), (math.pi / 2, 0, 0))[:3, :3]
    np.testing.assert_allclose(roll @ [0, 1, 0], [0, 0, 1], atol=1e-12)


def test_urdf_visuals_of_pybullet_table():
    """table.urdf: a top and four legs, each the same OBJ scaled, at their URDF origins."""
    vis = urdf_visuals(f'{pybullet_data.getDataPath()}/table/table.urdf')
    assert len(vis) == 5
    assert all(v['shape'] == 'mesh' and v['mesh'].endswith('table.obj') for v in vis)
    assert vis[0]['size'] == [1.5, 1.0, 0.05]
    np.testing.assert_allclose(vis[0]['T'][:3, 3], [0, 0, 0.6])
    np.testing.assert_allclose(vis[1]['T'][:3, 3], [-0.65, -0.4, 0.29])


def test_urdf_with_joints_or_unknown_geometry_is_refused(tmp_path):
    p = tmp_path / 'j.urdf'
    p.write_text('<robot name="r"><link name="a"/><link name="b"/><joint name="j"/></robot>')
    with pytest.raises(ValueError, match='joints'):
        urdf_visuals(p)
    p.write_text(
        '<robot name="r"><link name="a"><visual><geometry><capsule/></geometry>'
        '</visual></link></robot>'
    )
    with pytest.raises(ValueError, match='capsule'):
        urdf_visuals(p)


def test_plan_of_a_room_is_json_and_complete(tmp_path):
    """Every part and every URDF visual of the room is in the plan with its class; window panes
    (and only they) are emissive; frames carry T_world_cam and consecutive indices."""
    found_urdf = False
    for seed in range(12):
        rng = np.random.default_rng([3, seed, 0])
        scene = make_scene(rng)
        poses = camera_path(rng, scene.free_zone, 4)
        plan = make_plan(
            scene,
            poses,
            centred_K(64, 48, scene.fov_y_deg),
            64,
            48,
            seed=9,
            urdf_root=pybullet_data.getDataPath(),
            first_index=8,
        )
        write_plan(plan, tmp_path / 'plan.json')
        back = json.loads((tmp_path / 'plan.json').read_text())
        assert back == json.loads(json.dumps(plan))
        n_parts = sum(len(o) for o in scene.objects if not isinstance(o, UrdfObject))
        urdfs = [o for o in scene.objects if isinstance(o, UrdfObject)]
        found_urdf |= bool(urdfs)
        assert len(plan['visuals']) >= n_parts + len(urdfs)
        assert {v['class_id'] for v in plan['visuals']} == scene.class_ids()
        # the renderer's texture vocabulary (synth/cycles_materials.py handles exactly these)
        vocabulary = set(SURFACE_TEXTURES) | {'sky', 'picture'}
        assert {v['texture'] for v in plan['visuals']} <= vocabulary
        assert any(v['texture'] == 'picture' for v in plan['visuals'])
        for v in plan['visuals']:
            if v['emissive']:
                assert v['class_id'] == CLS['window'] and v['shape'] == 'box'
        panes = [v for v in plan['visuals'] if v['emissive']]
        windows = [v for v in plan['visuals'] if v['class_id'] == CLS['window']]
        assert len(panes) * 6 == len(windows)  # a pane and its five frame bars
        assert [f['index'] for f in plan['frames']] == [8, 9, 10, 11]
        np.testing.assert_allclose(plan['frames'][0]['T_world_cam'], poses[0].matrix())
        assert plan['K'][0][2] == pytest.approx(31.5) and plan['K'][1][2] == pytest.approx(23.5)
    assert found_urdf


def test_urdf_visual_poses_follow_object_pose_and_scale():
    """A scaled, rotated URDF: origins scale with globalScaling, rotate with the object's yaw."""
    from depth3dseg_ros.synth.render_plan import scene_visuals
    from depth3dseg_ros.synth.scene import SceneSpec

    scene = SceneSpec(size=(4, 4, 3))
    scene.objects.append(
        UrdfObject('table/table.urdf', (2.0, 1.0, 0.0), math.pi / 2, 0.5, CLS['table'])
    )
    vis = scene_visuals(scene, pybullet_data.getDataPath())
    top = np.asarray(vis[0]['T'])
    np.testing.assert_allclose(top[:3, 3], [2.0, 1.0, 0.3])
    assert vis[0]['size'] == [0.75, 0.5, 0.025]
    leg = np.asarray(vis[1]['T'])  # origin (-0.65, -0.4) * 0.5, turned by 90°
    np.testing.assert_allclose(leg[:3, 3], [2.0 + 0.2, 1.0 - 0.325, 0.145], atol=1e-12)
