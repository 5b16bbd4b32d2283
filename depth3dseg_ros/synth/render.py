"""pybullet (DIRECT, CPU TinyRenderer) rendering of a :class:`SceneSpec`: RGB, metric z-depth,
label image.

One :class:`Renderer` keeps one pybullet connection for many scenes (``resetSimulation`` between
scenes). Each scene object becomes one multibody whose links are its parts (base without visual),
so the segmentation mask rendered with ``ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX`` (value =
uid + ((link + 1) << 24)) maps through a (uid, link) lookup table to the part's NYU13 class id.

Depth: pybullet returns the OpenGL depth buffer d ∈ [0, 1]; the metric z-depth (distance along the
optical axis, what a depth camera and core.geometry expect) is ``z = far·near / (far − (far −
near)·d)``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional

import cv2
import numpy as np

from depth3dseg_ros.quiet import silenced_fd
from depth3dseg_ros.synth.camera import CameraPose, tinyrenderer_K
from depth3dseg_ros.synth.scene import Part, SceneSpec, UrdfObject

with silenced_fd():  # pybullet's C code prints its build-time banner on stderr when imported
    import pybullet as pb
    import pybullet_data

NEAR, FAR = 0.05, 20.0


@dataclass
class Frame:
    """One rendered view: ``rgb`` H×W×3 uint8 (RGB), ``depth`` H×W float32 metres (NaN = no
    surface), ``labels`` H×W uint8 NYU13 ids (0 = void), ``K`` 3×3 float64, ``T_world_cam`` 4×4
    float64."""

    rgb: np.ndarray
    depth: np.ndarray
    labels: np.ndarray
    K: np.ndarray
    T_world_cam: np.ndarray


def depth_buffer_to_z(buf: np.ndarray, near: float = NEAR, far: float = FAR) -> np.ndarray:
    """OpenGL depth buffer (float, 0..1) -> metric z-depth float32 m; d >= 1 (no surface) ->
    NaN."""
    d = np.asarray(buf, dtype=np.float64)
    z = far * near / (far - (far - near) * d)
    z[d >= 1.0] = np.nan
    return z.astype(np.float32)


def _procedural_textures(folder: str) -> Dict[str, str]:
    """Write the procedural texture PNGs (fixed seed, so identical every run) and return name ->
    path."""
    rng = np.random.default_rng(12345)
    s = 128
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32)
    tex = {}
    grain = (0.75 + 0.25 * np.sin(xx / 3.0 + 4 * np.sin(yy / 23.0))) * (
        0.9 + 0.1 * rng.random((s, s))
    )
    tex['wood'] = grain
    tex['tiles'] = np.where((xx % 32 < 2) | (yy % 32 < 2), 0.55, 0.95) * (
        0.95 + 0.05 * rng.random((s, s))
    )
    tex['noise'] = cv2.GaussianBlur(rng.random((s, s)).astype(np.float32), (0, 0), 2) * 0.5 + 0.6
    tex['stripes'] = np.where((xx // 8) % 2 == 0, 1.0, 0.8)
    row = (yy // 16).astype(int)
    tex['brick'] = np.where((yy % 16 < 2) | (((xx + 16 * (row % 2)) % 32) < 2), 0.6, 1.0)
    tex['carpet'] = 0.75 + 0.25 * rng.random((s, s))
    paths = {}
    for name, img in tex.items():
        g = np.clip(img * 255, 0, 255).astype(np.uint8)
        paths[name] = os.path.join(folder, f'{name}.png')
        cv2.imwrite(paths[name], cv2.merge([g, g, g]))
    # colourful "pictures" and a sky gradient
    for name, k in (('picture_a', 3), ('picture_b', 6), ('picture_c', 12)):
        small = rng.integers(0, 256, (k, k, 3), dtype=np.uint8)
        img = cv2.resize(
            small, (s, s), interpolation=cv2.INTER_CUBIC if k > 3 else cv2.INTER_NEAREST
        )
        paths[name] = os.path.join(folder, f'{name}.png')
        cv2.imwrite(paths[name], img)
    sky = np.zeros((s, s, 3), np.uint8)
    sky[..., 0] = 255
    sky[..., 1] = np.linspace(255, 190, s)[:, None]
    sky[..., 2] = np.linspace(255, 140, s)[:, None]
    paths['sky'] = os.path.join(folder, 'sky.png')
    cv2.imwrite(paths['sky'], sky)
    return paths


class Renderer:
    """Holds one pybullet DIRECT connection and renders scenes at ``width``×``height``.

    Raises:
        ValueError: non-positive image size.
    """

    def __init__(self, width: int, height: int):
        if width <= 0 or height <= 0:
            raise ValueError(f'width={width} height={height} must be positive')
        self.width, self.height = int(width), int(height)
        self.client = pb.connect(pb.DIRECT)
        self._tmp = tempfile.TemporaryDirectory(prefix='depth3dseg_tex_')
        self._tex_paths = _procedural_textures(self._tmp.name)
        data = pybullet_data.getDataPath()
        for name in ('tex256.png', 'uvmap.png', 'checker_grid.jpg'):
            self._tex_paths[name] = os.path.join(data, name)
        self._textures: Dict[str, int] = {}
        self._lut = np.zeros((1, 1), np.uint8)
        self.scene: Optional[SceneSpec] = None

    def close(self) -> None:
        """Disconnect pybullet and remove the texture folder."""
        if self.client is not None:
            pb.disconnect(self.client)
            self.client = None
        self._tmp.cleanup()

    def __enter__(self) -> 'Renderer':
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- scene -----------------------------------------------------------------------------------
    def _texture(self, name: Optional[str]) -> int:
        if name is None:
            return -1
        if name not in self._textures:
            self._textures[name] = pb.loadTexture(
                self._tex_paths[name], physicsClientId=self.client
            )
        return self._textures[name]

    def _visual(self, part: Part) -> int:
        kw = dict(rgbaColor=list(part.rgba), physicsClientId=self.client)
        if part.shape == 'box':
            return pb.createVisualShape(pb.GEOM_BOX, halfExtents=list(part.size), **kw)
        if part.shape == 'cylinder':
            return pb.createVisualShape(
                pb.GEOM_CYLINDER, radius=part.size[0], length=part.size[1], **kw
            )
        if part.shape == 'sphere':
            return pb.createVisualShape(pb.GEOM_SPHERE, radius=part.size[0], **kw)
        raise ValueError(f'Part.shape={part.shape!r} is not box/cylinder/sphere')

    def _add_parts(self, parts: List[Part]) -> List[tuple]:
        n = len(parts)
        vis = [self._visual(p) for p in parts]
        uid = pb.createMultiBody(
            0,
            -1,
            -1,
            basePosition=[0, 0, 0],
            linkMasses=[0] * n,
            linkCollisionShapeIndices=[-1] * n,
            linkVisualShapeIndices=vis,
            linkPositions=[list(p.pos) for p in parts],
            linkOrientations=[pb.getQuaternionFromEuler([0, 0, p.yaw]) for p in parts],
            linkInertialFramePositions=[[0, 0, 0]] * n,
            linkInertialFrameOrientations=[[0, 0, 0, 1]] * n,
            linkParentIndices=[0] * n,
            linkJointTypes=[pb.JOINT_FIXED] * n,
            linkJointAxis=[[0, 0, 1]] * n,
            physicsClientId=self.client,
        )
        out = []
        for link, p in enumerate(parts):
            if p.texture is not None:
                pb.changeVisualShape(
                    uid,
                    link,
                    textureUniqueId=self._texture(p.texture),
                    rgbaColor=list(p.rgba),
                    physicsClientId=self.client,
                )
            out.append((uid, link, p.class_id))
        return out

    def _add_urdf(self, obj: UrdfObject) -> List[tuple]:
        path = os.path.join(pybullet_data.getDataPath(), obj.path)
        uid = pb.loadURDF(
            path,
            list(obj.pos),
            pb.getQuaternionFromEuler([0, 0, obj.yaw]),
            useFixedBase=True,
            globalScaling=obj.scale,
            physicsClientId=self.client,
        )
        links = range(-1, pb.getNumJoints(uid, physicsClientId=self.client))
        if obj.rgba is not None:
            for link in links:
                pb.changeVisualShape(
                    uid, link, rgbaColor=list(obj.rgba), physicsClientId=self.client
                )
        return [(uid, link, obj.class_id) for link in links]

    def load(self, scene: SceneSpec) -> None:
        """Replace the current world by ``scene`` and build the (uid, link) -> class lookup
        table."""
        pb.resetSimulation(physicsClientId=self.client)
        self._textures = {}
        entries: List[tuple] = []
        for obj in scene.objects:
            entries += (
                self._add_urdf(obj) if isinstance(obj, UrdfObject) else self._add_parts(list(obj))
            )
        lut = np.zeros((max(e[0] for e in entries) + 1, max(e[1] for e in entries) + 2), np.uint8)
        for uid, link, cls in entries:
            lut[uid, link + 1] = cls
        self._lut, self.scene = lut, scene

    # -- rendering -------------------------------------------------------------------------------
    def labels_from_mask(self, seg: np.ndarray) -> np.ndarray:
        """Segmentation mask (int32, uid + ((link+1) << 24), −1 = nothing) -> H×W uint8 class
        ids."""
        seg = np.asarray(seg, dtype=np.int64)
        hit = seg >= 0
        uid = np.where(hit, seg & 0xFFFFFF, 0)
        link1 = np.where(hit, seg >> 24, 0)
        ok = hit & (uid < self._lut.shape[0]) & (link1 < self._lut.shape[1])
        out = np.zeros(seg.shape, np.uint8)
        out[ok] = self._lut[uid[ok], link1[ok]]
        return out

    def render(self, pose: CameraPose) -> Frame:
        """Render the loaded scene from ``pose`` (RGB, z-depth in m, labels, K, T_world_cam)."""
        if self.scene is None:
            raise ValueError('Renderer.render called before Renderer.load(scene)')
        w, h = self.width, self.height
        eye, target, up = pose.view_target_up()
        view = pb.computeViewMatrix(eye, target, up, physicsClientId=self.client)
        proj = pb.computeProjectionMatrixFOV(
            self.scene.fov_y_deg, w / h, NEAR, FAR, physicsClientId=self.client
        )
        _, _, rgba, buf, seg = pb.getCameraImage(
            w,
            h,
            view,
            proj,
            renderer=pb.ER_TINY_RENDERER,
            flags=pb.ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX,
            physicsClientId=self.client,
            **self.scene.light,
        )
        rgb = np.ascontiguousarray(
            np.reshape(np.asarray(rgba, dtype=np.uint8), (h, w, 4))[:, :, :3]
        )
        depth = depth_buffer_to_z(np.reshape(buf, (h, w)))
        labels = self.labels_from_mask(np.reshape(seg, (h, w)))
        return Frame(rgb, depth, labels, tinyrenderer_K(w, h, self.scene.fov_y_deg), pose.matrix())
