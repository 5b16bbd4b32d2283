"""Training images painted over real label layouts: real rooms' shapes, synthetic appearance.

Real label images without their photographs still say what the synthetic rooms get wrong: where
real cameras see each class, how large, in which shapes and next to what (NYU's beds fill the lower
half of a bedroom frame; its ``objects`` are small, many and on other things; its windows are
covered by curtains). This module turns such a label image into an RGB image whose every pixel's
class is known, so the 2D head (and through predicted depth the 3D head) trains on real layouts
(METHOD M5: a frame without depth trains the terms it has):

1. Shading (:func:`layout_shading`), luminance in [0.05, 1]: a smooth global light field (a
   3×4 random grid, cubic-upsampled, log-amplitude U(0.1, 0.5)) with light from above (a vertical
   ramp of slope U(0, 0.4)); per segment (connected region of one label, 8-connected) a linear
   ramp at a random angle, amplitude U(0, 0.6) over the image diagonal, as a plane under a light
   would be; and darkening along every segment boundary, ``1 - s·exp(-d / w)`` with d the
   distance to the boundary in px, s ~ U(0, 0.5) and w ~ U(1, 6) px, as contact shadows and
   occluding contours are.
2. Appearance (:func:`paint_layout`): the shaded grey image is repainted segment by segment by
   training.texture_rand with every segment retextured and nothing of the grey kept (``p = 1``,
   ``p_segment = 1``, ``blend = 1``): random muted colours, procedural textures and, given a pool,
   real photographs (Tobin et al. 2017 domain randomisation; the texture-versus-shape argument of
   Geirhos et al. 2019). No colour can name a class; only shape, place and context can.
3. Optics: a Gaussian blur of σ ~ U(0.3, 1.0) px, as a real lens and demosaicing soften edges
   (a label boundary is otherwise a 1-px step no camera produces). The camera-true operations
   (training.camera_aug) are the caller's.

Pure numpy/cv2; every draw comes from the ``rng`` given (same seed, same bytes).
"""

from __future__ import annotations

import cv2
import numpy as np

from depth3dseg_ros.training.texture_rand import randomize_texture, resolve_texture, segments

#: texture_rand fields for painting: every segment repainted, nothing of the grey image kept.
PAINT = {'p': 1.0, 'p_segment': 1.0, 'blend': [1.0, 1.0]}
_PAINT_CFG = resolve_texture(dict(PAINT), 'layout_paint')  # checked once; never mutated
BLUR_SIGMA = (0.3, 1.0)


def layout_shading(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Luminance of a lit scene with the segments of ``labels`` (module docstring, step 1).

    Args:
        labels: H×W integer label image (any ids; void is a segment like any other).
        rng: the generator all draws come from.
    Returns:
        H×W float32 in [0.05, 1].
    Raises:
        ValueError: ``labels`` is not 2-D or is empty.
    """
    if labels.ndim != 2 or labels.size == 0:
        raise ValueError(f'labels shape={labels.shape}: expected a non-empty H×W image')
    h, w = labels.shape
    seg, n = segments(labels)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    grid = rng.standard_normal((3, 4)).astype(np.float32) * rng.uniform(0.1, 0.5)
    light = np.exp(cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC))
    light *= 1.0 - rng.uniform(0.0, 0.4) * yy / max(h - 1, 1)
    diag = float(np.hypot(h, w))
    angle = rng.uniform(0.0, 2 * np.pi, n)
    amp = rng.uniform(0.0, 0.6, n)
    count = np.maximum(np.bincount(seg.ravel(), minlength=n), 1)
    cx = np.bincount(seg.ravel(), xx.ravel(), minlength=n) / count
    cy = np.bincount(seg.ravel(), yy.ravel(), minlength=n) / count
    along = (xx - cx[seg]) * np.cos(angle)[seg] + (yy - cy[seg]) * np.sin(angle)[seg]
    ramp = 1.0 + (amp[seg] * along / diag).astype(np.float32)
    edge = np.zeros((h, w), np.uint8)
    edge[:, 1:] |= seg[:, 1:] != seg[:, :-1]
    edge[1:, :] |= seg[1:, :] != seg[:-1, :]
    d = cv2.distanceTransform(1 - edge, cv2.DIST_L2, 3)
    contact = 1.0 - rng.uniform(0.0, 0.5) * np.exp(-d / rng.uniform(1.0, 6.0))
    lum = light * ramp * contact
    lum = lum / max(float(lum.max()), 1e-6)
    return np.clip(lum, 0.05, 1.0).astype(np.float32)


def paint_layout(
    labels: np.ndarray,
    rng: np.random.Generator,
    photos: np.ndarray | None = None,
) -> np.ndarray:
    """An RGB image for the label image ``labels`` (module docstring, steps 1-3).

    Args:
        labels: H×W integer label image.
        rng: the generator all draws come from.
        photos: optional pool of real photographs, uint8 N×H×W×3 at the label image's size
            (training.real_pool.load_rgb_pool; none of an evaluation set): half of the segments
            take their appearance from them.
    Returns:
        H×W×3 uint8 RGB.
    Raises:
        ValueError: ``labels`` is not a non-empty H×W image, or ``photos`` is not its size.
    """
    lum = layout_shading(labels, rng)
    grey = cv2.convertScaleAbs(np.repeat(lum[..., None], 3, axis=2), alpha=255.0)
    rgb = randomize_texture(grey, labels, rng, _PAINT_CFG, photos)
    sigma = float(rng.uniform(*BLUR_SIGMA))
    return cv2.GaussianBlur(rgb, (0, 0), sigma)
