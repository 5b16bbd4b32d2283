"""Split CPU execution of an exported depth3dseg graph: M1 in ONNX Runtime, M2 + M3 in torch.

Measured on this 2-core CPU (docs/deployment.md, ``bench/bench_core.py --onnx-only``), one thread
each: ONNX Runtime runs the 2D+depth network (M1, convolutions) in 0.54–0.70 × PyTorch's time, but
the 3D point network (M3: ~100 small memory-bound gathers, minima and concatenations over 3,072
points and the full-resolution 3D-aware upsampling) in 1.2–1.8 × PyTorch's time, where torch has
data-dependent shortcuts (core.pointnet: int32 keys for the kNN, no masking passes when every
point is valid) that a static graph cannot take. So on the CPU provider the Segmenter runs each
part where it is faster:

- the 2D+depth subgraph (input ``rgb`` -> outputs ``depth``, ``seg2d``) is cut out of the exported
  whole graph at load time (``onnx.utils.Extractor``; the file is unchanged) and runs in ONNX
  Runtime;
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
from typing import Any, Dict, Union

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


def net2d_onnx(path: Union[str, Path]) -> bytes:
    """The 2D+depth subgraph of an exported whole graph: serialized ONNX model with input ``rgb``
    1×3×H×W float32 and outputs ``depth`` 1×1×H×W m, ``seg2d`` 1×C×H×W logits (the nodes and
    initializers these depend on; metadata kept). Needs the ``onnx`` package (ImportError)."""
    import onnx
    from onnx.utils import Extractor

    proto = onnx.load(str(path))
    sub = Extractor(proto).extract_model(['rgb'], ['depth', 'seg2d'])
    del sub.metadata_props[:]
    sub.metadata_props.extend(proto.metadata_props)
    return sub.SerializeToString()


class OrtNet2D(nn.Module):
    """Stands in for ``Depth3DSeg.net``: forward(rgb_norm 1×3×H×W float32 torch, CPU) ->
    {'depth': 1×1×H×W m, 'seg2d': 1×C×H×W} float32 CPU tensors sharing ONNX Runtime's output
    buffers, from an ``onnxruntime.InferenceSession`` over `net2d_onnx`."""

    def __init__(self, session: Any):
        super().__init__()
        self.session = session

    def forward(self, rgb_norm: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Run the session on ``rgb_norm`` (made contiguous NCHW float32 if it is not)."""
        x = rgb_norm.detach().float().contiguous().numpy()
        depth, seg2d = self.session.run(['depth', 'seg2d'], {'rgb': x})
        return {'depth': torch.from_numpy(depth), 'seg2d': torch.from_numpy(seg2d)}


def split_model(session: Any, meta: Dict[str, Any]) -> Depth3DSeg:
    """A `Depth3DSeg` (eval, float32, CPU) whose ``net`` is `OrtNet2D` over ``session`` and whose
    3D net carries the weights of ``meta[POINTNET_KEY]`` (read_onnx_meta of the file). Raises
    KeyError without that key, ValueError / RuntimeError for weights that do not fit
    ``meta['arch']``."""
    model = Depth3DSeg.from_arch(meta['arch'])
    model.pointnet.load_state_dict(decode_state(meta[POINTNET_KEY]), strict=True)
    model.net = OrtNet2D(session)
    return model.eval()
