"""Object recipes for the synthetic rooms: tables, shelves with books, cabinets, beds, TVs and
clutter (chairs and sofas: synth.seating), each composed of boxes/cylinders/spheres with random
sizes.

Every function takes the scene's :class:`~depth3dseg_ros.synth.scene.Placer` (random generator,
room size, occupied footprints) and returns a list of objects (a list of :class:`Part` or a
:class:`UrdfObject`), or an empty list when there was no room for it. Class ids follow NYUv2-13
(:data:`depth3dseg_ros.synth.scene.CLS`).
"""

from __future__ import annotations

import math
from typing import List

from depth3dseg_ros.synth import nyu_items, seating, wall_decor
from depth3dseg_ros.synth.scene import (
    CLS,
    PICTURE_TEXTURES,
    ObjectBuilder,
    Part,
    UrdfObject,
    Placer,
)

WOODS = (
    (0.55, 0.38, 0.22),
    (0.75, 0.6, 0.42),
    (0.35, 0.22, 0.12),
    (0.85, 0.85, 0.82),
    (0.2, 0.2, 0.2),
)
CLUTTER_URDFS = ('duck_vhacd.urdf', 'teddy_vhacd.urdf', 'soccerball.urdf', 'sphere2red.urdf')


def _wood(pl: Placer):
    return pl.colour(WOODS[int(pl.rng.integers(len(WOODS)))], 0.08)


def clutter_on(pl: Placer, x, y, yaw, w, d, z, n_max=4) -> List[object]:
    """Small objects (and sometimes books) on a surface of size w×d at height z, centred at x,
    y: 0 to ``n_max`` × ``pl.clutter_scale`` (rounded) of them, sized × ``pl.clutter_size``."""
    rng, out, k = pl.rng, [], pl.clutter_size
    n_max = int(round(n_max * pl.clutter_scale))
    for _ in range(int(rng.integers(0, n_max + 1))):
        ob = ObjectBuilder(x, y, yaw)
        lx, ly = rng.uniform(-w / 2 + 0.1, w / 2 - 0.1), rng.uniform(-d / 2 + 0.1, d / 2 - 0.1)
        kind = rng.integers(5)
        if kind == 0:
            h = k * rng.uniform(0.05, 0.3)
            ob.cylinder(
                (lx, ly, z + h / 2), k * rng.uniform(0.03, 0.08), h, pl.colour(), CLS['objects']
            )
        elif kind == 1:
            hx, hy, hz = k * rng.uniform(0.03, 0.12, 3)
            ob.box(
                (lx, ly, z + hz),
                (hx, hy, hz),
                pl.colour(),
                CLS['objects'],
                pl.texture(),
                rng.uniform(0, 3),
            )
        elif kind == 2:
            r = k * rng.uniform(0.04, 0.1)
            ob.sphere((lx, ly, z + r), r, pl.colour(), CLS['objects'])
        elif kind == 3:  # a pile of books lying flat
            zz = z
            for _ in range(int(rng.integers(1, 5))):
                t = rng.uniform(0.015, 0.04)
                ob.box(
                    (lx, ly, zz + t),
                    (rng.uniform(0.07, 0.12), rng.uniform(0.1, 0.15), t),
                    pl.colour(),
                    CLS['books'],
                    None,
                    rng.uniform(-0.3, 0.3),
                )
                zz += 2 * t
        else:  # a pybullet_data mesh
            c, s = math.cos(yaw), math.sin(yaw)
            name = CLUTTER_URDFS[int(rng.integers(len(CLUTTER_URDFS)))]
            scale = {
                'duck_vhacd.urdf': 1.0,
                'teddy_vhacd.urdf': 1.6,
                'soccerball.urdf': 0.2,
                'sphere2red.urdf': 0.15,
            }[name]
            zoff = {
                'duck_vhacd.urdf': 0.0,
                'teddy_vhacd.urdf': 0.0,
                'soccerball.urdf': 0.1,
                'sphere2red.urdf': 0.075,
            }[name]
            out.append(
                UrdfObject(
                    name,
                    (x + c * lx - s * ly, y + s * lx + c * ly, z + zoff),
                    float(rng.uniform(-3, 3)),
                    scale,
                    CLS['objects'],
                )
            )
            continue
        out.append(ob.parts)
    return out


def table(pl: Placer) -> List[object]:
    """A table (table): composed of a top and four legs, or pybullet_data's table.urdf (1.5 × 1.0 ×
    0.625 m, scaled 0.6–1.1) in about a quarter of the cases; clutter on top, chairs around if
    free."""
    rng = pl.rng
    urdf_scale = float(rng.uniform(0.6, 1.1)) if rng.random() < 0.25 else None
    if urdf_scale is None:
        w, d, h = rng.uniform(0.8, 1.8), rng.uniform(0.6, 1.0), rng.uniform(0.45, 0.8)
    else:
        w, d, h = 1.5 * urdf_scale, 1.0 * urdf_scale, 0.625 * urdf_scale
    free_standing = rng.random() < 0.6
    # a free-standing table reserves room for chairs on all sides; one against a wall gets none
    pose = pl.anywhere(w + 1.0, d + 1.0) if free_standing else None
    if pose is None:
        free_standing = False
        pose = pl.against_wall(w, d)
    if pose is None:
        return []
    x, y, yaw = pose
    out: List[object] = []
    if urdf_scale is not None:
        out.append(UrdfObject('table/table.urdf', (x, y, 0.0), yaw, urdf_scale, CLS['table']))
    else:
        ob, col, t = ObjectBuilder(x, y, yaw), _wood(pl), rng.uniform(0.02, 0.05)
        ob.box((0, 0, h - t), (w / 2, d / 2, t), col, CLS['table'], pl.texture(('wood', None)))
        leg = rng.uniform(0.02, 0.04)
        for sx in (-1, 1):
            for sy in (-1, 1):
                centre = (sx * (w / 2 - 2 * leg), sy * (d / 2 - 2 * leg), (h - 2 * t) / 2)
                if rng.random() < 0.5:
                    ob.box(centre, (leg, leg, (h - 2 * t) / 2), col, CLS['table'])
                else:
                    ob.cylinder(centre, leg, h - 2 * t, col, CLS['table'])
        out.append(ob.parts)
    out += clutter_on(pl, x, y, yaw, w, d, h)
    if free_standing:
        out += seating.chairs_around(pl, x, y, yaw, w, d)
    return out


def shelf(pl: Placer) -> List[object]:
    """Bookshelf (furniture) with rows of books (books) and a few objects."""
    rng = pl.rng
    w, d, h = rng.uniform(0.6, 1.6), rng.uniform(0.25, 0.4), rng.uniform(0.8, 2.0)
    pose = pl.against_wall(w, d)
    if pose is None:
        return []
    x, y, yaw = pose
    ob, col, t = ObjectBuilder(x, y, yaw), _wood(pl), 0.02
    tex = pl.texture(('wood', None))
    for sx in (-1, 1):
        ob.box((sx * (w / 2 - t), 0, h / 2), (t, d / 2, h / 2), col, CLS['furniture'], tex)
    ob.box((0, -d / 2 + 0.01, h / 2), (w / 2, 0.01, h / 2), col, CLS['furniture'])
    n_shelves = max(2, int(h / rng.uniform(0.3, 0.4)))
    levels = [i * h / n_shelves for i in range(n_shelves + 1)]
    for z in levels:
        ob.box((0, 0, min(max(z, t), h - t)), (w / 2, d / 2, t), col, CLS['furniture'], tex)
    books = ObjectBuilder(x, y, yaw)
    for z0, z1 in zip(levels[:-1], levels[1:]):
        xx = -w / 2 + 2 * t
        gap = z1 - z0 - 2 * t
        while xx < w / 2 - 2 * t - 0.05:
            bw = rng.uniform(0.015, 0.045)
            if rng.random() < 0.15:  # a gap
                xx += rng.uniform(0.05, 0.2)
                continue
            bh = min(gap * rng.uniform(0.6, 0.95), 0.35)
            bd = min(d * rng.uniform(0.6, 0.9), d - 0.03)
            books.box(
                (xx + bw, d / 2 - bd / 2 - 0.01, z0 + t + bh / 2),
                (bw, bd / 2, bh / 2),
                pl.colour(),
                CLS['books'],
            )
            xx += 2 * bw + 0.002
    out: List[object] = [ob.parts]
    if books.parts:
        out.append(books.parts)
    out += clutter_on(pl, x, y, yaw, w, d, h, n_max=2)
    return out


def cabinet(pl: Placer, with_tv: bool) -> List[object]:
    """Low cabinet/dresser (furniture), optionally with a TV (tv) on top."""
    rng = pl.rng
    w, d, h = rng.uniform(0.6, 1.8), rng.uniform(0.35, 0.6), rng.uniform(0.4, 1.1)
    pose = pl.against_wall(w, d)
    if pose is None:
        return []
    x, y, yaw = pose
    ob, col = ObjectBuilder(x, y, yaw), _wood(pl)
    ob.box(
        (0, 0, h / 2),
        (w / 2, d / 2, h / 2),
        col,
        CLS['furniture'],
        pl.texture(('wood', 'noise', None)),
    )
    n = int(rng.integers(1, 4))
    for i in range(n):  # drawer/door fronts with handles
        zc = h * (i + 0.5) / n
        ob.box(
            (0, d / 2 + 0.005, zc),
            (w / 2 - 0.03, 0.005, h / (2 * n) - 0.02),
            pl.colour(col[:3], 0.1),
            CLS['furniture'],
        )
        ob.box((0, d / 2 + 0.015, zc), (0.06, 0.01, 0.01), (0.7, 0.7, 0.7, 1.0), CLS['furniture'])
    out: List[object] = [ob.parts]
    if with_tv:
        out.append(tv(pl, x, y, yaw, min(w, 1.4), h))
    else:
        out += clutter_on(pl, x, y, yaw, w, d, h, n_max=3)
        if pl.nyu and rng.random() < 0.3:
            lamp = ObjectBuilder(x, y, yaw)
            nyu_items.table_lamp(pl, lamp, float(rng.uniform(-w / 3, w / 3)), 0.0, h)
            out.append(lamp.parts)
        if pl.upper_cabinet_p > 0 and rng.random() < pl.upper_cabinet_p:
            out.append(wall_decor.upper_cabinet(pl, x, y, yaw, w, d, h, col))
    return out


def tv(pl: Placer, x, y, yaw, max_w, z) -> List[Part]:
    """A flat TV (tv) on a stand at height z: foot, neck, bezel and a dark or textured screen."""
    rng = pl.rng
    w = rng.uniform(0.5, max(0.55, max_w))
    hh = w * rng.uniform(0.55, 0.62)
    ob, frame = ObjectBuilder(x, y, yaw), (0.05, 0.05, 0.06, 1.0)
    ob.box((0, 0, z + 0.02), (0.12, 0.08, 0.02), frame, CLS['tv'])
    ob.box((0, 0, z + 0.08), (0.03, 0.02, 0.06), frame, CLS['tv'])
    ob.box((0, 0, z + 0.12 + hh / 2), (w / 2, 0.03, hh / 2), frame, CLS['tv'])
    screen = pl.colour((0.1, 0.12, 0.18), 0.1) if rng.random() < 0.6 else pl.colour()
    ob.box(
        (0, 0.031, z + 0.12 + hh / 2),
        (w / 2 - 0.02, 0.002, hh / 2 - 0.02),
        screen,
        CLS['tv'],
        pl.texture(PICTURE_TEXTURES) if rng.random() < 0.4 else None,
    )
    return ob.parts


def bed(pl: Placer) -> List[object]:
    """A bed (bed) with its head against a wall: frame, mattress, headboard and pillows."""
    rng = pl.rng
    w, d = rng.uniform(0.9, 1.8), rng.uniform(1.9, 2.2)
    pose = pl.against_wall(w, d)
    if pose is None:
        return []
    x, y, yaw = pose
    ob, frame = ObjectBuilder(x, y, yaw), _wood(pl)
    ob.box((0, 0, 0.15), (w / 2, d / 2, 0.15), frame, CLS['bed'], pl.texture(('wood', None)))
    ob.box(
        (0, 0.02, 0.4),
        (w / 2 - 0.03, d / 2 - 0.05, 0.1),
        pl.colour(kind='bedding'),
        CLS['bed'],
        pl.texture(('stripes', 'carpet', 'noise', None)),
    )
    ob.box((0, -d / 2 + 0.03, 0.5), (w / 2, 0.03, rng.uniform(0.3, 0.6)), frame, CLS['bed'])
    pillow = CLS['objects'] if pl.nyu else CLS['bed']  # NYU labels pillows objects
    for sx in (-1, 1) if w > 1.3 else (0,):
        ob.box(
            (sx * w / 4, -d / 2 + 0.25, 0.55),
            (w / 4 - 0.06, 0.15, 0.06),
            pl.colour((0.9, 0.9, 0.9)),
            pillow,
        )
    if not pl.nyu:
        return [ob.parts]
    nyu_items.bed_extras(pl, ob, w, d)
    return [ob.parts] + nyu_items.night_stands(pl, x, y, yaw, w, d)


def floor_clutter(pl: Placer) -> List[object]:
    """Up to two small objects on a free 0.4 m patch of floor."""
    pose = pl.anywhere(0.4, 0.4)
    if pose is None:
        return []
    return clutter_on(pl, pose[0], pose[1], pose[2], 0.4, 0.4, 0.0, n_max=2)


def big_object(pl: Placer) -> List[object]:
    """A larger floor-standing object (objects): box stack, floor lamp, potted plant or bin."""
    rng = pl.rng
    kind = int(rng.integers(4))
    size = (0.6, 0.6) if kind == 0 else (0.45, 0.45)
    pose = pl.anywhere(*size)
    if pose is None:
        return []
    ob, cls = ObjectBuilder(*pose), CLS['objects']
    if kind == 0:
        z = 0.0
        for _ in range(int(rng.integers(1, 4))):
            hx, hy, hz = rng.uniform(0.12, 0.28), rng.uniform(0.12, 0.28), rng.uniform(0.08, 0.25)
            ob.box(
                (rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), z + hz),
                (hx, hy, hz),
                pl.colour((0.65, 0.5, 0.32), 0.1),
                cls,
                pl.texture(('noise', None)),
                rng.uniform(-0.3, 0.3),
            )
            z += 2 * hz
    elif kind == 1:
        h = rng.uniform(1.2, 1.8)
        ob.cylinder((0, 0, 0.015), 0.15, 0.03, (0.2, 0.2, 0.2, 1.0), cls)
        ob.cylinder((0, 0, h / 2), 0.015, h, (0.3, 0.3, 0.3, 1.0), cls)
        ob.cylinder(
            (0, 0, h),
            rng.uniform(0.12, 0.22),
            rng.uniform(0.15, 0.3),
            pl.colour((0.95, 0.9, 0.8), 0.1),
            cls,
        )
    elif kind == 2:
        hp = rng.uniform(0.2, 0.4)
        ob.cylinder(
            (0, 0, hp / 2), rng.uniform(0.12, 0.2), hp, pl.colour((0.6, 0.3, 0.2), 0.1), cls
        )
        for _ in range(int(rng.integers(2, 5))):
            r = rng.uniform(0.12, 0.25)
            ob.sphere(
                (rng.uniform(-0.1, 0.1), rng.uniform(-0.1, 0.1), hp + r + rng.uniform(0, 0.4)),
                r,
                pl.colour((0.2, 0.5, 0.2), 0.12),
                cls,
            )
    else:
        h = rng.uniform(0.3, 0.6)
        ob.cylinder((0, 0, h / 2), rng.uniform(0.12, 0.2), h, pl.colour(), cls)
    return [ob.parts]
