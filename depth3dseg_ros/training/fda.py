"""Fourier domain adaptation (FDA) of training RGB towards real camera images, numpy/cv2.

Yang & Soatto 2020, "FDA: Fourier Domain Adaptation for Semantic Segmentation" (CVPR): the low
frequencies of an image's amplitude spectrum carry its global appearance (colour cast, exposure,
illumination gradients, white balance) and little of its content, which lives in the phase and the
high frequencies. Replacing a synthetic frame's low-frequency amplitude with that of a real image
makes the frame look lit and recorded like the real one while every edge stays where it was, so
labels, depth and K stay exact. The real images need no labels (METHOD M5: unlabelled real frames
take part in training), and none of an evaluation set may be among them.

Per frame, with probability ``p`` (drawn from the dataset's per-sample generator, so exact resume
and DDP determinism hold):

1. a style image is drawn from the pool (the RGB of every frame of the ``style`` dataset
   directories, resized to the network input size once, its amplitude spectrum kept);
2. ``beta`` is drawn from U(``beta``); the half-width of the swapped square is
   ``b = floor(beta · min(H, W))`` frequency bins (0 = DC only: the mean colour);
3. per channel, ``rfft2`` of the frame; the amplitude in rows ``[0, b] ∪ [H − b, H)`` and
   columns ``[0, b]`` (the centred (2b+1)² square of the shifted spectrum, in rfft layout) is
   replaced by the style's, the phase kept; ``irfft2`` back, rounded and clipped to uint8.

Frames of the style directories themselves are never restyled (they are real already). The default
``beta`` range [0, 0.01] (b <= 2 bins at 240 rows) moves the mean colour and the largest gradients
only: on the flat-shaded renders, larger squares paint blob-shaped colour fields over the room.

Config (``augment.fda``): null (off), or a mapping
``{style: [DIR, ...], p: 0.5, beta: [0.0, 0.01]}`` checked by `resolve_fda`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from depth3dseg_ros.training.config_checks import check_number, check_range
from depth3dseg_ros.training.real_pool import load_rgb_pool

#: Field -> default (``style`` has none: it must be given).
DEFAULTS: dict[str, Any] = {'p': 0.5, 'beta': [0.0, 0.01]}
#: Largest ``beta``: beyond a quarter of the image the swap replaces content, not appearance.
BETA_MAX = 0.25


def resolve_fda(spec: Any, where: str = 'augment.fda') -> dict[str, Any] | None:
    """The complete, checked ``augment.fda`` table, or None when off (null / 'none' / p = 0).

    ``spec``: a mapping with ``style`` (a non-empty list of dataset directories, or one) and the
    optional ``p`` (probability per frame, [0, 1]) and ``beta`` ([min, max] in [0, 0.25]).
    Raises ValueError naming the dotted key and value (unknown field, bad value). Whether the
    directories exist is checked when the pool is loaded (`load_style_pool`).
    """
    if spec is None or (isinstance(spec, str) and spec.lower() in ('none', 'off', '')):
        return None
    if not isinstance(spec, dict):
        raise ValueError(
            f'config {where}={spec!r} must be null or a mapping '
            '{style: [dataset dirs of real images], p: ..., beta: [min, max]}'
        )
    unknown = sorted(set(spec) - set(DEFAULTS) - {'style'})
    if unknown:
        raise ValueError(
            f'config {where}.{unknown[0]} is unknown (known: {sorted([*DEFAULTS, "style"])})'
        )
    style = spec.get('style')
    if isinstance(style, str):
        style = [style]
    if (
        not isinstance(style, (list, tuple))
        or not style
        or not all(isinstance(s, str) and s for s in style)
    ):
        raise ValueError(
            f'config {where}.style={spec.get("style")!r} must be a non-empty list of dataset '
            'directories (real frames, written by depth3dseg-extract)'
        )
    table = {**DEFAULTS, **{k: v for k, v in spec.items() if k != 'style'}}
    table['p'] = check_number(table['p'], f'{where}.p', 0.0, 1.0)
    table['beta'] = check_range(table['beta'], f'{where}.beta', 0.0, BETA_MAX)
    table['style'] = [str(s) for s in style]
    return table if table['p'] > 0 else None


def amplitude(rgb: np.ndarray) -> np.ndarray:
    """|rfft2| of each channel of an H×W×3 image: float32 array H×(W//2+1)×3."""
    return np.abs(np.fft.rfft2(rgb.astype(np.float32), axes=(0, 1))).astype(np.float32)


def load_style_pool(dirs: Sequence[str | Path], wh: tuple[int, int]) -> np.ndarray:
    """Amplitude spectra of the RGB of every frame in the dataset directories ``dirs``, each
    resized to ``wh`` = (W, H) (INTER_AREA, `real_pool.load_rgb_pool`): float32
    N×H×(W//2+1)×3.

    Raises FileNotFoundError naming a missing directory or image, ValueError when the directories
    hold no frame.
    """
    return np.stack([amplitude(rgb) for rgb in load_rgb_pool(dirs, wh, 'augment.fda.style')])


def swap_low_amplitude(rgb: np.ndarray, style_amp: np.ndarray, b: int) -> np.ndarray:
    """H×W×3 uint8 ``rgb`` with the low-frequency amplitude (half-width ``b`` bins, module
    docstring) replaced by ``style_amp`` (H×(W//2+1)×3, `amplitude` of an image of the same size),
    phase kept. Returns uint8 H×W×3. Raises ValueError for mismatched shapes or b < 0."""
    h, w = rgb.shape[:2]
    if style_amp.shape != (h, w // 2 + 1, 3):
        raise ValueError(f'style amplitude shape={style_amp.shape} != {(h, w // 2 + 1, 3)}')
    if b < 0:
        raise ValueError(f'b={b} must be >= 0')
    f = np.fft.rfft2(rgb.astype(np.float32), axes=(0, 1))
    rows = np.r_[0 : min(b + 1, h), max(h - b, b + 1) : h]
    cols = slice(0, min(b + 1, w // 2 + 1))
    # only the low square is recomposed (its phase, the style's amplitude); the rest stays as is
    f[rows, cols] = style_amp[rows, cols] * np.exp(1j * np.angle(f[rows, cols]))
    out = np.fft.irfft2(f, s=(h, w), axes=(0, 1))
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def apply_fda(
    rgb: np.ndarray, rng: np.random.Generator, cfg: dict | None, pool: np.ndarray | None
) -> np.ndarray:
    """Restyle H×W×3 uint8 ``rgb`` towards a random image of ``pool`` (`load_style_pool` at the
    same size) with probability ``cfg['p']``; ``rgb`` itself when off or the draw says no. Draws
    only from ``rng``: one number when off by the draw, three when on."""
    if cfg is None or pool is None or not rng.random() < cfg['p']:
        return rgb
    k = int(rng.integers(0, len(pool)))
    beta = float(rng.uniform(*cfg['beta']))
    b = int(np.floor(beta * min(rgb.shape[:2])))
    return swap_low_amplitude(rgb, pool[k], b)
