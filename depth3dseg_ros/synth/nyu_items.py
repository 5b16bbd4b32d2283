"""Household items of real rooms, labelled as NYU Depth v2's 13-class labels label them.

The 13 classes are NYU's 40 classes (Gupta et al. 2013) merged by a fixed table (the
``class13Mapping`` of the NYU meta data, Handa et al. 2016; docs/synthetic.md lists it). Several
common things land in a class their look does not suggest, and a generator that labels them by
look teaches the network the wrong answer on real frames:

* door -> **wall**; blinds and curtains -> **window**;
* pillow, mirror, whiteboard, clothes, towel, sink, toilet, lamp, bag, box, paper, person and
  "otherstructure"/"otherprop" -> **objects**;
* counter, refrigerator, night stand, bookshelf, shelves, dresser, cabinet -> **furniture**;
  desk -> **table**.

This module and :mod:`depth3dseg_ros.synth.nyu_wall` build the items the other recipes lack,
each labelled that way: doors (wall), curtains and blinds beside and over windows (window),
whiteboards, mirrors and radiators on the walls (objects; nyu_wall), night stands with table
lamps beside beds (furniture, objects), kitchen counter runs with a sink, upper cabinets and a
refrigerator (furniture, objects), throw pillows and piles of clothes (objects) and rugs (floor).
The ``nyu`` layout of :mod:`depth3dseg_ros.synth.room` uses them (and labels bed pillows
objects); the other layouts draw exactly what they drew before.

Conventions as in :mod:`depth3dseg_ros.synth.furniture`: each function takes the scene's
:class:`~depth3dseg_ros.synth.scene.Placer` and returns a list of objects (lists of
:class:`~depth3dseg_ros.synth.scene.Part`), empty when there was no room for it.
"""

from __future__ import annotations

import math
from typing import List

from depth3dseg_ros.synth.scene import CLS, ObjectBuilder, Placer

FABRICS = (
    (0.75, 0.7, 0.6),
    (0.55, 0.15, 0.15),
    (0.2, 0.25, 0.45),
    (0.9, 0.88, 0.82),
    (0.35, 0.4, 0.3),
    (0.6, 0.5, 0.4),
)
WHITE = (0.92, 0.92, 0.9)
METAL = (0.7, 0.7, 0.72)


def fabric(pl: Placer):
    """A random fabric colour (RGBA) near one of FABRICS."""
    return pl.colour(FABRICS[int(pl.rng.integers(len(FABRICS)))], 0.12)


def table_lamp(pl: Placer, ob: ObjectBuilder, lx: float, ly: float, z: float) -> None:
    """A table lamp (objects) standing at local (lx, ly) on a surface at height z: base, stem and
    shade."""
    rng, cls = pl.rng, CLS['objects']
    hs = float(rng.uniform(0.2, 0.4))
    ob.cylinder((lx, ly, z + 0.02), float(rng.uniform(0.05, 0.09)), 0.04, pl.colour(), cls)
    ob.cylinder((lx, ly, z + 0.04 + hs / 2), 0.012, hs, pl.colour(METAL, 0.2), cls)
    ob.cylinder(
        (lx, ly, z + 0.04 + hs + 0.08),
        float(rng.uniform(0.1, 0.18)),
        float(rng.uniform(0.14, 0.24)),
        pl.colour((0.95, 0.9, 0.8), 0.1),
        cls,
    )


def night_stands(pl: Placer, x: float, y: float, yaw: float, w: float, d: float) -> List[object]:
    """Night stands (furniture) beside a bed of width w and length d whose head is against the wall
    at x, y, yaw (bed footprint centre), each with p 0.7, each with a table lamp (objects) with
    p 0.7."""
    rng, out = pl.rng, []
    c, s = math.cos(yaw), math.sin(yaw)
    for side in (-1, 1):
        if rng.random() >= 0.7:
            continue
        nw, nd, nh = (
            float(v)
            for v in (rng.uniform(0.4, 0.55), rng.uniform(0.35, 0.45), rng.uniform(0.45, 0.65))
        )
        lx, ly = side * (w / 2 + nw / 2 + 0.05), -d / 2 + nd / 2
        cx, cy = x + c * lx - s * ly, y + s * lx + c * ly
        hx = 0.5 * (nw * abs(c) + nd * abs(s))
        hy = 0.5 * (nw * abs(s) + nd * abs(c))
        rect = (cx - hx, cy - hy, cx + hx, cy + hy)
        if not pl.free(rect, margin=0.02, zone_margin=0.1):
            continue
        pl.footprints.append(rect)
        ob = ObjectBuilder(cx, cy, yaw)
        col = pl.colour((0.55, 0.38, 0.22), 0.15)
        ob.box(
            (0, 0, nh / 2),
            (nw / 2, nd / 2, nh / 2),
            col,
            CLS['furniture'],
            pl.texture(('wood', None)),
        )
        ob.box(
            (0, nd / 2 + 0.005, nh * 0.7),
            (nw / 2 - 0.03, 0.005, nh * 0.2),
            pl.colour(col[:3], 0.1),
            CLS['furniture'],
        )
        if rng.random() < 0.7:
            table_lamp(pl, ob, 0.0, 0.0, nh)
        out.append(ob.parts)
    return out


def cushions(pl: Placer, ob: ObjectBuilder, w: float, y: float, z: float, n_max: int) -> None:
    """0..n_max throw pillows (objects) leaning on a back at local y, seat height z, over a width
    w."""
    rng = pl.rng
    for _ in range(int(rng.integers(0, n_max + 1))):
        sz = float(rng.uniform(0.14, 0.22))
        ob.box(
            (float(rng.uniform(-w / 2 + sz, w / 2 - sz)), y, z + sz),
            (sz, 0.07, sz),
            fabric(pl),
            CLS['objects'],
            pl.texture(('stripes', 'carpet', None)),
            float(rng.uniform(-0.4, 0.4)),
        )


def clothes_pile(pl: Placer, ob: ObjectBuilder, lx: float, ly: float, z: float) -> None:
    """A pile of clothes or a bag (objects) at local (lx, ly) on a surface at height z: two to four
    squashed, turned boxes of fabric colours."""
    rng = pl.rng
    zz = z
    for _ in range(int(rng.integers(2, 5))):
        hx, hy, hz = (
            float(v)
            for v in (rng.uniform(0.1, 0.3), rng.uniform(0.08, 0.25), rng.uniform(0.02, 0.08))
        )
        ob.box(
            (lx + float(rng.uniform(-0.1, 0.1)), ly + float(rng.uniform(-0.1, 0.1)), zz + hz),
            (hx, hy, hz),
            fabric(pl),
            CLS['objects'],
            pl.texture(('carpet', 'noise', None)),
            float(rng.uniform(-math.pi, math.pi)),
        )
        zz += hz


def floor_clothes(pl: Placer) -> List[object]:
    """Clothes or a bag on a free 0.6 m patch of floor (objects)."""
    pose = pl.anywhere(0.6, 0.6)
    if pose is None:
        return []
    ob = ObjectBuilder(*pose)
    clothes_pile(pl, ob, 0.0, 0.0, 0.0)
    return [ob.parts]


def kitchen(pl: Placer) -> List[object]:
    """A kitchen counter run against a wall (furniture: base cabinets with door fronts, a counter
    top, upper cabinets) with a sink and tap (objects) and, with p 0.5, a refrigerator
    (furniture) at one end."""
    rng = pl.rng
    w, d, h = float(rng.uniform(1.5, 3.0)), 0.6, float(rng.uniform(0.85, 0.95))
    fridge = rng.random() < 0.5
    fw = 0.75 if fridge else 0.0
    pose = pl.against_wall(w + fw, d + 0.05)
    if pose is None:
        return []
    x, y, yaw = pose
    ob, col = (
        ObjectBuilder(x, y, yaw),
        pl.colour() if rng.random() < 0.4 else pl.colour((0.55, 0.38, 0.22), 0.2),
    )
    x0 = -(w + fw) / 2 + fw  # the counter's left end (the fridge stands left of it)
    xc = x0 + w / 2
    ob.box(
        (xc, 0, (h - 0.04) / 2),
        (w / 2, d / 2, (h - 0.04) / 2),
        col,
        CLS['furniture'],
        pl.texture(('wood', None)),
    )
    n = max(1, int(round(w / 0.5)))
    for i in range(n):
        ob.box(
            (x0 + w * (i + 0.5) / n, d / 2 + 0.005, (h - 0.04) / 2),
            (w / (2 * n) - 0.012, 0.005, (h - 0.04) / 2 - 0.06),
            pl.colour(col[:3], 0.08),
            CLS['furniture'],
        )
    top = pl.colour((0.3, 0.3, 0.3), 0.25)
    ob.box(
        (xc, 0.01, h - 0.02),
        (w / 2 + 0.01, d / 2 + 0.01, 0.02),
        top,
        CLS['furniture'],
        pl.texture(('noise', 'tiles', None)),
    )
    sx = xc + float(rng.uniform(-w / 2 + 0.35, w / 2 - 0.35))
    ob.box((sx, 0.02, h + 0.003), (0.25, 0.2, 0.004), pl.colour(METAL, 0.1), CLS['objects'])
    ob.cylinder((sx, -d / 2 + 0.1, h + 0.15), 0.015, 0.3, pl.colour(METAL, 0.1), CLS['objects'])
    ob.box(
        (sx, -d / 2 + 0.2, h + 0.28), (0.012, 0.1, 0.012), pl.colour(METAL, 0.1), CLS['objects']
    )
    out: List[object] = [ob.parts]
    if fridge:
        fh = min(float(rng.uniform(1.6, 1.9)), pl.size[2] - 0.2)
        fo, fc = (
            ObjectBuilder(x, y, yaw),
            pl.colour(WHITE, 0.05) if rng.random() < 0.6 else (pl.colour(METAL, 0.05)),
        )
        fxc = -(w + fw) / 2 + fw / 2
        fo.box((fxc, 0, fh / 2), (fw / 2 - 0.02, d / 2, fh / 2), fc, CLS['furniture'])
        fo.box(
            (fxc, d / 2 + 0.003, fh * 0.62),
            (fw / 2 - 0.03, 0.003, 0.004),
            pl.colour(fc[:3], 0.15),
            CLS['furniture'],
        )
        for zz in (fh * 0.8, fh * 0.45):
            fo.box(
                (fxc + fw / 2 - 0.08, d / 2 + 0.02, zz),
                (0.012, 0.015, 0.12),
                pl.colour(METAL, 0.1),
                CLS['furniture'],
            )
        out.append(fo.parts)
    up = ObjectBuilder(x, y, yaw)
    du, hu = float(rng.uniform(0.3, 0.35)), float(rng.uniform(0.6, 0.8))
    z0 = min(h + float(rng.uniform(0.45, 0.6)), pl.size[2] - hu - 0.05)
    up.box((xc, -d / 2 + du / 2, z0 + hu / 2), (w / 2, du / 2, hu / 2), col, CLS['furniture'])
    for i in range(n):
        up.box(
            (x0 + w * (i + 0.5) / n, -d / 2 + du + 0.005, z0 + hu / 2),
            (w / (2 * n) - 0.012, 0.005, hu / 2 - 0.02),
            pl.colour(col[:3], 0.08),
            CLS['furniture'],
        )
    out.append(up.parts)
    for _ in range(int(rng.integers(0, 4))):  # things on the counter
        kind = rng.random()
        lx = xc + float(rng.uniform(-w / 2 + 0.15, w / 2 - 0.15))
        ly = float(rng.uniform(-d / 2 + 0.1, d / 2 - 0.15))
        if kind < 0.5:
            hh = float(rng.uniform(0.1, 0.35))
            ob.cylinder(
                (lx, ly, h + hh / 2),
                float(rng.uniform(0.04, 0.1)),
                hh,
                pl.colour(),
                CLS['objects'],
            )
        else:
            hx, hy, hz = (float(v) for v in rng.uniform(0.05, 0.18, 3))
            ob.box(
                (lx, ly, h + hz),
                (hx, hy, hz),
                pl.colour(),
                CLS['objects'],
                pl.texture(),
                float(rng.uniform(0, 3)),
            )
    return out


def bed_extras(pl: Placer, ob: ObjectBuilder, w: float, d: float) -> None:
    """On a bed of width w, length d (local frame, head at -y): a folded blanket at the foot (bed)
    with p 0.4 and a pile of clothes (objects) with p 0.3."""
    rng = pl.rng
    if rng.random() < 0.4:
        ob.box(
            (0, d / 2 - 0.35, 0.52),
            (w / 2 - 0.02, 0.25, 0.025),
            fabric(pl),
            CLS['bed'],
            pl.texture(('stripes', 'carpet', None)),
        )
    if rng.random() < 0.3:
        clothes_pile(pl, ob, float(rng.uniform(-w / 4, w / 4)), float(rng.uniform(0, d / 3)), 0.5)


def rug(pl: Placer) -> List[object]:
    """A rug (floor, as NYU labels floor mats) near the middle of the room: 1.2–2.5 m × 0.8–1.8 m,
    patterned, 3 mm thick (so its pixels lie on the floor plane to the tests' 5 mm), under
    whatever stands there; it reserves no floor."""
    rng = pl.rng
    lx, ly, _ = pl.size
    w, d = float(rng.uniform(1.2, 2.5)), float(rng.uniform(0.8, 1.8))
    x = float(rng.uniform(0.35, 0.65)) * lx
    y = float(rng.uniform(0.35, 0.65)) * ly
    ob = ObjectBuilder(x, y, float(rng.uniform(-0.3, 0.3)))
    ob.box(
        (0, 0, 0.0015),
        (w / 2, d / 2, 0.0015),
        fabric(pl),
        CLS['floor'],
        pl.texture(('carpet', 'stripes', 'picture_b', 'picture_c', 'noise')),
    )
    return [ob.parts]
