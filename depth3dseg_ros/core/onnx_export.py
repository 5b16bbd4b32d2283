"""Model file (.pt) -> self-describing ONNX file of the whole inference graph (deployment runtime).

One graph: the BatchNorm-folded 2D+depth network (M1), back-projection (M2) and the 3D point
network (M3) with its 3D-aware upsampling (core.onnx_graph.InferenceGraph), exported by PyTorch's
TorchScript exporter (``torch.onnx.export(dynamo=False)``, opset 17) and checked with
``onnx.checker``.

Inputs / outputs (core.onnx_graph): ``rgb`` 1×3×H×W float32 normalised, ``K`` 1×3×3 float32 at H×W,
``measured_depth`` 1×1×H×W float32 metres (all-NaN = none) -> ``depth``, ``seg2d``, ``seg3d``,
``xyz``, ``valid``, ``measured``. H×W is the model file's ``input_size`` (fixed), or any size with
``dynamic``.

The model-file metadata travels as ONNX ``metadata_props`` (string values; lists and dicts as
JSON), so the file is self-describing: ``format`` ('depth3dseg-onnx'), ``version``, ``classes``,
``input_size``, ``mean``, ``std``, ``max_depth``, ``arch`` (REQUIRED_KEYS), plus ``dynamic_size``,
``opset``, ``input_balance`` (the white balance applied before mean/std, core.colour_balance; read
as 'none' when absent), ``source_file``, ``source_sha256`` (of the .pt: a stale export beside a
retrained .pt is noticed), ``created``, ``exporter``, ``pointnet_state`` (the 3D net's weights as
base64 .npz, for the split CPU execution of core.ort_split). `read_onnx_meta` refuses a file
without the required ones, naming the missing key.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import torch

from .model import fold_batchnorm
from .modelfile import ModelFileError, _validate_meta, load_model
from .onnx_graph import INPUT_NAMES, OUTPUT_NAMES, InferenceGraph
from .ort_split import POINTNET_KEY, encode_state

__all__ = [
    'export_onnx',
    'export_module',
    'read_onnx_meta',
    'sha256_file',
    'ONNX_FORMAT',
    'ONNX_VERSION',
    'REQUIRED_KEYS',
    'DEFAULT_OPSET',
]

ONNX_FORMAT = 'depth3dseg-onnx'
ONNX_VERSION = 1
DEFAULT_OPSET = 17
#: metadata_props every depth3dseg ONNX file must carry (JSON-encoded except 'format').
REQUIRED_KEYS = (
    'format',
    'version',
    'classes',
    'input_size',
    'mean',
    'std',
    'max_depth',
    'arch',
    'dynamic_size',
)
_JSON_KEYS = (*REQUIRED_KEYS[1:], 'opset')  # every required key but 'format', and the opset


def sha256_file(path: Union[str, Path]) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, 'rb') as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


def _example_inputs(w: int, h: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    rgb = torch.randn(1, 3, h, w, generator=g)
    K = torch.tensor([[[0.8 * w, 0.0, w / 2], [0.0, 0.8 * w, h / 2], [0.0, 0.0, 1.0]]])
    return rgb, K, torch.full((1, 1, h, w), float('nan'))


def export_module(
    module: torch.nn.Module,
    args: Tuple[torch.Tensor, ...],
    out: Union[str, Path],
    input_names,
    output_names,
    opset: int = DEFAULT_OPSET,
) -> Path:
    """Plain export of any module (no metadata; benchmarks export the 2D+depth and 3D nets alone
    this way): TorchScript exporter, fixed sizes, constant folding, onnx.checker. Returns
    ``out``."""
    import onnx

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(
            module,
            args,
            str(out),
            dynamo=False,
            opset_version=int(opset),
            input_names=list(input_names),
            output_names=list(output_names),
            do_constant_folding=True,
        )
    onnx.checker.check_model(str(out))
    return Path(out)


def export_onnx(
    model_file: Union[str, Path],
    out: Union[str, Path],
    dynamic: bool = False,
    input_size: Optional[Tuple[int, int]] = None,
    opset: int = DEFAULT_OPSET,
) -> Dict[str, Any]:
    """Export the model file ``model_file`` (.pt, core.modelfile) to the ONNX file ``out``.

    Args:
        model_file: a depth3dseg model file. out: the .onnx path (written atomically: temp file +
            rename).
        dynamic: H and W of the inputs are dynamic (any size >= 8); else fixed at the input size.
        input_size: (W, H) to export at (and record as ``input_size``); default the model file's.
        opset: ONNX opset (17 tested).
    Returns: the metadata written (dict of str -> str).
    Raises FileNotFoundError / ModelFileError (bad model file), ValueError (input_size),
    ImportError (onnx not installed), onnx.checker.ValidationError (an invalid graph; nothing
    written).
    """
    import onnx  # optional dependency: only the export and the ONNX Runtime backend need it

    model_file = Path(model_file)
    model, meta = load_model(model_file, map_location='cpu')
    w, h = (int(v) for v in (input_size or meta['input_size']))
    if w < 8 or h < 8:
        raise ValueError(f'input_size=({w}, {h}) must be integers >= 8')
    graph = InferenceGraph(fold_batchnorm(copy.deepcopy(model).float().eval())).eval()
    dyn_axes = None
    if dynamic:
        dyn_axes = {'rgb': {2: 'H', 3: 'W'}, 'measured_depth': {2: 'H', 3: 'W'}}
        dyn_axes.update({n: {2: 'H', 3: 'W'} for n in OUTPUT_NAMES})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + '.', suffix='.tmp', dir=out.parent)
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter(
                'ignore'
            )  # TracerWarnings of shape arithmetic; deprecation notice
            torch.onnx.export(
                graph,
                _example_inputs(w, h),
                tmp,
                dynamo=False,
                opset_version=int(opset),
                input_names=list(INPUT_NAMES),
                output_names=list(OUTPUT_NAMES),
                dynamic_axes=dyn_axes,
                do_constant_folding=True,
            )
        proto = onnx.load(tmp)
        props = {
            'format': ONNX_FORMAT,
            'version': json.dumps(ONNX_VERSION),
            'classes': json.dumps(meta['classes']),
            'input_size': json.dumps([w, h]),
            'mean': json.dumps(list(meta['mean'])),
            'std': json.dumps(list(meta['std'])),
            'input_balance': str(meta.get('input_balance', 'none')),
            'max_depth': json.dumps(float(meta['max_depth'])),
            'arch': json.dumps(meta['arch']),
            'dynamic_size': json.dumps(bool(dynamic)),
            'opset': json.dumps(int(opset)),
            'graph': 'whole: rgb, K, measured_depth -> ' + ', '.join(OUTPUT_NAMES),
            'source_file': model_file.name,
            'source_sha256': sha256_file(model_file),
            'created': _dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds'),
            'exporter': f'torch {torch.__version__} (TorchScript exporter), onnx '
            f'{onnx.__version__}',
            # the 3D net's weights, for the split CPU execution (core.ort_split)
            POINTNET_KEY: encode_state(graph.pointnet),
        }
        del proto.metadata_props[:]
        for k, v in props.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = k, v
        proto.doc_string = (
            'depth3dseg_ros Depth3DSeg inference graph (M1 2D+depth, M2 back-projection, '
            'M3 point network); metadata_props describe classes, input size, normalisation'
        )
        onnx.checker.check_model(proto, full_check=True)
        onnx.save(proto, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return props


def _read_props(path: Path) -> Dict[str, str]:
    """metadata_props of an ONNX file: with ``onnx`` when installed, else through an onnxruntime
    session (a GPU install may have only onnxruntime-gpu). ModelFileError for a file that is not
    ONNX."""
    try:
        import onnx
    except ImportError:
        onnx = None
    try:
        if onnx is not None:
            return {
                p.key: p.value
                for p in onnx.load(str(path), load_external_data=False).metadata_props
            }
        import onnxruntime as ort

        sess = ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])
        return dict(sess.get_modelmeta().custom_metadata_map)
    except Exception as exc:  # DecodeError, InvalidProtobuf, OSError ...
        raise ModelFileError(
            f'{path}: not an ONNX file ({type(exc).__name__}: {str(exc)[:200]})'
        ) from None


def read_onnx_meta(
    path: Union[str, Path], props: Optional[Dict[str, str]] = None
) -> Dict[str, Any]:
    """The model-file style metadata of a depth3dseg ONNX file (``classes``, ``input_size``,
    ``mean``, ``std``, ``max_depth``, ``arch`` decoded from JSON, plus ``dynamic_size`` bool and
    the other props).

    ``props``: the metadata_props already read (e.g. from an onnxruntime session's
    ``get_modelmeta().custom_metadata_map``); default read with ``onnx.load`` (weights not loaded).
    Raises FileNotFoundError; ModelFileError (a ValueError) naming the file and the missing or bad
    key for an ONNX file that was not written by depth3dseg-export (or another format/version).
    """
    path = Path(path)
    if props is None:
        if not path.is_file():
            raise FileNotFoundError(f'ONNX model file not found: {path}')
        props = _read_props(path)
    for key in REQUIRED_KEYS:
        if key not in props:
            raise ModelFileError(
                f"{path}: ONNX metadata_props is missing '{key}' (has {sorted(props)}): not "
                'a depth3dseg ONNX file; export the .pt with depth3dseg-export'
            )
    if props['format'] != ONNX_FORMAT:
        raise ModelFileError(
            f"{path}: metadata format={props['format']!r}, expected {ONNX_FORMAT!r}"
        )
    meta: Dict[str, Any] = dict(props)
    for key in _JSON_KEYS:
        if key in props:
            try:
                meta[key] = json.loads(props[key])
            except ValueError:
                raise ModelFileError(
                    f"{path}: metadata '{key}'={props[key][:80]!r} is not JSON"
                ) from None
    if meta['version'] != ONNX_VERSION:
        raise ModelFileError(
            f"{path}: metadata version={meta['version']!r}, this package reads {ONNX_VERSION}"
        )
    meta.setdefault('input_balance', 'none')  # files exported before the key
    _validate_meta(meta)
    return meta
