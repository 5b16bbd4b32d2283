"""Procedural, physically based materials for the Cycles renderer (runs beside ``bpy``).

Each plan visual's texture key (:data:`depth3dseg_ros.synth.scene.SURFACE_TEXTURES`, 'picture',
'sky') becomes a Principled BSDF whose base colour, roughness and bump come from Blender's
procedural texture nodes in *object* coordinates, which the renderer keeps in metres (meshes are
built at their true size), so wood grain, tiles, bricks and carpet have real-world scales whatever
the object's size. The plain colour (key None) still varies a little (no real wall is perfectly
uniform). Emissive visuals (window panes) get an emission shader instead. All random choices come
from the ``random.Random`` the caller passes (seeded per room), so a plan renders the same way
every time.

Only :mod:`depth3dseg_ros.synth.cycles_render` imports this module (Blender's Python environment,
not the package's).
"""

from __future__ import annotations

import colorsys
import random
from typing import Optional, Sequence

import bpy


def _rgb(c: Sequence[float]) -> tuple:
    return (float(c[0]), float(c[1]), float(c[2]), 1.0)


def _shade(c: Sequence[float], k: float) -> tuple:
    return _rgb([min(1.0, max(0.0, v * k)) for v in c[:3]])


def _srgb_to_linear(c: Sequence[float]) -> list:
    """The plan's colours are display (sRGB) values; Cycles works in linear light."""
    return [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c[:3]]


class _Tree:
    """Small helper over a material's node tree: add nodes and link sockets."""

    def __init__(self, mat):
        self.nodes, self.links = mat.node_tree.nodes, mat.node_tree.links
        self.nodes.clear()
        self.out = self.nodes.new('ShaderNodeOutputMaterial')
        coord = self.nodes.new('ShaderNodeTexCoord')
        self.obj = coord.outputs['Object']

    def new(self, kind: str, **props):
        node = self.nodes.new(kind)
        for k, v in props.items():
            setattr(node, k, v)
        return node

    def link(self, a, b):
        self.links.new(a, b)

    def ramp(self, fac, c0, c1, constant=False):
        """Colour ramp from ``c0`` to ``c1`` driven by ``fac``; returns its colour output."""
        r = self.new('ShaderNodeValToRGB')
        if constant:
            r.color_ramp.interpolation = 'CONSTANT'
        r.color_ramp.elements[0].color = c0
        r.color_ramp.elements[1].color = c1
        if constant:
            r.color_ramp.elements[1].position = 0.5
        self.link(fac, r.inputs['Fac'])
        return r.outputs['Color']

    def noise(self, scale: float, detail: float = 4.0):
        n = self.new('ShaderNodeTexNoise')
        n.inputs['Scale'].default_value = scale
        n.inputs['Detail'].default_value = detail
        self.link(self.obj, n.inputs['Vector'])
        return n


def make_material(
    name: str,
    rgba: Sequence[float],
    texture: Optional[str],
    emissive: bool,
    rng: random.Random,
    emission_strength: float = 4.0,
):
    """A new ``bpy.types.Material`` for one visual.

    Args:
        rgba: display colour 0..1 (alpha ignored).
        texture: texture key or None (plain, slightly varied colour).
        emissive: a light-emitting surface (window pane): emission of the colour at
            ``emission_strength`` (W/m²-like Cycles strength).
        rng: seeded generator for roughness, scales and palette choices.
    Raises:
        ValueError: an unknown texture key.
    """
    mat = bpy.data.materials.new(name)
    t = _Tree(mat)
    base = _srgb_to_linear(rgba)
    if emissive:
        em = t.new('ShaderNodeEmission')
        grad = t.noise(rng.uniform(0.5, 2.0), 2.0)
        col = t.ramp(grad.outputs['Fac'], _shade(base, 0.85), _shade(base, 1.1))
        t.link(col, em.inputs['Color'])
        em.inputs['Strength'].default_value = emission_strength
        t.link(em.outputs['Emission'], t.out.inputs['Surface'])
        return mat
    bsdf = t.new('ShaderNodeBsdfPrincipled')
    t.link(bsdf.outputs['BSDF'], t.out.inputs['Surface'])
    rough = rng.uniform(0.35, 0.9)
    bsdf.inputs['Roughness'].default_value = rough
    colour = _colour_pattern(t, base, texture, rng, bsdf)
    t.link(colour, bsdf.inputs['Base Color'])
    return mat


def _bump(t: _Tree, height, strength: float, bsdf) -> None:
    b = t.new('ShaderNodeBump')
    b.inputs['Strength'].default_value = strength
    b.inputs['Distance'].default_value = 0.01
    t.link(height, b.inputs['Height'])
    t.link(b.outputs['Normal'], bsdf.inputs['Normal'])


def _colour_pattern(t: _Tree, base, texture, rng: random.Random, bsdf):
    """The base-colour socket for ``texture`` (see :func:`make_material`)."""
    if texture is None:
        n = t.noise(rng.uniform(0.5, 3.0))
        return t.ramp(n.outputs['Fac'], _shade(base, 0.9), _shade(base, 1.06))
    if texture == 'wood':
        w = t.new('ShaderNodeTexWave', wave_type='BANDS', bands_direction='X')
        w.inputs['Scale'].default_value = rng.uniform(2.0, 6.0)
        w.inputs['Distortion'].default_value = rng.uniform(4.0, 12.0)
        w.inputs['Detail'].default_value = 3.0
        t.link(t.obj, w.inputs['Vector'])
        _bump(t, w.outputs['Fac'], 0.05, bsdf)
        return t.ramp(w.outputs['Fac'], _shade(base, 0.65), _shade(base, 1.1))
    if texture in ('tiles', 'brick'):
        b = t.new('ShaderNodeTexBrick', offset=0.0 if texture == 'tiles' else 0.5)
        if texture == 'tiles':
            side = rng.choice((0.2, 0.3, 0.45, 0.6))
            b.inputs['Brick Width'].default_value = side
            b.inputs['Row Height'].default_value = side
            b.inputs['Mortar Size'].default_value = 0.004
        else:
            b.inputs['Brick Width'].default_value = 0.22
            b.inputs['Row Height'].default_value = 0.075
            b.inputs['Mortar Size'].default_value = 0.01
        b.inputs['Scale'].default_value = 1.0
        b.inputs['Color1'].default_value = _shade(base, 1.0)
        b.inputs['Color2'].default_value = _shade(base, 0.85)
        b.inputs['Mortar'].default_value = _shade(base, rng.choice((0.55, 1.2)))
        t.link(t.obj, b.inputs['Vector'])
        _bump(t, b.outputs['Fac'], 0.2, bsdf)
        return b.outputs['Color']
    if texture == 'noise':
        n = t.noise(rng.uniform(4.0, 20.0), 8.0)
        _bump(t, n.outputs['Fac'], 0.1, bsdf)
        return t.ramp(n.outputs['Fac'], _shade(base, 0.75), _shade(base, 1.15))
    if texture == 'stripes':
        w = t.new('ShaderNodeTexWave', wave_type='BANDS', bands_direction=rng.choice(('X', 'Z')))
        w.inputs['Scale'].default_value = rng.uniform(3.0, 10.0)
        w.inputs['Distortion'].default_value = 0.0
        t.link(t.obj, w.inputs['Vector'])
        return t.ramp(w.outputs['Fac'], _shade(base, 0.85), _shade(base, 1.05), constant=True)
    if texture == 'carpet':
        n = t.noise(rng.uniform(150.0, 400.0), 2.0)
        _bump(t, n.outputs['Fac'], 0.4, bsdf)
        bsdf.inputs['Roughness'].default_value = 0.95
        return t.ramp(n.outputs['Fac'], _shade(base, 0.7), _shade(base, 1.1))
    if texture == 'picture':
        return _painting(t, rng)
    if texture == 'sky':
        n = t.noise(rng.uniform(0.5, 2.0))
        return t.ramp(n.outputs['Fac'], _rgb([0.5, 0.7, 1.0]), _rgb([0.95, 0.95, 1.0]))
    raise ValueError(f'texture key {texture!r} has no Cycles material')


def _painting(t: _Tree, rng: random.Random):
    """A picture: coloured patches (Voronoi cells or noise) from a random palette of 2 hues."""
    h0 = rng.random()
    c0 = colorsys.hsv_to_rgb(h0, rng.uniform(0.3, 0.9), rng.uniform(0.2, 0.9))
    c1 = colorsys.hsv_to_rgb((h0 + rng.uniform(0.2, 0.6)) % 1.0, rng.uniform(0.3, 0.9), 0.9)
    if rng.random() < 0.5:
        v = t.new('ShaderNodeTexVoronoi')
        v.inputs['Scale'].default_value = rng.uniform(3.0, 15.0)
        t.link(t.obj, v.inputs['Vector'])
        mix = t.new('ShaderNodeMix', data_type='RGBA')
        t.link(v.outputs['Color'], mix.inputs[7])  # B
        mix.inputs[0].default_value = 0.5  # Factor
        mix.inputs[6].default_value = _rgb(_srgb_to_linear(c0))  # A
        return mix.outputs[2]
    n = t.noise(rng.uniform(2.0, 8.0), 6.0)
    return t.ramp(n.outputs['Fac'], _rgb(_srgb_to_linear(c0)), _rgb(_srgb_to_linear(c1)))
