#!/usr/bin/env python3
"""Pack a rendered synthetic training set small enough to send to a machine that cannot render it,
and rebuild it there (docs/training.md "A GPU machine that cannot render").

A GPU machine without pybullet (no wheel for its Python, no network) can still train on the
project's synthetic rooms if the extracted dataset travels. The noisy sets ``depth3dseg-synth
--noise`` writes do not compress (about 40 kB a frame: 120 MB for 3,000 frames), but the same
render without ``--noise`` does (about 15 kB a frame with xz: RGB and labels byte for byte, depth
as row differences of its millimetres), and the Kinect-like noise (``synth.noise.kinect_noise``)
is drawn from the renderer's own per-scene stream ``default_rng([seed, scene, 1])``. So:

* ``pack``: a dataset extracted from a *noise-free* render (``depth3dseg-synth`` without
  ``--noise``, same ``--seed`` / ``--scenes`` / ``--frames-per-scene``) -> ``<out>/`` with
  ``rgb|depth_dx|labels.raw.xz``, their shapes, and the dataset's index and manifest.
* ``unpack``: that folder -> a dataset directory (docs/ARCHITECTURE.md "Dataset directory") whose
  RGB and labels equal the noisy render's and whose depth is ``kinect_noise`` of the clean
  millimetres with the renderer's stream. It differs from the ``--noise`` render only by the noise
  acting on millimetre-rounded instead of float depth: measured on the 300 validation frames,
  mean |difference| 0.25 mm over pixels valid in both, hole fractions equal to 1e-6.

Usage::

    python scripts/train_pack.py pack DATASET_DIR OUT_DIR --seed 1 --frames-per-scene 50
    python scripts/train_pack.py unpack OUT_DIR DATASET_DIR [--workers 8]

The pure steps (`depth_to_dx`, `dx_to_depth`, `renoise`) are tested in test/test_train_pack.py.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depth3dseg_ros.core.depth import depth_to_meters, meters_to_16uc1  # noqa: E402
from depth3dseg_ros.dataset_format import INDEX, MANIFEST, read_index  # noqa: E402
from depth3dseg_ros.synth.noise import kinect_noise  # noqa: E402

ARRAYS = ('rgb', 'depth_dx', 'labels')
META = 'pack.json'


def depth_to_dx(depth_mm: np.ndarray) -> np.ndarray:
    """N×H×W (or H×W) uint16 millimetres -> int16 differences along each row (the first column
    kept as is): rendered depth is piecewise smooth, so these compress several times better.
    Raises ValueError for depth that is not uint16 or whose jumps exceed int16 (never for 16UC1
    depth under 32.767 m)."""
    d = np.asarray(depth_mm)
    if d.dtype != np.uint16:
        raise ValueError(f'depth dtype {d.dtype} must be uint16 millimetres')
    dx = np.diff(d.astype(np.int32), axis=-1, prepend=0)
    if dx.size and (dx.min() < -32768 or dx.max() > 32767):
        raise ValueError(f'depth jumps {dx.min()}..{dx.max()} mm do not fit int16')
    return dx.astype(np.int16)


def dx_to_depth(dx: np.ndarray) -> np.ndarray:
    """Inverse of `depth_to_dx`: int16 row differences -> uint16 millimetres (same shape)."""
    return np.cumsum(np.asarray(dx, dtype=np.int32), axis=-1).astype(np.uint16)


def renoise(depth_mm: np.ndarray, K: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The renderer's Kinect-like noise (synth.noise.kinect_noise) on a clean H×W uint16 mm depth
    (0 = no surface) -> H×W uint16 mm, as ``depth3dseg-synth --noise`` records it."""
    m = depth_to_meters(depth_mm, '16UC1')
    return meters_to_16uc1(kinect_noise(m, np.asarray(K, dtype=np.float64).reshape(3, 3), rng))


def pack(src: Path, out: Path, seed: int, frames_per_scene: int) -> None:
    """Write the pack of the noise-free dataset ``src`` to ``out`` (module docstring)."""
    recs = read_index(src)
    out.mkdir(parents=True, exist_ok=True)

    def load(r: dict) -> tuple:
        return tuple(
            cv2.imread(str(src / r[k]), cv2.IMREAD_UNCHANGED) for k in ('rgb', 'depth', 'labels')
        )

    with ThreadPoolExecutor(2) as ex:
        frames = list(ex.map(load, recs))
    arrays = {
        'rgb': np.stack([f[0] for f in frames]),
        'depth_dx': depth_to_dx(np.stack([f[1] for f in frames])),
        'labels': np.stack([f[2] for f in frames]),
    }
    del frames

    def write(name: str) -> None:
        (out / f'{name}.raw.xz').write_bytes(lzma.compress(arrays[name].tobytes(), preset=6))

    with ThreadPoolExecutor(len(ARRAYS)) as ex:
        list(ex.map(write, ARRAYS))
    meta = {
        'seed': seed,
        'frames_per_scene': frames_per_scene,
        'arrays': {k: {'shape': list(a.shape), 'dtype': str(a.dtype)} for k, a in arrays.items()},
    }
    (out / META).write_text(json.dumps(meta, indent=1))
    shutil.copy(src / INDEX, out / INDEX)
    shutil.copy(src / MANIFEST, out / MANIFEST)
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f'packed {len(recs)} frames of {src} into {out}: {size / 2**20:.1f} MiB')


def _unpack_scene(args: tuple) -> int:
    """Write one scene's frames (a worker of `unpack`)."""
    raw, out, meta, recs, s = args
    a = {
        k: np.memmap(raw / k, dtype=m['dtype'], mode='r', shape=tuple(m['shape']))
        for k, m in meta['arrays'].items()
    }
    fps = meta['frames_per_scene']
    rng = np.random.default_rng([meta['seed'], s, 1])  # synth.cli: the scene's noise stream
    for i in range(s * fps, min((s + 1) * fps, len(recs))):
        r = recs[i]
        cv2.imwrite(str(out / r['rgb']), np.asarray(a['rgb'][i]))
        cv2.imwrite(str(out / r['labels']), np.asarray(a['labels'][i]))
        cv2.imwrite(str(out / r['depth']), renoise(dx_to_depth(a['depth_dx'][i]), r['K'], rng))
    return s


def unpack(src: Path, out: Path, workers: int) -> None:
    """Rebuild the noisy dataset directory ``out`` from the pack ``src`` (module docstring)."""
    meta = json.loads((src / META).read_text())
    raw = out / '.raw'
    raw.mkdir(parents=True, exist_ok=True)

    def decompress(name: str) -> None:
        (raw / name).write_bytes(lzma.decompress((src / f'{name}.raw.xz').read_bytes()))

    with ThreadPoolExecutor(len(ARRAYS)) as ex:
        list(ex.map(decompress, ARRAYS))
    recs = read_index(src)
    for sub in ('rgb', 'depth', 'labels'):
        (out / sub).mkdir(exist_ok=True)
    n_scenes = -(-len(recs) // meta['frames_per_scene'])
    jobs = [(raw, out, meta, recs, s) for s in range(n_scenes)]
    if workers <= 1:
        list(map(_unpack_scene, jobs))
    else:
        with ProcessPoolExecutor(workers) as ex:
            list(ex.map(_unpack_scene, jobs))
    shutil.rmtree(raw)
    shutil.copy(src / MANIFEST, out / MANIFEST)
    shutil.copy(src / INDEX, out / INDEX)  # last: the index names only frames that are in place
    print(f'unpacked {len(recs)} frames into {out}')


def main(argv: list[str] | None = None) -> None:
    """Command line: ``pack`` or ``unpack`` (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('pack', help='noise-free extracted dataset -> pack folder')
    p.add_argument('dataset', type=Path)
    p.add_argument('out', type=Path)
    p.add_argument('--seed', type=int, required=True, help="the render's depth3dseg-synth --seed")
    p.add_argument('--frames-per-scene', type=int, required=True)
    u = sub.add_parser('unpack', help='pack folder -> dataset directory with Kinect-like depth')
    u.add_argument('pack', type=Path)
    u.add_argument('out', type=Path)
    u.add_argument('--workers', type=int, default=2)
    a = ap.parse_args(argv)
    if a.cmd == 'pack':
        pack(a.dataset, a.out, a.seed, a.frames_per_scene)
    else:
        unpack(a.pack, a.out, a.workers)


if __name__ == '__main__':
    main()
