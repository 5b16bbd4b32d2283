"""Render a plan (:mod:`depth3dseg_ros.synth.render_plan`) with Blender Cycles: lit, textured RGB,
metric z-depth and the label image, one ``.npz`` per frame.

Runs in the renderer's own environment (``make render-venv``: Blender's ``bpy`` 5.0 from PyPI,
which needs numpy < 2), as a script::

    .venv-render/bin/python -m depth3dseg_ros.synth.cycles_render PLAN.json OUT_DIR [--threads N]

It imports nothing else of the package but :mod:`cycles_materials`. Frames already in ``OUT_DIR``
are skipped, so an interrupted render resumes where it stopped.

What makes it more camera-like than the pybullet renders: path-traced global illumination (light
bounces, soft shadows, colour bleeding) from ceiling lamps (area lights, 2700–6500 K) and emissive
windows (day: bright; night: dark, the lamps carry the room), procedural PBR materials
(:mod:`cycles_materials`), and an auto-exposed sRGB camera response.

Per-frame output ``frame_<index>.npz``: ``rgb`` H×W×3 uint8, ``depth`` H×W float32 m (z along the
optical axis, NaN where nothing was hit), ``labels`` H×W uint8 NYUv2-13 ids (Cycles' object-index
pass, 0 = void), ``K`` 3×3 float64, ``T_world_cam`` 4×4 float64.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

import bpy
import numpy as np
import OpenEXR
from mathutils import Matrix

from depth3dseg_ros.synth.cycles_materials import make_material

#: optical frame (x right, y down, z forward) -> Blender camera frame (x right, y up, looks −z)
OPTICAL_TO_BLENDER = np.diag([1.0, -1.0, -1.0, 1.0])


def kelvin_rgb(kelvin: float) -> tuple:
    """Approximate linear RGB of a black body at ``kelvin`` (Tanner Helland's fit,
    1000–40000 K)."""
    t = kelvin / 100.0
    r = 255.0 if t <= 66 else 329.7 * (t - 60) ** -0.1332
    g = 99.47 * math.log(t) - 161.1 if t <= 66 else 288.1 * (t - 60) ** -0.0755
    b = 255.0 if t >= 66 else (0.0 if t <= 19 else 138.5 * math.log(t - 10) - 305.0)
    return tuple(min(1.0, max(0.0, c / 255.0)) for c in (r, g, b))


def _mesh_box(name, h):
    hx, hy, hz = h
    v = [(sx * hx, sy * hy, sz * hz) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    f = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    me = bpy.data.meshes.new(name)
    me.from_pydata(v, [], f)
    return me


def _mesh_cylinder(name, r, length, n=32):
    v = [
        (r * math.cos(2 * math.pi * i / n), r * math.sin(2 * math.pi * i / n), z)
        for z in (-length / 2, length / 2)
        for i in range(n)
    ]
    f = [(i, (i + 1) % n, n + (i + 1) % n, n + i) for i in range(n)]
    f += [tuple(reversed(range(n))), tuple(range(n, 2 * n))]
    me = bpy.data.meshes.new(name)
    me.from_pydata(v, [], f)
    me.polygons.foreach_set('use_smooth', [True] * n + [False, False])
    return me


def _mesh_sphere(name, r, nu=24, nv=12):
    v = [(0.0, 0.0, -r)]
    for j in range(1, nv):
        th = math.pi * j / nv - math.pi / 2
        v += [
            (
                r * math.cos(th) * math.cos(2 * math.pi * i / nu),
                r * math.cos(th) * math.sin(2 * math.pi * i / nu),
                r * math.sin(th),
            )
            for i in range(nu)
        ]
    v.append((0.0, 0.0, r))
    top = len(v) - 1
    ring = lambda j, i: 1 + (j - 1) * nu + i % nu  # noqa: E731
    f = [(0, ring(1, i + 1), ring(1, i)) for i in range(nu)]
    f += [
        (ring(j, i), ring(j, i + 1), ring(j + 1, i + 1), ring(j + 1, i))
        for j in range(1, nv - 1)
        for i in range(nu)
    ]
    f += [(ring(nv - 1, i), ring(nv - 1, i + 1), top) for i in range(nu)]
    me = bpy.data.meshes.new(name)
    me.from_pydata(v, [], f)
    me.polygons.foreach_set('use_smooth', [True] * len(f))
    return me


_OBJ_CACHE: dict = {}


def _mesh_obj(name, path, scale):
    """An OBJ file's geometry (kept in its own axes, as pybullet loads it) scaled per axis."""
    if path not in _OBJ_CACHE:
        bpy.ops.wm.obj_import(filepath=path, forward_axis='Y', up_axis='Z')
        objs = list(bpy.context.selected_objects)
        verts, faces = [], []
        for ob in objs:
            base = len(verts)
            verts += [tuple(ob.matrix_world @ v.co) for v in ob.data.vertices]
            faces += [tuple(base + i for i in p.vertices) for p in ob.data.polygons]
            bpy.data.objects.remove(ob)
        _OBJ_CACHE[path] = (verts, faces)
    verts, faces = _OBJ_CACHE[path]
    me = bpy.data.meshes.new(name)
    me.from_pydata([(x * scale[0], y * scale[1], z * scale[2]) for x, y, z in verts], [], faces)
    me.polygons.foreach_set('use_smooth', [True] * len(faces))
    return me


def build_scene(plan: dict, threads: int) -> random.Random:
    """Replace Blender's scene by the plan's room, lights, materials and render settings."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    sc = bpy.context.scene
    rng = random.Random(plan['seed'])
    sc.render.engine = 'CYCLES'
    cy = sc.cycles
    cy.device, cy.samples, cy.seed = 'CPU', int(plan['samples']), int(plan['seed']) % (2**31)
    cy.use_adaptive_sampling = False
    cy.use_denoising, cy.denoiser = True, 'OPENIMAGEDENOISE'
    cy.max_bounces, cy.diffuse_bounces, cy.glossy_bounces = 4, 3, 2
    cy.transmission_bounces, cy.transparent_max_bounces = 0, 2
    cy.caustics_reflective = cy.caustics_refractive = False
    cy.sample_clamp_indirect = 10.0
    sc.render.threads_mode = 'FIXED' if threads > 0 else 'AUTO'
    if threads > 0:
        sc.render.threads = threads
    sc.render.resolution_x, sc.render.resolution_y = plan['width'], plan['height']
    sc.render.resolution_percentage = 100
    vl = sc.view_layers[0]
    vl.use_pass_z = True
    vl.use_pass_object_index = True
    sc.render.use_compositing = sc.render.use_sequencer = False  # save the passes as rendered
    fmt = sc.render.image_settings
    fmt.media_type = 'MULTI_LAYER_IMAGE'
    fmt.file_format, fmt.color_depth, fmt.exr_codec = 'OPEN_EXR_MULTILAYER', '32', 'NONE'

    day = rng.random() < 0.6
    world = bpy.data.worlds.new('world')
    sc.world = world
    bg = world.node_tree.nodes['Background']
    bg.inputs['Color'].default_value = (0.8, 0.85, 1.0, 1.0)
    bg.inputs['Strength'].default_value = rng.uniform(0.02, 0.15)
    window_strength = rng.uniform(3.0, 12.0) if day else rng.uniform(0.02, 0.2)

    for i, v in enumerate(plan['visuals']):
        name = f'v{i}'
        if v['shape'] == 'box':
            me = _mesh_box(name, v['size'])
        elif v['shape'] == 'cylinder':
            me = _mesh_cylinder(name, *v['size'][:2])
        elif v['shape'] == 'sphere':
            me = _mesh_sphere(name, v['size'][0])
        elif v['shape'] == 'mesh':
            me = _mesh_obj(name, v['mesh'], v['size'])
        else:
            raise ValueError(
                f"plan visual {i}: shape={v['shape']!r} is not box/cylinder/sphere/mesh"
            )
        emissive = bool(v.get('emissive', False))
        me.materials.append(
            make_material(name, v['rgba'], v['texture'], emissive, rng, window_strength)
        )
        ob = bpy.data.objects.new(name, me)
        ob.matrix_world = Matrix(v['T'])
        ob.pass_index = int(v['class_id'])
        sc.collection.objects.link(ob)

    lx, ly, hc = plan['room']
    n_lamps = rng.randint(1, 3) if day else rng.randint(2, 4)
    for j in range(n_lamps):
        light = bpy.data.lights.new(f'lamp{j}', type='AREA')
        light.shape = rng.choice(('SQUARE', 'DISK'))
        light.size = rng.uniform(0.25, 0.9)
        light.energy = rng.uniform(40.0, 200.0) * (0.5 if day else 1.0)
        light.color = kelvin_rgb(rng.uniform(2700.0, 6500.0))
        ob = bpy.data.objects.new(f'lamp{j}', light)
        ob.location = (rng.uniform(0.2, 0.8) * lx, rng.uniform(0.2, 0.8) * ly, hc - 0.02)
        sc.collection.objects.link(ob)  # area lights shine along their −z: down
    if rng.random() < 0.4:  # a table or floor lamp
        light = bpy.data.lights.new('point', type='POINT')
        light.energy = rng.uniform(20.0, 80.0)
        light.shadow_soft_size = rng.uniform(0.05, 0.2)
        light.color = kelvin_rgb(rng.uniform(2500.0, 4000.0))
        ob = bpy.data.objects.new('point', light)
        ob.location = (
            rng.uniform(0.1, 0.9) * lx,
            rng.uniform(0.1, 0.9) * ly,
            rng.uniform(0.8, 1.8),
        )
        sc.collection.objects.link(ob)

    cam_data = bpy.data.cameras.new('camera')
    cam = bpy.data.objects.new('camera', cam_data)
    sc.collection.objects.link(cam)
    sc.camera = cam
    set_intrinsics(cam_data, np.asarray(plan['K']), plan['width'], plan['height'])
    return rng


def set_intrinsics(cam_data, K: np.ndarray, width: int, height: int) -> None:
    """Set a Blender camera to the pinhole K (pixel units, pixel centres at integer coordinates).

    Blender's sensor is fitted to the image width; the principal point offset from the image
    centre ((W−1)/2, (H−1)/2) becomes lens shift in units of the width.

    Raises:
        ValueError: fx and fy differ by more than 0.1 % (square pixels only).
    """
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    if abs(fx - fy) > 1e-3 * fx:
        raise ValueError(f'K fx={fx} fy={fy}: the Cycles renderer needs square pixels')
    cam_data.type = 'PERSP'
    cam_data.sensor_fit = 'HORIZONTAL'
    cam_data.sensor_width = 36.0
    cam_data.lens = fx * 36.0 / width
    cam_data.shift_x = -(cx - (width - 1) / 2.0) / width
    cam_data.shift_y = (cy - (height - 1) / 2.0) / width
    cam_data.clip_start, cam_data.clip_end = 0.05, 50.0


def read_exr(path: str, width: int, height: int):
    """Linear RGB (H×W×3 float32), Cycles depth (H×W float32) and object index (H×W float32)
    from Blender's multi-layer EXR (one EXR part per pass in Blender 5)."""
    with OpenEXR.File(path, separate_channels=True) as f:
        ch = {name: c for part in f.parts for name, c in part.channels.items()}

        def get(suffix):
            names = [n for n in ch if n.endswith(suffix)]
            if not names:
                raise ValueError(f'{path}: no channel ending in {suffix!r} (have {sorted(ch)})')
            return np.asarray(ch[names[0]].pixels, dtype=np.float32).reshape(height, width)

        rgb = np.stack([get('Combined.R'), get('Combined.G'), get('Combined.B')], axis=-1)
        return rgb, get('Depth.Z'), get('Object Index.X')


def camera_response(linear: np.ndarray, key: float) -> np.ndarray:
    """Auto-exposure (the 98th-percentile luminance maps to ``key``) and the sRGB OETF -> uint8."""
    lum = linear @ np.array([0.2126, 0.7152, 0.0722], np.float32)
    ref = float(np.percentile(lum, 98.0))
    x = np.clip(linear * (key / max(ref, 1e-6)), 0.0, 1.0)
    srgb = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)
    return np.clip(np.round(srgb * 255.0), 0, 255).astype(np.uint8)


def render_plan(plan: dict, out: Path, threads: int = 0) -> int:
    """Render every frame of ``plan`` not yet in ``out`` (at the plan's samples per pixel);
    returns the number rendered now."""
    out.mkdir(parents=True, exist_ok=True)
    todo = [f for f in plan['frames'] if not (out / f"frame_{f['index']:06d}.npz").exists()]
    if not todo:
        return 0
    rng = build_scene(plan, threads)
    sc = bpy.context.scene
    w, h = plan['width'], plan['height']
    K = np.asarray(plan['K'], dtype=np.float64)
    key = rng.uniform(0.8, 1.0)
    with tempfile.TemporaryDirectory(prefix='depth3dseg_cycles_') as tmp:
        for f in todo:
            T = np.asarray(f['T_world_cam'], dtype=np.float64)
            sc.camera.matrix_world = Matrix((T @ OPTICAL_TO_BLENDER).tolist())
            sc.render.filepath = os.path.join(tmp, 'frame.exr')
            bpy.ops.render.render(write_still=True)
            rgb, dist, index = read_exr(sc.render.filepath, w, h)
            hit = dist < 1e9
            # Cycles' depth pass is already z along the optical axis (checked against pybullet)
            depth = np.where(hit, dist, np.nan).astype(np.float32)
            labels = np.where(hit, np.rint(index), 0).clip(0, 255).astype(np.uint8)
            target = out / f"frame_{f['index']:06d}.npz"
            part = target.with_suffix('.part.npz')
            np.savez(
                part, rgb=camera_response(rgb, key), depth=depth, labels=labels, K=K, T_world_cam=T
            )
            os.replace(part, target)
    return len(todo)


def main(argv=None) -> int:
    """CLI: render one plan file into a frame folder (see the module docstring)."""
    ap = argparse.ArgumentParser(prog='cycles_render', description=__doc__.split('\n')[0])
    ap.add_argument('plan', type=Path)
    ap.add_argument('out', type=Path)
    ap.add_argument('--threads', type=int, default=0, help='render threads (0: all cores)')
    args = ap.parse_args(argv)
    plan = json.loads(args.plan.read_text())
    n = render_plan(plan, args.out, args.threads)
    print(f'cycles_render: {n} frames rendered into {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
