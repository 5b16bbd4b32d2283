"""Chairs and sofas for the synthetic rooms, basic and varied (``depth3dseg-synth --shapes``).

Under the default ``--shapes basic`` every chair is one template (a box seat, four square legs and
a slab back) and every sofa one block against a wall (:func:`chair`, :func:`sofa`). Real rooms
hold dining chairs with slatted or spindle backs, upholstered dining chairs, office chairs on a
five-star base and upholstered armchairs, and sofas on legs with separate seat and back cushions
and arms of many sizes. ``'varied'`` builds those, labelled as NYU Depth v2 labels them (an
armchair is a chair; seat and back cushions are the sofa; throw pillows stay objects).

Only chairs and sofas change: :func:`chair` and :func:`sofa` draw the basic template's sizes,
colour and texture from the layout's generator under either value (the varied builders start from
them), so the rooms, cameras and every other object stay the same; the variant and its extra
sizes come from ``Placer.shape_rng`` (``numpy.random.default_rng([seed, scene, 3])`` in
synth.cli), a generator of its own. Each variant stays inside the footprint its basic template
reserved (tested: a loose chair's CHAIR_SQUARE, a sofa's w × d), so nothing new overlaps. Lever
69 of docs/levers.md measures it.
"""

from __future__ import annotations

import math
from typing import List, Optional

from depth3dseg_ros.synth import nyu_items
from depth3dseg_ros.synth.palette import DARKS
from depth3dseg_ros.synth.scene import CLS, ObjectBuilder, Part, Placer

#: side (m) of the floor square a loose chair reserves (Placer.anywhere); every chair variant,
#: basic or varied, fits inside it
CHAIR_SQUARE = 0.55

#: chair variants and their probabilities around a table and elsewhere (a loose chair)
CHAIRS_AT_TABLE = (('solid', 0.25), ('slatted', 0.4), ('padded', 0.2), ('office', 0.15))
CHAIRS_LOOSE = (
    ('solid', 0.15),
    ('slatted', 0.15),
    ('padded', 0.1),
    ('office', 0.3),
    ('armchair', 0.3),
)

#: metal finishes of office-chair bases and chair legs, RGB 0..1: black, dark grey, chrome
METALS = ((0.05, 0.05, 0.05), (0.25, 0.25, 0.27), (0.7, 0.7, 0.72))

#: textures of upholstery (synth.render's procedural kinds; None = plain)
FABRIC_TEXTURES = ('carpet', 'noise', None)


def chair(pl: Placer, x, y, yaw, at_table: bool = False) -> List[Part]:
    """A chair (chair) facing local +y at floor pose x, y, yaw: seat, four legs and a back, or
    under ``pl.shapes == 'varied'`` one of :func:`varied_chair`'s variants (``at_table``: one
    that suits a table) with the same sizes, colour and texture."""
    rng = pl.rng
    s, h, back = rng.uniform(0.2, 0.25), rng.uniform(0.4, 0.5), rng.uniform(0.35, 0.55)
    col = pl.colour(kind='chair')
    tex = pl.texture(('wood', 'noise', None))
    if pl.shapes == 'varied':
        return varied_chair(pl, x, y, yaw, s, h, back, col, tex, at_table)
    ob = ObjectBuilder(x, y, yaw)
    ob.box((0, 0, h), (s, s, 0.025), col, CLS['chair'], tex)
    for sx in (-1, 1):
        for sy in (-1, 1):
            ob.box(
                (sx * (s - 0.02), sy * (s - 0.02), h / 2), (0.015, 0.015, h / 2), col, CLS['chair']
            )
    ob.box((0, -s + 0.02, h + back / 2), (s, 0.02, back / 2), col, CLS['chair'])
    return ob.parts


def chairs_around(pl: Placer, x, y, yaw, w, d) -> List[object]:
    """Up to four chairs facing a w×d table at x, y, yaw (each with probability 0.6)."""
    out = []
    c, s = math.cos(yaw), math.sin(yaw)
    for lx, ly, lyaw in (
        (-w / 4, -d / 2 - 0.3, 0.0),
        (w / 4, -d / 2 - 0.3, 0.0),
        (-w / 4, d / 2 + 0.3, math.pi),
        (w / 4, d / 2 + 0.3, math.pi),
    ):
        if pl.rng.random() < 0.6:
            out.append(
                chair(
                    pl,
                    x + c * lx - s * ly,
                    y + s * lx + c * ly,
                    yaw + lyaw + pl.rng.uniform(-0.3, 0.3),
                    at_table=True,
                )
            )
    return out


def loose_chair(pl: Placer) -> List[object]:
    """A chair anywhere on the free floor, randomly turned."""
    pose = pl.anywhere(CHAIR_SQUARE, CHAIR_SQUARE)
    return [] if pose is None else [chair(pl, *pose)]


def sofa(pl: Placer) -> List[object]:
    """A sofa (sofa) against a wall: base, cushion, back and two armrests, or under ``pl.shapes
    == 'varied'`` :func:`varied_sofa` (legs, separate cushions, varied arms) of the same size,
    colour and texture."""
    rng = pl.rng
    w, d = rng.uniform(1.4, 2.4), rng.uniform(0.8, 1.0)
    pose = pl.against_wall(w, d)
    if pose is None:
        return []
    ob, col = ObjectBuilder(*pose), pl.colour(kind='sofa')
    tex = pl.texture(('carpet', 'noise', 'stripes', None))
    seat, arm = rng.uniform(0.35, 0.48), rng.uniform(0.1, 0.2)
    base_col = pl.colour(col[:3], 0.05)  # drawn under either value: the layout stream stays
    back = rng.uniform(0.7, 0.95)
    pillows = (-d / 2 + 0.27, seat)  # where throw pillows lean: local y, seat height
    if pl.shapes == 'varied':
        front, top = varied_sofa(pl, ob, w, d, col, tex, seat, arm, back)
        pillows = (front + 0.07, top)
    else:
        ob.box((0, 0, 0.1), (w / 2, d / 2, 0.1), base_col, CLS['sofa'])
        ob.box(
            (0, 0.05, (0.2 + seat) / 2),
            (w / 2 - arm, d / 2 - 0.05, (seat - 0.2) / 2),
            col,
            CLS['sofa'],
            tex,
        )
        ob.box((0, -d / 2 + 0.1, back / 2), (w / 2, 0.1, back / 2), col, CLS['sofa'], tex)
        for sx in (-1, 1):
            ob.box((sx * (w / 2 - arm / 2), 0, 0.3), (arm / 2, d / 2, 0.3), col, CLS['sofa'], tex)
    if pl.nyu:  # throw pillows against the back (objects)
        nyu_items.cushions(pl, ob, w - 2 * arm, pillows[0], pillows[1], 3)
    return [ob.parts]


def _pick(rng, table) -> str:
    names, p = zip(*table)
    return names[int(rng.choice(len(names), p=p))]


def _rgba(rgb, rng, spread: float = 0.03):
    c = [min(1.0, max(0.02, float(v) + float(rng.uniform(-spread, spread)))) for v in rgb]
    return (c[0], c[1], c[2], 1.0)


def varied_chair(
    pl: Placer, x, y, yaw, s: float, h: float, back: float, col, seat_tex, at_table: bool
) -> List[Part]:
    """A chair (chair) of a random variant, facing local +y at floor pose x, y, yaw.

    ``s`` (half seat width, m), ``h`` (seat height, m), ``back`` (back height above the seat, m),
    ``col`` (RGBA) and ``seat_tex`` are the basic template's draws (:func:`chair`); the
    variant ('solid', 'slatted', 'padded', 'office' or, away from tables, 'armchair') and its
    extra sizes come from ``pl.shape_rng``. Every part lies within ±CHAIR_SQUARE / 2 m of the
    chair's centre in x and y (the square a loose chair reserves).
    """
    rng = pl.shape_rng
    kind = _pick(rng, CHAIRS_AT_TABLE if at_table else CHAIRS_LOOSE)
    ob = ObjectBuilder(x, y, yaw)
    if kind == 'office':
        _office(ob, rng, s, h, back, col)
    elif kind == 'armchair':
        _armchair(ob, rng, s, col)
    else:
        _dining(ob, rng, kind, s, h, back, col, seat_tex)
    return ob.parts


def _legs(ob: ObjectBuilder, rng, s: float, top: float, col, rear_top: Optional[float] = None):
    """Four legs under a seat of half width s whose underside is at ``top``; the rear two rise to
    ``rear_top`` when given (the posts of a slatted back). Square or round, 1.2–2.2 cm."""
    c, r = CLS['chair'], float(rng.uniform(0.012, 0.022))
    round_legs = rng.random() < 0.5
    for sx in (-1, 1):
        for sy in (-1, 1):
            z1 = rear_top if (rear_top is not None and sy < 0) else top
            centre = (sx * (s - 0.02), sy * (s - 0.02), z1 / 2)
            if round_legs:
                ob.cylinder(centre, r, z1, col, c)
            else:
                ob.box(centre, (r, r, z1 / 2), col, c)


def _feet(ob: ObjectBuilder, rng, x: float, y: float, r: float, leg: float, cls: int) -> None:
    """Four short square feet (half width r, height leg, m) at (±x, ±y) in a dark wood or black
    finish: under an armchair or a sofa."""
    dark = _rgba(DARKS[int(rng.integers(len(DARKS)))], rng)
    for sx in (-1, 1):
        for sy in (-1, 1):
            ob.box((sx * x, sy * y, leg / 2), (r, r, leg / 2), dark, cls)


def _dining(ob, rng, kind, s, h, back, col, seat_tex) -> None:
    """'solid': the basic slab back; 'slatted': rear legs rising into back posts with a top rail
    and 2–5 vertical slats or 1–3 horizontal rails; 'padded': a thick fabric seat and a padded
    back on posts."""
    c = CLS['chair']
    fabric = _rgba(col[:3], rng, 0.08)
    ftex = FABRIC_TEXTURES[int(rng.integers(len(FABRIC_TEXTURES)))]
    if kind == 'padded':
        t = float(rng.uniform(0.04, 0.07))
        pad = float(rng.uniform(0.03, 0.05))
        z0 = h + float(rng.uniform(0.08, 0.15))
        _legs(ob, rng, s, h - 2 * t, col, rear_top=z0 + 0.05)
        ob.box((0, 0.01, h - t), (s, s - 0.01, t), fabric, c, ftex)
        ob.box(
            (0, -s + pad, (z0 + h + back) / 2),
            (s - 0.01, pad, (h + back - z0) / 2),
            fabric,
            c,
            ftex,
        )
        return
    ob.box((0, 0, h), (s, s, 0.025), col, c, seat_tex)
    if kind == 'solid':
        _legs(ob, rng, s, h - 0.025, col)
        ob.box((0, -s + 0.02, h + back / 2), (s, 0.02, back / 2), col, c)
        return
    top = h + back
    _legs(ob, rng, s, h - 0.025, col, rear_top=top)
    rail = float(rng.uniform(0.025, 0.06))
    ob.box((0, -s + 0.02, top - rail), (s - 0.02, 0.015, rail), col, c)
    span = top - 2 * rail - h
    if rng.random() < 0.6:  # vertical slats / spindles
        n = int(rng.integers(2, 6))
        w = float(rng.uniform(0.008, 0.025))
        for i in range(n):
            lx = -s + 0.02 + (i + 1) * 2 * (s - 0.02) / (n + 1)
            ob.box((lx, -s + 0.02, h + span / 2), (w, 0.01, span / 2), col, c)
    else:  # horizontal rails (a ladder back)
        n = int(rng.integers(1, 4))
        for i in range(n):
            z = h + (i + 1) * span / (n + 1)
            ob.box((0, -s + 0.02, z), (s - 0.02, 0.012, float(rng.uniform(0.015, 0.04))), col, c)


def _office(ob, rng, s, h, back, col) -> None:
    """A swivel chair: five-star base with casters, gas column, padded seat and back on a post,
    armrests half the time; the base in a metal finish, seat and back in ``col``."""
    c = CLS['chair']
    metal = _rgba(METALS[int(rng.integers(len(METALS)))], rng)
    # the casters (radius 0.025) stay 5 mm inside the chair's square
    r = min(s + 0.04, float(rng.uniform(0.25, 0.3)), CHAIR_SQUARE / 2 - 0.03)
    turn = float(rng.uniform(0, 2 * math.pi / 5))
    for k in range(5):
        th = turn + 2 * math.pi * k / 5
        ob.box(
            (0.5 * r * math.cos(th), 0.5 * r * math.sin(th), 0.07),
            (0.5 * r, 0.018, 0.015),
            metal,
            c,
            None,
            th,
        )
        ob.sphere((r * math.cos(th), r * math.sin(th), 0.025), 0.025, metal, c)
    ob.cylinder((0, 0, (0.085 + h) / 2), 0.025, h - 0.085, metal, c)
    t = float(rng.uniform(0.035, 0.06))
    ob.box((0, 0.01, h + t), (s, s - 0.02, t), col, c, 'noise' if rng.random() < 0.5 else None)
    lift = float(rng.uniform(0.08, 0.14))
    ob.box((0, -s + 0.03, h + lift / 2 + t), (0.03, 0.015, lift / 2 + t), metal, c)
    ob.box(
        (0, -s + 0.05, h + 2 * t + lift + back / 2),
        (s - 0.02, float(rng.uniform(0.025, 0.05)), back / 2),
        col,
        c,
    )
    if rng.random() < 0.5:
        for sx in (-1, 1):
            ob.box((sx * (s - 0.01), -0.03, h + 0.12), (0.012, 0.012, 0.1), metal, c)
            ob.box((sx * (s - 0.01), 0.0, h + 0.22), (0.03, 0.13, 0.015), DARKS[0] + (1.0,), c)


def _armchair(ob, rng, s, col) -> None:
    """An upholstered armchair around a seat of half width ``s``: a body on short legs or to the
    floor, a seat cushion, a high back and two arms (its own seat and back heights), all in
    ``col`` with one fabric texture."""
    c = CLS['chair']
    tex = FABRIC_TEXTURES[int(rng.integers(len(FABRIC_TEXTURES)))]
    arm = float(rng.uniform(0.05, 0.07))
    half = min(s + arm, CHAIR_SQUARE / 2 - 0.005)  # outer half width, inside the chair's square
    inner = min(s, half - arm)  # the seat cushion's half width
    seat = float(rng.uniform(0.38, 0.46))
    leg = float(rng.uniform(0.06, 0.14)) if rng.random() < 0.6 else 0.0
    if leg > 0:
        _feet(ob, rng, half - 0.04, half - 0.04, 0.02, leg, c)
    body = seat - 0.1 - leg
    ob.box((0, 0, leg + body / 2), (half, half, body / 2), col, c, tex)
    ob.box((0, 0.04, seat - 0.05), (inner, half - 0.05, 0.05), _rgba(col[:3], rng, 0.04), c, tex)
    top = seat + float(rng.uniform(0.3, 0.5))
    ob.box((0, -half + 0.09, (leg + top) / 2), (half, 0.09, (top - leg) / 2), col, c, tex)
    arm_top = seat + float(rng.uniform(0.12, 0.25))
    for sx in (-1, 1):
        ob.box(
            (sx * (half - arm), 0, (leg + arm_top) / 2),
            (arm, half, (arm_top - leg) / 2),
            col,
            c,
            tex,
        )


def varied_sofa(pl: Placer, ob: ObjectBuilder, w, d, col, tex, seat, arm, back) -> tuple:
    """A sofa (sofa) of w × d m against a wall, into ``ob``: the basic template's sizes (``seat``
    height, ``arm`` width, ``back`` height, m), colour and texture; from ``pl.shape_rng``: legs or
    a plinth, arm height and width (armless 15 % of the time), 1–3 separate seat cushions and,
    60 % of the time, back cushions. Everything stays within the w × d footprint. Returns (local y
    of the back's front face, seat top height in m): where throw pillows lean."""
    rng, c = pl.shape_rng, CLS['sofa']
    if rng.random() < 0.15:
        arm = 0.0
    else:
        arm = float(min(arm, rng.uniform(0.08, 0.25)))
    leg = float(rng.uniform(0.06, 0.15)) if rng.random() < 0.55 else 0.0
    if leg > 0:
        _feet(ob, rng, w / 2 - 0.06, d / 2 - 0.06, 0.025, leg, c)
    cushion = float(rng.uniform(0.08, 0.14))
    base_top = max(leg + 0.08, seat - cushion)
    ob.box(
        (0, 0, (leg + base_top) / 2),
        (w / 2, d / 2, (base_top - leg) / 2),
        _rgba(col[:3], rng),
        c,
        tex,
    )
    back_t = float(rng.uniform(0.12, 0.2))
    ob.box(
        (0, -d / 2 + back_t / 2, (base_top + back) / 2),
        (w / 2, back_t / 2, (back - base_top) / 2),
        col,
        c,
        tex,
    )
    inner = w - 2 * arm
    n = max(1, min(3, int(round(inner / rng.uniform(0.55, 0.8)))))
    gap, depth = 0.01, d - back_t
    centres = [-inner / 2 + (i + 0.5) * inner / n for i in range(n)]  # of the cushions, in x
    for lx in centres:
        ob.box(
            (lx, -d / 2 + back_t + depth / 2, base_top + cushion / 2),
            (inner / (2 * n) - gap, depth / 2 - gap, cushion / 2),
            _rgba(col[:3], rng, 0.03),
            c,
            tex,
        )
    front = -d / 2 + back_t
    if rng.random() < 0.6:
        t = float(rng.uniform(0.1, 0.16))
        front += t
        zb = base_top + cushion
        zt = min(back + 0.05, zb + float(rng.uniform(0.35, 0.5)))
        for lx in centres:
            ob.box(
                (lx, -d / 2 + back_t + t / 2, (zb + zt) / 2),
                (inner / (2 * n) - gap, t / 2, (zt - zb) / 2),
                _rgba(col[:3], rng, 0.03),
                c,
                tex,
            )
    if arm > 0:
        arm_top = seat + float(rng.uniform(0.1, 0.3))
        for sx in (-1, 1):
            ob.box(
                (sx * (w / 2 - arm / 2), 0, (leg + arm_top) / 2),
                (arm / 2, d / 2, (arm_top - leg) / 2),
                col,
                c,
                tex,
            )
    return front, base_top + cushion
