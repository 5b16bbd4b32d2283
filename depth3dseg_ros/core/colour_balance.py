"""Grey-world white balance of the network input (model-file ``input_balance``, METHOD M1 input).

A camera's white balance and the light of a room give every image a colour cast; the rendered
rooms that train the model carry the renderer's casts, a real camera carries its own. The
grey-world assumption (Buchsbaum, J. Franklin Inst. 1980: the average reflectance of a scene is
grey) removes the cast: each channel is scaled so that the image's mean colour is grey, keeping its
mean brightness. When a model file's ``input_balance`` is 'grey_world' (default 'none'), it is
part of the input normalisation, before ``(x − mean) / std``, at training
(training.dataset.FrameDataset), evaluation and inference (core.inference, both backends) alike.
Measured on real frames in docs/levers.md, "Grey-world white balance of the input, at test time"
and "… trained in": neither shipped.

Gains are g_c = M / M_c (M_c the image's mean of channel c, M the mean of the three), clipped to
[1 / MAX_GAIN, MAX_GAIN] so that a nearly single-coloured or black image is not blown up; the
balanced values are clipped to the input's range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = [
    'BALANCES',
    'MAX_GAIN',
    'check_balance',
    'grey_world_gains',
    'grey_world',
    'grey_world_',
]

#: the values of the model file's ``input_balance`` (and the config's ``model.input_balance``)
BALANCES = ('none', 'grey_world')
#: the largest factor (and 1 / the smallest) grey-world puts on a channel
MAX_GAIN = 4.0


def check_balance(value: Any, where: str = 'input_balance') -> str:
    """``value`` if it is one of BALANCES, else ValueError naming ``where`` and the value."""
    if not isinstance(value, str) or value not in BALANCES:
        raise ValueError(
            f'{where}={value!r} must be one of {list(BALANCES)} (the white balance of the '
            'network input, core.colour_balance)'
        )
    return value


def grey_world_gains(channel_means: np.ndarray) -> np.ndarray:
    """Per-channel grey-world gains from an image's channel means (3 floats, any scale):
    float32 (3,), each in [1 / MAX_GAIN, MAX_GAIN]; all 1 for a black image (means all 0).
    Raises ValueError unless 3 finite numbers >= 0 are given."""
    m = np.asarray(channel_means, dtype=np.float64).reshape(-1)
    if m.shape != (3,) or not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError(f'channel means {channel_means!r} must be 3 finite numbers >= 0 (RGB)')
    grey = m.mean()
    if grey <= 0:
        return np.ones(3, np.float32)
    g = grey / np.maximum(m, grey / MAX_GAIN)
    return np.clip(g, 1.0 / MAX_GAIN, MAX_GAIN).astype(np.float32)


def grey_world(rgb: np.ndarray, peak: float = 1.0) -> np.ndarray:
    """Grey-world balanced copy of an H×W×3 RGB image of values in [0, ``peak``] (uint8 with peak
    255, or float 0..1): float32 H×W×3 in [0, peak]. Raises ValueError for another shape."""
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f'grey_world: rgb must be H×W×3, got shape {rgb.shape}')
    x = rgb.astype(np.float32, copy=False)
    g = grey_world_gains(x.reshape(-1, 3).mean(axis=0, dtype=np.float64))
    return np.clip(x * g, 0.0, float(peak)).astype(np.float32, copy=False)


def grey_world_(t: torch.Tensor, peak: float = 255.0) -> torch.Tensor:
    """Grey-world balance in place of a 3×H×W float tensor of values in [0, ``peak``] (any
    device, any memory format); returns ``t``. The gains are `grey_world_gains` of the tensor's
    channel means, as in `grey_world`. Raises ValueError for another shape, a non-float tensor
    or non-finite values."""
    if t.dim() != 3 or t.shape[0] != 3 or not t.is_floating_point():
        raise ValueError(f'grey_world_: need a float 3×H×W tensor, got {tuple(t.shape)} {t.dtype}')
    g = grey_world_gains(t.mean(dim=(1, 2), dtype=torch.float64).cpu().numpy())
    return t.mul_(torch.from_numpy(g).to(t.device, t.dtype).view(3, 1, 1)).clamp_(0.0, float(peak))
