"""depth3dseg-synth --palette indoor: material colour priors for chairs, sofas, bed covers and
the items without a base colour (synth.palette; lever 58 of docs/levers.md).

The checks: the colours follow their priors (chairs near a wood, black/leather or fabric entry;
muted colours under the saturation bound), the palette changes the colours and nothing else (same
seed: same rooms, depth and labels as 'random', different RGB), it is deterministic and recorded
in the bag, and a bad palette or kind is refused by name.
"""

from __future__ import annotations

import colorsys
import json

import numpy as np
import pytest
import yaml

from depth3dseg_ros.synth import cli
from depth3dseg_ros.synth.palette import (
    DARKS,
    FABRICS,
    LINENS,
    WOODS,
    indoor_colour,
    muted_colour,
)
from depth3dseg_ros.synth.room import make_scene
from depth3dseg_ros.synth.scene import CLS, Placer
from synthutil import read_all


def _sat(c):
    return colorsys.rgb_to_hsv(*c[:3])[1]


def _near(c, families, spread):
    """True when c is within ``spread`` per channel of an entry of one of ``families``."""
    return any(
        np.all(np.abs(np.asarray(c[:3]) - np.asarray(e)) <= spread + 1e-9)
        for f in families
        for e in f
    )


def test_muted_colours_are_low_saturation():
    rng = np.random.default_rng(0)
    sats = np.array([_sat(muted_colour(rng)) for _ in range(2000)])
    assert sats.max() <= 0.65 + 1e-9
    assert 0.2 < sats.mean() < 0.32  # 0.65 · E[u^1.5] = 0.26
    uniform = np.random.default_rng(1).uniform(0.1, 0.95, (2000, 3))
    assert np.mean([_sat(c) for c in uniform]) > 0.5  # what the 'random' palette gives


def test_indoor_kinds_draw_from_their_families():
    rng = np.random.default_rng(2)
    chairs = [indoor_colour(rng, 'chair') for _ in range(500)]
    assert all(_near(c, (WOODS, DARKS, FABRICS), 0.1) for c in chairs)
    woods = sum(_near(c, (WOODS,), 0.06) for c in chairs) / len(chairs)
    assert 0.4 < woods < 0.7  # 50 % wood (a few fabric/dark draws also sit near a wood)
    beds = [indoor_colour(rng, 'bedding') for _ in range(500)]
    linen = sum(_near(c, (LINENS,), 0.05) for c in beds) / len(beds)
    assert 0.35 < linen < 0.6
    for kind in ('sofa', 'bedding', None, 'muted'):
        for _ in range(200):
            c = indoor_colour(rng, kind)
            assert all(0.0 <= v <= 1.0 for v in c), (kind, c)


def test_bad_palette_or_kind_is_refused_by_name(tmp_path):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="kind='stool'"):
        indoor_colour(rng, 'stool')
    with pytest.raises(ValueError, match="palette='pastel'"):
        Placer(rng, (4, 4, 2.5), (1, 1, 2, 2), palette='pastel')
    with pytest.raises(ValueError, match='needs a palette_rng'):
        Placer(rng, (4, 4, 2.5), (1, 1, 2, 2), palette='indoor')
    with pytest.raises(ValueError, match="--palette 'pastel'"):
        cli.generate(tmp_path / 'x', 1, 1, palette='pastel')
    assert not (tmp_path / 'x').exists()


def _chair_colours(palette, n=12):
    out = []
    for s in range(n):
        sc = make_scene(
            np.random.default_rng([3, s, 0]), 'nyu', palette, np.random.default_rng([3, s, 2])
        )
        out += [
            p.rgba
            for obj in sc.objects
            if isinstance(obj, list)
            for p in obj
            if p.class_id == CLS['chair']
        ]
    return out


def test_indoor_rooms_furnish_chairs_from_the_priors_and_keep_the_layout():
    indoor, random_ = _chair_colours('indoor'), _chair_colours('random')
    assert len(indoor) == len(random_) > 20  # the same chairs ...
    assert all(_near(c, (WOODS, DARKS, FABRICS), 0.1) for c in indoor)  # ... in furniture colours
    assert not all(_near(c, (WOODS, DARKS, FABRICS), 0.1) for c in random_)
    assert np.mean([_sat(c) for c in indoor]) < np.mean([_sat(c) for c in random_])


def test_palette_changes_colours_only():
    args = dict(width=64, height=48, seed=4, noise=True, layout='nyu', camera='handheld')
    a = list(cli.render_frames(2, 2, palette='indoor', **args))
    b = list(cli.render_frames(2, 2, palette='random', **args))
    assert len(a) == len(b) == 4
    for (_, fa, da), (_, fb, db) in zip(a, b):
        np.testing.assert_array_equal(fa.labels, fb.labels)
        np.testing.assert_array_equal(fa.depth, fb.depth)
        np.testing.assert_array_equal(da, db)  # the sensor noise too
        np.testing.assert_array_equal(fa.K, fb.K)
    assert any((fa.rgb != fb.rgb).any() for (_, fa, _), (_, fb, _) in zip(a, b))


def test_indoor_palette_same_seed_same_bytes_and_recorded(tmp_path):
    args = dict(scenes=1, frames_per_scene=2, width=64, height=48, progress=False)
    cli.generate(tmp_path / 'a', seed=5, palette='indoor', **args)
    cli.generate(tmp_path / 'b', seed=5, palette='indoor', **args)
    a, b = ([m[3] for m in read_all(tmp_path / n)] for n in 'ab')
    assert len(a) == 2 * 4 and a == b
    info = yaml.safe_load((tmp_path / 'a' / 'metadata.yaml').read_text())
    custom = json.loads(info['rosbag2_bagfile_information']['custom_data']['depth3dseg.synth'])
    assert custom['palette'] == 'indoor'


def test_furniture_palette_recolours_only_chairs_sofas_and_beds():
    changed = same = 0
    for s in range(8):
        a, b = (
            make_scene(
                np.random.default_rng([3, s, 0]), 'nyu', p, np.random.default_rng([3, s, 2])
            )
            for p in ('furniture', 'random')
        )
        pa = [p for obj in a.objects if isinstance(obj, list) for p in obj]
        pb = [p for obj in b.objects if isinstance(obj, list) for p in obj]
        assert len(pa) == len(pb)
        for x, y in zip(pa, pb):
            assert (x.shape, x.size, x.pos, x.class_id) == (y.shape, y.size, y.pos, y.class_id)
            if x.class_id in (CLS['chair'], CLS['sofa'], CLS['bed']):
                changed += x.rgba != y.rgba
            else:
                assert x.rgba == y.rgba, x  # everything else keeps the random draw
                same += 1
        chairs = [p.rgba for p in pa if p.class_id == CLS['chair']]
        assert all(_near(c, (WOODS, DARKS, FABRICS), 0.1) for c in chairs)
    assert changed > 20 and same > 500
