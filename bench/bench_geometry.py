"""Speed of M2 back-projection (core/geometry.py) at 640×480, against a reference in the same run.

Reference: the same arithmetic with the pixel grid rebuilt on every call (what the grid cache
saves). Prints milliseconds per frame and the ratio; no thresholds (figures depend on the machine).
Run: python bench/bench_geometry.py
"""

import time

import numpy as np
import torch

from depth3dseg_ros.core.geometry import backproject, backproject_np


def uncached(depth, K):
    """Reference back-projection that rebuilds the pixel grid on every call: (xyz B×3×H×W, valid
    B×1×H×W)."""
    b, _, h, w = depth.shape
    v, u = torch.meshgrid(
        torch.arange(h, dtype=depth.dtype), torch.arange(w, dtype=depth.dtype), indexing='ij'
    )
    valid = torch.isfinite(depth) & (depth > 0)
    d = torch.where(valid, depth, torch.zeros(()))
    fx, fy = K[:, 0, 0].view(-1, 1, 1, 1), K[:, 1, 1].view(-1, 1, 1, 1)
    cx, cy = K[:, 0, 2].view(-1, 1, 1, 1), K[:, 1, 2].view(-1, 1, 1, 1)
    return torch.cat([(u - cx) / fx * d, (v - cy) / fy * d, d], 1), valid


def timeit(fn, n=20, repeats=5):
    """Best of `repeats` means over `n` calls, in ms (the machine is shared: take the minimum)."""
    fn()
    best = float('inf')
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e3)
    return best


def main():
    """Time the reference, backproject (with and without the K check) and backproject_np; print
    ms."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    d = rng.uniform(0.5, 5, (480, 640)).astype(np.float32)
    K = np.array([[525.0, 0, 319.5], [0, 525.0, 239.5], [0, 0, 1]])
    dt, Kt = torch.from_numpy(d)[None, None], torch.tensor(K, dtype=torch.float32)[None]
    ref = timeit(lambda: uncached(dt, Kt))
    cached = timeit(lambda: backproject(dt, Kt, check=False))
    checked = timeit(lambda: backproject(dt, Kt))
    npy = timeit(lambda: backproject_np(d, K))
    print(
        f'640x480, 1 thread: uncached-grid reference {ref:.2f} ms, backproject (cached grid) '
        f'{cached:.2f} ms (ratio {cached / ref:.2f}), with K check {checked:.2f} ms, '
        f'backproject_np {npy:.2f} ms'
    )


if __name__ == '__main__':
    main()
