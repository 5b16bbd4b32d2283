"""depth3dseg-synth --shapes varied: chairs and sofas of varied geometry (synth.seating; lever 69
of docs/levers.md).

The checks: every variant is built, labelled as NYU labels it and stays inside the footprint its
basic template reserved and above the floor; the option changes the chairs' and sofas' geometry
and nothing else (same seed: the same rooms, footprints, cameras and other objects); it is
deterministic and recorded in the bag; the default is what it always was; a bad value is refused
by name.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from depth3dseg_ros.synth import cli, seating
from depth3dseg_ros.synth.room import make_scene
from depth3dseg_ros.synth.scene import CLS, Placer
from synthutil import read_all

SEATING = (CLS['chair'], CLS['sofa'])


def _placer(seed=0, shapes='varied'):
    return Placer(
        np.random.default_rng(seed),
        (6.0, 6.0, 2.7),
        (2.5, 2.5, 3.5, 3.5),
        nyu=True,
        shapes=shapes,
        shape_rng=np.random.default_rng([seed, 3]),
    )


def _extent(p):
    """(x0, x1, y0, y1, z0, z1) of a part in world coordinates (boxes by their turned corners)."""
    x, y, z = p.pos
    if p.shape == 'box':
        hx, hy, hz = p.size
        c, s = abs(math.cos(p.yaw)), abs(math.sin(p.yaw))
        ex, ey = hx * c + hy * s, hx * s + hy * c
        return x - ex, x + ex, y - ey, y + ey, z - hz, z + hz
    if p.shape == 'cylinder':
        r, length = p.size
        return x - r, x + r, y - r, y + r, z - length / 2, z + length / 2
    (r,) = p.size
    return x - r, x + r, y - r, y + r, z - r, z + r


@pytest.mark.parametrize('at_table', [False, True])
def test_every_chair_variant_is_a_chair_inside_its_square(at_table):
    kinds = {}
    for seed in range(120):
        pl = _placer(seed)
        s = 0.2 + 0.05 * (seed % 5) / 4  # the basic template's range of half widths
        kind = seating._pick(
            np.random.default_rng([seed, 3]),
            (seating.CHAIRS_AT_TABLE if at_table else seating.CHAIRS_LOOSE),
        )
        parts = seating.varied_chair(
            pl, 0.0, 0.0, 0.0, s, 0.45, 0.45, (0.5, 0.3, 0.2, 1.0), None, at_table
        )
        kinds[kind] = kinds.get(kind, 0) + 1
        assert parts and all(p.class_id == CLS['chair'] for p in parts)
        for p in parts:
            x0, x1, y0, y1, z0, z1 = _extent(p)
            bound = seating.CHAIR_SQUARE / 2 + 1e-9  # the square a loose chair reserves
            assert -bound <= x0 and x1 <= bound and -bound <= y0 and y1 <= bound, (kind, p)
            assert z0 >= -1e-9 and z1 < 1.6, (kind, p)
    expected = seating.CHAIRS_AT_TABLE if at_table else seating.CHAIRS_LOOSE
    assert set(kinds) == {k for k, _ in expected}  # every variant was built
    assert ('armchair' in kinds) == (not at_table)  # no armchair at a dining table


def test_office_chairs_stand_on_five_casters_and_armchairs_reach_the_floor():
    found = set()
    for seed in range(200):
        parts = seating.varied_chair(
            _placer(seed), 0.0, 0.0, 0.0, 0.22, 0.45, 0.45, (0.4, 0.4, 0.4, 1.0), None, False
        )
        spheres = [p for p in parts if p.shape == 'sphere']
        if spheres:  # only the office chair has casters
            assert len(spheres) == 5 and all(abs(p.pos[2] - p.size[0]) < 0.01 for p in spheres)
            found.add('office')
        if not spheres and max(_extent(p)[1] for p in parts) > 0.22 + 0.045:
            found.add('armchair')  # wider than the seat: the arms
        assert min(_extent(p)[4] for p in parts) < 1e-6  # something touches the floor
    assert found == {'office', 'armchair'}


def test_varied_sofa_stays_in_its_footprint_and_tells_where_pillows_lean():
    counts = set()
    for seed in range(60):
        pl = _placer(seed)
        ob = seating.ObjectBuilder(0.0, 0.0, 0.0)
        w, d = 1.4 + seed % 5 * 0.25, 0.8 + seed % 3 * 0.1
        front, top = seating.varied_sofa(
            pl, ob, w, d, (0.3, 0.3, 0.5, 1.0), None, 0.42, 0.15, 0.85
        )
        assert ob.parts and all(p.class_id == CLS['sofa'] for p in ob.parts)
        for p in ob.parts:
            x0, x1, y0, y1, z0, z1 = _extent(p)
            assert -w / 2 - 1e-9 <= x0 and x1 <= w / 2 + 1e-9, p
            assert -d / 2 - 1e-9 <= y0 and y1 <= d / 2 + 1e-9, p
            assert z0 >= -1e-9 and z1 <= 1.0 + 1e-9, p
        assert -d / 2 < front < d / 2 and 0.3 < top < 0.7
        counts.add(len(ob.parts))
    # base, back and 1-3 seat cushions; with or without legs (4), back cushions (1-3), arms (2)
    assert min(counts) >= 3 and len(counts) >= 5


def _objects(shapes, s):
    return make_scene(
        np.random.default_rng([7, s, 0]),
        'nyu',
        'random',
        None,
        shapes,
        np.random.default_rng([7, s, 3]),
    )


def test_shapes_change_seating_geometry_and_nothing_else():
    changed = 0
    for s in range(8):
        rng_a, rng_b = np.random.default_rng([7, s, 0]), np.random.default_rng([7, s, 0])
        a = make_scene(rng_a, 'nyu', 'random', None, 'varied', np.random.default_rng([7, s, 3]))
        b = make_scene(rng_b, 'nyu', 'random', None, 'basic', None)
        assert a.footprints == b.footprints and a.free_zone == b.free_zone
        assert a.light == b.light and a.fov_y_deg == b.fov_y_deg
        # the layout's generator advanced the same: the cameras drawn next are the same
        assert rng_a.bit_generator.state == rng_b.bit_generator.state
        assert len(a.objects) == len(b.objects)
        for oa, ob in zip(a.objects, b.objects):
            ids = {p.class_id for p in oa} if isinstance(oa, list) else {oa.class_id}
            if ids & set(SEATING):
                changed += oa != ob
            else:
                assert oa == ob
    assert changed > 10


def test_basic_is_the_default_and_same_seed_same_bytes_recorded(tmp_path):
    for s in range(3):
        default = make_scene(np.random.default_rng([7, s, 0]), 'nyu')
        assert default.objects == _objects('basic', s).objects
    args = dict(scenes=1, frames_per_scene=2, width=64, height=48, progress=False, layout='nyu')
    cli.generate(tmp_path / 'a', seed=5, shapes='varied', camera='handheld', **args)
    cli.generate(tmp_path / 'b', seed=5, shapes='varied', camera='handheld', **args)
    a, b = ([m[3] for m in read_all(tmp_path / n)] for n in 'ab')
    assert len(a) == 2 * 4 and a == b
    info = yaml.safe_load((tmp_path / 'a' / 'metadata.yaml').read_text())
    custom = json.loads(info['rosbag2_bagfile_information']['custom_data']['depth3dseg.synth'])
    assert custom['shapes'] == 'varied'


def test_bad_shapes_are_refused_by_name(tmp_path, capsys):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="shapes='wobbly'"):
        Placer(rng, (4, 4, 2.5), (1, 1, 2, 2), shapes='wobbly')
    with pytest.raises(ValueError, match='needs a shape_rng'):
        Placer(rng, (4, 4, 2.5), (1, 1, 2, 2), shapes='varied')
    with pytest.raises(ValueError, match="--shapes 'wobbly'"):
        cli.generate(tmp_path / 'x', 1, 1, shapes='wobbly')
    assert not (tmp_path / 'x').exists()
    with pytest.raises(SystemExit) as e:
        cli.main(['--out', str(tmp_path / 'y'), '--shapes', 'wobbly'])
    assert e.value.code == 2 and '--shapes' in capsys.readouterr().err
