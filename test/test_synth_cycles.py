"""The Cycles renderer (depth3dseg-synth-cycles; Blender's bpy in its own environment, built by
`make render-venv`, which `make test` runs first).

The same room and poses rendered by pybullet (TinyRenderer, whose K and depth test_synth checks
against the room's planes) and by Cycles must give the same labels (but at anti-aliased edges) and
the same z-depth: this checks the Cycles camera's K (lens and shift), the optical-frame pose, the
depth pass convention and the URDF meshes' axes and scales. Cycles frames also back-project onto
the room's planes with their own (centred) K. Same seed -> same bytes; an interrupted render
resumes; the bag is what depth3dseg-extract reads.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pybullet_data
import pytest
from rosbags.highlevel import AnyReader

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.synth import cycles_cli
from depth3dseg_ros.synth.camera import camera_path, centred_K, tinyrenderer_K
from depth3dseg_ros.synth.render import Renderer
from depth3dseg_ros.synth.render_plan import make_plan, write_plan
from depth3dseg_ros.synth.room import make_scene
from depth3dseg_ros.synth.scene import CLS

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope='module')
def render_python():
    py = cycles_cli.default_render_python()
    assert Path(py).exists(), f'{py} missing: run `make render-venv` (make test does it first)'
    return py


def _render(plan, folder, python):
    folder.mkdir(parents=True, exist_ok=True)
    write_plan(plan, folder / 'plan.json')
    cycles_cli.render_scenes([folder], python, threads=1)
    return [dict(np.load(folder / f"frame_{f['index']:06d}.npz")) for f in plan['frames']]


def test_cycles_matches_pybullet_labels_and_depth(tmp_path, render_python):
    """Same room, poses and K: label images agree on ≥ 97 % of pixels (edges differ by
    anti-aliasing) and z-depth to 0.1 % (median) wherever both hit the same class."""
    W, H = 80, 60
    for seed in (1, 4):
        rng = np.random.default_rng([seed, 0, 0])
        scene = make_scene(rng)
        poses = camera_path(rng, scene.free_zone, 3)
        K = tinyrenderer_K(W, H, scene.fov_y_deg)
        plan = make_plan(
            scene, poses, K, W, H, seed=5, urdf_root=pybullet_data.getDataPath(), samples=4
        )
        frames = _render(plan, tmp_path / f's{seed}', render_python)
        with Renderer(W, H) as r:
            r.load(scene)
            ref = [r.render(p) for p in poses]
        for a, b in zip(ref, frames):
            assert (a.labels == b['labels']).mean() >= 0.97
            same = (a.labels == b['labels']) & np.isfinite(a.depth) & np.isfinite(b['depth'])
            rel = np.abs(a.depth[same] - b['depth'][same]) / a.depth[same]
            assert np.median(rel) < 1e-3, np.median(rel)
            assert np.percentile(rel, 90) < 1e-2
            np.testing.assert_array_equal(b['K'], K)
            # lit and exposed: neither black nor blown out, with shading contrast
            rgb = b['rgb'].astype(np.float32)
            assert 30 < rgb.mean() < 225 and rgb.std() > 10


def test_centred_K_backprojects_onto_room_planes(tmp_path, render_python):
    """The renderer's own camera (centred principal point): floor, ceiling and wall pixels
    back-projected with K (M2) and moved by T_world_cam lie on their planes within 1 cm."""
    rng = np.random.default_rng([2, 0, 0])
    scene = make_scene(rng)
    poses = camera_path(rng, scene.free_zone, 3)
    K = centred_K(64, 48, scene.fov_y_deg)
    plan = make_plan(
        scene, poses, K, 64, 48, seed=3, urdf_root=pybullet_data.getDataPath(), samples=4
    )
    lx, ly, hc = scene.size
    checked = 0
    for f in _render(plan, tmp_path / 'c', render_python):
        T = f['T_world_cam']
        P = backproject_np(f['depth'], f['K']).reshape(-1, 3) @ T[:3, :3].T + T[:3, 3]
        lab = f['labels'].reshape(-1)
        for cls, dist in (
            ('floor', lambda p: np.abs(p[:, 2])),
            ('ceiling', lambda p: np.abs(p[:, 2] - hc)),
            (
                'wall',
                lambda p: np.min(
                    np.abs(np.stack([p[:, 0], p[:, 0] - lx, p[:, 1], p[:, 1] - ly], 1)), axis=1
                ),
            ),
        ):
            d = dist(P[lab == CLS[cls]])
            if d.size:
                checked += 1
                assert np.median(d) < 2e-3 and np.percentile(d, 95) < 1e-2, (cls, np.median(d))
    assert checked >= 3


def _messages(bag):
    with AnyReader([Path(bag)]) as r:
        return [(c.topic, t, raw) for c, t, raw in r.messages()]


def test_cli_same_seed_same_bytes_resume_and_extract(tmp_path, render_python):
    """Two runs with one seed write identical bags; a frame removed from the work folder is
    rendered again on the next run and nothing else is; depth3dseg-extract reads the bag."""
    from depth3dseg_ros.bags import extract

    args = [
        '--scenes',
        '2',
        '--frames-per-scene',
        '2',
        '--width',
        '48',
        '--height',
        '36',
        '--seed',
        '3',
        '--noise',
        '--samples',
        '2',
        '--threads',
        '1',
        '--render-python',
        render_python,
    ]
    assert cycles_cli.main(['--out', str(tmp_path / 'a')] + args) == 0
    assert cycles_cli.main(['--out', str(tmp_path / 'b')] + args) == 0
    a = _messages(tmp_path / 'a')
    assert len(a) == 2 * 2 * 4 and a == _messages(tmp_path / 'b')
    work = tmp_path / 'a.frames'
    frames = sorted(work.glob('scene_*/frame_*.npz'))
    assert len(frames) == 4
    mtimes = {p: os.stat(p).st_mtime_ns for p in frames}
    frames[1].unlink()
    assert cycles_cli.main(['--out', str(tmp_path / 'c'), '--work', str(work)] + args) == 0
    assert _messages(tmp_path / 'c') == a
    assert [p for p in frames if os.stat(p).st_mtime_ns != mtimes[p]] == [frames[1]]
    assert cycles_cli.main(['--out', str(tmp_path / 'c')] + args) == 2  # out exists
    # other arguments with the same work folder: refused, its frames are not reused
    for change in (['--width', '64'], ['--seed', '4'], ['--samples', '3']):
        changed = args + change  # argparse: the last value wins
        out = tmp_path / f'd{change[0]}'
        assert cycles_cli.main(['--out', str(out), '--work', str(work)] + changed) == 2
        assert not out.exists()
    assert extract.main([str(tmp_path / 'a'), '-o', str(tmp_path / 'ds'), '-q']) == 0
    rows = [json.loads(x) for x in (tmp_path / 'ds' / 'index.jsonl').read_text().splitlines()]
    assert len(rows) == 4 and all(r['depth'] and r['labels'] and r['width'] == 48 for r in rows)


def test_work_folder_of_other_arguments_is_named(tmp_path, capsys):
    """Plans are checked before any render: the error names the folder and what to do."""
    base = ['--scenes', '1', '--frames-per-scene', '1', '--width', '32', '--height', '24']
    work = tmp_path / 'w'
    cycles_cli.plan_scenes(work, 1, 1, 32, 24, seed=0)
    rc = cycles_cli.main(['--out', str(tmp_path / 'x'), '--work', str(work), '--seed', '1'] + base)
    assert rc == 2  # bad input (docs/extraction.md, "Exit codes")
    err = capsys.readouterr().err
    assert str(work) in err and 'other arguments' in err and 'another --work' in err


TINY = ['--scenes', '1', '--frames-per-scene', '1', '--width', '32', '--height', '24']


@pytest.mark.parametrize('kind', ['without bpy', 'missing'])
def test_unusable_render_python_says_what_to_do(tmp_path, capsys, kind):
    """A Python without Blender (here the package's own) or no Python at that path: exit 2 (bad
    input) and the make target to run, before any bag is written."""
    python = sys.executable if kind == 'without bpy' else str(tmp_path / 'nope')
    out = tmp_path / 'x'
    rc = cycles_cli.main(['--out', str(out), '--render-python', python, '--no-progress'] + TINY)
    assert rc == 2 and not out.exists()
    err = capsys.readouterr().err
    assert 'make render-venv' in err
    assert ('bpy' in err) if kind == 'without bpy' else ('not found' in err)
