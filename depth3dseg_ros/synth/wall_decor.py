"""Wall decor for the synthetic rooms: windows (bright panes with frames) and pictures (textured
thin boxes) on the walls, NYUv2-13 classes ``window`` and ``picture``.

Same conventions as :mod:`depth3dseg_ros.synth.furniture`: the function takes the scene's
:class:`~depth3dseg_ros.synth.scene.Placer` and returns a list of objects (lists of
:class:`~depth3dseg_ros.synth.scene.Part`).
"""

from __future__ import annotations

import math
from typing import List

from depth3dseg_ros.synth.scene import CLS, PICTURE_TEXTURES, ObjectBuilder, Placer


def wall_panels(pl: Placer, n_windows: int, n_pictures: int) -> List[object]:
    """Windows (bright panes with frames) and pictures (textured thin boxes) on the walls."""
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
