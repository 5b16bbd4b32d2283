"""Material colour priors for the synthetic rooms (``depth3dseg-synth --palette``).

The generator's items that have no base colour (chairs, sofas, bed covers, small objects, accent
walls, picture frames, kitchen fronts) draw one from :meth:`synth.scene.Placer.colour`. With the
``'random'`` palette (the default, and what every model up to 2026-12-06 trained on) that is
uniform in RGB over 0.1–0.95 per channel, so most of those surfaces are saturated colours that
real rooms rarely have, while wood tones go to tables, shelves and cabinets only: a rendered
room teaches "brown wood is a table, a bright surface is a chair or a sofa". The ``'indoor'``
palette draws them from priors of what furniture is made of instead (chairs of wood, black or
fabric; sofas of fabric or leather; bed covers of white, cream or fabric; anything else a muted
colour), which are general furnishing facts, not fitted to any evaluation frame. The
``'furniture'`` palette applies only the chair, sofa and bed-cover priors and leaves everything
else to the 'random' draw (so muted colours stay a cue for the room's structure).

The ``'indoor'`` and ``'furniture'`` colours come from a generator of their own
(``numpy.random.default_rng([seed, scene, 2])`` in :func:`synth.cli.render_frames`), and
:meth:`Placer.colour` still draws the ``'random'`` colour from the layout's generator before it is
replaced, so the same seed gives the same rooms, cameras, depth and labels under either palette:
only the colours differ (``test/test_synth_palette.py``). Levers 58–60 of docs/levers.md measure
them.
"""

from __future__ import annotations

import colorsys
from typing import Optional, Tuple

import numpy as np

#: palettes of ``depth3dseg-synth --palette``
PALETTES = ('random', 'indoor', 'furniture')

#: kinds of item the 'indoor' palette has a prior for; any other kind (or None) is 'muted'
KINDS = ('chair', 'sofa', 'bedding', 'muted')

#: wood finishes, RGB 0..1: oak, light pine, walnut, cherry, dark stain, white paint
WOODS = (
    (0.55, 0.38, 0.22),
    (0.75, 0.6, 0.42),
    (0.35, 0.22, 0.12),
    (0.5, 0.25, 0.15),
    (0.2, 0.13, 0.08),
    (0.85, 0.85, 0.82),
)
#: upholstery fabrics, RGB 0..1: beige, burgundy, navy, grey, olive, taupe, charcoal, cream
FABRICS = (
    (0.75, 0.7, 0.6),
    (0.5, 0.15, 0.15),
    (0.2, 0.25, 0.45),
    (0.55, 0.55, 0.55),
    (0.35, 0.4, 0.3),
    (0.6, 0.5, 0.4),
    (0.25, 0.25, 0.27),
    (0.88, 0.85, 0.78),
)
#: leathers and black finishes, RGB 0..1
DARKS = ((0.1, 0.1, 0.1), (0.3, 0.18, 0.1), (0.18, 0.12, 0.08), (0.15, 0.15, 0.17))
#: bed linen, RGB 0..1: white, cream, pale blue, pale rose, light grey
LINENS = (
    (0.93, 0.93, 0.92),
    (0.9, 0.86, 0.76),
    (0.7, 0.78, 0.88),
    (0.88, 0.72, 0.72),
    (0.78, 0.78, 0.78),
)

#: per kind: (probability, family, spread) of each family the colour is drawn near
_PRIORS = {
    'chair': ((0.5, WOODS, 0.06), (0.25, DARKS, 0.05), (0.25, FABRICS, 0.1)),
    'sofa': ((0.6, FABRICS, 0.1), (0.25, DARKS, 0.05), (0.15, None, 0.0)),
    'bedding': ((0.45, LINENS, 0.05), (0.4, FABRICS, 0.1), (0.15, None, 0.0)),
}


def muted_colour(rng: np.random.Generator) -> Tuple[float, float, float]:
    """A random colour with low saturation, as most painted and dyed indoor surfaces have.

    Hue uniform, saturation ``0.65 · u^1.5`` (mean 0.26; the 'random' palette's mean is about
    0.6), value uniform in 0.15–0.9, HSV → RGB.

    Returns:
        (r, g, b) floats in 0..1.
    """
    h, u, v = rng.uniform(0.0, 1.0), rng.uniform(0.0, 1.0), rng.uniform(0.15, 0.9)
    r, g, b = colorsys.hsv_to_rgb(float(h), float(0.65 * u**1.5), float(v))
    return float(r), float(g), float(b)


def indoor_colour(rng: np.random.Generator, kind: Optional[str]) -> Tuple[float, float, float]:
    """A colour for an item of ``kind`` under the 'indoor' palette.

    ``kind`` 'chair': a wood finish (50 %), black or leather (25 %) or a fabric (25 %); 'sofa':
    a fabric (60 %), leather (25 %) or a muted colour (15 %); 'bedding': linen (45 %), a fabric
    (40 %) or a muted colour (15 %); None or 'muted': :func:`muted_colour`. A family's colour is
    its entry plus a uniform per-channel offset of ± the family's spread, clipped to 0.02–1.

    Returns:
        (r, g, b) floats in 0..1.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS` or None.
    """
    if kind is None or kind == 'muted':
        return muted_colour(rng)
    if kind not in _PRIORS:
        raise ValueError(f'kind={kind!r}: expected one of {list(KINDS)} or None')
    priors = _PRIORS[kind]
    i = int(rng.choice(len(priors), p=[p for p, _, _ in priors]))
    _, family, spread = priors[i]
    if family is None:
        return muted_colour(rng)
    base = np.asarray(family[int(rng.integers(len(family)))])
    c = np.clip(base + rng.uniform(-spread, spread, 3), 0.02, 1.0)
    return float(c[0]), float(c[1]), float(c[2])
