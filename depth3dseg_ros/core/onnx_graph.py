"""The whole inference graph of `Depth3DSeg` (M1 + M2 + M3) in a form that exports to ONNX.

`InferenceGraph` computes what ``Depth3DSeg.forward(rgb_norm, K, measured_depth)`` computes, with
the same weights (it holds the model's own sub-modules), but with operators that ONNX (opset 17)
has:

- the k nearest neighbours of M3 (core.pointnet.knn_window) by k ``argmin`` passes over the
  window×window candidate distances instead of the int32 key trick of core.keys (ONNX has no
  bit-cast); the candidates are slices of the +inf-padded subsampled cloud, the neighbours' flat
  indices are computed in the graph, so the graph also works for a dynamic input size;
- no data-dependent Python branches: the general (masked) path of PointSegNet always runs (the
  "every point valid" shortcuts of the torch module give the same values, they only skip work);
- back-projection (core.geometry.backproject, M2) with the pixel grid built in the graph
  (cumulative sum of ones) and no K check (the caller checks K: core.geometry.check_intrinsics_np);
- the 3D-aware nearest upsampling by an ``argmin`` over the 4 candidate distances.

Tie-breaking differs from the torch module only where two candidate distances are equal to within
~4e-6 relative (core.keys quantises, ``argmin`` does not): the chosen neighbour can then differ (1
pixel of 76,800 on a random 320×240 frame). Batch 1 only. Choices made for ONNX Runtime's CPU
kernels (this 2-core machine): gathers of whole rows (its Gather copies element by element),
channel sums as 1×3 MatMuls, misses pointed at an extra table row instead of masks.
test/test_onnx_export.py checks the outputs against Depth3DSeg.forward.

The measured depth is a required input of the graph: all-NaN (no valid pixel) means "no measured
depth" and gives exactly the prediction-only cloud.
"""

from __future__ import annotations

from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .depth_calibration import focal_depth
from .depth_code import depth_code
from .model import Depth3DSeg
from .pointnet import PointSegNet

__all__ = ['InferenceGraph', 'INPUT_NAMES', 'OUTPUT_NAMES']

#: Graph inputs: rgb 1×3×H×W float32 normalised ((rgb/255 - mean)/std), K 1×3×3 float32 (at H×W),
#: measured_depth 1×1×H×W float32 metres (NaN, 0, negative = no data; all-NaN when there is none).
INPUT_NAMES = ('rgb', 'K', 'measured_depth')
#: Graph outputs: depth 1×1×H×W float32 m (the prediction, for K's camera: focal_depth),
#: seg2d / seg3d 1×C×H×W float32 logits, xyz 1×3×H×W float32 m (0 where invalid), valid 1×1×H×W
#: bool, measured 1×1×H×W bool.
OUTPUT_NAMES = ('depth', 'seg2d', 'seg3d', 'xyz', 'valid', 'measured')


def _iota(ref_1d: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0, 1, …, n-1 (length of the 1-D ``ref_1d``) built from the data, so a traced graph keeps it
    dynamic: cumulative sum of ones minus one."""
    return torch.ones_like(ref_1d, dtype=dtype).cumsum(0) - 1


def backproject_graph(depth: torch.Tensor, K: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """core.geometry.backproject without the K check (same arithmetic, same order): depth B×1×H×W
    m, K B×3×3 -> (xyz B×3×H×W, 0 where invalid; valid B×1×H×W bool)."""
    valid = torch.isfinite(depth) & (depth > 0)
    d = torch.where(valid, depth, torch.zeros_like(depth))
    u = _iota(depth[0, 0, 0, :], depth.dtype).view(1, 1, 1, -1)
    v = _iota(depth[0, 0, :, 0], depth.dtype).view(1, 1, -1, 1)
    fx = K[:, 0, 0].view(-1, 1, 1, 1)
    fy = K[:, 1, 1].view(-1, 1, 1, 1)
    s = K[:, 0, 1].view(-1, 1, 1, 1)
    cx = K[:, 0, 2].view(-1, 1, 1, 1)
    cy = K[:, 1, 2].view(-1, 1, 1, 1)
    ry = (v - cy) / fy
    rx = (u - cx) / fx - (s / fx) * ry
    return torch.cat([rx * d, ry * d, d], dim=1), valid


def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cross product over dim 1 of B×3×h×w tensors (torch.cross has no ONNX symbolic)."""
    a0, a1, a2 = a[:, 0:1], a[:, 1:2], a[:, 2:3]
    b0, b1, b2 = b[:, 0:1], b[:, 1:2], b[:, 2:3]
    return torch.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], 1)


def _normals(xyz: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """core.pointnet._normals with an exportable cross product (same formula)."""
    p = F.pad(xyz, (1, 1, 1, 1), mode='replicate')
    vv = F.pad(valid.float(), (1, 1, 1, 1)) > 0
    du = p[:, :, 1:-1, 2:] - p[:, :, 1:-1, :-2]
    dv = p[:, :, 2:, 1:-1] - p[:, :, :-2, 1:-1]
    n = _cross(du, dv)
    n = n / n.square().sum(1, keepdim=True).clamp_min(1e-12).sqrt()
    n = torch.where((n * xyz).sum(1, keepdim=True) > 0, -n, n)
    ok = (
        valid & vv[:, :, 1:-1, 2:] & vv[:, :, 1:-1, :-2] & vv[:, :, 2:, 1:-1] & vv[:, :, :-2, 1:-1]
    )
    return torch.where(ok, n, torch.zeros_like(n))


def _sum3(x: torch.Tensor) -> torch.Tensor:
    """Sum over the first axis (size 3) of x 3×… as a 1×3 matrix product -> 1×(…) flattened: one
    MatMul, where ONNX Runtime's ReduceSum over a size-3 axis was a slow strided pass."""
    return torch.matmul(torch.ones((1, 3), dtype=x.dtype), x.reshape(3, -1))


def knn_graph(
    p: torch.Tensor, v: torch.Tensor, k: int, window: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """core.pointnet.knn_window by ``topk``, batch 1: p 1×3×h×w m, v 1×1×h×w bool -> (idx k×(h·w)
    long flat indices, nearest first; mask k×(h·w) bool). Masked entries hold h·w, one past the
    last point:
    callers gather from tables with an extra row (zero coordinates, -inf features) there."""
    r = window // 2
    inf = float('inf')
    pad = F.pad(torch.where(v, p, torch.full_like(p, inf)), (r, r, r, r), value=inf)
    centre = torch.where(v, p, torch.full_like(p, -inf))
    sl: List[torch.Tensor] = []
    for dy in range(window):
        ye = dy - 2 * r if dy < 2 * r else None
        for dx in range(window):
            xe = dx - 2 * r if dx < 2 * r else None
            sl.append(pad[0, :, dy:ye, dx:xe])
    e = (torch.stack(sl, -1) - centre[0].unsqueeze(-1)).square()  # 3×h×w×win² (window last)
    d2 = _sum3(e).reshape(-1, window * window)  # N×win²
    # k × (ArgMin, knock the winner out): lowest window position on exact ties, like core.keys;
    # ONNX Runtime's TopK took ~2 ms here, these ~4 cheap passes over N×win²
    slots = _iota(d2[0], torch.int64).view(1, -1)
    dists, poss = [], []
    for j in range(k):
        pj = torch.argmin(d2, 1, keepdim=True)  # N×1
        dists.append(d2.gather(1, pj))
        poss.append(pj)
        if j + 1 < k:
            d2 = torch.where(slots == pj, torch.full_like(d2, inf), d2)
    dist, pos = torch.cat(dists, 1), torch.cat(poss, 1)  # N×k, nearest first
    mask = torch.isfinite(dist)
    yy = _iota(p[0, 0, :, 0], torch.int64).view(-1, 1)
    xx = _iota(p[0, 0, 0, :], torch.int64).view(1, -1)
    w = xx.shape[-1]
    flat = (yy * w + xx).reshape(-1, 1)  # N×1
    idx = (
        flat
        + (torch.div(pos, window, rounding_mode='floor') - r) * w
        + torch.remainder(pos, window)
        - r
    )
    idx = torch.where(mask, idx, torch.zeros_like(idx) + flat.shape[0])
    return idx.transpose(0, 1), mask.transpose(0, 1)


def pointnet_graph(
    pn: PointSegNet, xyz: torch.Tensor, valid: torch.Tensor, feats: torch.Tensor
) -> torch.Tensor:
    """PointSegNet.forward (general, masked path) with exportable operators, batch 1: xyz 1×3×H×W
    m, valid 1×1×H×W bool, feats 1×F×H×W -> 1×C×H×W logits (float32 model)."""
    st, o = pn.stride, pn.stride // 2
    if st > 1:
        v = valid[:, :, o::st, o::st]
        p0, f0 = xyz[:, :, o::st, o::st], feats[:, :, o::st, o::st]
    else:
        v, p0, f0 = valid, xyz, feats
    p = torch.where(v, p0, torch.zeros_like(p0))
    fc = torch.where(v, f0, torch.zeros_like(f0)) if pn.colour else torch.zeros_like(f0)
    inf = float('inf')
    idx, mask = knn_graph(p, v, pn.k, pn.window)  # k×N, masked -> N
    parts = [p, fc] + ([_normals(p, v)] if pn.normals else [])
    f = torch.cat(parts, 1).flatten(2).transpose(1, 2)  # B×N×F
    pf = p.flatten(2)  # B×3×N
    n = pf.shape[-1]
    pf_ext = torch.cat([pf[0], torch.zeros_like(pf[0, :, :1])], 1)  # 3×(N+1): row N = 0 (masked)
    nb = pf_ext.index_select(1, idx.reshape(-1)).reshape(1, 3, pn.k, n)
    rel = (nb - pf.unsqueeze(2)).permute(0, 2, 3, 1)  # B×k×N×3
    dist = torch.sqrt(rel.square().sum(-1, keepdim=True) + 1e-12)
    m = mask.unsqueeze(0).unsqueeze(-1).to(xyz.dtype)  # 1×k×N×1
    r = ((dist * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1)).clamp(min=1e-3)
    geo = torch.cat([rel, rel / r, dist], -1) * m  # B×k×N×7
    outs = []
    for layer in pn.layers:
        g = F.linear(geo[0], layer.wg.weight)  # k×N×C
        a = layer.wn(f)[0]  # N×C
        # row N = -inf: a masked neighbour never wins the max (masked_fill without a pass per rank)
        a = torch.cat([a, torch.full_like(a[:1], -inf)], 0)
        best = None
        for j in range(pn.k):
            e = a.index_select(0, idx[j]) + g[j]  # N×C
            best = e if best is None else torch.maximum(best, e)
        f = layer.post(torch.relu(layer.wc(f) + best.unsqueeze(0))).relu()
        outs.append(f)
    vmask = v.flatten(2).transpose(1, 2).to(f.dtype)  # B×N×1
    gfeat = (f * vmask).amax(1)
    hdn = torch.relu(pn.head_local(torch.cat(outs, -1)) + pn.head_global(gfeat).unsqueeze(1))
    logits = pn.out(hdn) * vmask  # B×N×C
    return _upsample_graph(logits, p, v, xyz, valid, st)


def _upsample_graph(
    logits: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    xyz: torch.Tensor,
    valid: torch.Tensor,
    st: int,
) -> torch.Tensor:
    """PointSegNet._upsample for batch 1: 1×N×C -> 1×C×H×W, each pixel takes the logits of the
    valid subsampled point nearest in 3D among its 2×2 candidates (0 where none is valid or the
    pixel is invalid). Candidates as slices of an upsampled grid, logits gathered as whole rows,
    misses pointed at a zero row: ONNX Runtime's Gather copies element by element (1 ms per
    76,800-element gather on this CPU), so per-pixel 1-D gathers and full-resolution masks were
    avoided."""
    lc = logits[0].transpose(0, 1)  # C×N
    c = lc.shape[0]
    if st == 1:
        return lc.reshape(1, c, xyz.shape[2], xyz.shape[3])
    o, inf = st // 2, float('inf')
    hh = _iota(p[0, 0, :, 0], torch.int64)
    ww = _iota(p[0, 0, 0, :], torch.int64)
    h1, w1 = hh[-1:], ww[-1:]  # h-1, w-1 (1-element tensors)
    Y = _iota(xyz[0, 0, :, 0], torch.int64)
    X = _iota(xyz[0, 0, 0, :], torch.int64)
    y0 = torch.div(Y - o + st, st, rounding_mode='floor') - 1  # floor((Y - o) / st) >= -1
    x0 = torch.div(X - o + st, st, rounding_mode='floor') - 1
    ys = [torch.minimum(torch.clamp(y0 + a, min=0), h1) for a in (0, 1)]
    xs = [torch.minimum(torch.clamp(x0 + a, min=0), w1) for a in (0, 1)]
    n = hh.shape[0] * ww.shape[0]
    cands = [(y.view(-1, 1) * ww.shape[0] + x.view(1, -1)).reshape(-1) for y in ys for x in xs]
    # candidate (a, b) of pixel (Y, X) = subsampled point (y0 + a, x0 + b) clamped, i.e. a slice of
    # the edge-padded grid nearest-upsampled by st (as core.pointnet does): no per-pixel gathers
    H, W = xyz.shape[2], xyz.shape[3]
    pinf = torch.where(v, p, torch.full_like(p, inf))  # +inf at invalid points
    up = F.interpolate(
        F.pad(pinf, (1, 1, 1, 1), mode='replicate'), scale_factor=float(st), mode='nearest'
    )
    ds = []
    for i in range(4):
        y, x = st * (i // 2 + 1) - o, st * (i % 2 + 1) - o
        ds.append(
            _sum3((up[0, :, y : y + H, x : x + W] - xyz[0]).square())[0]
        )  # HW, +inf: invalid
    # the nearest of the 4 by pairwise comparisons (lowest candidate on exact ties, like argmin;
    # ONNX Runtime's ReduceMin/ArgMin over a leading axis of 4 were slow strided passes), on
    # float32 indices (exact below 2^24 points; its Where on int64 was ~10x slower than on float32)
    cf = [ci.to(torch.float32) for ci in cands]
    d01, d23 = torch.minimum(ds[0], ds[1]), torch.minimum(ds[2], ds[3])
    s01 = torch.where(ds[1] < ds[0], cf[1], cf[0])
    s23 = torch.where(ds[3] < ds[2], cf[3], cf[2])
    src = torch.where(d23 < d01, s23, s01)
    dmin = torch.minimum(d01, d23)
    found = torch.isfinite(dmin) & valid.flatten()
    src = torch.where(found, src, torch.zeros_like(src) + n).to(
        torch.int64
    )  # misses -> the zero row
    lcz = torch.cat(
        [logits[0], torch.zeros_like(logits[0, :1])], 0
    )  # (N+1)×C: rows gathered whole
    return lcz.index_select(0, src).transpose(0, 1).reshape(1, c, H, W)


class InferenceGraph(nn.Module):
    """M1 + M2 + M3 of a (BatchNorm-folded, float32, eval) `Depth3DSeg` as one exportable module.

    forward(rgb 1×3×H×W float32 normalised, K 1×3×3 float32 at H×W, measured_depth 1×1×H×W float32
    m, all-NaN when none) -> (depth, seg2d, seg3d, xyz, valid, measured) as in OUTPUT_NAMES. Batch
    1 only (the upsampling indexes one image). Holds the model's sub-modules (no copy).
    """

    def __init__(self, model: Depth3DSeg):
        super().__init__()
        self.net = model.net
        self.pointnet = model.pointnet
        a = model.arch
        #: (depth_focal, min_depth, max_depth, depth_gain): the depth head's calibration (model.py)
        self.focal = (a['depth_focal'], a['min_depth'], a['max_depth'], a['depth_gain'])

    def forward(self, rgb: torch.Tensor, K: torch.Tensor, measured_depth: torch.Tensor):
        """M1 + M2 + M3 as in `Depth3DSeg.forward`, in exportable operators.

        rgb 1×3×H×W float32 (normalised), K 1×3×3 float32 (at H×W, pixels), measured_depth 1×1×H×W
        float32 m (NaN/±inf/<= 0 = no data; all-NaN when none) -> tuple in OUTPUT_NAMES order:
        depth 1×1×H×W m (predicted), seg2d 1×C×H×W logits, seg3d 1×C×H×W logits, xyz 1×3×H×W m
        float32 (0 where invalid), valid 1×1×H×W bool, measured 1×1×H×W bool.
        """
        # a code_input net (RGB-D input) also sees the geometry code of the measured depth; all-NaN
        # measured depth gives an all-zero code, as Depth3DSeg without measured depth
        code = depth_code(measured_depth, K) if self.net.code_input else None
        out = self.net(rgb, code)
        pred = focal_depth(out['depth'], K, *self.focal)
        measured = torch.isfinite(measured_depth) & (measured_depth > 0)
        depth = torch.where(measured, measured_depth, pred)
        xyz, valid = backproject_graph(depth, K)
        seg3d = pointnet_graph(self.pointnet, xyz, valid, rgb)
        return pred, out['seg2d'], seg3d, xyz, valid, measured
