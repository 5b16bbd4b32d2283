"""Wall items of real rooms labelled by NYU Depth v2's 13-class conventions (synth.nyu_items has
the table): doors (wall), curtains and blinds (window), whiteboards, mirrors and radiators
(objects). Used by the ``nyu`` layout (synth.room, synth.wall_decor).

Each function takes the scene's :class:`~depth3dseg_ros.synth.scene.Placer`; those that return
objects return a list of part lists, empty when there was no room.
"""

from __future__ import annotations

import math
from typing import List, Tuple

from depth3dseg_ros.synth.nyu_items import METAL, WHITE, fabric
from depth3dseg_ros.synth.scene import CLS, PICTURE_TEXTURES, ObjectBuilder, Placer


def wall_pose(pl: Placer, width: float, margin: float = 0.2) -> Tuple[float, float, float] | None:
    """(x, y, yaw) of a point on a random wall, at least ``margin`` + width/2 from the corners, the
    local +y pointing into the room (ObjectBuilder frame), or None if the wall is too short."""
    lx, ly, _ = pl.size
    wall = int(pl.rng.integers(4))
    along = lx if wall in (0, 2) else ly
    if width + 2 * margin > along:
        return None
    s = float(pl.rng.uniform(width / 2 + margin, along - width / 2 - margin))
    return {
        0: (s, 0.0, 0.0),
        1: (lx, s, math.pi / 2),
        2: (s, ly, math.pi),
        3: (0.0, s, -math.pi / 2),
    }[wall]


def door(pl: Placer) -> List[object]:
    """A closed door (wall, as NYU labels doors): leaf, casing and a handle plate on a random wall,
    all within 4 mm of the wall plane (a door is part of the wall's surface: M2 back-projects its
    pixels onto that plane, as the tests check); its swing area (0.9 m in front) is kept free of
    furniture."""
    rng = pl.rng
    w, hc = float(rng.uniform(0.75, 0.95)), pl.size[2]
    h = min(float(rng.uniform(1.95, 2.15)), hc - 0.15)
    pose = pl.against_wall(w + 0.2, 0.9)
    if pose is None:
        return []
    x, y, yaw = pose
    ob = ObjectBuilder(x, y, yaw)
    y0 = -0.45  # the wall plane in this footprint's frame (its back edge)
    leaf = pl.colour((0.55, 0.38, 0.22), 0.1) if rng.random() < 0.5 else pl.colour(WHITE, 0.05)
    tex = pl.texture(('wood', None, 'noise'))
    ob.box((0, y0 + 0.0015, h / 2), (w / 2, 0.0015, h / 2), leaf, CLS['wall'], tex)
    casing = pl.colour(leaf[:3], 0.05)
    for sx in (-1, 1):
        ob.box(
            (sx * (w / 2 + 0.04), y0 + 0.002, h / 2 + 0.02),
            (0.04, 0.002, h / 2 + 0.02),
            casing,
            CLS['wall'],
        )
    ob.box((0, y0 + 0.002, h + 0.04), (w / 2 + 0.08, 0.002, 0.04), casing, CLS['wall'])
    side = 1 if rng.random() < 0.5 else -1
    ob.box(
        (side * (w / 2 - 0.08), y0 + 0.0035, 1.0),
        (0.06, 0.0005, 0.03),
        pl.colour(METAL, 0.1),
        CLS['wall'],
    )
    return [ob.parts]


def _wall_panel(pl: Placer, w: float, h: float) -> Tuple[ObjectBuilder, float] | None:
    """(ObjectBuilder on a free stretch of wall, centre height zc in m: 1.3–1.6 m, below the
    ceiling by 0.1 m + h / 2) for a flat panel of width w, height h (m); None when no wall fits."""
    pose = wall_pose(pl, w)
    if pose is None:
        return None
    zc = min(float(pl.rng.uniform(1.3, 1.6)), pl.size[2] - h / 2 - 0.1)
    return ObjectBuilder(*pose), zc


def _frame(ob: ObjectBuilder, w: float, h: float, zc: float, t: float, colour, cls: int) -> None:
    """Four bars of thickness t (m), 3 cm deep, around a w × h panel centred at height zc."""
    for dz in (-1, 1):
        ob.box((0, 0.015, zc + dz * h / 2), (w / 2 + t, 0.015, t), colour, cls)
    for dx in (-1, 1):
        ob.box((dx * w / 2, 0.015, zc), (t, 0.015, h / 2), colour, cls)


def whiteboard(pl: Placer) -> List[object]:
    """A whiteboard (objects): white board in an aluminium frame with a pen tray, 1.2–2.4 m wide,
    its centre 1.3–1.6 m high."""
    rng = pl.rng
    w, h = float(rng.uniform(1.2, 2.4)), float(rng.uniform(0.9, 1.2))
    placed = _wall_panel(pl, w, h)
    if placed is None:
        return []
    ob, zc = placed
    cls = CLS['objects']
    ob.box(
        (0, 0.012, zc),
        (w / 2, 0.012, h / 2),
        pl.colour(WHITE, 0.04),
        cls,
        'noise' if rng.random() < 0.3 else None,
    )
    fr = pl.colour(METAL, 0.08)
    _frame(ob, w, h, zc, 0.02, fr, cls)
    ob.box((0, 0.05, zc - h / 2 - 0.02), (w / 3, 0.04, 0.012), fr, cls)
    return [ob.parts]


def mirror(pl: Placer) -> List[object]:
    """A wall mirror (objects): a bright, image-like pane (the room it reflects) in a thin frame,
    0.4–1.0 m wide, 0.6–1.2 m high."""
    rng = pl.rng
    w, h = float(rng.uniform(0.4, 1.0)), float(rng.uniform(0.6, 1.2))
    placed = _wall_panel(pl, w, h)
    if placed is None:
        return []
    ob, zc = placed
    cls = CLS['objects']
    ob.box(
        (0, 0.01, zc),
        (w / 2, 0.01, h / 2),
        pl.colour((0.8, 0.82, 0.85), 0.1),
        cls,
        pl.texture(PICTURE_TEXTURES + ('sky', 'noise')),
    )
    fr = pl.colour() if rng.random() < 0.5 else pl.colour(METAL, 0.1)
    _frame(ob, w, h, zc, 0.015, fr, cls)
    return [ob.parts]


def window_dressing(pl: Placer, ob: ObjectBuilder, w: float, h: float, zc: float) -> None:
    """Curtains (p 0.55: two folded panels beside the pane, down to the sill or the floor) or
    blinds (p 0.25: slats over the upper part of the pane) on a window of width w, height h
    centred at height zc in ``ob``'s frame; NYU labels both window."""
    rng, hc, cls = pl.rng, pl.size[2], CLS['window']
    r = rng.random()
    if r < 0.55:
        col = fabric(pl)
        top = min(zc + h / 2 + 0.15, hc - 0.02)
        bottom = 0.02 if rng.random() < 0.6 else max(0.02, zc - h / 2 - 0.15)
        pw = float(rng.uniform(0.25, 0.6))
        for sx in (-1, 1):
            x = sx * (w / 2 + pw / 2 - float(rng.uniform(0.0, 0.2)))
            ob.box(
                (x, 0.07, (top + bottom) / 2),
                (pw / 2, 0.04, (top - bottom) / 2),
                col,
                cls,
                'stripes',
            )
        ob.box((0, 0.1, top), (w / 2 + pw + 0.05, 0.01, 0.01), pl.colour(METAL, 0.1), cls)
    elif r < 0.8:
        col = pl.colour(WHITE, 0.1) if rng.random() < 0.6 else fabric(pl)
        cover = float(rng.uniform(0.3, 1.0)) * h
        ob.box(
            (0, 0.04, zc + h / 2 - cover / 2), (w / 2 + 0.02, 0.01, cover / 2), col, cls, 'stripes'
        )
        ob.box((0, 0.05, zc + h / 2 + 0.03), (w / 2 + 0.04, 0.03, 0.03), col, cls)


def radiator(pl: Placer, ob: ObjectBuilder, w: float, z_top: float) -> None:
    """A radiator (objects, NYU "otherstructure") on the wall below a window of width w whose sill
    is at z_top: finned white panel 0.1 m above the floor."""
    rng = pl.rng
    rw = min(w, float(rng.uniform(0.6, 1.2)))
    rh = min(float(rng.uniform(0.4, 0.6)), z_top - 0.15)
    if rh < 0.2:
        return
    ob.box(
        (0, 0.06, 0.1 + rh / 2),
        (rw / 2, 0.04, rh / 2),
        pl.colour(WHITE, 0.05),
        CLS['objects'],
        'stripes',
    )


def wall_items(pl: Placer, n_doors: int, p_whiteboard: float, p_mirror: float) -> List[object]:
    """The room's doors (wall), and with the given probabilities a whiteboard and a mirror
    (objects)."""
    out: List[object] = []
    for _ in range(n_doors):
        out += door(pl)
    if pl.rng.random() < p_whiteboard:
        out += whiteboard(pl)
    if pl.rng.random() < p_mirror:
        out += mirror(pl)
    return out
