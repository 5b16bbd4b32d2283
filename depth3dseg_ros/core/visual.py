"""Pictures a person can read: depth on one fixed metric colour scale with a colour bar in metres,
a class legend, and side-by-side panels of one frame (issue 54).

Every depth picture of a run uses the same scale, 0 m to the model's ``max_depth`` (turbo: 0 m is
dark blue, ``max_depth`` dark red; beyond it the far colour; no data black), so that a frame whose
depth tops out at 3 m looks so, instead of each picture being stretched from its own minimum to
its own maximum. ``depth3dseg-demo`` (node/demo_report.py) and ``depth3dseg-eval --grids``
(training/eval_report.py) draw with these functions. Pure numpy + OpenCV; text is OpenCV's
Hershey font (the same pixels on every machine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from depth3dseg_ros.core.imageops import colormap_lut, colorize_depth, resize_nearest

#: the colour map of every depth picture (core.imageops.colorize_depth's default)
DEPTH_COLORMAP = cv2.COLORMAP_TURBO
FONT = cv2.FONT_HERSHEY_SIMPLEX
TEXT_SCALE = 0.45
TEXT_RGB = (20, 20, 20)
BACKGROUND = 255  # white around the pictures, under titles, bar and legend
GAP = 4  # px between tiles


def check_max_depth(max_depth: float) -> float:
    """``max_depth`` as a float; ValueError naming it unless finite and > 0 (metres)."""
    value = float(max_depth)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f'max_depth={max_depth!r} must be a finite number of metres > 0')
    return value


def depth_on_scale(depth_m: np.ndarray, max_depth: float) -> np.ndarray:
    """H×W float depth (m; NaN, inf, <= 0 = no data) -> H×W×3 uint8 RGB on the fixed scale
    0..``max_depth`` m: LUT[round(d / max_depth · 255)], depth beyond ``max_depth`` in the far
    colour, no data black. Raises ValueError for a bad ``max_depth``."""
    return colorize_depth(depth_m, 0.0, check_max_depth(max_depth), DEPTH_COLORMAP)


def depth_colour(depth_m: float, max_depth: float) -> tuple[int, int, int]:
    """The RGB colour :func:`depth_on_scale` gives one depth of ``depth_m`` metres."""
    rgb = depth_on_scale(np.array([[depth_m]], dtype=np.float32), max_depth)[0, 0]
    return tuple(int(c) for c in rgb)


def text_size(text: str) -> tuple[int, int]:
    """(width, height) in px of ``text`` as this module draws it (baseline included)."""
    (w, h), base = cv2.getTextSize(text, FONT, TEXT_SCALE, 1)
    return w, h + base


def _put(img: np.ndarray, text: str, x: int, y_top: int) -> None:
    w, h = text_size(text)
    base = cv2.getTextSize(text, FONT, TEXT_SCALE, 1)[1]
    cv2.putText(img, text, (x, y_top + h - base), FONT, TEXT_SCALE, TEXT_RGB, 1, cv2.LINE_AA)


def tick_step(max_depth: float) -> float:
    """Metres between two ticks of the colour bar: 0.5, 1, 2 or 5 m, for about 4 to 10 ticks."""
    for step in (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0):
        if max_depth / step <= 10:
            return step
    return 10 ** math.ceil(math.log10(max_depth / 10))


def colour_bar(width: int, max_depth: float, bar_height: int = 14) -> np.ndarray:
    """A horizontal colour bar of the depth scale, H×``width``×3 uint8 RGB: the ramp from 0 m
    (left) to ``max_depth`` m (right) with ticks and their values in metres below it (every
    :func:`tick_step` m), titled ``depth (m), no data = black``. The column at x shows the colour
    of depth ``x / (width - 1) · max_depth``.

    Raises:
        ValueError: ``width`` < 64 px or a bad ``max_depth``.
    """
    max_depth = check_max_depth(max_depth)
    if int(width) < 64:
        raise ValueError(f'colour bar width={width!r} must be >= 64 px')
    width = int(width)
    margin = 12  # room for the first and last tick's text
    inner = width - 2 * margin
    title = f'depth (m), 0 to {max_depth:g} m, no data = black'
    th = text_size(title)[1]
    out = np.full((th + 4 + bar_height + 6 + th + 4, width, 3), BACKGROUND, np.uint8)
    _put(out, title, margin, 2)
    y0 = th + 4
    # column x is depth x / (inner - 1) * max_depth: its colour map index, as depth_on_scale's
    idx = np.rint(np.linspace(0.0, 255.0, inner)).astype(np.intp)
    out[y0 : y0 + bar_height, margin : margin + inner] = scale_colours()[idx][None, :, :]
    step = tick_step(max_depth)
    for k in range(int(math.floor(max_depth / step + 1e-9)) + 1):
        d = k * step
        x = margin + int(round(d / max_depth * (inner - 1)))
        out[y0 + bar_height : y0 + bar_height + 4, x] = TEXT_RGB
        label = f'{d:g}'
        tw = text_size(label)[0]
        _put(out, label, min(max(0, x - tw // 2), width - tw), y0 + bar_height + 5)
    return out


@dataclass(frozen=True)
class LegendEntry:
    """One class in a legend: its name, RGB colour, swatch box (x, y, w, h) and text origin."""

    name: str
    color: tuple[int, int, int]
    box: tuple[int, int, int, int]
    text_xy: tuple[int, int]


def legend_entries(
    names: Sequence[str], colors: np.ndarray, width: int, swatch: int = 12
) -> tuple[list[LegendEntry], int]:
    """Lay out a legend of every class (``names[i]`` in ``colors[i]``) in rows that fit
    ``width`` px; returns the entries and the legend's height. ``colors``: C×3 uint8 RGB.

    Raises:
        ValueError: names and colours of different lengths, or no class.
    """
    cols = np.asarray(colors)
    if cols.ndim != 2 or cols.shape[1] != 3 or len(names) != cols.shape[0] or not len(names):
        raise ValueError(
            f'legend: {len(names)} names and colours of shape {cols.shape} must be C and C×3'
        )
    row_h = max(swatch, text_size('Ag')[1]) + 4
    entries, x, y = [], 4, 4
    for name, c in zip(names, cols):
        w = swatch + 4 + text_size(name)[0] + 12
        if x > 4 and x + w > width:
            x, y = 4, y + row_h
        color = tuple(int(v) for v in c)
        entries.append(
            LegendEntry(str(name), color, (x, y + 2, swatch, swatch), (x + swatch + 4, y))
        )
        x += w
    return entries, y + row_h + 2


def legend(names: Sequence[str], colors: np.ndarray, width: int) -> np.ndarray:
    """The class legend as an H×``width``×3 uint8 RGB image: a swatch of each class's colour
    (outlined) and its name, in rows (:func:`legend_entries`)."""
    entries, height = legend_entries(names, colors, width)
    out = np.full((height, int(width), 3), BACKGROUND, np.uint8)
    for e in entries:
        x, y, w, h = e.box
        out[y : y + h, x : x + w] = e.color
        cv2.rectangle(out, (x - 1, y - 1), (x + w, y + h), TEXT_RGB, 1)
        _put(out, e.name, *e.text_xy)
    return out


def titled(img: np.ndarray, title: str) -> np.ndarray:
    """``img`` (H×W×3 uint8) with a one-line title strip above it."""
    th = text_size(title)[1] + 6
    out = np.full((th + img.shape[0], img.shape[1], 3), BACKGROUND, np.uint8)
    _put(out, title, 2, 3)
    out[th:] = img
    return out


def stack(images: Sequence[np.ndarray], width: int | None = None) -> np.ndarray:
    """Images (H×W×3 uint8) one under the other on a white background, left-aligned, as wide as
    the widest (or ``width``)."""
    w = width or max(i.shape[1] for i in images)
    out = np.full((sum(i.shape[0] for i in images) + GAP * (len(images) - 1), w, 3), BACKGROUND)
    y = 0
    for img in images:
        out[y : y + img.shape[0], : img.shape[1]] = img[:, :w]
        y += img.shape[0] + GAP
    return out.astype(np.uint8)


def side_by_side(tiles: Sequence[tuple[str, np.ndarray]], height: int) -> np.ndarray:
    """Titled tiles in a row, each resized (nearest: class colours stay pure) to ``height`` px
    high keeping its aspect; ``tiles``: (title, H×W×3 uint8 RGB). Raises ValueError when empty."""
    if not tiles:
        raise ValueError('side_by_side: no tiles')
    row = []
    for title, img in tiles:
        w = max(1, int(round(img.shape[1] * height / img.shape[0])))
        row.append(titled(resize_nearest(np.asarray(img, np.uint8), (w, int(height))), title))
    h = max(t.shape[0] for t in row)
    out = np.full((h, sum(t.shape[1] for t in row) + GAP * (len(row) - 1), 3), BACKGROUND)
    x = 0
    for t in row:
        out[: t.shape[0], x : x + t.shape[1]] = t
        x += t.shape[1] + GAP
    return out.astype(np.uint8)


def frame_panel(
    tiles: Sequence[tuple[str, np.ndarray]],
    max_depth: float,
    names: Sequence[str],
    colors: np.ndarray,
    height: int = 240,
    title: str = '',
) -> np.ndarray:
    """One frame's panel: the tiles side by side (:func:`side_by_side`), under them the depth
    colour bar (0..``max_depth`` m) and the class legend, as wide as the row; with ``title`` a
    title line above. Depth tiles must already be on the scale (:func:`depth_on_scale`)."""
    row = side_by_side(tiles, height)
    width = max(row.shape[1], 320)
    parts = [row, colour_bar(min(width, 640), max_depth), legend(names, colors, width)]
    out = stack(parts, width)
    return titled(out, title) if title else out


def labels_picture(labels: np.ndarray, colors: np.ndarray, void_id: int | None = None):
    """H×W class ids -> H×W×3 uint8 RGB in the class colours; ``void_id`` pixels black (no label).
    Raises ValueError for an id outside the palette (core.imageops.colorize_labels)."""
    from depth3dseg_ros.core.imageops import colorize_labels

    out = colorize_labels(labels, colors)
    if void_id is not None:
        out[np.asarray(labels) == void_id] = 0
    return out


def lut_index(depth_m: float, max_depth: float) -> int:
    """The colour map index (0..255) that depth ``depth_m`` takes on the 0..``max_depth`` scale."""
    return int(np.clip(np.rint(depth_m / check_max_depth(max_depth) * 255.0), 0, 255))


def scale_colours() -> np.ndarray:
    """The 256×3 uint8 RGB colours of the depth scale, near (index 0) to far (255)."""
    return colormap_lut(DEPTH_COLORMAP)
