"""depth3dseg-export: model file (.pt) -> ONNX file of the whole inference graph
(core.onnx_export).

    depth3dseg-export models/depth3dseg_nyu13.pt -o models/depth3dseg_nyu13.onnx [--dynamic]
        [--input-size 320x240] [--opset 17] [--verify]

Writes the 2D+depth network, back-projection and the 3D point network as one graph (inputs rgb, K,
measured_depth; outputs depth, seg2d, seg3d, xyz, valid, measured), with the class set, input size,
mean/std, max_depth and arch as ONNX metadata_props; ``onnx.checker`` runs before the file is
written. ``--verify`` then runs one random frame through ONNX Runtime (CPU) and PyTorch and prints
the largest differences, the pixels whose label differs and a verdict (OK, or FAILED with the
tolerances). An exported ``<stem>.onnx`` beside ``<stem>.pt`` is what Segmenter(backend='auto')
picks up. Exit status: 0 done, 1 --verify FAILED, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List, Optional

__all__ = ['main']


def _size(text: str):
    try:
        w, h = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'--input-size {text!r}: expected WxH, e.g. 320x240'
        ) from None
    return w, h


#: --verify's verdict: depth (m) and 2D logits within these of PyTorch's; labels (argmax of 2D and
#: 3D) differing at no more than this fraction of the pixels (the 3D net's neighbour choice can
#: differ on near-ties: docs/deployment.md)
VERIFY_DEPTH_M, VERIFY_LOGIT, VERIFY_LABEL_FRACTION = 1e-3, 1e-3, 1e-3


def _verify(pt: Path, onnx_path: Path) -> tuple[str, bool]:
    """ONNX Runtime against PyTorch on one random frame (CPU, 1 thread): the largest |difference|
    of depth, seg2d and seg3d, the pixels whose 2D / 3D label differs, and whether that is within
    the VERIFY_* tolerances; returns (the line to print, ok). An RGB-D input model (arch
    code_input) is checked twice: without measured depth and with a measured depth image (a
    tilted plane with a hole), so its geometry code's path is compared too."""
    import numpy as np
    import torch

    from .core.backends import OrtGraph
    from .core.model import fold_batchnorm
    from .core.modelfile import load_model

    ort_g = OrtGraph(onnx_path, device='cpu', num_threads=1, split='whole')  # the file's graph
    model, meta = load_model(pt)
    model = fold_batchnorm(model.eval())
    w, h = ort_g.meta['input_size']
    x = torch.randn(1, 3, h, w, generator=torch.Generator().manual_seed(1))
    K = torch.tensor([[[0.8 * w, 0.0, w / 2], [0.0, 0.8 * w, h / 2], [0.0, 0.0, 1.0]]])
    cases = {'': None}
    if model.arch['code_input']:
        md = torch.linspace(1.0, 4.0, h).view(1, 1, h, 1).expand(1, 1, h, w).clone()
        md[..., : h // 4, : w // 4] = float('nan')
        cases[' with measured depth'] = md
    texts, ok = [], True
    for name, md in cases.items():
        with torch.no_grad():
            ref = model(x, K, md)
        feed = np.full((1, 1, h, w), np.nan, np.float32) if md is None else md.numpy()
        got = ort_g.run(x.numpy(), K.numpy(), feed)
        diffs = {
            k: float(np.abs(got[k] - ref[k].numpy()).max()) for k in ('depth', 'seg2d', 'seg3d')
        }
        flips = {
            k: int((got[k].argmax(1) != ref[k].numpy().argmax(1)).sum())
            for k in ('seg2d', 'seg3d')
        }
        ok = ok and (
            diffs['depth'] <= VERIFY_DEPTH_M
            and diffs['seg2d'] <= VERIFY_LOGIT
            and max(flips.values()) <= VERIFY_LABEL_FRACTION * h * w
        )
        texts.append(
            f'max |diff|{name} '
            + ', '.join(f'{k} {v:.2g}' for k, v in diffs.items())
            + f"; labels differ at {flips['seg2d']} (2D) and {flips['seg3d']} (3D) of "
            f'{h * w} pixels'
        )
    text = '; '.join(texts) + (
        ': OK'
        if ok
        else f': FAILED (tolerances: depth {VERIFY_DEPTH_M} m, seg2d {VERIFY_LOGIT}, labels '
        f'{VERIFY_LABEL_FRACTION:.1%} of the pixels)'
    )
    return text, ok


def main(argv: Optional[List[str]] = None) -> int:
    """Export a model file to ONNX (CLI depth3dseg-export); returns the exit status (0 done, 2 bad
    input)."""
    ap = argparse.ArgumentParser(
        prog='depth3dseg-export', description=' '.join(__doc__.split('\n\n')[0].split())
    )
    ap.add_argument('model', type=Path, help='model file (.pt) written by depth3dseg-train')
    ap.add_argument(
        '-o', '--out', type=Path, default=None, help='output .onnx (default: beside the .pt)'
    )
    ap.add_argument(
        '--dynamic', action='store_true', help='dynamic input height/width (default: fixed)'
    )
    ap.add_argument(
        '--input-size', type=_size, default=None, help="WxH (default: the model file's)"
    )
    ap.add_argument('--opset', type=int, default=17)
    ap.add_argument(
        '--verify', action='store_true', help='compare ONNX Runtime with PyTorch on one frame'
    )
    args = ap.parse_args(argv)
    out = args.out or args.model.with_suffix('.onnx')
    try:
        from .core.onnx_export import export_onnx

        t0 = time.perf_counter()
        props = export_onnx(
            args.model, out, dynamic=args.dynamic, input_size=args.input_size, opset=args.opset
        )
    except ImportError as exc:
        print(f'depth3dseg-export: {exc} (pip install onnx onnxruntime)', file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f'depth3dseg-export: {" ".join(str(exc).split())}', file=sys.stderr)
        return 2
    size = (
        'dynamic'
        if args.dynamic
        else 'x'.join(str(v) for v in props['input_size'].strip('[]').split(', '))
    )
    print(
        f'wrote {out} ({out.stat().st_size / 1e6:.2f} MB, opset {args.opset}, input {size}, '
        f'{time.perf_counter() - t0:.1f} s); onnx.checker passed'
    )
    if args.verify:
        text, ok = _verify(args.model, out)
        print(f'ONNX Runtime vs PyTorch on a random frame: {text}')
        return 0 if ok else 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
