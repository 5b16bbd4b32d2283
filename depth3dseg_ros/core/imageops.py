"""Image operations on label and depth images: nearest resize, colour maps, palette overlay.

Nearest resize maps destination pixel ``u'`` to source pixel ``floor(u' * W0 / W1)`` (the rule of
OpenCV's INTER_NEAREST, no half-pixel shift, but in exact integers: OpenCV's float scale picks the
neighbouring pixel at a few sizes, e.g. 6 -> 34 px, destination 17: source 2 there, 3 = floor(17 *
6 / 34) here), the same convention as K scaling in core.geometry
(docs/ARCHITECTURE.md), so a resized label image, a resized depth image and the scaled K stay
aligned. Labels and depth are never interpolated: bilinear invents class ids (docs/cases.md C22)
and blends valid with invalid depth (C09). Colour maps use the range of finite values only (C10).
Pure numpy + OpenCV.
"""

from __future__ import annotations

import cv2
import numpy as np

from depth3dseg_ros.core.depth import valid_depth


def _check_wh(size: tuple[int, int], name: str = 'size') -> tuple[int, int]:
    try:
        w, h = (int(size[0]), int(size[1]))
    except (TypeError, IndexError, ValueError):
        raise ValueError(f'{name}={size!r} must be (width, height)') from None
    if w <= 0 or h <= 0:
        raise ValueError(f'{name}={size!r} must be positive (width, height)')
    return w, h


def nearest_indices(src: int, dst: int) -> np.ndarray:
    """Source index of each destination index for a nearest resize: ``floor(i * src / dst)``
    (int64)."""
    return (np.arange(dst, dtype=np.int64) * src) // dst


def resize_nearest(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of an H×W or H×W×C array of any dtype to ``size=(w, h)``; dtype
    kept.

    Source pixel for destination (u', v') is (floor(u'·W0/W1), floor(v'·H0/H1)) with separate x and
    y factors (C20: a 640×480 grid over a 1280×720 image takes pixel (100, 100) from (200, 150)).

    Raises:
        ValueError: ``img`` has fewer than 2 dimensions or is empty, or ``size`` is not positive.
    """
    w, h = _check_wh(size)
    a = np.asarray(img)
    if a.ndim < 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f'image shape={a.shape} must be a non-empty H×W[×C] array')
    if a.shape[:2] == (h, w):
        return a.copy()
    rows = nearest_indices(a.shape[0], h)
    cols = nearest_indices(a.shape[1], w)
    return a[rows[:, None], cols[None, :]]


def resize_labels(labels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an H×W integer label image to ``size=(w, h)`` with nearest neighbour, dtype kept
    (C22).

    The output holds only ids present in the input: [[0,5],[5,0]] at 4×4 is
    [[0,0,5,5],[0,0,5,5],[5,5,0,0],[5,5,0,0]]. uint16 labels (ids >= 256) stay uint16.

    Raises:
        ValueError: non-integer dtype, not 2-D, or a bad ``size``.
    """
    a = np.asarray(labels)
    if a.ndim != 2 or a.dtype.kind not in 'iu':
        raise ValueError(f'labels shape={a.shape} dtype={a.dtype} must be an H×W integer array')
    return resize_nearest(a, size)


def resize_depth(depth: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an H×W depth image to ``size=(w, h)`` with nearest neighbour, never blending (C09).

    Works for float32 metres (NaN stays NaN) and uint16 millimetres (0 stays 0): every output pixel
    is a copy of one input pixel, so no valid-looking value is made from an invalid neighbour.

    Raises:
        ValueError: not 2-D, or a bad ``size``.
    """
    a = np.asarray(depth)
    if a.ndim != 2:
        raise ValueError(f'depth shape={a.shape} must be H×W')
    return resize_nearest(a, size)


def check_rgb(rgb: object) -> np.ndarray:
    """``rgb`` if it is an H×W×3 uint8 array (RGB order assumed), else ValueError naming its dtype
    and shape (case C05: convert 4-channel and mono images first)."""
    if not (
        isinstance(rgb, np.ndarray)
        and rgb.dtype == np.uint8
        and rgb.ndim == 3
        and rgb.shape[2] == 3
    ):
        desc = f'{rgb.dtype} {rgb.shape}' if isinstance(rgb, np.ndarray) else type(rgb).__name__
        raise ValueError(
            f'rgb must be an H×W×3 uint8 RGB image, got {desc} (convert 4-channel/mono '
            'images first, case C05)'
        )
    return rgb


def measured_at(depth: object, rgb_shape: tuple, size: tuple[int, int]) -> np.ndarray:
    """A measured depth image H×W (float metres, registered to an RGB image of ``rgb_shape``) at
    ``size`` (W, H): a contiguous float32 array, nearest neighbour (resize_depth: no blended depth
    at edges). Raises ValueError for a non-float or non-2D depth (16UC1 millimetres must be
    converted with core.depth.depth_to_meters) or one whose size is not the RGB's."""
    depth = np.asarray(depth)
    if depth.ndim != 2 or depth.dtype.kind != 'f':
        raise ValueError(
            f'depth must be an H×W float array in metres, got {depth.dtype} {depth.shape} '
            '(convert 16UC1 millimetres with core.depth.depth_to_meters)'
        )
    if depth.shape != tuple(rgb_shape[:2]):
        raise ValueError(
            f'depth size {depth.shape[1]}×{depth.shape[0]} != rgb size '
            f'{rgb_shape[1]}×{rgb_shape[0]}: the depth must be registered to the colour image'
        )
    return np.ascontiguousarray(resize_depth(depth.astype(np.float32, copy=False), size))


def label_image(labels: np.ndarray) -> np.ndarray:
    """Return ``labels`` in the narrowest label-image dtype: uint8 (mono8) if all ids < 256, else
    uint16 (C22).

    Raises:
        ValueError: negative ids or ids > 65535 (they cannot be published as 16UC1 without
            wrapping).
    """
    a = np.asarray(labels)
    if a.dtype.kind not in 'iub':
        raise ValueError(f'labels dtype={a.dtype} must be integer class ids')
    if a.size == 0:
        return a.astype(np.uint8)
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi > 65535:
        raise ValueError(f'label ids range [{lo}, {hi}] does not fit a 16UC1 label image')
    return a.astype(np.uint8 if hi < 256 else np.uint16, copy=False)


def check_same_hw(**arrays: np.ndarray | None) -> tuple[int, int]:
    """Check that all given arrays (None skipped) share the same H×W; return (H, W) (C20).

    Raises:
        ValueError: listing every array's name, W×H size and dtype, e.g.
            ``size mismatch: depth is 640x480 (float32), rgb is 1280x720 (uint8)``.
    """
    given = {k: np.asarray(v) for k, v in arrays.items() if v is not None}
    if not given:
        raise ValueError('check_same_hw needs at least one array')
    for k, v in given.items():
        if v.ndim < 2:
            raise ValueError(f'{k} shape={v.shape} must be H×W[×C]')
    sizes = {v.shape[:2] for v in given.values()}
    if len(sizes) > 1:
        desc = ', '.join(f'{k} is {v.shape[1]}x{v.shape[0]} ({v.dtype})' for k, v in given.items())
        raise ValueError(f'size mismatch (W x H): {desc}; resample with separate x/y scales first')
    h, w = next(iter(sizes))
    return h, w


def depth_to_u8(
    depth_m: np.ndarray, vmin: float | None = None, vmax: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Scale depth to 0..255 over the range of finite, positive values only (C10).

    Args:
        depth_m: H×W float depth (m). NaN, ±inf and <= 0 are no data.
        vmin, vmax: fixed range; by default min/max over valid pixels ([[NaN,1],[3,inf]] -> 1..3).
    Returns:
        (u8 H×W uint8, valid H×W bool); invalid pixels are 0 in ``u8`` and False in ``valid``.
    """
    d = np.asarray(depth_m, dtype=np.float32)
    valid = valid_depth(d)
    u8 = np.zeros(d.shape, dtype=np.uint8)
    if not valid.any():
        return u8, valid
    vals = d[valid]
    lo = float(vals.min()) if vmin is None else float(vmin)
    hi = float(vals.max()) if vmax is None else float(vmax)
    span = hi - lo
    if not np.isfinite(span) or span <= 0:
        return u8, valid
    scaled = np.clip((vals.astype(np.float64) - lo) / span * 255.0, 0.0, 255.0)
    u8[valid] = np.rint(scaled).astype(np.uint8)
    return u8, valid


def colormap_lut(colormap: int = cv2.COLORMAP_TURBO) -> np.ndarray:
    """256×3 uint8 RGB lookup table of an OpenCV colour map (OpenCV's BGR converted to RGB)."""
    ramp = np.arange(256, dtype=np.uint8).reshape(256, 1)
    return np.ascontiguousarray(cv2.applyColorMap(ramp, colormap)[:, 0, ::-1])


def colorize_depth(
    depth_m: np.ndarray,
    vmin: float | None = None,
    vmax: float | None = None,
    colormap: int = cv2.COLORMAP_TURBO,
) -> np.ndarray:
    """Colourise metric depth as H×W×3 uint8 RGB: colour map over the finite range, no data black
    (C10).

    See :func:`depth_to_u8` for the scaling; the near end maps to LUT[0], the far end to LUT[255].
    """
    u8, valid = depth_to_u8(depth_m, vmin, vmax)
    out = colormap_lut(colormap)[u8]
    out[~valid] = 0
    return out


def _check_palette(palette: np.ndarray) -> np.ndarray:
    p = np.asarray(palette)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] == 0:
        raise ValueError(f'palette shape={p.shape} must be C×3 RGB')
    return p.astype(np.uint8, copy=False)


def colorize_labels(labels: np.ndarray, palette: np.ndarray) -> np.ndarray:
    """Palette lookup: H×W class ids -> H×W×3 uint8 RGB (``palette[id]``; ClassSet.colors is the
    palette).

    Resize labels first (nearest, :func:`resize_labels`), then colourise (C22).

    Raises:
        ValueError: non-integer labels, a palette not C×3, or an id >= C (names the id and C).
    """
    p = _check_palette(palette)
    a = np.asarray(labels)
    if a.dtype.kind not in 'iu':
        raise ValueError(f'labels dtype={a.dtype} must be integer class ids')
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= p.shape[0]:
            raise ValueError(
                f'label id {lo if lo < 0 else hi} outside palette of {p.shape[0]} colours'
            )
    return p[a]


def overlay(
    rgb: np.ndarray,
    labels: np.ndarray,
    palette: np.ndarray,
    alpha: float = 0.5,
    skip_id: int | None = None,
) -> np.ndarray:
    """Blend palette colours over an RGB image: ``(1-alpha)*rgb + alpha*palette[labels]``, rounded.

    Args:
        rgb: H×W×3 uint8 RGB.
        labels: H×W class ids at the same size (resize with :func:`resize_labels` first).
        palette: C×3 uint8 RGB colours.
        alpha: opacity of the label colour in [0, 1].
        skip_id: pixels with this id (e.g. the void id) keep the plain RGB.
    Returns:
        H×W×3 uint8 RGB.
    Raises:
        ValueError: alpha outside [0, 1], rgb not H×W×3, or a size mismatch (both sizes named).
    """
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f'alpha={alpha} must be in [0, 1]')
    img = np.asarray(rgb)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f'rgb shape={img.shape} must be H×W×3')
    check_same_hw(rgb=img, labels=labels)
    colours = colorize_labels(labels, palette)
    out = np.rint((1.0 - alpha) * img.astype(np.float32) + alpha * colours.astype(np.float32))
    out = out.astype(np.uint8)
    if skip_id is not None:
        keep = np.asarray(labels) == skip_id
        out[keep] = img[keep]
    return out
