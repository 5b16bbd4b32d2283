"""Depth units: 16UC1 millimetres <-> 32FC1 metres (REP 118, depth_image_proc's DepthTraits).

Core convention: depth is float32 metres with NaN for "no data". 16UC1 (and mono16) depth is
unsigned millimetres with 0 for "no data"; 32FC1 is metres where NaN, ±inf, 0 and negative values
are "no data" (a 0.0 float depth is never a point at the origin: docs/cases.md C09). Converting
metres to 16UC1 rounds like depth_image_proc (``mm = m * 1000 + 0.5``, truncated) and maps NaN,
negative and out-of-range values to 0, never wrapping (C08: 70 m must not become 4464 mm). Pure
numpy; no ROS imports.
"""

from __future__ import annotations

import numpy as np

#: Encodings whose pixels are unsigned integer depth in ``depth_scale`` units (mm by default).
INTEGER_DEPTH_ENCODINGS = ('16UC1', 'mono16')
#: Encodings whose pixels are float depth in metres.
FLOAT_DEPTH_ENCODINGS = ('32FC1', '64FC1')
#: Largest value a 16UC1 pixel can hold.
UINT16_MAX = 65535


def valid_depth(depth_m: np.ndarray) -> np.ndarray:
    """Bool mask of valid metric depth: finite and > 0 (same shape as ``depth_m``)."""
    d = np.asarray(depth_m)
    with np.errstate(invalid='ignore'):
        return np.isfinite(d) & (d > 0)


def depth_to_meters(
    arr: np.ndarray, encoding: str, depth_scale: float | None = None
) -> np.ndarray:
    """Convert a depth image to float32 metres with NaN for no data (C08, C09).

    Args:
        arr: H×W depth pixels: uint16 for ``16UC1``/``mono16``; float32/float64 for
            ``32FC1``/``64FC1``.
        encoding: the ROS image encoding the pixels came with.
        depth_scale: metres per integer unit for 16UC1 (default 0.001, i.e. millimetres; TUM PNGs
            use 1/5000). Ignored for float encodings, which are metres already.
    Returns:
        float32 H×W metres; 0 (integer) and NaN/±inf/0/negative (float) become NaN.
    Raises:
        ValueError: unknown depth encoding, or a dtype that does not match the encoding, or bad
            scale.
    """
    a = np.asarray(arr)
    if encoding in INTEGER_DEPTH_ENCODINGS:
        if a.dtype != np.uint16:
            raise ValueError(
                f'depth encoding={encoding!r} needs uint16 pixels, got dtype={a.dtype}'
            )
        scale = 0.001 if depth_scale is None else float(depth_scale)
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(
                f'depth_scale={depth_scale!r} must be a positive number of metres per unit'
            )
        out = a.astype(np.float32) * np.float32(scale)
        out[a == 0] = np.nan
        return out
    if encoding in FLOAT_DEPTH_ENCODINGS:
        if a.dtype.kind != 'f':
            raise ValueError(
                f'depth encoding={encoding!r} needs float pixels, got dtype={a.dtype}'
            )
        out = a.astype(np.float32, copy=True)
        out[~valid_depth(out)] = np.nan
        return out
    raise ValueError(
        f'depth encoding={encoding!r} is not a depth encoding '
        f'(expected one of {INTEGER_DEPTH_ENCODINGS + FLOAT_DEPTH_ENCODINGS})'
    )


def meters_to_16uc1(depth_m: np.ndarray) -> np.ndarray:
    """Convert metric depth to 16UC1 millimetres like depth_image_proc, never wrapping (C08).

    The input is taken as float32 (the network's output type, as in depth_image_proc's
    ``DepthTraits<uint16_t>::fromMeters(float)``): ``mm = trunc(m * 1000 + 0.5)`` computed in
    float32, so 1.2345 m -> 1235 and 2.0005 m -> 2001. NaN, ±inf, values <= 0 and values whose
    millimetres exceed 65535 become 0 (no data).

    Args:
        depth_m: H×W float depth in metres.
    Returns:
        uint16 H×W millimetres.
    """
    d = np.asarray(depth_m, dtype=np.float32)
    with np.errstate(invalid='ignore', over='ignore'):
        # float32 arithmetic throughout, as depth_image_proc's `d * 1000.0f + 0.5f`: 2.0005 m is
        # 2000.49996 in float64 but 2000.5 in float32, so 2001 (a float64 product gives 2000)
        mm = np.floor(d * np.float32(1000.0) + np.float32(0.5))
        ok = valid_depth(d) & (mm <= UINT16_MAX)
    out = np.zeros(d.shape, dtype=np.uint16)
    out[ok] = mm[ok].astype(np.uint16)
    return out


def meters_to_32fc1(depth_m: np.ndarray) -> np.ndarray:
    """Return metric depth as a 32FC1 array: float32 metres, NaN wherever depth is not finite and >
    0 (C08/C09)."""
    out = np.asarray(depth_m, dtype=np.float32).copy()
    out[~valid_depth(out)] = np.nan
    return out


def convert_depth(
    arr: np.ndarray, src_encoding: str, dst_encoding: str, depth_scale: float | None = None
) -> np.ndarray:
    """Convert a depth image between 16UC1/mono16 (mm) and 32FC1 (m) (depth_image_proc
    convert_metric).

    Raises:
        ValueError: an encoding that is not a depth encoding, or a destination other than
            16UC1/32FC1.
    """
    m = depth_to_meters(arr, src_encoding, depth_scale)
    if dst_encoding in INTEGER_DEPTH_ENCODINGS:
        return meters_to_16uc1(m)
    if dst_encoding == '32FC1':
        return m
    raise ValueError(f'dst_encoding={dst_encoding!r}: depth is published as 16UC1 or 32FC1')
