"""Render plans: a room and its camera path as plain JSON data, for a renderer in another
process.

The Cycles renderer (:mod:`depth3dseg_ros.synth.cycles_render`) runs in its own environment
(Blender's ``bpy`` needs numpy < 2), so it cannot import the room generator. The generator's
:class:`~depth3dseg_ros.synth.scene.SceneSpec` is flattened here into a list of *visuals*, each
one primitive or mesh with its world pose, colour, texture key and NYUv2-13 class id; pybullet_data
URDFs are expanded into their ``<visual>`` elements (origin, box/cylinder/sphere/mesh, scale), so
both renderers draw the same geometry. The plan also carries the image size, the pinhole K and one
``T_world_cam`` (optical frame -> world, REP 103) per frame, and a seed for the renderer's own
random choices (lights, materials).

Plan layout (all lengths in metres, matrices row-major nested lists)::

    {"version": 1, "width": W, "height": H, "K": 3×3, "room": [Lx, Ly, Hc], "seed": int,
     "samples": int,
     "visuals": [{"shape": "box"|"cylinder"|"sphere"|"mesh", "size": [...], "mesh": path|null,
                  "T": 4×4 world pose, "rgba": [r, g, b, a], "texture": key|null, "class_id": int,
                  "emissive": bool}],
     "frames": [{"index": i, "T_world_cam": 4×4}]}

``seed`` and ``samples`` (samples per pixel) set the renderer's own random choices and quality,
so that a plan alone says how its frames were made.
``texture``: a key of :data:`~depth3dseg_ros.synth.scene.SURFACE_TEXTURES`, ``"sky"``, or
``"picture"`` for every picture texture (each renderer draws its own pictures).
``size``: box half extents (3), cylinder (radius, length) along local z, sphere (radius,), mesh
scale (3).
"""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from depth3dseg_ros.synth.camera import CameraPose
from depth3dseg_ros.synth.scene import PICTURE_TEXTURES, Part, SceneSpec, UrdfObject

PLAN_VERSION = 1


def pose_matrix(pos: Sequence[float], rpy: Sequence[float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """4×4 float64 transform from a position (m) and URDF roll/pitch/yaw (rad, R = Rz·Ry·Rx)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = (
        math.cos(r),
        math.sin(r),
        math.cos(p),
        math.sin(p),
        math.cos(y),
        math.sin(y),
    )
    T = np.eye(4)
    T[:3, :3] = [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ]
    T[:3, 3] = [float(v) for v in pos]
    return T


def _floats(text: str | None, n: int, default: float) -> List[float]:
    if text is None:
        return [default] * n
    vals = [float(v) for v in text.split()]
    if len(vals) != n:
        raise ValueError(f'URDF attribute {text!r} has {len(vals)} numbers, expected {n}')
    return vals


def urdf_visuals(path: str | os.PathLike) -> List[dict]:
    """The ``<visual>`` elements of a single-link URDF, in the link frame (scale 1).

    Returns dicts with ``shape``, ``size``, ``mesh`` (absolute path or None) and ``T`` (4×4 numpy).

    Raises:
        ValueError: a URDF with joints (more than one link) or an unknown geometry element.
    """
    root = ET.parse(path).getroot()
    if root.findall('joint'):
        raise ValueError(f'URDF {path}: joints are not supported (single-link URDFs only)')
    folder = os.path.dirname(os.path.abspath(path))
    out = []
    for vis in root.iter('visual'):
        origin = vis.find('origin')
        T = pose_matrix(
            _floats(None if origin is None else origin.get('xyz'), 3, 0.0),
            _floats(None if origin is None else origin.get('rpy'), 3, 0.0),
        )
        geom = vis.find('geometry')
        kind = geom[0] if geom is not None and len(geom) else None
        if kind is None:
            raise ValueError(f'URDF {path}: a <visual> without geometry')
        if kind.tag == 'mesh':
            scale = _floats(kind.get('scale'), 3, 1.0)
            mesh = os.path.join(folder, kind.get('filename'))
            out.append(dict(shape='mesh', size=scale, mesh=mesh, T=T))
        elif kind.tag == 'box':
            size = _floats(kind.get('size'), 3, 1.0)
            out.append(dict(shape='box', size=[s / 2 for s in size], mesh=None, T=T))
        elif kind.tag == 'sphere':
            out.append(dict(shape='sphere', size=[float(kind.get('radius'))], mesh=None, T=T))
        elif kind.tag == 'cylinder':
            size = [float(kind.get('radius')), float(kind.get('length'))]
            out.append(dict(shape='cylinder', size=size, mesh=None, T=T))
        else:
            raise ValueError(f'URDF {path}: geometry <{kind.tag}> is not supported')
    return out


def _scaled(T: np.ndarray, scale: float) -> np.ndarray:
    """A URDF origin under pybullet's globalScaling: the translation scales, the rotation does
    not."""
    S = T.copy()
    S[:3, 3] *= scale
    return S


def scene_visuals(scene: SceneSpec, urdf_root: str | os.PathLike) -> List[dict]:
    """Flatten ``scene`` into plan visuals (JSON-ready); URDF paths are relative to
    ``urdf_root``."""
    out: List[dict] = []
    for obj in scene.objects:
        if isinstance(obj, UrdfObject):
            base = pose_matrix(obj.pos, (0.0, 0.0, obj.yaw))
            for v in urdf_visuals(os.path.join(urdf_root, obj.path)):
                k = obj.scale
                size = [s * k for s in v['size']]
                out.append(
                    dict(
                        shape=v['shape'],
                        size=size,
                        mesh=v['mesh'],
                        T=(base @ _scaled(v['T'], k)).tolist(),
                        rgba=list(obj.rgba) if obj.rgba is not None else [0.8, 0.8, 0.8, 1.0],
                        texture=None,
                        class_id=int(obj.class_id),
                        emissive=False,
                    )
                )
            continue
        for p in obj:
            out.append(_part_visual(p))
    return out


def _part_visual(p: Part) -> dict:
    return dict(
        shape=p.shape,
        size=[float(s) for s in p.size],
        mesh=None,
        T=pose_matrix(p.pos, (0.0, 0.0, p.yaw)).tolist(),
        rgba=[float(c) for c in p.rgba],
        texture='picture' if p.texture in PICTURE_TEXTURES else p.texture,
        class_id=int(p.class_id),
        emissive=bool(p.emissive),
    )


def make_plan(
    scene: SceneSpec,
    poses: Sequence[CameraPose],
    K: np.ndarray,
    width: int,
    height: int,
    seed: int,
    urdf_root: str | os.PathLike,
    first_index: int = 0,
    samples: int = 16,
) -> Dict:
    """The JSON-ready plan of one room seen from ``poses`` (frame indices from
    ``first_index``), rendered at ``samples`` samples per pixel."""
    return dict(
        version=PLAN_VERSION,
        width=int(width),
        height=int(height),
        K=np.asarray(K, dtype=np.float64).tolist(),
        room=[float(v) for v in scene.size],
        seed=int(seed),
        samples=int(samples),
        visuals=scene_visuals(scene, urdf_root),
        frames=[
            dict(index=first_index + i, T_world_cam=p.matrix().tolist())
            for i, p in enumerate(poses)
        ],
    )


def write_plan(plan: Dict, path: Path) -> None:
    """Write ``plan`` as JSON (atomically: a temporary file renamed into place)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + '.tmp')
    tmp.write_text(json.dumps(plan))
    os.replace(tmp, path)
