"""M3: point-cloud semantic segmentation over the organized cloud of the predicted depth.

An EdgeConv-style network (Wang et al. 2019, "Dynamic Graph CNN for Learning on Point Clouds";
static graph over metric 3D positions, as in PointNet++ set abstraction, Qi et al. 2017) that runs
at a reduced resolution (every ``stride``-th pixel, the centre pixel of each stride×stride block):

1. neighbours: for each point, the candidates are the points of a ``window``×``window`` pixel
   window of the subsampled organized cloud; the ``k`` nearest by metric 3D distance are kept
   (core.keys); invalid candidates (no depth, outside the image) get +inf distance and are masked
   out, so the cost is O(N·k) and pixel-adjacent points that are far apart in 3D (across a depth
   edge) are not neighbours;
2. per-point input features: X, Y, Z (metres, optical frame), colour (or zeros in its place for
   a geometry-only net, ``colour=False``), and optionally the organized-cloud normal (cross
   product of the 4-neighbour differences, zero where a neighbour is invalid);
3. EdgeConv layers (``channels``; two by default) ``h_i = max_j ReLU(W_n f_j + W_c f_i + W_g
   g_ij)`` over the valid neighbours j, with edge geometry g_ij = [p_j − p_i (m), (p_j − p_i)/r_i,
   |p_j − p_i|]:
   relative coordinates, and the same in the local scale frame r_i = mean neighbour distance (so
   the features do not change with the sampling density, which falls with depth); then a per-point
   1×1 layer;
4. a PointNet global feature (max over the valid points) and a per-point head -> C class logits;
5. back to H×W: every full-resolution point takes the logits of the valid subsampled point nearest
   to it in 3D among the 2×2 subsampled points around it in the image (a 3D-aware nearest
   upsampling: a pixel on the near side of a depth edge takes the near side's logits).

Invalid points are masked at every step, never treated as (0, 0, 0): they do not influence any
valid output (test_core_pointnet.py perturbs them). Gradients flow from the logits into xyz (and
so, in `Depth3DSeg`, into the depth head): the coupling of M3.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .keys import INF_KEY, float_keys, key_bits

__all__ = ['PointSegNet', 'knn_window', 'subsample']

_IDX_CACHE: Dict[Tuple, Any] = {}  # index tables per (kind, sizes, device)
_INT32_MIN = -(2**31)


def _window_index(
    h: int, w: int, window: int, device: torch.device
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Flat indices (window²×h·w long each) of every pixel's window candidates: into the h×w grid
    (clamped at the border; those candidates are never chosen, see knn_window) and into the grid
    padded by window//2 on every side (never clamped)."""
    key = ('win', h, w, window, str(device))
    if key not in _IDX_CACHE:
        r = window // 2
        d = torch.arange(-r, r + 1, device=device)
        dy, dx = torch.meshgrid(d, d, indexing='ij')
        y = torch.arange(h, device=device).view(1, h, 1) + dy.reshape(-1, 1, 1)
        x = torch.arange(w, device=device).view(1, 1, w) + dx.reshape(-1, 1, 1)
        idx = (y.clamp(0, h - 1) * w + x.clamp(0, w - 1)).reshape(window * window, h * w)
        padded = ((y + r) * (w + 2 * r) + x + r).reshape(window * window, h * w)
        _IDX_CACHE[key] = (idx, padded)
    return _IDX_CACHE[key]


def _upsample_index(
    H: int, W: int, h: int, w: int, stride: int, device: torch.device
) -> torch.Tensor:
    """For each full-res pixel, flat indices (4×H·W long) of the 2×2 subsampled points (block
    centres at ``i*stride + stride//2``) nearest to it in the image; its own block's centre is one
    of them."""
    key = ('up', H, W, h, w, stride, str(device))
    if key not in _IDX_CACHE:
        o = stride // 2
        y0 = torch.div(torch.arange(H, device=device) - o, stride, rounding_mode='floor')
        x0 = torch.div(torch.arange(W, device=device) - o, stride, rounding_mode='floor')
        ys = [y0.clamp(0, h - 1), (y0 + 1).clamp(0, h - 1)]
        xs = [x0.clamp(0, w - 1), (x0 + 1).clamp(0, w - 1)]
        idx = torch.stack([(y.view(H, 1) * w + x.view(1, W)).reshape(-1) for y in ys for x in xs])
        _IDX_CACHE[key] = idx
    return _IDX_CACHE[key]


def subsample(x: torch.Tensor, stride: int) -> torch.Tensor:
    """Pick the centre pixel of every stride×stride block: B×C×H×W -> B×C×h×w (no averaging, so no
    mixing of depths across edges and no mixing of valid with invalid points)."""
    if stride == 1:
        return x
    o = stride // 2
    return x[:, :, o::stride, o::stride]


def knn_window(
    xyz: torch.Tensor, valid: torch.Tensor, k: int, window: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """k nearest neighbours by metric 3D distance among the window×window pixel neighbours.

    Args:
        xyz: B×3×h×w metres (values at invalid pixels are ignored). valid: B×1×h×w bool.
        k: neighbours per point (the point itself included, distance 0). window: odd pixel window.
    Returns:
        idx: B×k×(h·w) long, flat indices into h·w of the chosen neighbours (nearest first);
        mask: B×k×(h·w) bool, True where the neighbour is valid (finite distance) and the centre
            valid.
    Raises ValueError when k > window² or window is even.
    """
    if window % 2 != 1 or k > window * window or k < 1:
        raise ValueError(f'need odd window and 1 <= k <= window², got window={window} k={k}')
    b, _, h, w = xyz.shape
    n, r = h * w, window // 2
    cand, pcand = _window_index(
        h, w, window, xyz.device
    )  # win²×N, flat into h·w / into (h+2r)·(w+2r)
    inf = float('inf')
    with torch.no_grad():
        # Invalid and outside-the-image neighbours sit at +inf, invalid centres at -inf: every
        # distance involving one is +inf (never NaN), with no masks to build or apply.
        p = xyz.float()
        nbs = F.pad(torch.where(valid, p, inf), (r, r, r, r), value=inf).reshape(b, 3, -1)
        centre = torch.where(valid, p, -inf).reshape(b, 3, 1, n)
        nb = nbs.gather(2, pcand.view(1, 1, -1).expand(b, 3, -1)).view(b, 3, -1, n)
        keys = float_keys((nb - centre).square_().sum(1), 1)  # B×win²×N, squared metres
        sel = torch.empty((b, k, n), dtype=torch.int32, device=xyz.device)
        m = keys.amin(1, keepdim=True)
        sel[:, :1] = m
        for s in range(1, k):  # next smallest key > m; topk is ~6x slower on CPU here
            # unsigned min of keys - (m + 1) (sign bit flipped -> signed min): skips keys <= m
            u = (keys - (m + 1)).bitwise_xor_(_INT32_MIN).amin(1, keepdim=True)
            m = u.bitwise_xor_(_INT32_MIN).add_(m + 1)
            sel[:, s : s + 1] = m
        pos = (sel & ((1 << key_bits(window * window)) - 1)).long()
    idx = cand.unsqueeze(0).expand(b, -1, -1).gather(1, pos)
    return idx, sel < INF_KEY


def _normals(xyz: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Organized-cloud normals B×3×h×w (unit, facing the camera), 0 where a 4-neighbour is
    invalid."""
    p = F.pad(xyz, (1, 1, 1, 1), mode='replicate')
    vv = F.pad(valid.float(), (1, 1, 1, 1)) > 0
    du = p[:, :, 1:-1, 2:] - p[:, :, 1:-1, :-2]
    dv = p[:, :, 2:, 1:-1] - p[:, :, :-2, 1:-1]
    n = torch.cross(du, dv, dim=1)
    # = n / max(|n|, 1e-6) (float32 geometry); sqrt of the clamped sum of squares is ~40x faster
    # than Tensor.norm over dim 1 on CPU here, and its gradient stays finite at |n| = 0
    n = n / n.square().sum(1, keepdim=True).clamp_min(1e-12).sqrt()
    n = torch.where((n * xyz).sum(1, keepdim=True) > 0, -n, n)
    ok = (
        valid & vv[:, :, 1:-1, 2:] & vv[:, :, 1:-1, :-2] & vv[:, :, 2:, 1:-1] & vv[:, :, :-2, 1:-1]
    )
    return torch.where(ok, n, torch.zeros_like(n))


class EdgeConv(nn.Module):
    """h_i = Lin(max_{j in kNN(i), valid} ReLU(W_n f_j + W_c f_i + W_g g_ij)) (DGCNN EdgeConv, with
    the linear part on [f_j, f_i] computed per point before gathering, so the edge cost is
    O(N·k·C)).
    Channels-last: f B×N×C, geo B×k×N×G, idx/mask B×k×N -> B×N×C_out."""

    def __init__(self, cin: int, cgeo: int, cout: int):
        super().__init__()
        self.wn = nn.Linear(cin, cout, bias=False)
        self.wc = nn.Linear(cin, cout)
        self.wg = nn.Linear(cgeo, cout, bias=False)
        self.post = nn.Linear(cout, cout)

    def forward(
        self,
        f: torch.Tensor,
        geo: torch.Tensor,
        idx: torch.Tensor,
        mask: Optional[torch.Tensor],
        g: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """f B×N×C_in float point features, geo B×k×N×G float edge geometry, idx B×k×N int64
        neighbour indices into N, mask B×k×N bool valid neighbours -> B×N×C_out float.

        ``mask`` None: every neighbour valid (no masking pass). ``g``: W_g geo (B×k×N×C_out)
        when the caller computed it already (PointSegNet does, for all layers at once); default
        computed here."""
        b, n, _ = f.shape
        a = self.wn(f).reshape(b * n, -1)
        if g is None:
            g = self.wg(geo)  # B×k×N×C_out, one matmul for all neighbour ranks
        off = (torch.arange(b, device=f.device) * n).view(b, 1)
        out = None
        # max_j ReLU(a_j + c_i + g_ij) = ReLU(c_i + max_j (a_j + g_ij)) (ReLU is monotonic, c_i
        # does not depend on j): three ops per neighbour rank, the centre term and ReLU once.
        # Masked neighbours get -inf, so a point with none valid ends at ReLU(-inf) = 0. One rank
        # at a time keeps the B×N×C tensors cache-sized (no B×N×k×C temporaries).
        for j in range(idx.shape[1]):
            # in place on fresh tensors (autograd-safe: index_select/add keep no outputs for
            # backward)
            e = a.index_select(0, (idx[:, j] + off).reshape(-1)).view(b, n, -1).add_(g[:, j])
            if mask is not None:
                e.masked_fill_(~mask[:, j].unsqueeze(-1), float('-inf'))
            if out is None:
                out = e
            elif torch.is_grad_enabled() and (out.requires_grad or e.requires_grad):
                out = torch.maximum(out, e)
            else:
                torch.maximum(out, e, out=out)
        out = (self.wc(f) + out).relu_()
        return self.post(out).relu_()


class PointSegNet(nn.Module):
    """M3 point network over the organized cloud (see the module docstring).

    Args:
        num_classes: C. in_feats: F per-point feature channels besides X, Y, Z (3: colour).
        k: neighbours per point. window: odd pixel window for the neighbour candidates (at the
        reduced resolution). stride: subsampling of the organized cloud (1 = full resolution).
        channels: output channels of the EdgeConv layers. head: hidden channels of the head.
        normals: add organized-cloud normals to the point features.
        colour: False makes a geometry-only net: the F feature channels are zeros whatever
        ``feats`` holds (the weights keep their shape, so a colour model's weights load into it
        and fine-tune; Handa et al. 2016: geometry crosses the synthetic-to-real gap better than
        colour).
    forward(xyz B×3×H×W metres, valid B×1×H×W bool, feats B×F×H×W) -> B×C×H×W logits (0 at invalid
    pixels and at valid pixels with no valid subsampled point within reach), in the weights' dtype;
    the geometry (neighbour search, offsets, distances) is computed in float32 whatever the input
    dtype. Raises ValueError for inconsistent shapes or hyper-parameters.
    """

    def __init__(
        self,
        num_classes: int,
        in_feats: int = 3,
        k: int = 8,
        window: int = 5,
        stride: int = 4,
        channels: Sequence[int] = (32, 64),
        head: int = 64,
        normals: bool = True,
        colour: bool = True,
    ):
        super().__init__()
        self.colour = bool(colour)
        if window % 2 != 1 or not 1 <= k <= window * window:
            raise ValueError(
                f'PointSegNet needs odd window and 1 <= k <= window², got window={window} k={k}'
            )
        if stride < 1 or len(channels) < 1:
            raise ValueError(
                f'PointSegNet stride={stride} must be >= 1, channels={list(channels)} non-empty'
            )
        self.k, self.window, self.stride, self.normals = (
            int(k),
            int(window),
            int(stride),
            bool(normals),
        )
        self.in_feats = int(in_feats)
        cin = 3 + in_feats + (3 if normals else 0)
        self.layers = nn.ModuleList()
        for c in channels:
            self.layers.append(EdgeConv(cin, 7, c))
            cin = c
        cat = sum(channels)
        self.head_local = nn.Linear(cat, head)
        self.head_global = nn.Linear(channels[-1], head, bias=False)
        self.out = nn.Linear(head, num_classes)

    def forward(self, xyz: torch.Tensor, valid: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
        """M3 on a batch of organized clouds.

        xyz B×3×H×W float m (optical frame), valid B×1×H×W bool, feats B×F×H×W float (F = in_feats,
        e.g. normalised colour) -> B×C×H×W logits in the weights' dtype (0 at invalid pixels and
        where no valid subsampled point is within reach); the geometry runs in float32. Raises
        ValueError for inconsistent shapes.
        """
        if (
            xyz.dim() != 4
            or xyz.shape[1] != 3
            or valid.shape != (xyz.shape[0], 1) + xyz.shape[2:]
            or feats.dim() != 4
            or feats.shape[1] != self.in_feats
            or feats.shape[2:] != xyz.shape[2:]
            or feats.shape[0] != xyz.shape[0]
        ):
            raise ValueError(
                f'PointSegNet expects xyz B×3×H×W, valid B×1×H×W, feats B×{self.in_feats}×H×W; '
                f'got xyz {tuple(xyz.shape)}, valid {tuple(valid.shape)}, feats '
                f'{tuple(feats.shape)}'
            )
        valid = valid.bool()
        wt = self.out.weight.dtype  # fp16 for a .half() model; geometry stays in float32:
        xyz = xyz.float()  # (distances of a point to itself are 0: sqrt(0+eps) needs fp32)
        zero = torch.zeros((), dtype=xyz.dtype, device=xyz.device)
        v = subsample(valid, self.stride)
        p = torch.where(
            v, subsample(xyz, self.stride), zero
        )  # finite; invalid values never used below
        if self.colour:
            fc = torch.where(v, subsample(feats, self.stride).to(xyz.dtype), zero)
        else:  # geometry only: zeros in the colour channels (same weight shapes)
            fc = p.new_zeros((p.shape[0], self.in_feats) + p.shape[2:])
        b, _, h, w = p.shape
        n = h * w
        idx, mask = knn_window(p, v, self.k, self.window)  # B×k×N
        parts: List[torch.Tensor] = [p, fc] + ([_normals(p, v)] if self.normals else [])
        f = torch.cat(parts, 1).reshape(b, -1, n).transpose(1, 2).to(wt)  # B×N×F, channels-last
        pf = p.reshape(b, 3, n)
        nb = pf.gather(2, idx.view(b, 1, -1).expand(b, 3, -1)).view(b, 3, self.k, n)
        rel = (nb - pf.unsqueeze(2)).permute(0, 2, 3, 1)  # B×k×N×3, metres
        dist = torch.sqrt(rel.square().sum(-1, keepdim=True) + 1e-12)
        full = bool(
            mask.all()
        )  # common case: every point valid with k valid neighbours, no masking
        if full:
            r = dist.mean(1, keepdim=True).clamp(min=1e-3)
            geo = torch.cat([rel, rel / r, dist], -1).to(wt)  # B×k×N×7
        else:
            m = mask.unsqueeze(-1).to(xyz.dtype)
            r = ((dist * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1)).clamp(
                min=1e-3
            )
            geo = (torch.cat([rel, rel / r, dist], -1) * m).to(wt)
        # the edge-geometry term of every layer in one matmul (geo is shared): B×k×N×sum(channels)
        gall = F.linear(geo, torch.cat([layer.wg.weight for layer in self.layers]))
        outs, c0 = [], 0
        for layer in self.layers:
            c1 = c0 + layer.wg.out_features
            f = layer(f, geo, idx, None if full else mask, g=gall[..., c0:c1])
            outs.append(f)
            c0 = c1
        vmask = None if full else v.reshape(b, h * w, 1).to(f.dtype)
        g = (f if full else f * vmask).amax(1)  # PointNet global feature (f >= 0)
        hdn = self.head_local(torch.cat(outs, -1)).add_(self.head_global(g).unsqueeze(1)).relu_()
        logits = self.out(hdn) if full else self.out(hdn) * vmask  # B×N×C, 0 at invalid points
        return self._upsample(logits, p, v, xyz, valid)

    def _upsample(
        self,
        logits: torch.Tensor,
        p: torch.Tensor,
        v: torch.Tensor,
        xyz: torch.Tensor,
        valid: torch.Tensor,
    ) -> torch.Tensor:
        """3D-aware nearest upsampling B×(h·w)×C -> B×C×H×W (see the module docstring, step 5)."""
        B, _, C = logits.shape
        h, w = p.shape[-2:]
        H, W = xyz.shape[-2:]
        if self.stride == 1:
            return logits.transpose(1, 2).reshape(B, C, H, W)
        st, o = self.stride, self.stride // 2
        with torch.no_grad():
            # Candidate (a, b) of full-res pixel (Y, X) is subsampled point (y0 + a, x0 + b), y0 =
            # floor((Y - o) / stride), clamped to the grid. In the edge-replicated grid (one point
            # of padding), nearest-upsampled by `stride`, it sits at (Y - o + stride·(a+1), X - o +
            # stride·(b+1)):
            # each candidate map is a slice (a view), no gathers at full resolution.
            # as in knn_window: invalid subsampled points at +inf, invalid full-res points at -inf
            inf = float('inf')
            all_valid = bool(valid.all()) and bool(
                v.all()
            )  # then every pixel finds its own block centre
            up_p = F.interpolate(
                F.pad(p if all_valid else torch.where(v, p, inf), (1, 1, 1, 1), mode='replicate'),
                scale_factor=st,
                mode='nearest',
            )
            full = xyz if all_valid else torch.where(valid, xyz, -inf)
            dist = torch.empty((4, B, H, W), dtype=torch.float32, device=xyz.device)
            e = torch.empty((B, H, W), dtype=torch.float32, device=xyz.device)
            for c in range(4):  # squared distance, one channel at a time (no B×3×H×W temporaries)
                y, x = st * (c // 2 + 1) - o, st * (c % 2 + 1) - o
                u, dc = up_p[:, :, y : y + H, x : x + W], dist[c]
                torch.sub(u[:, 0], full[:, 0], out=e)
                torch.mul(e, e, out=dc)
                for ch in (1, 2):
                    dc.addcmul_(torch.sub(u[:, ch], full[:, ch], out=e), e)
            kmin = (
                float_keys(dist, 0).amin(0).view(B, H * W)
            )  # nearest valid candidate (lowest c on ties)
            found = None if all_valid else kmin < INF_KEY
            src = _upsample_index(H, W, h, w, st, xyz.device).gather(0, (kmin & 3).long())  # B×HW
        # Contiguous B×C×H×W output: channel softmax/argmax downstream are 5-15x slower on
        # channels-last.
        lcf = logits.transpose(1, 2).contiguous()  # B×C×N (small)
        if B == 1:  # index_select is ~3x faster than gather on CPU for the batch-of-one path
            out = lcf[0].index_select(1, src[0]).unsqueeze(0)
        else:
            out = lcf.gather(2, src.unsqueeze(1).expand(B, C, H * W))
        if found is not None and not bool(found.all()):
            out.masked_fill_(~found.view(B, 1, H * W), 0.0)
        return out.view(B, C, H, W)
