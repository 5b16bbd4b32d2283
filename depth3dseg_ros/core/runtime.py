"""Runtime basics of core.inference (re-exported there): the per-frame result type, the device
choice and the default CPU thread count, shared by the torch and ONNX Runtime backends
(core.backends)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Union

import numpy as np
import torch

__all__ = ['InferenceResult', 'resolve_device', 'default_num_threads']


@dataclass
class InferenceResult:
    """One frame's output, all at the network input size (h, w).

    labels: (h, w) uint8 (C <= 256) or uint16 class ids, never the void id. confidence: (h, w)
    float32, probability of the chosen class under the distribution used. depth: (h, w) float32
    metres, NaN where invalid (M8). K: (3, 3) float64 intrinsics at (w, h), None without input K.
    points: (h, w, 3) float32 organized cloud in the optical frame, metres, NaN where invalid (M9),
    None without K. rgb: (h, w, 3) uint8 network-size image. timings: {'preprocess', 'inference',
    'postprocess'} milliseconds.
    label_source: the source actually used ('2d' when K was None, whatever was asked).
    measured: (h, w) bool, True where the cloud used the measured depth; None when none was given.
    """

    labels: np.ndarray
    confidence: np.ndarray
    depth: np.ndarray
    K: Optional[np.ndarray]
    points: Optional[np.ndarray]
    rgb: np.ndarray
    timings: Dict[str, float] = field(default_factory=dict)
    label_source: str = 'fused'
    measured: Optional[np.ndarray] = None


def resolve_device(device: Union[str, torch.device]) -> torch.device:
    """'auto' -> cuda when available else cpu; 'cuda[:n]' without CUDA -> ValueError naming the
    value."""
    if str(device) == 'auto':
        return torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a torch device ('auto', 'cpu', 'cuda', 'cuda:N')"
        ) from exc
    if dev.type == 'cuda' and not torch.cuda.is_available():
        raise ValueError(
            f'device={device!r} but CUDA is not available in this torch build/machine'
        )
    return dev


def default_num_threads() -> int:
    """CPU threads for inference: usable cores (sched_getaffinity) minus one, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)
