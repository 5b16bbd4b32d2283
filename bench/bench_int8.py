"""ONNX Runtime INT8 static quantisation trial of the exported whole graph (issue 13): speed and
mIoU.

Quantises only the convolutions (the 2D+depth net; the 3D net's geometry and small MatMuls stay
float32) with onnxruntime.quantization.quantize_static (QDQ, per-channel int8 weights, uint8
activations, MinMax calibration) calibrated on synthetic frames of a dataset directory
(depth3dseg-synth -> depth3dseg-extract; docs/ARCHITECTURE.md "Dataset directory"), then compares
on other frames of the same kind and on the real labelled frames (trainutil.real_frames,
$DEPTH3DSEG_SAMPLE_DATA):

- fused / 2D mIoU (core.metrics.ConfusionMatrix) of torch fp32, ONNX Runtime fp32 and ONNX Runtime
  int8;
- label agreement int8 vs fp32;
- Segmenter.infer time, ONNX Runtime int8 vs fp32 vs torch, interleaved (CPU provider, --threads).

    python bench/bench_int8.py --calib data/ds_synth_train --eval data/ds_synth_val --threads 1

Imports no ROS module. Writes nothing outside a temporary directory unless --keep DIR.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'test'))
from depth3dseg_ros.core.inference import Segmenter  # noqa: E402
from depth3dseg_ros.core.metrics import ConfusionMatrix  # noqa: E402
from depth3dseg_ros.core.onnx_export import export_onnx, read_onnx_meta  # noqa: E402


def _frames(root: Path, start: int, count: int):
    """(rgb uint8 RGB, K 3×3, labels | None) of index.jsonl lines start..start+count of a dataset
    dir."""
    lines = (root / 'index.jsonl').read_text().splitlines()[start : start + count]
    for line in lines:
        rec = json.loads(line)
        rgb = cv2.cvtColor(cv2.imread(str(root / rec['rgb'])), cv2.COLOR_BGR2RGB)
        lab = (
            cv2.imread(str(root / rec['labels']), cv2.IMREAD_UNCHANGED)
            if rec.get('labels')
            else None
        )
        yield rgb, np.asarray(rec['K'], np.float64).reshape(3, 3), lab


class _Calib:
    """onnxruntime CalibrationDataReader over preprocessed frames (Segmenter._preprocess, so the
    calibration inputs are exactly what inference feeds)."""

    def __init__(self, seg: Segmenter, frames):
        w, h = seg.input_size
        self.items = []
        for rgb, K, _ in frames:
            _, Kn, x = seg._preprocess(rgb, K)
            self.items.append(
                {
                    'rgb': x.numpy().copy(),
                    'K': np.asarray(Kn, np.float32)[None],
                    'measured_depth': np.full((1, 1, h, w), np.nan, np.float32),
                }
            )
        self.it = iter(self.items)

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.items)


def _miou(segs, frames, num_classes):
    cms = {k: {s: ConfusionMatrix(num_classes) for s in ('fused', '2d')} for k in segs}
    agree = {k: [0, 0] for k in segs}
    for rgb, K, lab in frames:
        if lab is None:
            continue
        res = {}
        for k, seg in segs.items():
            for src in ('fused', '2d'):
                r = seg.infer(rgb, K, src)
                gt = cv2.resize(lab, seg.input_size, interpolation=cv2.INTER_NEAREST)
                cms[k][src].update(r.labels.astype(np.int64), gt.astype(np.int64))
                res[(k, src)] = r.labels
        for k in segs:
            agree[k][0] += int((res[(k, 'fused')] == res[('ort_fp32', 'fused')]).sum())
            agree[k][1] += res[(k, 'fused')].size
    return {
        k: {
            'miou_fused': cms[k]['fused'].miou(),
            'miou_2d': cms[k]['2d'].miou(),
            'fused_labels_equal_to_ort_fp32': agree[k][0] / max(1, agree[k][1]),
        }
        for k in segs
    }


def main(argv=None) -> int:
    """Run the INT8 quantisation trial (CLI): export, quantise, compare speed and mIoU; exit
    status."""
    ap = argparse.ArgumentParser(description=' '.join(__doc__.split('\n\n')[0].split()))
    ap.add_argument('--model', type=Path, default=REPO / 'models' / 'depth3dseg_nyu13.pt')
    ap.add_argument('--calib', type=Path, required=True, help='dataset dir of calibration frames')
    ap.add_argument('--calib-frames', type=int, default=32)
    ap.add_argument('--eval', type=Path, required=True, help='dataset dir of evaluation frames')
    ap.add_argument('--eval-frames', type=int, default=100)
    ap.add_argument('--real', action='store_true', help='also the real labelled frames')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--runs', type=int, default=30)
    ap.add_argument(
        '--keep', type=Path, default=None, help='keep the .onnx files in this directory'
    )
    ap.add_argument(
        '--skip-depthwise',
        action='store_true',
        help='quantise only convolutions with group == 1 (depthwise stay float32)',
    )
    args = ap.parse_args(argv)
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        fp32 = out / (args.model.stem + '.onnx')
        export_onnx(args.model, fp32)
        seg_f = Segmenter(fp32, device='cpu', num_threads=args.threads)
        pre = out / 'pre.onnx'
        quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
        int8 = out / (args.model.stem + '_int8.onnx')
        nodes = None
        if args.skip_depthwise:
            import onnx

            g = onnx.load(str(pre), load_external_data=False).graph
            nodes = [
                n.name
                for n in g.node
                if n.op_type == 'Conv' and all(a.name != 'group' or a.i == 1 for a in n.attribute)
            ]
            print(
                f'quantising {len(nodes)} of {sum(n.op_type == "Conv" for n in g.node)} '
                'convolutions (group == 1 only)'
            )
        t0 = time.perf_counter()
        quantize_static(
            str(pre),
            str(int8),
            _Calib(seg_f, _frames(args.calib, 0, args.calib_frames)),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=['Conv'],
            per_channel=True,
            nodes_to_quantize=nodes,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )
        tq = time.perf_counter() - t0
        # quantize_static keeps the model's metadata_props? copy them over to be sure
        import onnx

        src = onnx.load(str(fp32), load_external_data=False)
        q = onnx.load(str(int8))
        del q.metadata_props[:]
        for p in src.metadata_props:
            e = q.metadata_props.add()
            e.key, e.value = (
                p.key,
                (p.value if p.key != 'graph' else p.value + ' (INT8 QDQ convolutions)'),
            )
        onnx.save(q, str(int8))
        read_onnx_meta(int8)
        print(
            f'quantised {int8.name} in {tq:.1f} s on {args.calib_frames} frames of {args.calib}; '
            f'{fp32.stat().st_size / 1e6:.2f} MB -> {int8.stat().st_size / 1e6:.2f} MB'
        )
        segs = {
            'torch_fp32': Segmenter(
                args.model, device='cpu', backend='torch', num_threads=args.threads
            ),
            'ort_fp32': seg_f,
            'ort_int8': Segmenter(int8, device='cpu', num_threads=args.threads),
        }
        res = {'eval_synthetic': _miou(segs, _frames(args.eval, 0, args.eval_frames), 14)}
        if args.real:
            from depth3dseg_ros.samples import fetch_all
            from trainutil import real_frames

            res['real'] = _miou(
                segs, ((rgb, K, lab) for _, rgb, _, lab, K in real_frames(fetch_all())), 14
            )
        for part, r in res.items():
            for k, v in r.items():
                print(
                    f"{part:>15} {k:>10}: mIoU fused {v['miou_fused']:.4f}, 2D "
                    f"{v['miou_2d']:.4f}; fused labels "
                    f"equal to ORT fp32 {100 * v['fused_labels_equal_to_ort_fp32']:.2f} %"
                )
        rgb = next(_frames(args.eval, 0, 1))[0]
        rgb = cv2.resize(rgb, (640, 480))
        K = np.array([[468.0, 0, 320], [0, 468.0, 238], [0, 0, 1]])
        names = list(segs)
        for s in segs.values():
            for _ in range(3):
                s.infer(rgb, K)
        times = {k: [] for k in names}
        for _ in range(args.runs):  # interleaved: each round runs all three back to back
            for k in names:
                t = time.perf_counter()
                segs[k].infer(rgb, K)
                times[k].append((time.perf_counter() - t) * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio_q = statistics.median(a / b for a, b in zip(times['ort_int8'], times['ort_fp32']))
        ratio_t = statistics.median(a / b for a, b in zip(times['ort_int8'], times['torch_fp32']))
        print(
            f"Segmenter.infer 640x480 fused, {args.threads} thread(s), {args.runs} interleaved "
            "rounds: "
            + ', '.join(f'{k} {v:.1f} ms' for k, v in med.items())
            + f'; int8/ort_fp32 {ratio_q:.2f}, int8/torch {ratio_t:.2f}'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
