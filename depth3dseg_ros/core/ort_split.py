"""Split CPU execution of an exported depth3dseg graph: M1 in ONNX Runtime, M2 + M3 in torch.

Measured on this 2-core CPU (docs/deployment.md, ``bench/bench_core.py --onnx-only``), one thread
each: ONNX Runtime runs the 2D+depth network (M1, convolutions) in 0.54–0.70 × PyTorch's time, but
the 3D point network (M3: ~100 small memory-bound gathers, minima and concatenations over 3,072
points and the full-resolution 3D-aware upsampling) in 1.2–1.8 × PyTorch's time, where torch has
data-dependent shortcuts (core.pointnet: int32 keys for the kNN, no masking passes when every
point is valid) that a static graph cannot take. So on the CPU provider the Segmenter runs each
part where it is faster:

- the 2D+depth subgraph (input ``rgb`` -> the two heads' outputs at 1/2 resolution) is cut out
  of the exported whole graph at load time (``onnx.utils.Extractor``; the file is unchanged) and
  runs in ONNX Runtime; the heads' final bilinear upsampling and the depth activation run after it
  (cv2 per channel, torch; `OrtNet2D`), faster than ONNX Runtime's NCHWc Upsample + reorder;
- the merge with the measured depth, the back-projection (M2) and the 3D net (M3) run in torch,
  through ``Depth3DSeg.forward`` itself (its ``net`` replaced by `OrtNet2D`), so the values are
  exactly the torch backend's given the same M1 outputs. The 3D net's weights travel in the ONNX
  file's metadata (``pointnet_state``: base64 of an ``.npz`` of ``PointSegNet.state_dict()``,
  float32, no pickle), written by core.onnx_export.

A file exported before that key existed runs as one whole graph (core.backends.OrtGraph).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import cv2
import numpy as np
import torch
from torch import nn

from .model import Depth3DSeg

__all__ = ['POINTNET_KEY', 'encode_state', 'decode_state', 'net2d_onnx', 'OrtNet2D', 'split_model']

#: metadata_props key of the 3D net's weights (optional; core.onnx_export writes it).
POINTNET_KEY = 'pointnet_state'


def encode_state(module: nn.Module) -> str:
    """``module.state_dict()`` as ASCII text: base64 of an uncompressed ``.npz`` (float32 arrays
    named by the state_dict keys). Raises ValueError for a non-floating-point entry."""
    arrays = {}
    for k, v in module.state_dict().items():
        if not v.is_floating_point():
            raise ValueError(f'state_dict entry {k!r} is {v.dtype}, expected floating point')
        arrays[k] = v.detach().float().cpu().numpy()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return base64.b64encode(buf.getvalue()).decode('ascii')


def decode_state(text: str) -> Dict[str, torch.Tensor]:
    """Inverse of `encode_state`: {name: float32 tensor}. ``allow_pickle=False``: a crafted value
    cannot run code. Raises ValueError for text that is not base64 of an .npz."""
    try:
        with np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False) as z:
            return {k: torch.from_numpy(np.array(z[k], np.float32)) for k in z.files}
    except (ValueError, OSError, KeyError) as exc:
        raise ValueError(f'{POINTNET_KEY} is not a base64 .npz ({exc})') from None


def _head_cut(graph: Any) -> Optional[Tuple[str, str]]:
    """Names of the two head outputs before their final bilinear upsampling (depth pre-activation,
    seg logits at 1/2 resolution) when ``graph`` ends as DepthSegNet.forward does: ``seg2d =
    Resize(s)``, ``depth = Add(Mul(Sigmoid(Resize(d))))`` with linear Resize, or that depth scaled
    to K's camera, ``Clip(Mul(Add(...), factor))`` (focal_depth: Depth3DSeg.forward
    redoes the scaling in torch after `OrtNet2D`); None otherwise."""
    prod = {o: n for n in graph.node for o in n.output}

    def node(name: str, kind: str) -> Any:
        n = prod.get(name)
        return n if n is not None and n.op_type == kind else None

    def feeding(n: Any, kind: str) -> Any:
        return next(
            (node(i, kind) for i in (n.input if n is not None else ()) if node(i, kind)), None
        )

    seg = node('seg2d', 'Resize')
    act = node('depth', 'Add')
    if act is None:  # depth scaled to K's camera (focal_depth): Clip(Mul(Add(...), f))
        act = feeding(feeding(node('depth', 'Clip'), 'Mul'), 'Add')
    sig = feeding(feeding(act, 'Mul'), 'Sigmoid')
    rsz = node(sig.input[0], 'Resize') if sig is not None else None
    if seg is None or rsz is None:
        return None
    for n in (seg, rsz):
        mode = {a.name: a for a in n.attribute}.get('mode')
        if mode is None or mode.s != b'linear':
            return None
    return rsz.input[0], seg.input[0]


def net2d_onnx(path: Union[str, Path]) -> Tuple[bytes, Optional[Tuple[str, str]]]:
    """The 2D+depth subgraph of an exported whole graph: (serialized ONNX model with input ``rgb``
    1×3×H×W float32, metadata kept; ``cut``). With ``cut`` None its outputs are ``depth`` 1×1×H×W
    m and ``seg2d`` 1×C×H×W; otherwise the subgraph stops before the heads' final bilinear
    upsampling and its outputs are ``cut`` = (depth pre-activation 1×1×h×w, seg logits 1×C×h×w)
    at the decoder's 1/2 resolution (`OrtNet2D` upsamples them). Needs ``onnx`` (ImportError)."""
    import onnx
    from onnx.utils import Extractor

    proto = onnx.load(str(path))
    cut = _head_cut(proto.graph)
    outputs = list(cut) if cut is not None else ['depth', 'seg2d']
    known = {v.name for v in proto.graph.value_info} | {o.name for o in proto.graph.output}
    for name in outputs:  # inner tensors need a value_info to become outputs (rank 4, float32)
        if name not in known:
            proto.graph.value_info.append(
                onnx.helper.make_tensor_value_info(
                    name, onnx.TensorProto.FLOAT, [1, None, None, None]
                )
            )
    sub = Extractor(proto).extract_model(['rgb'], outputs)
    del sub.metadata_props[:]
    sub.metadata_props.extend(proto.metadata_props)
    return sub.SerializeToString(), cut


class OrtNet2D(nn.Module):
    """Stands in for ``Depth3DSeg.net``: forward(rgb_norm 1×3×H×W float32 torch, CPU) ->
    {'depth': 1×1×H×W m, 'seg2d': 1×C×H×W} float32 CPU tensors, from an
    ``onnxruntime.InferenceSession`` over `net2d_onnx`'s subgraph.

    ``cut`` (from net2d_onnx) and ``depth_range`` (min_depth, max_depth of the arch): the session
    returns the 1/2-resolution head outputs and the last step of DepthSegNet.forward runs here:
    bilinear upsampling to H×W (half-pixel centres, as ``F.interpolate(align_corners=False)``) by
    cv2.resize per channel, then ``min + (max - min) * sigmoid`` for the depth. On this CPU the
    14-channel upsampling took 0.5 ms with cv2 against ~4 ms in ONNX Runtime (its NCHWc Upsample,
    the 14 → 16 channel padding and the reorder back to NCHW) or torch; the values agree to
    float rounding (~5e-7)."""

    def __init__(
        self,
        session: Any,
        cut: Optional[Tuple[str, str]] = None,
        depth_range: Tuple[float, float] = (0.1, 10.0),
    ):
        super().__init__()
        self.session = session
        self.cut = cut
        self.outputs = list(cut) if cut is not None else ['depth', 'seg2d']
        self.min_depth, self.max_depth = float(depth_range[0]), float(depth_range[1])

    def forward(
        self, rgb_norm: torch.Tensor, code: Optional[torch.Tensor] = None
    ) -> Dict[str, torch.Tensor]:
        """Run the session on ``rgb_norm`` (made contiguous NCHW float32 if it is not); the
        signature is `DepthSegNet.forward`'s. Raises ValueError for a ``code``: the split runs
        colour-only 2D nets (an RGB-D input model runs as one whole graph, core.backends)."""
        if code is not None:
            raise ValueError('OrtNet2D: the split 2D net takes no geometry code (code_input)')
        x = rgb_norm.detach().float().contiguous().numpy()
        d, s = self.session.run(self.outputs, {'rgb': x})
        if self.cut is None:
            return {'depth': torch.from_numpy(d), 'seg2d': torch.from_numpy(s)}
        h, w = x.shape[-2:]
        seg = np.empty((1, s.shape[1], h, w), np.float32)
        for c in range(s.shape[1]):
            cv2.resize(s[0, c], (w, h), dst=seg[0, c], interpolation=cv2.INTER_LINEAR)
        d = torch.from_numpy(cv2.resize(d[0, 0], (w, h), interpolation=cv2.INTER_LINEAR))
        depth = self.min_depth + (self.max_depth - self.min_depth) * torch.sigmoid(d)
        return {'depth': depth[None, None], 'seg2d': torch.from_numpy(seg)}


def split_model(
    session: Any, meta: Dict[str, Any], cut: Optional[Tuple[str, str]] = None
) -> Depth3DSeg:
    """A `Depth3DSeg` (eval, float32, CPU) whose ``net`` is `OrtNet2D` over ``session`` (``cut``
    as returned by net2d_onnx with the session's model) and whose
    3D net carries the weights of ``meta[POINTNET_KEY]`` (read_onnx_meta of the file). Raises
    KeyError without that key, ValueError / RuntimeError for weights that do not fit
    ``meta['arch']``."""
    model = Depth3DSeg.from_arch(meta['arch'])
    model.pointnet.load_state_dict(decode_state(meta[POINTNET_KEY]), strict=True)
    a = model.arch
    model.net = OrtNet2D(session, cut, (a['min_depth'], a['max_depth']))
    return model.eval()
