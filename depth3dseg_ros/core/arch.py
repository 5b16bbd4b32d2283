"""The hyper-parameters of `core.model.Depth3DSeg` (``arch``, stored in the model file's metadata)
and their check.

Plain data: every key of `DEFAULT_ARCH` is a keyword of Depth3DSeg (docs/model.md has the table);
a model file stores the full dict, so a file written before a key existed loads with its default.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict

from .depth_calibration import GAIN_RANGE

__all__ = ['DEFAULT_ARCH', 'ENCODERS', 'check_arch']

#: ``arch['encoder']`` values: core.encoder.Encoder (``width``/``depth_mult`` size it) and
#: core.efficientnet_lite.EfficientNetLite0 (fixed size, ImageNet weights; width and depth_mult
#: do not apply to it).
ENCODERS = ('mobilenet_v2', 'efficientnet_lite0')

#: Hyper-parameters of `Depth3DSeg` (stored as ``meta['arch']`` in the model file, modelfile.py).
DEFAULT_ARCH: Dict[str, Any] = {
    'num_classes': 14,
    # the 2D net's encoder; a file written before the key existed has the MobileNetV2-style one
    'encoder': 'mobilenet_v2',
    'width': 0.75,
    'depth_mult': 1.0,
    'dec_ch': 64,
    'head_ch': 32,
    'min_depth': 0.1,
    'max_depth': 10.0,
    'init_depth': 3.0,
    'p_stride': 5,
    'p_window': 5,
    'p_k': 4,
    'p_channels': [32, 32],
    'p_head': 32,
    'p_normals': True,
    'p_colour': True,
    'depth_focal': 0.0,
    'depth_gain': 1.0,
    'input_blur': 0.0,
    'fusion_w3d': 0.5,
    'code_input': False,
    'code_stream': False,
}


def _number(out: Dict[str, Any], key: str, ok: Any, meaning: str) -> None:
    """Make ``out[key]`` a float, or raise ValueError naming the key and value when it is not a
    number (bool excluded) for which ``ok(value)`` holds; ``meaning`` says what it must be."""
    v = out[key]
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not ok(v):
        raise ValueError(f"arch['{key}']={v!r} must be {meaning}")
    out[key] = float(v)


def check_arch(arch: Dict[str, Any]) -> Dict[str, Any]:
    """Return DEFAULT_ARCH updated with `arch`; ValueError naming an unknown key or bad value."""
    if not isinstance(arch, dict):
        raise ValueError(f'arch must be a dict, got {type(arch).__name__}')
    unknown = sorted(set(arch) - set(DEFAULT_ARCH))
    if unknown:
        raise ValueError(f'arch has unknown keys {unknown}; known: {sorted(DEFAULT_ARCH)}')
    out = dict(DEFAULT_ARCH, **arch)
    out['p_channels'] = [int(c) for c in out['p_channels']]
    if int(out['num_classes']) < 2:
        raise ValueError(f"arch['num_classes']={out['num_classes']} must be >= 2")
    if out['encoder'] not in ENCODERS:
        raise ValueError(f"arch['encoder']={out['encoder']!r} must be one of {list(ENCODERS)}")
    if out['encoder'] != 'mobilenet_v2' and out['code_input']:
        raise ValueError(
            f"arch['code_input']=true needs arch['encoder']='mobilenet_v2' (the RGB-D input "
            f"widens its stem), got {out['encoder']!r}"
        )
    lo, hi = GAIN_RANGE
    _number(
        out,
        'depth_focal',
        lambda f: 0 <= f < 100,
        '0 (off) or the normalised focal length fy / H of the camera the depth head is '
        'calibrated for (NYU: 1.082)',
    )
    _number(
        out,
        'depth_gain',
        lambda g: lo <= g <= hi,
        f"a number in [{lo}, {hi}]: the factor on the depth head's metres fitted to a camera's "
        'RGB-D frames (1 = none; core.depth_calibration)',
    )
    _number(
        out,
        'input_blur',
        lambda b: 0 <= b <= 10,
        '0 (off) or the σ in px (at most 10) of the Gaussian blur of the network input '
        '(core.lowpass)',
    )
    _number(
        out,
        'fusion_w3d',
        lambda w: 0 < w <= 1,
        'in (0, 1]: the weight of the 3D labels in the fused ones (M7; 0.5 = the mean)',
    )
    if not isinstance(out['code_input'], bool):
        raise ValueError(
            f"arch['code_input']={out['code_input']!r} must be true (the 2D net also sees the "
            'geometry code of measured depth, core.depth_code) or false (colour only)'
        )
    if not isinstance(out['code_stream'], bool):
        raise ValueError(
            f"arch['code_stream']={out['code_stream']!r} must be true (the code has its own "
            'encoder, core.code_stream) or false'
        )
    if out['code_stream'] and not out['code_input']:
        raise ValueError("arch['code_stream']=true needs arch['code_input']=true (RGB-D input)")
    if not isinstance(out['p_colour'], bool):
        raise ValueError(
            f"arch['p_colour']={out['p_colour']!r} must be true (the 3D net sees colour) or false "
            '(geometry only)'
        )
    return out
