"""One random furnished room (:func:`make_scene`): shell (floor, walls, ceiling), wall panels,
furniture, clutter, lighting and camera field of view, drawn from a ``numpy.random.Generator``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from depth3dseg_ros.synth import furniture as fu
from depth3dseg_ros.synth import nyu_items, nyu_wall, seating, wall_decor
from depth3dseg_ros.synth.scene import CLS, ObjectBuilder, SceneSpec, Placer

WALL_COLOURS = (
    (0.92, 0.9, 0.85),
    (0.85, 0.88, 0.9),
    (0.9, 0.85, 0.75),
    (0.7, 0.75, 0.7),
    (0.95, 0.95, 0.95),
)
FLOOR_COLOURS = (
    (0.55, 0.4, 0.28),
    (0.7, 0.7, 0.68),
    (0.4, 0.35, 0.3),
    (0.8, 0.75, 0.65),
    (0.3, 0.3, 0.35),
)


def _shell(pl: Placer):
    """Floor (top at z=0), ceiling (bottom at z=Hc) and four 0.1 m walls just outside the room."""
    rng, (lx, ly, hc) = pl.rng, pl.size
    floor = ObjectBuilder(lx / 2, ly / 2, 0.0)
    floor.box(
        (0, 0, -0.05),
        (lx / 2 + 0.1, ly / 2 + 0.1, 0.05),
        pl.colour(FLOOR_COLOURS[int(rng.integers(len(FLOOR_COLOURS)))], 0.08),
        CLS['floor'],
        pl.texture(('wood', 'tiles', 'carpet', 'noise', None)),
    )
    ceil = ObjectBuilder(lx / 2, ly / 2, 0.0)
    ceil.box(
        (0, 0, hc + 0.05),
        (lx / 2 + 0.1, ly / 2 + 0.1, 0.05),
        pl.colour((0.95, 0.95, 0.95), 0.05),
        CLS['ceiling'],
        pl.texture(('tiles', None, None)),
    )
    walls = ObjectBuilder(0.0, 0.0, 0.0)
    wall_col = pl.colour(WALL_COLOURS[int(rng.integers(len(WALL_COLOURS)))], 0.06)
    tex = pl.texture(('stripes', 'noise', 'brick', None, None))
    for centre, half in (
        ((lx / 2, -0.05, hc / 2), (lx / 2 + 0.1, 0.05, hc / 2 + 0.1)),
        ((lx / 2, ly + 0.05, hc / 2), (lx / 2 + 0.1, 0.05, hc / 2 + 0.1)),
        ((-0.05, ly / 2, hc / 2), (0.05, ly / 2 + 0.1, hc / 2 + 0.1)),
        ((lx + 0.05, ly / 2, hc / 2), (0.05, ly / 2 + 0.1, hc / 2 + 0.1)),
    ):
        # one wall of four is sometimes painted differently (an accent wall)
        col = pl.colour() if rng.random() < 0.15 else wall_col
        walls.box(centre, half, col, CLS['wall'], tex)
    return [floor.parts, ceil.parts, walls.parts]


#: per layout: room side range (m), free-zone fraction, (low, high) count ranges (numpy
#: ``integers``: high exclusive) of windows, pictures, tables, shelves, extra cabinets, loose
#: chairs, floor clutter groups and larger objects; factors on the number and size of the small
#: objects on every surface (furniture.clutter_on); the probability of an upper cabinet above a
#: low one (furniture.upper_cabinet).
LAYOUTS = {
    'sparse': dict(
        side=(4.0, 7.5),
        zone=0.25,
        windows=(0, 3),
        pictures=(2, 6),
        table=(1, 4),
        shelf=(1, 4),
        cabinet=(0, 3),
        chair=(1, 5),
        clutter=(1, 6),
        big=(2, 6),
        clutter_scale=1.0,
        clutter_size=1.0,
        upper_cabinet_p=0.0,
    ),
    'dense': dict(
        side=(3.5, 6.0),
        zone=0.12,
        windows=(0, 3),
        pictures=(2, 6),
        table=(1, 4),
        shelf=(1, 5),
        cabinet=(1, 4),
        chair=(2, 7),
        clutter=(3, 10),
        big=(3, 9),
        clutter_scale=1.0,
        clutter_size=1.0,
        upper_cabinet_p=0.0,
    ),
}
#: 'nyu': the dense rooms furnished and labelled by NYU's 13-class conventions (synth.nyu_items):
#: doors (wall), curtains/blinds (window), whiteboards, mirrors, radiators, lamps, pillows,
#: clothes, sinks (objects), kitchen runs and night stands (furniture), rugs (floor)
LAYOUTS['nyu'] = dict(
    LAYOUTS['dense'],
    nyu=True,
    doors=(0, 3),
    p_whiteboard=0.3,
    p_mirror=0.3,
    p_kitchen=0.35,
    clothes=(0, 3),
    p_rug=0.4,
)
#: 'nyu_large': the 'nyu' rooms at 5.5–9.5 m a side with 1.6× as many items, and the sensor's far
#: dropout at 6–9 m instead of 4–6 m (synth.noise), for hand-held views that reach as deep as real
#: rooms do: the other layouts' rendered depth has 3.5 % of its pixels beyond 4 m (99th
#: percentile 4.5 m) where the real RGB-D sample frames have 22 % (99th percentile 8.1 m), and a
#: depth head trained on them stops near 3 m on real frames (docs/levers.md).
LAYOUTS['nyu_large'] = dict(
    LAYOUTS['nyu'],
    side=(5.5, 9.5),
    windows=(1, 4),
    pictures=(3, 9),
    table=(2, 6),
    shelf=(2, 7),
    cabinet=(2, 6),
    chair=(3, 10),
    clutter=(5, 15),
    big=(5, 13),
    doors=(1, 4),
    clothes=(0, 4),
    far_holes=(6.0, 9.0),
)
LAYOUTS['cluttered'] = dict(
    LAYOUTS['dense'],
    pictures=(3, 9),
    cabinet=(2, 5),
    clutter_scale=2.5,
    clutter_size=1.6,
    upper_cabinet_p=0.6,
)


def make_scene(
    rng: np.random.Generator,
    layout: str = 'sparse',
    palette: str = 'random',
    palette_rng: Optional[np.random.Generator] = None,
    shapes: str = 'basic',
    shape_rng: Optional[np.random.Generator] = None,
) -> SceneSpec:
    """A random room with furniture along the walls and a free middle.

    ``layout`` 'sparse' (the shipped model's training set): 4–7.5 m × 4–7.5 m × 2.4–3.0 m, the
    middle 25 % × 25 % kept free for the robot's camera path; 'dense' (NYU-like rooms, for
    hand-held views across them): 3.5–6 m sides, a 12 % free middle and more of every item
    (:data:`LAYOUTS`); 'cluttered': 'dense' with 3–8 pictures, 2–4 extra cabinets (60 % with a
    wall-mounted upper cabinet) and 2.5 × as many, 1.6 × larger small objects on every surface
    (NYU's "objects" class covers 12 % of its labelled pixels). Contents (counts drawn
    per room, sparse): 0–2 windows, 2–5 pictures, 1–3 tables (free-standing ones with chairs
    around; clutter and books on top), 1–3 bookshelves with books, 0–3 cabinets (one may carry a
    TV), a sofa and/or a bed, 1–4 loose chairs, 1–5 floor clutter groups, 2–5 larger objects
    (box stacks, lamps, plants, bins); items that do not fit are dropped. Lighting: random
    direction, colour, ambient/diffuse/specular coefficients, shadows in about a quarter of the
    rooms. ``fov_y_deg`` 45–58 (Kinect-like vertical field of view). ``palette`` (synth.palette:
    'random' or 'indoor', the latter drawn from ``palette_rng``) sets the colours of the items
    without a base colour and nothing else. ``shapes`` 'varied' (synth.seating, drawn from
    ``shape_rng``) gives the chairs and sofas varied geometry and changes nothing else.

    Raises:
        ValueError: unknown ``layout``, ``palette`` or ``shapes``, 'indoor' without
            ``palette_rng`` or 'varied' without ``shape_rng``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f'layout={layout!r}: expected one of {sorted(LAYOUTS)}')
    cfg = LAYOUTS[layout]
    lx, ly, hc = (
        float(rng.uniform(*cfg['side'])),
        float(rng.uniform(*cfg['side'])),
        float(rng.uniform(2.4, 3.0)),
    )
    fw, fd = cfg['zone'] * lx, cfg['zone'] * ly
    cx, cy = lx / 2 + rng.uniform(-0.1, 0.1) * lx, ly / 2 + rng.uniform(-0.1, 0.1) * ly
    zone = (cx - fw / 2, cy - fd / 2, cx + fw / 2, cy + fd / 2)
    nyu = cfg.get('nyu', False)
    pl = Placer(
        rng,
        (lx, ly, hc),
        zone,
        cfg['clutter_scale'],
        cfg['clutter_size'],
        cfg['upper_cabinet_p'],
        nyu,
        palette,
        palette_rng,
        shapes,
        shape_rng,
    )
    spec = SceneSpec(size=(lx, ly, hc), free_zone=zone)
    spec.objects += _shell(pl)
    if nyu:  # doors first: their swing areas stay free of furniture
        spec.objects += nyu_wall.wall_items(
            pl, int(rng.integers(*cfg['doors'])), cfg['p_whiteboard'], cfg['p_mirror']
        )
    spec.objects += wall_decor.wall_panels(
        pl, int(rng.integers(*cfg['windows'])), int(rng.integers(*cfg['pictures']))
    )
    big = [seating.sofa, fu.bed] if rng.random() < 0.5 else [fu.bed, seating.sofa]
    if rng.random() < 0.35:
        big = big[:1]
    n_tv = 1 if rng.random() < 0.75 else 0
    recipes = big + [fu.table] * int(rng.integers(*cfg['table']))
    recipes += [fu.shelf] * int(rng.integers(*cfg['shelf']))
    recipes += [lambda p: fu.cabinet(p, with_tv=True)] * n_tv
    recipes += [lambda p: fu.cabinet(p, with_tv=False)] * int(rng.integers(*cfg['cabinet']))
    recipes += [seating.loose_chair] * int(rng.integers(*cfg['chair']))
    recipes += [fu.floor_clutter] * int(rng.integers(*cfg['clutter']))
    recipes += [fu.big_object] * int(rng.integers(*cfg['big']))
    if nyu:
        recipes = (
            recipes[:2] + [nyu_items.kitchen] * int(rng.random() < cfg['p_kitchen']) + recipes[2:]
        )
        recipes += [nyu_items.floor_clothes] * int(rng.integers(*cfg['clothes']))
        if rng.random() < cfg['p_rug']:
            spec.objects += nyu_items.rug(pl)
    for recipe in recipes:
        spec.objects += recipe(pl)
    spec.light = dict(
        lightDirection=[
            float(v) for v in (rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(0.8, 2.5))
        ],
        lightColor=[float(v) for v in rng.uniform(0.85, 1.0, 3)],
        lightDistance=float(rng.uniform(2.0, 5.0)),
        lightAmbientCoeff=float(rng.uniform(0.35, 0.7)),
        lightDiffuseCoeff=float(rng.uniform(0.3, 0.65)),
        lightSpecularCoeff=float(rng.uniform(0.0, 0.25)),
        shadow=int(rng.random() < 0.25),
    )
    spec.fov_y_deg = float(rng.uniform(45.0, 58.0))
    spec.footprints = list(pl.footprints)
    return spec
