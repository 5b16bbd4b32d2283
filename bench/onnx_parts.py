"""torch against ONNX Runtime for bench/bench_core.py --onnx: the inference form's 2D+depth net,
3D net and whole graph exported (core.onnx_export) and timed interleaved with their torch
counterparts, then Segmenter.infer with either backend. Needs onnx + onnxruntime."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.geometry import resize_intrinsics
from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.model import Depth3DSeg, fold_batchnorm
from depth3dseg_ros.core.modelfile import save_model
from timing import interleaved

#: NYU Depth v2's colour camera at 640×480 (the frame the Segmenter benchmarks feed)
NYU_K = np.array([[518.8579, 0, 325.5824], [0, 519.4696, 253.7362], [0, 0, 1]])


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
            res['2d'] = interleaved(
                lambda: sess['2d'].run(None, {'rgb': xn}),
                lambda: fast_cl.net(xc),
                cpu,
                runs,
                warmup,
            )
            f3 = {'xyz': xyz.numpy(), 'valid': valid.numpy(), 'feats': xn}
            res['3d'] = interleaved(
                lambda: sess['3d'].run(None, f3),
                lambda: fast_cl.pointnet(xyz, valid, xc),
                cpu,
                runs,
                warmup,
            )
            fa = {'rgb': xn, 'K': Kn, 'measured_depth': nn_}
            res['whole'] = interleaved(
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
            res['2d_split'] = interleaved(
                lambda: seg_o.ort.split_model.net(x), lambda: fast_cl.net(xc), cpu, runs, warmup
            )
        rgb = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
        res['segmenter'] = interleaved(
            lambda: seg_o.infer(rgb, NYU_K), lambda: seg_t.infer(rgb, NYU_K), cpu, runs, warmup
        )
        res['segmenter_whole'] = interleaved(
            lambda: seg_w.infer(rgb, NYU_K), lambda: seg_t.infer(rgb, NYU_K), cpu, runs, warmup
        )
    return res
