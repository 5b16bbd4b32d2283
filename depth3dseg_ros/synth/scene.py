"""Random indoor room layouts for the synthetic RGB-D generator (pure numpy, no pybullet).

A :class:`SceneSpec` is a list of objects, each a list of primitive :class:`Part` s (box, cylinder,
sphere) or one pybullet_data URDF, every part carrying its NYUv2 13-class id. The renderer
(:mod:`depth3dseg_ros.synth.render`) turns each object into one pybullet multibody whose links are
the parts, so the segmentation mask (object uid + link index) maps back to the part's class.

World frame: z up, the room spans ``[0, Lx] × [0, Ly] × [0, Hc]`` (floor top at z = 0). A free zone
in the middle of the room is kept empty for the camera path (:mod:`depth3dseg_ros.synth.camera`).
Everything is drawn from one ``numpy.random.Generator``, so a seed fixes the layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.synth.palette import PALETTES, indoor_colour

#: NYUv2 13-class ids used by the generator, looked up by name in :data:`core.classes.NYU13`.
CLS = {name: NYU13.names.index(name) for name in NYU13.names if name != 'void'}

RGBA = Tuple[float, float, float, float]
#: clearance (m) between furniture footprints and the camera's free zone
ZONE_MARGIN = 0.5


@dataclass(frozen=True)
class Part:
    """One primitive in world coordinates.

    ``shape``: 'box' (size = half extents hx, hy, hz, m), 'cylinder' (radius, length; axis = z) or
    'sphere' (radius,). ``pos`` is the centre (m), ``yaw`` the rotation about z (rad), ``texture``
    a key of the renderer's texture bank or None, ``class_id`` the NYU13 id of its pixels,
    ``emissive`` a light-emitting surface (a window pane: the Cycles renderer lights the room with
    it; pybullet draws it like any other part).
    """

    shape: str
    size: Tuple[float, ...]
    pos: Tuple[float, float, float]
    yaw: float
    rgba: RGBA
    texture: Optional[str]
    class_id: int
    emissive: bool = False


@dataclass(frozen=True)
class UrdfObject:
    """A pybullet_data URDF placed at ``pos``/``yaw`` with ``scale``; all its links get
    ``class_id``."""

    path: str
    pos: Tuple[float, float, float]
    yaw: float
    scale: float
    class_id: int
    rgba: Optional[RGBA] = None


@dataclass
class SceneSpec:
    """A room: size (Lx, Ly, Hc) in m, objects (lists of parts or URDFs), camera free zone,
    floor footprints of the placed furniture ((x0, y0, x1, y1) m, axis-aligned), lighting."""

    size: Tuple[float, float, float]
    objects: List[object] = field(default_factory=list)
    free_zone: Tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    footprints: List[Tuple[float, float, float, float]] = field(default_factory=list)
    light: dict = field(default_factory=dict)
    fov_y_deg: float = 50.0

    def class_ids(self) -> set:
        """Set of class ids placed in the scene."""
        ids = set()
        for obj in self.objects:
            if isinstance(obj, UrdfObject):
                ids.add(obj.class_id)
            else:
                ids.update(p.class_id for p in obj)
        return ids


#: chair and sofa geometry of ``depth3dseg-synth --shapes`` (synth.seating builds both)
SHAPES = ('basic', 'varied')

#: procedural texture kinds (made by synth.render) plus pybullet_data image textures.
SURFACE_TEXTURES = ('wood', 'tiles', 'noise', 'stripes', 'brick', 'carpet', None)
PICTURE_TEXTURES = (
    'picture_a',
    'picture_b',
    'picture_c',
    'tex256.png',
    'uvmap.png',
    'checker_grid.jpg',
)


class Placer:
    """Collects object parts in an object-local frame (x, y, yaw on the floor) and the free
    footprints.

    ``palette`` (synth.palette.PALETTES) sets how :meth:`colour` colours items without a base
    colour; 'indoor' and 'furniture' draw them from ``palette_rng``. ``shapes`` ('basic' or
    'varied', synth.seating) sets the chairs' and sofas' geometry; 'varied' draws it from
    ``shape_rng``.

    Raises:
        ValueError: an unknown ``palette`` or ``shapes``, a palette other than 'random' without
            ``palette_rng``, or 'varied' shapes without ``shape_rng``.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        size,
        free_zone,
        clutter_scale: float = 1.0,
        clutter_size: float = 1.0,
        upper_cabinet_p: float = 0.0,
        nyu: bool = False,
        palette: str = 'random',
        palette_rng: Optional[np.random.Generator] = None,
        shapes: str = 'basic',
        shape_rng: Optional[np.random.Generator] = None,
    ):
        if shapes not in SHAPES:
            raise ValueError(f'shapes={shapes!r}: expected one of {list(SHAPES)}')
        if shapes == 'varied' and shape_rng is None:
            raise ValueError("shapes='varied' needs a shape_rng")
        if palette not in PALETTES:
            raise ValueError(f'palette={palette!r}: expected one of {list(PALETTES)}')
        if palette != 'random' and palette_rng is None:
            raise ValueError(f'palette={palette!r} needs a palette_rng')
        self.rng, self.size, self.free_zone = rng, size, free_zone
        #: colour priors of the items without a base colour (synth.palette) and their generator
        self.palette, self.palette_rng = palette, palette_rng
        #: chair and sofa geometry (SHAPES; synth.seating builds it) and the varied ones' generator
        self.shapes, self.shape_rng = shapes, shape_rng
        #: label and furnish by NYU Depth v2's 13-class conventions (synth.nyu_items): bed pillows
        #: objects, night stands, throw pillows, curtains, table lamps
        self.nyu = nyu
        #: factors on the maximum number and on the size of small objects per surface
        #: (furniture.clutter_on)
        self.clutter_scale, self.clutter_size = clutter_scale, clutter_size
        #: probability that a low cabinet gets a wall-mounted upper cabinet (furniture.cabinet)
        self.upper_cabinet_p = upper_cabinet_p
        self.footprints: List[Tuple[float, float, float, float]] = []

    def colour(self, base=None, spread=0.15, kind: Optional[str] = None) -> RGBA:
        """Random colour; around ``base`` (RGB 0..1) if given.

        Without ``base``: uniform in 0.1–0.95 per channel under the 'random' palette; under
        'indoor', :func:`synth.palette.indoor_colour` of ``kind`` ('chair', 'sofa', 'bedding'
        or None), drawn from ``palette_rng`` after the uniform draw, so the layout's generator
        advances the same under every palette; under 'furniture', the same for a ``kind`` and
        the uniform draw for None.
        """
        if base is None:
            c = self.rng.uniform(0.1, 0.95, 3)
            if self.palette == 'indoor' or (self.palette == 'furniture' and kind is not None):
                c = np.asarray(indoor_colour(self.palette_rng, kind))
        else:
            c = np.clip(np.asarray(base) + self.rng.uniform(-spread, spread, 3), 0.02, 1.0)
        return (float(c[0]), float(c[1]), float(c[2]), 1.0)

    def texture(self, choices=SURFACE_TEXTURES):
        """One texture name (or None = plain colour) drawn from ``choices``."""
        return choices[int(self.rng.integers(len(choices)))]

    def free(self, rect, margin=0.05, zone_margin=ZONE_MARGIN) -> bool:
        """True if ``rect`` is inside the room, ``margin`` from other footprints and
        ``zone_margin`` from the camera's free zone (so the camera, at the zone's edge, stays
        beyond the sensor's near range)."""
        x0, y0, x1, y1 = rect
        lx, ly, _ = self.size
        if x0 < -1e-6 or y0 < -1e-6 or x1 > lx + 1e-6 or y1 > ly + 1e-6:
            return False
        boxes = [(b, margin) for b in self.footprints] + [(self.free_zone, zone_margin)]
        return all(
            x1 + m <= a0 or a1 + m <= x0 or y1 + m <= b0 or b1 + m <= y0
            for (a0, b0, a1, b1), m in boxes
        )

    def against_wall(self, width: float, depth: float, tries: int = 30):
        """Pose (x, y, yaw) of a width×depth footprint whose back touches a random wall, or
        None."""
        lx, ly, _ = self.size
        for _ in range(tries):
            wall = int(self.rng.integers(4))
            along = lx if wall in (0, 2) else ly
            if width + 0.1 > along:
                continue
            s = float(self.rng.uniform(width / 2 + 0.05, along - width / 2 - 0.05))
            # yaw: the object's local +y (its front) points into the room
            if wall == 0:
                x, y, yaw = s, depth / 2, 0.0
            elif wall == 1:
                x, y, yaw = lx - depth / 2, s, math.pi / 2
            elif wall == 2:
                x, y, yaw = s, ly - depth / 2, math.pi
            else:
                x, y, yaw = depth / 2, s, -math.pi / 2
            rect = footprint(x, y, yaw, width, depth)
            if self.free(rect):
                self.footprints.append(rect)
                return x, y, yaw
        return None

    def anywhere(self, width: float, depth: float, tries: int = 30):
        """Pose of a width×depth footprint anywhere on the floor outside the free zone, or None."""
        lx, ly, _ = self.size
        for _ in range(tries):
            yaw = float(self.rng.uniform(-math.pi, math.pi))
            r = 0.5 * math.hypot(width, depth)
            if lx - 2 * r < 0.1 or ly - 2 * r < 0.1:
                return None
            x, y = float(self.rng.uniform(r, lx - r)), float(self.rng.uniform(r, ly - r))
            rect = footprint(x, y, yaw, width, depth)
            if self.free(rect):
                self.footprints.append(rect)
                return x, y, yaw
        return None


def footprint(x, y, yaw, width, depth):
    """Axis-aligned bounding rectangle (x0, y0, x1, y1) of a width×depth footprint rotated by
    yaw."""
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    hx, hy = 0.5 * (width * c + depth * s), 0.5 * (width * s + depth * c)
    return (x - hx, y - hy, x + hx, y + hy)


class ObjectBuilder:
    """Builds parts in an object-local frame (origin on the floor, +y = front) placed at x, y,
    yaw."""

    def __init__(self, x: float, y: float, yaw: float):
        self.x, self.y, self.yaw = x, y, yaw
        self.parts: List[Part] = []

    def _world(self, lx, ly, lz):
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return (self.x + c * lx - s * ly, self.y + s * lx + c * ly, lz)

    def box(self, centre, half, rgba, cls, texture=None, yaw=0.0, emissive=False):
        """Add a box: local centre (m), half extents (m), colour, class id, texture, extra yaw
        (rad), light-emitting or not."""
        self.parts.append(
            Part(
                'box',
                tuple(float(h) for h in half),
                self._world(*centre),
                self.yaw + yaw,
                rgba,
                texture,
                cls,
                emissive,
            )
        )

    def cylinder(self, centre, radius, length, rgba, cls, texture=None):
        """Add a vertical cylinder: local centre, radius and length (m), colour, class id,
        texture."""
        self.parts.append(
            Part(
                'cylinder',
                (float(radius), float(length)),
                self._world(*centre),
                self.yaw,
                rgba,
                texture,
                cls,
            )
        )

    def sphere(self, centre, radius, rgba, cls):
        """Add a sphere: local centre and radius (m), colour, class id."""
        self.parts.append(
            Part('sphere', (float(radius),), self._world(*centre), 0.0, rgba, None, cls)
        )
