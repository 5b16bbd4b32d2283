"""Benchmark of the core networks (M1 DepthSegNet, M3 PointSegNet, Depth3DSeg, Segmenter.infer).

Prints, per input size (default 320×240 and 640×480): median forward ms/frame and frames/s (after
warm-up) of the 2D+depth model, of the 3D network alone (on the cloud of the predicted depth) and
of the whole Depth3DSeg forward, as trained and in the Segmenter's inference form (BN folded,
channels-last); FLOPs (torch.utils.flop_counter.FlopCounterMode) and parameters; the ratio 3D / 2D
time, and the ratio of the whole forward at 320×240 to the 33.3 ms camera period (30 Hz); and the
Segmenter's end-to-end infer() of a 640×480 uint8 frame (resize, normalise, forward, postprocess).

    python bench/bench_core.py                      # CPU, torch's default threads
    python bench/bench_core.py --threads 1
    python bench/bench_core.py --device cuda --half # GPU machine: imports no ROS module
    python bench/bench_core.py --threads 1 --onnx   # + torch vs ONNX Runtime, interleaved

``--onnx`` (needs onnx + onnxruntime) exports the inference form's 2D+depth net, 3D net and whole
graph (core.onnx_export) to a temporary directory and times each against its torch counterpart
interleaved (pairs back to back, median of the per-pair ratios ONNX Runtime / torch), ONNX Runtime
with as many intra-op threads as torch uses; then Segmenter.infer with backend='torch' vs
'onnxruntime', interleaved: 'split' (the CPU default: 2D+depth net in ONNX Runtime up to the
heads' 1/2-resolution outputs, cv2 upsampling, back-projection + 3D net in torch; core.ort_split)
and 'whole' (the whole graph in ONNX Runtime); and the split form's 2D+depth part alone.

Imports only depth3dseg_ros.core (no rclpy), so it runs on a GPU machine with a CUDA torch and no
ROS.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depth3dseg_ros.core.classes import NYU13  # noqa: E402
from depth3dseg_ros.core.geometry import resize_intrinsics  # noqa: E402
from depth3dseg_ros.core.inference import Segmenter, resolve_device  # noqa: E402
from depth3dseg_ros.core.model import (  # noqa: E402
    Depth3DSeg,
    count_flops,
    count_params,
    fold_batchnorm,
)
from depth3dseg_ros.core.modelfile import save_model  # noqa: E402

CAMERA_PERIOD_MS = 1000.0 / 30.0
NYU_K = np.array([[518.8579, 0, 325.5824], [0, 519.4696, 253.7362], [0, 0, 1]])


def _once(fn, device: torch.device) -> float:
    """Wall milliseconds of one fn() call (CUDA: synchronised before and after)."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fn()
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3


def _time(fn, device: torch.device, runs: int, warmup: int) -> float:
    """Median wall milliseconds of fn() over `runs` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    return statistics.median(_once(fn, device) for _ in range(runs))


def _ratio(fn_a, fn_b, device: torch.device, runs: int, warmup: int) -> tuple:
    """Interleaved timing: (median ms of fn_a, median ms of fn_b, median of the per-pair ratios
    a/b). Each pair runs back to back, so both see the same machine state (CPU frequency,
    neighbours' load): the ratio is steadier than the ratio of two separately timed medians."""
    for _ in range(warmup):
        fn_a(), fn_b()
    pairs = [(_once(fn_a, device), _once(fn_b, device)) for _ in range(runs)]
    return (
        statistics.median(a for a, _ in pairs),
        statistics.median(b for _, b in pairs),
        statistics.median(a / b for a, b in pairs),
    )


def bench_size(
    model: Depth3DSeg,
    fast: Depth3DSeg,
    w: int,
    h: int,
    device: torch.device,
    dtype: torch.dtype,
    runs: int,
    warmup: int,
) -> dict:
    """Time one input size w×h (2D, 3D, whole forward; as trained and in the fast form) and count
    FLOPs."""
    torch.manual_seed(0)
    x = torch.randn(1, 3, h, w, device=device, dtype=dtype)
    K = torch.as_tensor(resize_intrinsics(NYU_K, (640, 480), (w, h)), dtype=dtype, device=device)[
        None
    ]
    with torch.inference_mode():
        out = model(x, K)
        xyz, valid = out['xyz'], out['valid']
        t2d = _time(lambda: model.net(x), device, runs, warmup)
        t3d = _time(lambda: model.pointnet(xyz, valid, x), device, runs, warmup)
        tall = _time(lambda: model(x, K), device, runs, warmup)
        xc = x.contiguous(memory_format=torch.channels_last)
        t2f = _time(lambda: fast.net(xc), device, runs, warmup)
        outf = fast(xc, K)
        t3f = _time(lambda: fast.pointnet(outf['xyz'], outf['valid'], xc), device, runs, warmup)
        # the node's form, 3D vs 2D interleaved (the figure for the <= 0.30 goal)
        t3i, t2i, ratio_i = _ratio(
            lambda: fast.pointnet(outf['xyz'], outf['valid'], xc),
            lambda: fast.net(xc),
            device,
            max(runs, 50),
            warmup,
        )
        tallf = _time(lambda: fast(xc, K), device, runs, warmup)
    xf, Kf = x.float().cpu(), K.float().cpu()
    m_cpu = model if device.type == 'cpu' and dtype == torch.float32 else None
    flops = {}
    if m_cpu is not None:
        flops = {
            '2d': count_flops(m_cpu.net, xf),
            '3d': count_flops(m_cpu.pointnet, xyz, valid, xf),
            'all': count_flops(m_cpu, xf, Kf),
        }
    return {
        'size': f'{w}x{h}',
        'ms_2d': t2d,
        'ms_3d': t3d,
        'ms_all': tall,
        'fps_all': 1000.0 / tall,
        'ratio_3d_2d': t3d / t2d,
        'ms_2d_fast': t2f,
        'ms_3d_fast': t3f,
        'ratio_3d_2d_fast': t3f / t2f,
        'ms_all_fast': tallf,
        'ms_3d_interleaved': t3i,
        'ms_2d_interleaved': t2i,
        'ratio_3d_2d_interleaved': ratio_i,
        'flops': flops,
    }


class _Net2D(torch.nn.Module):
    """The 2D+depth net with tuple outputs (exportable)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net(x)
        return out['depth'], out['seg2d']


class _Net3D(torch.nn.Module):
    """The 3D net in its exportable form (core.onnx_graph.pointnet_graph)."""

    def __init__(self, pointnet):
        super().__init__()
        self.pointnet = pointnet

    def forward(self, xyz, valid, feats):
        from depth3dseg_ros.core.onnx_graph import pointnet_graph

        return pointnet_graph(self.pointnet, xyz, valid, feats)


def bench_onnx(model: Depth3DSeg, w: int, h: int, runs: int, warmup: int, threads: int) -> dict:
    """torch (inference form) vs ONNX Runtime (CPU provider, `threads` intra-op threads),
    interleaved, for the 2D+depth net, the 3D net and the whole graph at w×h; and Segmenter.infer
    of a 640×480 frame with either backend. Returns {part: (ms ONNX Runtime, ms torch, median ratio
    ORT/torch)}."""
    import tempfile

    import onnxruntime as ort

    from depth3dseg_ros.core.onnx_export import export_module, export_onnx
    from depth3dseg_ros.core.onnx_graph import InferenceGraph

    cpu = torch.device('cpu')
    fast = fold_batchnorm(copy.deepcopy(model).float().cpu().eval())
    fast_cl = copy.deepcopy(fast).to(memory_format=torch.channels_last)
    torch.manual_seed(0)
    x = torch.randn(1, 3, h, w)
    xc = x.contiguous(memory_format=torch.channels_last)
    K = torch.as_tensor(resize_intrinsics(NYU_K, (640, 480), (w, h)), dtype=torch.float32)[None]
    nan = torch.full((1, 1, h, w), float('nan'))
    with torch.inference_mode():
        out = fast_cl(xc, K)
    xyz, valid = out['xyz'], out['valid']
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        export_module(_Net2D(fast.net), (x,), t / '2d.onnx', ['rgb'], ['depth', 'seg2d'])
        export_module(
            _Net3D(fast.pointnet),
            (xyz, valid, x),
            t / '3d.onnx',
            ['xyz', 'valid', 'feats'],
            ['seg3d'],
        )
        export_module(
            InferenceGraph(fast),
            (x, K, nan),
            t / 'all.onnx',
            ['rgb', 'K', 'measured_depth'],
            ['depth', 'seg2d', 'seg3d', 'xyz', 'valid', 'measured'],
        )
        sess = {
            k: ort.InferenceSession(str(t / f'{k}.onnx'), so, providers=['CPUExecutionProvider'])
            for k in ('2d', '3d', 'all')
        }
        xn, Kn, nn_ = x.numpy(), K.numpy(), nan.numpy()
        with torch.inference_mode():
            res['2d'] = _ratio(
                lambda: sess['2d'].run(None, {'rgb': xn}),
                lambda: fast_cl.net(xc),
                cpu,
                runs,
                warmup,
            )
            f3 = {'xyz': xyz.numpy(), 'valid': valid.numpy(), 'feats': xn}
            res['3d'] = _ratio(
                lambda: sess['3d'].run(None, f3),
                lambda: fast_cl.pointnet(xyz, valid, xc),
                cpu,
                runs,
                warmup,
            )
            fa = {'rgb': xn, 'K': Kn, 'measured_depth': nn_}
            res['whole'] = _ratio(
                lambda: sess['all'].run(None, fa), lambda: fast_cl(xc, K), cpu, runs, warmup
            )
        # end to end through Segmenter (preprocess, forward, core.fusion postprocess), 640x480 -> w
        # x h
        pt = save_model(t / 'm.pt', model.float().cpu(), {'classes': NYU13, 'input_size': [w, h]})
        export_onnx(pt, t / 'm.onnx')
        seg_t = Segmenter(pt, device='cpu', backend='torch', num_threads=threads)
        seg_o = Segmenter(t / 'm.onnx', device='cpu', num_threads=threads)  # CPU default: split
        seg_w = Segmenter(t / 'm.onnx', device='cpu', num_threads=threads, ort_split='whole')
        with torch.inference_mode():  # M1 as the split runs it: ORT to 1/2 res + cv2 upsampling
            res['2d_split'] = _ratio(
                lambda: seg_o.ort.split_model.net(x), lambda: fast_cl.net(xc), cpu, runs, warmup
            )
        rgb = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
        res['segmenter'] = _ratio(
            lambda: seg_o.infer(rgb, NYU_K), lambda: seg_t.infer(rgb, NYU_K), cpu, runs, warmup
        )
        res['segmenter_whole'] = _ratio(
            lambda: seg_w.infer(rgb, NYU_K), lambda: seg_t.infer(rgb, NYU_K), cpu, runs, warmup
        )
    return res


def main(argv=None) -> int:
    """Run the core-network benchmark (CLI); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default='cpu', help="'cpu', 'cuda', 'auto'")
    ap.add_argument('--half', action='store_true', help='fp16 (CUDA only)')
    ap.add_argument(
        '--threads', type=int, default=None, help='torch CPU threads (default: torch default)'
    )
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--warmup', type=int, default=3)
    ap.add_argument('--sizes', default='320x240,640x480')
    ap.add_argument('--arch', default='{}', help='JSON overrides of the default arch')
    ap.add_argument('--json', default=None, help='also write the figures to this JSON file')
    ap.add_argument(
        '--onnx', action='store_true', help='also torch vs ONNX Runtime (CPU), interleaved'
    )
    ap.add_argument(
        '--onnx-only', action='store_true', help='only the torch vs ONNX Runtime section'
    )
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    if args.half and device.type != 'cuda':
        ap.error('--half needs --device cuda')
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.float16 if args.half else torch.float32
    model = Depth3DSeg(len(NYU13), **json.loads(args.arch)).eval()
    params = {
        'all': count_params(model),
        '2d': count_params(model.net),
        '3d': count_params(model.pointnet),
    }
    # FLOPs on the fp32 CPU copy (the count does not depend on the device)
    flops320 = {
        '2d': count_flops(model.net, torch.randn(1, 3, 240, 320)),
        'all': count_flops(
            model,
            torch.randn(1, 3, 240, 320),
            torch.as_tensor(resize_intrinsics(NYU_K, (640, 480), (320, 240)), dtype=torch.float32)[
                None
            ],
        ),
    }
    model = model.to(device, dtype)
    # the Segmenter's inference form: BatchNorm folded, channels-last
    fast = fold_batchnorm(copy.deepcopy(model)).to(memory_format=torch.channels_last)
    print(
        f'device {device} dtype {dtype} torch {torch.__version__} threads '
        f'{torch.get_num_threads()} '
        f'cpus {os.cpu_count()} runs {args.runs} (median after {args.warmup} warm-up)'
    )
    onnx_res = {}
    if args.onnx or args.onnx_only:
        import onnxruntime

        threads = torch.get_num_threads()
        print(
            f'torch vs ONNX Runtime {onnxruntime.__version__} (CPU provider, {threads} intra-op '
            f'threads), interleaved, {max(args.runs, 30)} pairs; inference form (BN folded; torch '
            'channels-last):'
        )
        for s in args.sizes.split(','):
            w, h = (int(v) for v in s.lower().split('x'))
            r = bench_onnx(model, w, h, max(args.runs, 30), args.warmup, threads)
            torch.set_num_threads(threads)  # the Segmenters set it too
            onnx_res[f'{w}x{h}'] = r
            for part, label in (
                ('2d', '2D+depth net'),
                ('2d_split', '2D+depth net, split form'),
                ('3d', '3D net'),
                ('whole', 'whole graph'),
                ('segmenter', f'Segmenter.infer 640x480->{w}x{h} split'),
                ('segmenter_whole', f'Segmenter.infer 640x480->{w}x{h} whole'),
            ):
                o, t, q = r[part]
                print(
                    f"{w}x{h:<4} {label:>36}: ONNX Runtime {o:7.2f} ms | torch {t:7.2f} ms | "
                    f"ORT/torch {q:.2f}"
                )
        if args.onnx_only:
            if args.json:
                Path(args.json).write_text(
                    json.dumps({'threads': threads, 'onnx': onnx_res}, indent=1)
                )
            return 0
    print(f"arch {json.dumps(model.arch)}")
    print(
        f"params: all {params['all'] / 1e6:.3f} M, 2D+depth {params['2d'] / 1e6:.3f} M, "
        f"3D {params['3d'] / 1e6:.3f} M"
    )
    print(
        f"FLOPs at 320x240: 2D+depth {flops320['2d'] / 1e9:.3f} G, whole "
        f"{flops320['all'] / 1e9:.3f} G, "
        f"3D {(flops320['all'] - flops320['2d']) / 1e9:.3f} G"
    )
    results = []
    for s in args.sizes.split(','):
        w, h = (int(v) for v in s.lower().split('x'))
        r = bench_size(model, fast, w, h, device, dtype, args.runs, args.warmup)
        results.append(r)
        print(
            f"{r['size']:>8}: 2D+depth {r['ms_2d']:7.2f} ms | 3D net {r['ms_3d']:7.2f} ms "
            f"(3D/2D {r['ratio_3d_2d']:.2f}) | whole {r['ms_all']:7.2f} ms = {r['fps_all']:6.1f} "
            "frames/s"
        )
        print(
            f"{'':>10}inference form (BN folded, channels-last): 2D+depth {r['ms_2d_fast']:7.2f} "
            "ms | "
            f"3D net {r['ms_3d_fast']:7.2f} ms (3D/2D {r['ratio_3d_2d_fast']:.2f}) | "
            f"whole {r['ms_all_fast']:7.2f} ms = {1000 / r['ms_all_fast']:6.1f} frames/s"
        )
        print(
            f"{'':>10}3D / 2D in that form, timed interleaved: {r['ratio_3d_2d_interleaved']:.3f} "
            f"(3D {r['ms_3d_interleaved']:.2f} ms, 2D+depth {r['ms_2d_interleaved']:.2f} ms; goal "
            "<= 0.30)"
        )
        if r['flops']:
            print(
                f"{'':>10}FLOPs 2D+depth {r['flops']['2d'] / 1e9:.3f} G, 3D "
                f"{r['flops']['3d'] / 1e9:.3f} G, "
                f"whole {r['flops']['all'] / 1e9:.3f} G"
            )
    ref = next((r for r in results if r['size'] == '320x240'), None)
    if ref is not None:
        print(
            f"whole forward at 320x240 / camera period {CAMERA_PERIOD_MS:.1f} ms = "
            f"{ref['ms_all'] / CAMERA_PERIOD_MS:.2f} (inference form "
            f"{ref['ms_all_fast'] / CAMERA_PERIOD_MS:.2f})"
        )
    # end to end: 640x480 uint8 frame -> Segmenter at 320x240
    seg = Segmenter.from_model(
        model.float(),
        {'classes': NYU13, 'input_size': [320, 240]},
        device=str(device),
        half=args.half,
        num_threads=0,
    )  # keep --threads
    rgb = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    seg.warmup(args.warmup)
    parts = {'preprocess': [], 'inference': [], 'postprocess': []}
    totals = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        res = seg.infer(rgb, NYU_K, 'fused')
        totals.append((time.perf_counter() - t0) * 1e3)
        for k in parts:
            parts[k].append(res.timings[k])
    med = {k: statistics.median(v) for k, v in parts.items()}
    tot = statistics.median(totals)
    print(
        f"Segmenter.infer 640x480 -> 320x240 fused: {tot:.2f} ms = {1000 / tot:.1f} frames/s "
        f"(preprocess {med['preprocess']:.2f}, inference {med['inference']:.2f}, "
        f"postprocess {med['postprocess']:.2f} ms); / camera period = {tot / CAMERA_PERIOD_MS:.2f}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    'device': str(device),
                    'half': args.half,
                    'threads': torch.get_num_threads(),
                    'params': params,
                    'flops_320x240': flops320,
                    'sizes': results,
                    'segmenter_ms': tot,
                    'segmenter_parts_ms': med,
                    'onnx': onnx_res,
                },
                indent=1,
            )
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
