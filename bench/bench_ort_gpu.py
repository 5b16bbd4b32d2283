"""Benchmark: the exported whole graph in ONNX Runtime on every GPU execution provider present.

    python bench/bench_ort_gpu.py [--out DIR] [--runs 100] [--sizes 320x240,640x480] [--model M]

Part of ``make bench-gpu`` (bench/bench_gpu.sh). Plan (`provider_plan`): the CPU provider as the
reference (fewer runs), then CUDA fp32, TensorRT fp32 and TensorRT fp16 (``trt_fp16_enable``; the
engines cached in DIR/trt_cache); a provider this onnxruntime lacks is skipped with a printed line
(``pip install onnxruntime-gpu`` instead of onnxruntime, docs/deployment.md), and so is one that
was asked for but did not initialise (ONNX Runtime then silently runs on the CPU: checked with
``get_providers()``). Per provider and size: median ms per ``session.run`` on host numpy inputs
(host-device copies included, as the Segmenter runs it) after warm-up, frames/s, and agreement
with the CPU provider (largest |depth difference| in m, fused labels equal in % by core.fusion).
Figures also to DIR/ort_gpu.json. Imports no ROS module.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depth3dseg_ros.core.backends import GPU_PROVIDERS, provider_entry  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def provider_plan(
    available: Sequence[str], device_id: int = 0, trt_cache: Optional[str] = None
) -> List[Dict[str, Any]]:
    """The runs for the providers ``available`` (ort.get_available_providers()): a list of
    {'label', 'providers' (the InferenceSession list, CPU last as the fallback; None when
    skipped), 'skip' (the reason, or None)}: 'cpu' always, then 'cuda fp32', 'tensorrt fp32',
    'tensorrt fp16'. Pure (no onnxruntime import)."""
    have = set(available)
    plan: List[Dict[str, Any]] = [
        {'label': 'cpu', 'providers': ['CPUExecutionProvider'], 'skip': None}
    ]
    for label, kind, fp16 in (
        ('cuda fp32', 'cuda', False),
        ('tensorrt fp32', 'tensorrt', False),
        ('tensorrt fp16', 'tensorrt', True),
    ):
        name = GPU_PROVIDERS[kind]
        if name not in have:
            plan.append(
                {
                    'label': label,
                    'providers': None,
                    'skip': f'{name} not in this onnxruntime (available: {sorted(have)}; '
                    'install onnxruntime-gpu)',
                }
            )
            continue
        entry = provider_entry(kind, device_id, fp16, trt_cache if kind == 'tensorrt' else None)
        # TensorRT takes what it can; CUDA then CPU run the rest (ONNX Runtime's partitioning)
        rest = (
            [provider_entry('cuda', device_id)]
            if kind == 'tensorrt' and (GPU_PROVIDERS['cuda'] in have)
            else []
        )
        plan.append(
            {'label': label, 'providers': [entry, *rest, 'CPUExecutionProvider'], 'skip': None}
        )
    return plan


def _labels(o: Dict[str, np.ndarray], w3d: float = 0.5) -> np.ndarray:
    """The fused labels of one run's outputs with the model's fusion weight (arch fusion_w3d)."""
    import torch

    from depth3dseg_ros.core.fusion import source_labels

    return source_labels(
        torch.from_numpy(o['seg2d']).float(),
        torch.from_numpy(o['seg3d']).float(),
        torch.from_numpy(o['valid']),
        'fused',
        w3d=w3d,
    ).numpy()


def run_size(
    onnx_path: Path, w: int, h: int, plan: List[Dict[str, Any]], runs: int, warmup: int
) -> List[Dict[str, Any]]:
    """Time every planned provider on one random frame at w×h; returns one dict per plan entry."""
    import onnxruntime as ort

    from depth3dseg_ros.core.arch import DEFAULT_ARCH
    from depth3dseg_ros.core.backends import session_options
    from depth3dseg_ros.core.onnx_export import read_onnx_meta
    from depth3dseg_ros.core.onnx_graph import OUTPUT_NAMES

    arch = read_onnx_meta(onnx_path)['arch']
    w3d = arch.get('fusion_w3d', DEFAULT_ARCH['fusion_w3d'])  # the node's fused labels

    rng = np.random.default_rng(0)
    feeds = {
        'rgb': rng.standard_normal((1, 3, h, w)).astype(np.float32),
        'K': np.array([[[0.8 * w, 0, w / 2], [0, 0.8 * w, h / 2], [0, 0, 1]]], np.float32),
        'measured_depth': np.full((1, 1, h, w), np.nan, np.float32),
    }
    names = list(OUTPUT_NAMES)
    ref = None
    rows = []
    for item in plan:
        row = {'label': item['label'], 'size': f'{w}x{h}'}
        if item['providers'] is None:
            row['skip'] = item['skip']
            rows.append(row)
            continue
        want = item['providers'][0]
        want = want[0] if isinstance(want, tuple) else want
        t0 = time.perf_counter()
        try:
            sess = ort.InferenceSession(
                str(onnx_path), session_options(0), providers=item['providers']
            )
        except Exception as exc:  # noqa: BLE001  (a provider library missing at load)
            row['skip'] = f'session failed: {type(exc).__name__}: {str(exc)[:200]}'
            rows.append(row)
            continue
        if sess.get_providers()[0] != want:
            row['skip'] = f'{want} did not initialise (session runs on {sess.get_providers()})'
            rows.append(row)
            continue
        n = runs if want != 'CPUExecutionProvider' else max(5, runs // 10)
        for _ in range(warmup):
            out = sess.run(names, feeds)
        row['load_s'] = time.perf_counter() - t0
        t = []
        for _ in range(n):
            t1 = time.perf_counter()
            out = sess.run(names, feeds)
            t.append((time.perf_counter() - t1) * 1e3)
        o = dict(zip(names, out))
        row.update(ms=statistics.median(t), fps=1e3 / statistics.median(t), runs=n)
        if ref is None:
            ref = o
        else:
            row['max_depth_diff_m'] = float(np.nanmax(np.abs(o['depth'] - ref['depth'])))
            row['labels_equal_pct'] = float(100 * (_labels(o, w3d) == _labels(ref, w3d)).mean())
        rows.append(row)
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    """CLI: export, run the plan per size, print one line per run, write DIR/ort_gpu.json."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', type=Path, default=None, help='output directory (JSON, TRT cache)')
    ap.add_argument('--runs', type=int, default=100)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--sizes', default='320x240,640x480')
    ap.add_argument('--model', type=Path, default=REPO / 'models' / 'depth3dseg_nyu13.pt')
    ap.add_argument('--device-id', type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import onnxruntime as ort
    except ImportError:
        print('ONNX Runtime: skipped, onnxruntime is not installed (pip install onnxruntime-gpu)')
        return 0
    from depth3dseg_ros.core.onnx_export import export_onnx

    out = args.out or Path(tempfile.mkdtemp(prefix='bench_ort_gpu_'))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / 'trt_cache'
    cache.mkdir(exist_ok=True)
    avail = ort.get_available_providers()
    print(f'onnxruntime {ort.__version__} ({ort.get_device()}), providers {avail}')
    plan = provider_plan(avail, args.device_id, str(cache))
    for item in plan:
        if item['skip']:
            print(f"ONNX Runtime {item['label']}: skipped: {item['skip']}")
    results = []
    for s in args.sizes.split(','):
        w, h = (int(v) for v in s.lower().split('x'))
        path = out / f'model_{w}x{h}.onnx'
        export_onnx(args.model, path, input_size=(w, h))
        for row in run_size(
            path, w, h, [p for p in plan if not p['skip']], args.runs, args.warmup
        ):
            results.append(row)
            if 'skip' in row:
                print(f"ONNX Runtime {row['label']} {row['size']}: skipped: {row['skip']}")
                continue
            agree = (
                ''
                if 'labels_equal_pct' not in row
                else f"; vs CPU: depth within {row['max_depth_diff_m']:.1e} m, fused labels "
                f"{row['labels_equal_pct']:.3f} % equal"
            )
            print(
                f"ONNX Runtime {row['label']:>13} {row['size']}: {row['ms']:.2f} ms = "
                f"{row['fps']:.0f} frames/s (median of {row['runs']}, session load + warm-up "
                f"{row['load_s']:.1f} s){agree}"
            )
    (out / 'ort_gpu.json').write_text(
        json.dumps({'onnxruntime': ort.__version__, 'providers': avail, 'runs': results}, indent=1)
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
