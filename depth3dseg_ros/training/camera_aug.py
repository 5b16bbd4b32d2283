"""Camera-true photometric augmentation of training RGB (and sensor-like depth noise), numpy/cv2
only.

Synthetic renders are clean: exact white balance, no noise, no blur, no compression. A real robot
camera is not. These ops imitate the image formation of a real camera on the already geometrically
augmented input-size frame, in this fixed order (ops that happen in the scene/optics/sensor work in
*linear light*, the rendered sRGB-like image decoded with gamma 2.2):

  motion_blur    optics: a random short linear kernel (length 3..max_len px, any angle), linear
                 light
  vignetting     optics: radial fall-off 1 − k·r² (r = 1 at the corners, k ≤ strength), centre
                 jittered
  colour_cast    scene light: a per-channel tint varying linearly across the image (mixed
                 lighting), gains in [1 − strength, 1 + strength]
  exposure       sensor: exposure factor 2^U(−ev, ev); the output tone curve uses gamma U(gamma)
                 instead of 2.2 (the "gamma" part, applied at the encode step)
  noise          sensor: shot + read noise in linear light, σ² = a·x + b² (a ≤ shot, b ≤ read)
  white_balance  ISP: per-channel gains in [1 − gain, 1 + gain] (linear light)
  (encode)       back to 8 bit with the drawn gamma (2.2 when exposure is off)
  jpeg           ISP: cv2.imencode JPEG at a quality drawn in `quality` (e.g. [30, 90]), decoded
                 again
  depth          depth sensor (only where the frame has depth): stereo-like noise σ = k·z² (k ≤
                 sigma, spatially correlated) and holes (dropout blobs ≤ `holes` of the pixels,
                 plus a band at depth discontinuities). The synthetic data's `depth3dseg-synth
                 --noise` already applies a Kinect-v1 model at render time (synth/noise.py); this
                 op adds *further*, RealSense-like variation at training time and is meant mainly
                 for exact-depth data.

Every op has a probability ``p``; it is drawn only when ``p > 0``, so a config with all ops off
draws nothing from the generator and leaves the frame byte-identical (existing runs unchanged).
Photometric ops never touch labels or K; none of these ops is geometric. All randomness comes from
the dataset's per-sample generator (``numpy.random.default_rng([seed, epoch, index])``): exact
resume and DDP determinism hold.

Config (``augment.camera``): null / 'none' (off), a preset name (`PRESETS`, e.g. 'real_camera'), or
a mapping ``{preset: NAME?, OP: {field: value, ...}, ...}``: the preset's (or the op defaults')
values with the given fields replaced. `resolve_camera` checks and completes it.
"""

from __future__ import annotations

import copy
from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.training.config_checks import check_number, check_range, spec_mapping

#: Ops in the order they are applied; defaults: all off (p = 0).
OP_DEFAULTS: dict[str, dict[str, Any]] = {
    'motion_blur': {'p': 0.0, 'max_len': 7},
    'vignetting': {'p': 0.0, 'strength': 0.4},
    'colour_cast': {'p': 0.0, 'strength': 0.15},
    'exposure': {'p': 0.0, 'ev': 1.0, 'gamma': [1.8, 2.6]},
    'noise': {'p': 0.0, 'shot': 0.004, 'read': 0.004},
    'white_balance': {'p': 0.0, 'gain': 0.15},
    'jpeg': {'p': 0.0, 'quality': [30, 90]},
    'depth': {'p': 0.0, 'sigma': 0.003, 'holes': 0.02},
}
OPS = tuple(OP_DEFAULTS)

#: Named presets: every op on.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    'real_camera': {
        'motion_blur': {'p': 0.3, 'max_len': 7},
        'vignetting': {'p': 0.5, 'strength': 0.4},
        'colour_cast': {'p': 0.3, 'strength': 0.15},
        'exposure': {'p': 0.8, 'ev': 1.0, 'gamma': [1.8, 2.6]},
        'noise': {'p': 0.8, 'shot': 0.004, 'read': 0.004},
        'white_balance': {'p': 0.8, 'gain': 0.15},
        'jpeg': {'p': 0.5, 'quality': [30, 90]},
        'depth': {'p': 0.3, 'sigma': 0.003, 'holes': 0.02},
    },
}

GAMMA = 2.2
_DECODE = ((np.arange(256, dtype=np.float64) / 255.0) ** GAMMA).astype(np.float32)


_CHECKS = {  # field -> (kind, lo, hi)
    ('motion_blur', 'max_len'): ('int', 3, 31),
    ('vignetting', 'strength'): ('num', 0.0, 0.9),
    ('colour_cast', 'strength'): ('num', 0.0, 0.9),
    ('exposure', 'ev'): ('num', 0.0, 4.0),
    ('exposure', 'gamma'): ('range', 1.0, 3.5),
    ('noise', 'shot'): ('num', 0.0, 0.1),
    ('noise', 'read'): ('num', 0.0, 0.1),
    ('white_balance', 'gain'): ('num', 0.0, 0.9),
    ('jpeg', 'quality'): ('irange', 1, 100),
    ('depth', 'sigma'): ('num', 0.0, 0.1),
    ('depth', 'holes'): ('num', 0.0, 0.5),
}


def resolve_camera(spec: Any, where: str = 'augment.camera') -> dict[str, dict[str, Any]] | None:
    """The complete, checked op table of an ``augment.camera`` value, or None when every op is off.

    ``spec``: None / 'none' / a preset name / a mapping ``{preset?: NAME, OP: {field: value}}``.
    Raises ValueError naming the dotted key (unknown preset, op or field; value out of range).
    """
    spec = spec_mapping(spec, where, PRESETS)
    if spec is None:
        return None
    preset = spec.get('preset')
    if preset is None or (isinstance(preset, str) and preset.lower() in ('none', 'off')):
        table = copy.deepcopy(OP_DEFAULTS)
    elif isinstance(preset, str) and preset in PRESETS:
        table = copy.deepcopy(PRESETS[preset])
    else:
        raise ValueError(f'config {where}.preset={preset!r} is unknown (known: {sorted(PRESETS)})')
    for op, fields in spec.items():
        if op == 'preset':
            continue
        if op not in OP_DEFAULTS:
            raise ValueError(f'config {where}.{op} is unknown (known: {list(OPS)})')
        if not isinstance(fields, dict):
            raise ValueError(
                f'config {where}.{op}={fields!r} must be a mapping of {sorted(OP_DEFAULTS[op])}'
            )
        for k, v in fields.items():
            if k not in OP_DEFAULTS[op]:
                raise ValueError(
                    f'config {where}.{op}.{k} is unknown (known: {sorted(OP_DEFAULTS[op])})'
                )
            table[op][k] = v
    for op, fields in table.items():
        fields['p'] = check_number(fields['p'], f'{where}.{op}.p', 0.0, 1.0)
        for k in fields:
            if k == 'p':
                continue
            kind, lo, hi = _CHECKS[(op, k)]
            w = f'{where}.{op}.{k}'
            if kind in ('range', 'irange'):
                fields[k] = check_range(fields[k], w, lo, hi, integer=kind == 'irange')
            else:
                fields[k] = check_number(fields[k], w, lo, hi, integer=kind == 'int')
    if all(f['p'] == 0 for f in table.values()):
        return None
    return table


# ------------------------------------------------------------------------ the ops (pure functions)
def decode(rgb: np.ndarray) -> np.ndarray:
    """uint8 sRGB-like → float32 linear light in [0, 1] (gamma 2.2, a table lookup)."""
    return _DECODE[rgb]


def encode(lin: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    """float linear light → uint8 with tone curve x^(1/gamma); clipped to [0, 1] first."""
    x = cv2.pow(np.clip(lin, 0.0, 1.0, dtype=np.float32), 1.0 / gamma)
    return cv2.convertScaleAbs(x, alpha=255.0)  # round to nearest, saturate to [0, 255]


def motion_blur(lin: np.ndarray, length: int, angle_deg: float) -> np.ndarray:
    """Blur with a normalised line kernel of ``length`` px at ``angle_deg`` (a convex combination
    of neighbours: values stay within the input's range)."""
    k = int(length) | 1  # odd size, the line centred
    kernel = np.zeros((k, k), np.float32)
    c = k // 2
    dx, dy = np.cos(np.deg2rad(angle_deg)) * c, np.sin(np.deg2rad(angle_deg)) * c
    cv2.line(
        kernel,
        (int(round(c - dx)), int(round(c - dy))),
        (int(round(c + dx)), int(round(c + dy))),
        1.0,
        1,
        cv2.LINE_AA,
    )
    kernel /= kernel.sum()
    return cv2.filter2D(lin, -1, kernel, borderType=cv2.BORDER_REFLECT)


def vignetting(lin: np.ndarray, k: float, centre: tuple[float, float]) -> np.ndarray:
    """Multiply by 1 − k·r², r the distance to ``centre`` (x, y px) over the half diagonal (clipped
    ≥ 0)."""
    h, w = lin.shape[:2]
    r0 = 0.25 * (w * w + h * h)
    fx = ((np.arange(w, dtype=np.float32) - centre[0]) ** 2 / r0)[None, :]
    fy = ((np.arange(h, dtype=np.float32) - centre[1]) ** 2 / r0)[:, None]
    return lin * np.maximum(1.0 - k * (fx + fy), 0.0)[..., None]


def colour_cast(lin: np.ndarray, tint: np.ndarray, angle_deg: float) -> np.ndarray:
    """Per-channel gains 1 + t·tint, t running 0 → 1 across the image along ``angle_deg``."""
    h, w = lin.shape[:2]
    a = np.deg2rad(angle_deg)
    s = (np.cos(a) * np.arange(w, dtype=np.float32))[None, :] + (
        np.sin(a) * np.arange(h, dtype=np.float32)
    )[:, None]
    t = (s - s.min()) / max(float(s.max() - s.min()), 1e-6)
    return lin * (1.0 + t[..., None] * np.asarray(tint, np.float32))


def sensor_noise(lin: np.ndarray, shot: float, read: float, normal: np.ndarray) -> np.ndarray:
    """Add shot + read noise: σ² = shot·x + read², ``normal`` a standard normal field of lin's
    shape."""
    return lin + np.sqrt(shot * np.maximum(lin, 0.0) + read * read) * normal


def jpeg(rgb: np.ndarray, quality: int) -> np.ndarray:
    """JPEG round trip of an H×W×3 uint8 RGB image at ``quality`` (cv2)."""
    ok, buf = cv2.imencode(
        '.jpg', cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    )
    if not ok:  # pragma: no cover - cv2 always encodes a uint8 image
        return rgb
    return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def depth_sensor(
    depth: np.ndarray, rng: np.random.Generator, sigma: float, holes: float
) -> np.ndarray:
    """Stereo-like depth noise σ = k·z² (k = U(0, sigma), correlated at half resolution) and holes:
    dropout blobs (U(0, holes) of the pixels) and ~half the pixels of a 1–3 px band at depth jumps
    > 4 %. NaN stays NaN; returns float32."""
    z = np.asarray(depth, np.float32)
    h, w = z.shape
    valid = np.isfinite(z)
    zf = np.where(valid, z, 1.0).astype(np.float32)
    k = float(rng.uniform(0.0, sigma))
    field = cv2.resize(
        rng.standard_normal((max(1, h // 2), max(1, w // 2)), dtype=np.float32),
        (w, h),
        interpolation=cv2.INTER_LINEAR,
    )
    out = np.maximum(zf + k * zf * zf * field, 0.05)
    coarse = rng.random((max(2, h // 30), max(2, w // 30)), dtype=np.float32)
    smooth = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    hole = smooth > np.quantile(smooth[::4, ::4], 1.0 - rng.uniform(0.0, holes))
    jump_x = np.abs(np.diff(zf, axis=1)) > 0.04 * zf[:, 1:]
    edge = np.zeros((h, w), np.uint8)
    edge[:, 1:] |= jump_x
    band = cv2.dilate(edge, np.ones((1, 2 * int(rng.integers(1, 4)) + 1), np.uint8)).astype(bool)
    hole |= band & (rng.random((h, w), dtype=np.float32) < 0.5)
    out[hole | ~valid] = np.nan
    return out


# ---------------------------------------------------------------------------- the pipeline
def _on(rng: np.random.Generator, cfg: dict, op: str) -> bool:
    p = cfg[op]['p']
    return p > 0 and bool(rng.random() < p)


def augment_rgb(rgb: np.ndarray, rng: np.random.Generator, cfg: dict | None) -> np.ndarray:
    """Apply the photometric ops of ``cfg`` (a `resolve_camera` table; None = none) to H×W×3 uint8
    RGB.

    Returns uint8 RGB of the same shape (the input itself when no op fired). Draws only from
    ``rng``.
    """
    if cfg is None:
        return rgb
    h, w = rgb.shape[:2]
    lin = None
    gamma = GAMMA

    def linear():
        return decode(rgb) if lin is None else lin

    if _on(rng, cfg, 'motion_blur'):
        length = int(rng.integers(3, cfg['motion_blur']['max_len'] + 1))
        lin = motion_blur(linear(), length, float(rng.uniform(0.0, 180.0)))
    if _on(rng, cfg, 'vignetting'):
        k = float(rng.uniform(0.0, cfg['vignetting']['strength']))
        centre = (w / 2 + rng.uniform(-0.1, 0.1) * w, h / 2 + rng.uniform(-0.1, 0.1) * h)
        lin = vignetting(linear(), k, centre)
    if _on(rng, cfg, 'colour_cast'):
        s = cfg['colour_cast']['strength']
        lin = colour_cast(linear(), rng.uniform(-s, s, 3), float(rng.uniform(0.0, 360.0)))
    if _on(rng, cfg, 'exposure'):
        e = cfg['exposure']
        lin = linear() * np.float32(2.0 ** rng.uniform(-e['ev'], e['ev']))
        gamma = float(rng.uniform(*e['gamma']))
    if _on(rng, cfg, 'noise'):
        n = cfg['noise']
        shot, read = float(rng.uniform(0.0, n['shot'])), float(rng.uniform(0.0, n['read']))
        lin = sensor_noise(linear(), shot, read, rng.standard_normal((h, w, 3), dtype=np.float32))
    if _on(rng, cfg, 'white_balance'):
        g = cfg['white_balance']['gain']
        lin = linear() * rng.uniform(1.0 - g, 1.0 + g, 3).astype(np.float32)
    out = rgb if lin is None else encode(lin, gamma)
    if _on(rng, cfg, 'jpeg'):
        q = cfg['jpeg']['quality']
        out = jpeg(np.ascontiguousarray(out), int(rng.integers(q[0], q[1] + 1)))
    return out


def augment_depth(
    depth: np.ndarray | None, rng: np.random.Generator, cfg: dict | None
) -> np.ndarray | None:
    """The depth op of ``cfg`` on an H×W float32 depth (m, NaN = none); None / no draw when
    absent/off."""
    if cfg is None or depth is None or not _on(rng, cfg, 'depth'):
        return depth
    return depth_sensor(depth, rng, cfg['depth']['sigma'], cfg['depth']['holes'])
