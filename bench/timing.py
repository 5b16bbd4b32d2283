"""Wall-clock timing for the benchmark scripts: one call, a median over runs, and two functions
interleaved pair by pair (the ratio both saw under the same machine state). CUDA calls are
synchronised before and after."""

from __future__ import annotations

import statistics
import time

import torch


def once_ms(fn, device: torch.device) -> float:
    """Wall milliseconds of one fn() call (CUDA: synchronised before and after)."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fn()
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3


def median_ms(fn, device: torch.device, runs: int, warmup: int) -> float:
    """Median wall milliseconds of fn() over `runs` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    return statistics.median(once_ms(fn, device) for _ in range(runs))


def interleaved(fn_a, fn_b, device: torch.device, runs: int, warmup: int) -> tuple:
    """Interleaved timing: (median ms of fn_a, median ms of fn_b, median of the per-pair ratios
    a/b). Each pair runs back to back, so both see the same machine state (CPU frequency,
    neighbours' load): the ratio is steadier than the ratio of two separately timed medians."""
    for _ in range(warmup):
        fn_a(), fn_b()
    pairs = [(once_ms(fn_a, device), once_ms(fn_b, device)) for _ in range(runs)]
    return (
        statistics.median(a for a, _ in pairs),
        statistics.median(b for _, b in pairs),
        statistics.median(a / b for a, b in pairs),
    )
