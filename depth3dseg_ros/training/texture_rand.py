"""Label-guided texture and colour randomisation of training RGB (domain randomisation), numpy/cv2.

The synthetic rooms are flat-shaded with a few saturated colours per class (a blue sofa, a red
chair), so a network trained on them can name a class from its colour alone. Real rooms break that
shortcut. Domain randomisation (Tobin et al. 2017, "Domain randomization for transferring deep
neural networks from simulation to the real world"; Tremblay et al. 2018) replaces the appearance
of surfaces with random appearance at training time, so that only shape, layout and shading are
reliable cues. Here it is done in image space, after rendering, with the label image:

1. Segments: the connected regions of each label id (8-connectivity; void included), so two chairs
   get two appearances.
2. Shading: each pixel's luminance over its segment's mean luminance (clipped to [0.25, 2.5]): the
   renderer's lighting (shadowed sides, fall-off, edges) survives the recolouring.
3. Per segment, with probability ``p_segment``: a base colour drawn in HSV (any hue; saturation
   U(0, 1)² · ``max_saturation``, mostly muted as indoor surfaces are; value U(``value``)) times a
   procedural texture (flat, value noise over 2–32 px, or stripes/grain of period 3–24 px at any
   angle, amplitude U(0, ``texture``)), times the shading, then blended with the original by
   U(``blend``).

4. Photo textures (``photo``: dataset directories of unlabelled real frames, none of an evaluation
   set): a retextured segment takes, with probability ``p_photo``, its colour and detail from a
   real photograph instead of a procedural texture: one of three real frames of the pool drawn for
   the frame, each scaled by U(0.5, 2), rotated by U(−180°, 180°), mirrored with probability 0.5
   and shifted (reflected at the borders), times the segment's shading. Real photographs bring
   what the procedural textures lack (clutter, fine edges, real colour statistics, sensor noise)
   inside regions whose label comes from their shape and place alone, so internal texture stops
   naming a class: the texture-versus-shape shortcut of Geirhos et al. 2019 ("ImageNet-trained
   CNNs are biased towards texture"), here against real textures.

   With ``photo_labels: false`` a frame repainted while photo textures are on keeps its depth
   and K but loses its labels: it trains the depth and consistency terms only (METHOD M5). Real
   photographs take away the appearance that names many classes (a whiteboard and a wall, a
   window and a picture differ by little else) but none of the geometry the depth head needs.

It runs before the camera-true ops (training.camera_aug) and the colour jitter: appearance of the
scene first, then the camera. Depth and K are untouched, and so are the labels but for
``photo_labels: false``. All randomness comes from the
dataset's per-sample generator (exact resume and DDP determinism hold); with ``p = 0`` nothing is
drawn and the frame stays byte-identical.

Config (``augment.texture``): null / 'none' (off), 'domain_rand' (the preset below), or a mapping
``{preset?: NAME, field: value, ...}`` checked by `resolve_texture`.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.training.config_checks import check_number, check_range, spec_mapping

#: Field -> (default, kind, lo, hi); the preset below turns it on.
FIELDS: dict[str, tuple[Any, str, float, float]] = {
    'p': (0.0, 'num', 0.0, 1.0),  # probability for a frame
    'p_segment': (0.8, 'num', 0.0, 1.0),  # probability for each segment of such a frame
    'max_saturation': (0.7, 'num', 0.0, 1.0),
    'value': ([0.2, 0.95], 'range', 0.0, 1.0),
    'texture': (0.35, 'num', 0.0, 1.0),  # largest texture amplitude (relative)
    'blend': ([0.6, 1.0], 'range', 0.0, 1.0),  # weight of the new appearance
    'p_photo': (0.5, 'num', 0.0, 1.0),  # share of retextured segments that take a photo (`photo`)
}
#: Photo textures: draws per frame (each a real frame of the pool, warped), scale range.
PHOTOS_PER_FRAME = 3
PHOTO_SCALE = (0.5, 2.0)
PRESETS: dict[str, dict[str, Any]] = {'domain_rand': {'p': 0.8}}


def resolve_texture(spec: Any, where: str = 'augment.texture') -> dict[str, Any] | None:
    """The complete, checked field table of an ``augment.texture`` value, or None when off.

    ``spec``: None / 'none' / a preset name (`PRESETS`) / a mapping ``{preset?: NAME, field: v}``.
    Raises ValueError naming the dotted key (unknown preset or field; value out of range).
    """
    spec = spec_mapping(spec, where, PRESETS)
    if spec is None:
        return None
    table = {k: v[0] for k, v in FIELDS.items()}
    preset = spec.get('preset')
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(
                f'config {where}.preset={preset!r} is unknown (known: {sorted(PRESETS)})'
            )
        table.update(PRESETS[preset])
    table['photo'], table['photo_labels'] = [], True
    for k, v in spec.items():
        if k == 'preset':
            continue
        if k not in FIELDS and k not in ('photo', 'photo_labels'):
            raise ValueError(
                f"config {where}.{k} is unknown "
                f"(known: {sorted([*FIELDS, 'photo', 'photo_labels'])})"
            )
        table[k] = v
    for k, (_, kind, lo, hi) in FIELDS.items():
        check = check_range if kind == 'range' else check_number
        table[k] = check(table[k], f'{where}.{k}', lo, hi)
    photo = table['photo']
    if photo is None:
        photo = []
    if not isinstance(photo, (list, tuple)) or not all(isinstance(d, str) and d for d in photo):
        raise ValueError(
            f'config {where}.photo={photo!r} must be a list of dataset directories '
            '(unlabelled real frames)'
        )
    table['photo'] = list(photo)
    if not isinstance(table['photo_labels'], bool):
        raise ValueError(
            f"config {where}.photo_labels={table['photo_labels']!r} must be true or false"
        )
    return table if table['p'] > 0 else None


def segments(labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Connected regions of each label id: (H×W int32 segment ids 0..n-1, n). 8-connectivity."""
    seg = np.zeros(labels.shape, np.int32)
    n = 0
    for c in np.unique(labels):
        k, comp = cv2.connectedComponents((labels == c).astype(np.uint8), connectivity=8)
        m = comp > 0
        seg[m] = comp[m] + (n - 1)
        n += k - 1
    return seg, n


def texture_fields(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Three zero-mean procedural fields of H×W, unit-ish amplitude, float32 (3, H, W): value
    noise (2–32 px), stripes/grain (period 3–24 px, any angle, noise-warped), fine noise."""
    out = np.empty((3, h, w), np.float32)
    cell = float(rng.uniform(2.0, 32.0))
    gh, gw = max(2, int(h / cell) + 2), max(2, int(w / cell) + 2)
    grid = rng.standard_normal((gh, gw)).astype(np.float32)
    out[0] = cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
    a = rng.uniform(0.0, np.pi)
    period = rng.uniform(3.0, 24.0)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    warp = cv2.resize(
        rng.standard_normal((max(2, h // 16), max(2, w // 16))).astype(np.float32),
        (w, h),
        interpolation=cv2.INTER_CUBIC,
    )
    phase = (np.cos(a) * xx + np.sin(a) * yy) * (2 * np.pi / period) + 2.0 * warp
    out[1] = np.sin(phase)
    out[2] = rng.standard_normal((h, w)).astype(np.float32) * 0.5
    return out


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """HSV (h in [0, 1), s, v in [0, 1]) of N colours -> N×3 float32 RGB in [0, 1]."""
    hsv = np.stack([h * 180.0, s * 255.0, v * 255.0], -1).astype(np.uint8)[None]
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0].astype(np.float32) / 255.0


def photo_fields(rng: np.random.Generator, pool: np.ndarray) -> np.ndarray:
    """`PHOTOS_PER_FRAME` real frames of ``pool`` (uint8 N×H×W×3 at the frame's size), each
    scaled by U(`PHOTO_SCALE`), rotated by U(−180°, 180°) about a random centre, mirrored with
    probability 0.5 and reflected at the borders: float32 (PHOTOS_PER_FRAME, H, W, 3) in [0, 1]."""
    n, h, w = pool.shape[:3]
    out = np.empty((PHOTOS_PER_FRAME, h, w, 3), np.float32)
    for j in range(PHOTOS_PER_FRAME):
        k = int(rng.integers(0, n))
        scale = float(rng.uniform(*PHOTO_SCALE))
        angle = float(rng.uniform(-180.0, 180.0))
        cx, cy = float(rng.uniform(0, w)), float(rng.uniform(0, h))
        src = pool[k][:, ::-1] if rng.random() < 0.5 else pool[k]
        M = cv2.getRotationMatrix2D((cx, cy), angle, scale)
        M[:, 2] += (w / 2 - cx, h / 2 - cy)
        warped = cv2.warpAffine(
            np.ascontiguousarray(src),
            M,
            (w, h),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REFLECT_101,
        )
        out[j] = warped.astype(np.float32) / 255.0
    return out


def randomize_texture(
    rgb: np.ndarray,
    labels: np.ndarray | None,
    rng: np.random.Generator,
    cfg: dict | None,
    photos: np.ndarray | None = None,
) -> np.ndarray:
    """Recolour and retexture the segments of H×W×3 uint8 RGB ``rgb`` guided by H×W ``labels``
    (module docstring). Returns uint8 RGB of the same shape; ``rgb`` itself when ``cfg`` is None,
    the frame has no labels or the frame's draw says no. Draws only from ``rng``.

    ``photos``: the photo-texture pool (uint8 N×H×W×3 at the frame's size, `real_pool.
    load_rgb_pool` of ``cfg['photo']``) or None (procedural textures only: the draws, and so the
    output, are then exactly those without the photo option).

    Raises ValueError when ``labels`` is not the size of ``rgb``, or ``photos`` is not.
    """
    if cfg is None or labels is None or not rng.random() < cfg['p']:
        return rgb
    h, w = rgb.shape[:2]
    if labels.shape != (h, w):
        raise ValueError(f'labels shape={labels.shape} != rgb {(h, w)}')
    seg, n = segments(labels)
    if n == 0:
        return rgb
    img = rgb.astype(np.float32) / 255.0
    lum = img @ np.array([0.299, 0.587, 0.114], np.float32)
    count = np.bincount(seg.ravel(), minlength=n).astype(np.float32)
    mean_l = np.bincount(seg.ravel(), lum.ravel(), minlength=n).astype(np.float32)
    mean_l = mean_l / np.maximum(count, 1.0)
    shading = np.clip(lum / np.maximum(mean_l[seg], 1e-3), 0.25, 2.5)
    # per-segment draws (a fixed number per segment, whatever is used: deterministic layout)
    on = rng.random(n) < cfg['p_segment']
    hue = rng.random(n)
    sat = rng.random(n) ** 2 * cfg['max_saturation']
    val = rng.uniform(*cfg['value'], n)
    kind = rng.integers(0, 4, n)  # 0 flat, 1 value noise, 2 stripes/grain, 3 fine noise
    amp = rng.uniform(0.0, cfg['texture'], n).astype(np.float32)
    blend = rng.uniform(*cfg['blend'], n).astype(np.float32)
    fields = texture_fields(rng, h, w)
    base = _hsv_to_rgb(hue, sat, val)  # n×3
    k = kind[seg]
    tex = np.ones((h, w), np.float32)
    for i in range(3):
        m = k == i + 1
        tex[m] += amp[seg[m]] * fields[i][m]
    new = base[seg] * (shading * np.maximum(tex, 0.0))[..., None]
    if photos is not None:
        if photos.shape[1:3] != (h, w):
            raise ValueError(f'photo pool size {photos.shape[1:3]} != rgb {(h, w)}')
        use = (rng.random(n) < cfg['p_photo'])[seg]
        which = rng.integers(0, PHOTOS_PER_FRAME, n)[seg]
        fields_p = photo_fields(rng, photos)
        for j in range(PHOTOS_PER_FRAME):
            m = use & (which == j)
            new[m] = fields_p[j][m] * shading[m][:, None]
    b = np.where(on[seg], blend[seg], 0.0).astype(np.float32)[..., None]
    out = img * (1.0 - b) + np.clip(new, 0.0, 1.0) * b
    return cv2.convertScaleAbs(out, alpha=255.0)
