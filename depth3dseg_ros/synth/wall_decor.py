"""Wall decor for the synthetic rooms: windows (bright panes with frames) and pictures (textured
thin boxes) on the walls, NYUv2-13 classes ``window`` and ``picture``, and wall-mounted upper
cabinets (``furniture``).

Same conventions as :mod:`depth3dseg_ros.synth.furniture`: the function takes the scene's
:class:`~depth3dseg_ros.synth.scene.Placer` and returns a list of objects (lists of
:class:`~depth3dseg_ros.synth.scene.Part`).
"""

from __future__ import annotations

import math
from typing import List

from depth3dseg_ros.synth import nyu_wall
from depth3dseg_ros.synth.scene import CLS, PICTURE_TEXTURES, ObjectBuilder, Part, Placer


def wall_panels(pl: Placer, n_windows: int, n_pictures: int) -> List[object]:
    """Windows (bright panes with frames) and pictures (textured thin boxes) on the walls; with
    ``pl.nyu`` the windows also get curtains or blinds (window) and sometimes a radiator below
    (objects), synth.nyu_wall."""
    rng, (lx, ly, hc) = pl.rng, pl.size
    out: List[object] = []
    for i in range(n_windows + n_pictures):
        is_window = i < n_windows
        w = rng.uniform(0.8, 1.6) if is_window else rng.uniform(0.3, 1.0)
        h = rng.uniform(0.8, 1.3) if is_window else rng.uniform(0.3, 0.8)
        zc = rng.uniform(0.8, 1.0) + h / 2 if is_window else rng.uniform(1.2, 1.8)
        zc = min(zc, hc - h / 2 - 0.1)
        wall = int(rng.integers(4))
        along = lx if wall in (0, 2) else ly
        if w + 0.4 > along:
            continue
        s = float(rng.uniform(w / 2 + 0.2, along - w / 2 - 0.2))
        x, y, yaw = {
            0: (s, 0.0, 0.0),
            1: (lx, s, math.pi / 2),
            2: (s, ly, math.pi),
            3: (0.0, s, -math.pi / 2),
        }[wall]
        ob = ObjectBuilder(x, y, yaw)
        if is_window:
            sky = pl.colour((0.75, 0.85, 0.95), 0.1)
            ob.box(
                (0, 0.01, zc),
                (w / 2, 0.01, h / 2),
                sky,
                CLS['window'],
                'sky' if rng.random() < 0.5 else None,
                emissive=True,
            )
            fr = pl.colour((0.9, 0.9, 0.9), 0.1)
            for dz in (-1, 1):
                ob.box((0, 0.03, zc + dz * h / 2), (w / 2 + 0.03, 0.03, 0.03), fr, CLS['window'])
            for dx in (-1, 0, 1):
                ob.box(
                    (dx * w / 2, 0.03, zc), (0.02 + 0.01 * abs(dx), 0.03, h / 2), fr, CLS['window']
                )
            if pl.nyu:
                nyu_wall.window_dressing(pl, ob, w, h, zc)
                if rng.random() < 0.25:
                    nyu_wall.radiator(pl, ob, w, zc - h / 2)
        else:
            ob.box(
                (0, 0.015, zc),
                (w / 2, 0.015, h / 2),
                (1, 1, 1, 1),
                CLS['picture'],
                pl.texture(PICTURE_TEXTURES),
            )
        out.append(ob.parts)
    return out


def upper_cabinet(pl: Placer, x, y, yaw, w, d, h, col) -> List[Part]:
    """A wall-mounted cabinet (furniture) in colour ``col`` (RGBA) above a low cabinet of width w,
    depth d and height h at x, y, yaw (kitchens, offices): 0.25–0.35 m deep, 0.5–0.8 m high, its
    bottom 0.45–0.75 m above the low cabinet's top (below the ceiling), doors with handles."""
    rng = pl.rng
    du, hu = float(rng.uniform(0.25, 0.35)), float(rng.uniform(0.5, 0.8))
    z0 = min(h + float(rng.uniform(0.45, 0.75)), pl.size[2] - hu - 0.05)
    ob = ObjectBuilder(x, y, yaw)
    yc = -d / 2 + du / 2  # back against the wall, like the low cabinet's
    ob.box((0, yc, z0 + hu / 2), (w / 2, du / 2, hu / 2), col, CLS['furniture'])
    n, handle = max(1, int(round(w / 0.5))), (0.7, 0.7, 0.7, 1.0)
    for i in range(n):
        xc = -w / 2 + w * (i + 0.5) / n
        ob.box(
            (xc, yc + du / 2 + 0.005, z0 + hu / 2),
            (w / (2 * n) - 0.015, 0.005, hu / 2 - 0.02),
            pl.colour(col[:3], 0.1),
            CLS['furniture'],
        )
        ob.box((xc, yc + du / 2 + 0.015, z0 + 0.08), (0.01, 0.01, 0.05), handle, CLS['furniture'])
    return ob.parts
