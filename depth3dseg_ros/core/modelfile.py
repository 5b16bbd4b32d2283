"""Model files: one ``.pt`` holding plain metadata and the `Depth3DSeg` state_dict (M6 output, M7
input).

Layout (a dict of plain types only, so that loading never unpickles an arbitrary object)::

    {'format': 'depth3dseg-model', 'version': 1,
     'meta': {'classes': ClassSet.to_dict(), 'input_size': [W, H], 'mean': [r, g, b], 'std': [r, g,
              b], 'input_balance': 'none' | 'grey_world', 'input': 'rgb' | 'depth_code',
              'max_depth': float (m), 'arch':
              {...Depth3DSeg kwargs...}, 'created': ISO-8601 UTC, 'training': {...} (optional,
              plain)},
     'state_dict': {name: Tensor}}

Saving is atomic (temporary file in the same directory + ``os.replace``), so a reader (the node)
never sees a half-written file. Loading uses ``torch.load(weights_only=True)``: PyTorch's
restricted unpickler accepts tensors and plain containers only and refuses any other global (a
crafted ``__reduce__`` payload raises instead of running; test_core_modelfile.py).
mean/std are the RGB normalisation on the 0..1 scale: rgb_norm = (rgb/255 - mean) / std, after the
white balance ``input_balance`` (core.colour_balance; files written before the key: 'none').
``input`` says what the 2D network takes: 'rgb' colour images (files written before the key), or
'depth_code', the geometry code of depth images (a geometry model, core.late_fusion).
"""

from __future__ import annotations

import datetime as _dt
import os
import pickle
import re
import tempfile
from pathlib import Path
from typing import Any, Dict, Tuple, Union

import torch

from .classes import ClassSet
from .colour_balance import check_balance
from .model import Depth3DSeg, check_arch

#: what a model file's 2D network takes (meta ``input``): colour images, or the geometry code of
#: depth images (core.depth_code; a geometry model, core.late_fusion)
INPUT_KINDS = ('rgb', 'depth_code')


def check_input_kind(value: object, where: str = "meta['input']") -> str:
    """``value`` if it is one of INPUT_KINDS, else ValueError naming ``where`` and the value."""
    if value not in INPUT_KINDS:
        raise ValueError(f'{where}={value!r} must be one of {INPUT_KINDS}')
    return str(value)


__all__ = [
    'FORMAT',
    'VERSION',
    'ModelFileError',
    'save_model',
    'load_model',
    'load_plain',
    'make_meta',
    'IMAGENET_MEAN',
    'IMAGENET_STD',
    'DEFAULT_INPUT_SIZE',
]

FORMAT = 'depth3dseg-model'
VERSION = 1
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
DEFAULT_INPUT_SIZE = [320, 240]
_PLAIN = (str, int, float, bool, type(None))


class ModelFileError(ValueError):
    """A model file that is not a depth3dseg model file, of another version, incomplete or
    unsafe."""


def _check_plain(obj: Any, where: str) -> None:
    if isinstance(obj, _PLAIN):
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_plain(v, f'{where}[{i}]')
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ValueError(f'{where} key {k!r} must be a str')
            _check_plain(v, f'{where}.{k}')
        return
    raise ValueError(
        f'{where}={obj!r:.80} is a {type(obj).__name__}; model-file metadata must be plain '
        '(str, int, float, bool, None, list, dict)'
    )


def _check_triplet(meta: Dict[str, Any], key: str, positive: bool) -> None:
    v = meta[key]
    if not (
        isinstance(v, (list, tuple))
        and len(v) == 3
        and all(isinstance(x, (int, float)) for x in v)
    ):
        raise ModelFileError(f"meta['{key}']={v!r} must be 3 numbers (RGB, 0..1 scale)")
    if positive and not all(x > 0 for x in v):
        raise ModelFileError(f"meta['{key}']={v!r} must be > 0")


def make_meta(model: Depth3DSeg, meta: Dict[str, Any]) -> Dict[str, Any]:
    """Complete and validate model-file metadata for `model`.

    `meta` must hold ``classes`` (ClassSet.to_dict() or a ClassSet) with len == model.num_classes;
    the other keys default to input_size [320, 240], ImageNet mean/std, max_depth = arch max_depth,
    arch = model.arch (a given arch must equal it), created = now (UTC). Raises
    ValueError/ModelFileError naming the key for missing classes, a class-count mismatch, bad sizes
    or non-plain values.
    """
    if not isinstance(meta, dict) or 'classes' not in meta:
        raise ModelFileError(
            "model-file meta must be a dict with a 'classes' entry (ClassSet.to_dict())"
        )
    out = dict(meta)
    if isinstance(out['classes'], ClassSet):
        out['classes'] = out['classes'].to_dict()
    classes = ClassSet.from_dict(out['classes'])
    if len(classes) != model.num_classes:
        raise ModelFileError(
            f"meta['classes'] has {len(classes)} classes but the model has "
            f"num_classes={model.num_classes}"
        )
    arch = dict(model.arch)
    if 'arch' in out and check_arch(dict(out['arch'])) != arch:
        raise ModelFileError(
            f"meta['arch']={out['arch']!r} differs from the model's arch {arch!r}"
        )
    out['arch'] = arch
    out.setdefault('input_size', list(DEFAULT_INPUT_SIZE))
    out.setdefault('mean', list(IMAGENET_MEAN))
    out.setdefault('std', list(IMAGENET_STD))
    out.setdefault('input_balance', 'none')
    out.setdefault('input', 'rgb')
    out.setdefault('max_depth', float(arch['max_depth']))
    out.setdefault('created', _dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds'))
    out['input_size'] = (
        [int(x) for x in out['input_size']]
        if isinstance(out['input_size'], (list, tuple))
        else out['input_size']
    )
    _validate_meta(out)
    _check_plain(out, 'meta')
    return out


def _validate_meta(meta: Dict[str, Any]) -> None:
    for key in ('classes', 'input_size', 'mean', 'std', 'max_depth', 'arch'):
        if key not in meta:
            raise ModelFileError(f"model file meta is missing '{key}' (has {sorted(meta)})")
    size = meta['input_size']
    if not (
        isinstance(size, (list, tuple))
        and len(size) == 2
        and all(isinstance(s, int) and s >= 8 for s in size)
    ):
        raise ModelFileError(f"meta['input_size']={size!r} must be [width, height] integers >= 8")
    _check_triplet(meta, 'mean', False)
    _check_triplet(meta, 'std', True)
    try:
        check_balance(meta.get('input_balance', 'none'), "meta['input_balance']")
        check_input_kind(meta.get('input', 'rgb'))
    except ValueError as exc:
        raise ModelFileError(str(exc)) from None
    if not (isinstance(meta['max_depth'], (int, float)) and meta['max_depth'] > 0):
        raise ModelFileError(
            f"meta['max_depth']={meta['max_depth']!r} must be a number > 0 (metres)"
        )


def save_model(path: Union[str, Path], model: Depth3DSeg, meta: Dict[str, Any]) -> Path:
    """Write `model` (state_dict, on CPU) and its metadata (see `make_meta`) to `path`, atomically.

    Returns the path. Raises ValueError/ModelFileError for bad metadata (nothing is written) and
    OSError when the directory is not writable.
    """
    if not isinstance(model, Depth3DSeg):
        raise ModelFileError(f'save_model expects a Depth3DSeg, got {type(model).__name__}')
    full = make_meta(model, meta)
    state = {k: v.detach().to('cpu').clone() for k, v in model.state_dict().items()}
    payload = {'format': FORMAT, 'version': VERSION, 'meta': full, 'state_dict': state}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + '.', suffix='.tmp', dir=path.parent)
    try:
        with os.fdopen(fd, 'wb') as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(
            tmp, 0o644
        )  # mkstemp creates 0600; model files are installed and shared (share/models)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


#: the first bytes of what torch.save writes: a zip archive (PK 03 04), or a legacy pickle
#: (the protocol 2-5 opcode 0x80)
TORCH_MAGIC = (b'PK\x03\x04', b'\x80')


def _load_failure(exc: BaseException) -> str:
    """Why ``torch.load(weights_only=True)`` failed, as one short line.

    Never torch's own advice to retry with weights_only off (that would run the file's code): only
    the refused global's name is kept from an UnpicklingError.
    """
    text = str(exc)
    if isinstance(exc, pickle.UnpicklingError) or 'Weights only load failed' in text:
        m = re.search(r'(?:unsupported|Unsupported global:) GLOBAL ([\w.]+)', text)
        what = f' ({m.group(1)})' if m else ''
        return (
            'it holds an object other than tensors and plain containers'
            + what
            + ', refused by the safe loader (weights_only=True) and never run; or it is not a '
            'torch file'
        )
    if isinstance(exc, EOFError) or 'central directory' in text or 'PytorchStreamReader' in text:
        return 'truncated or corrupt (not a complete torch zip archive)'
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and 'weights_only' not in ln]
    return f'{type(exc).__name__}: {lines[0][:200]}' if lines else type(exc).__name__


def load_plain(
    path: Union[str, Path], map_location: Any = 'cpu', what: str = 'depth3dseg model file'
) -> Any:
    """``torch.load(path, weights_only=True)`` with one-line errors naming the file (model files
    and training checkpoints alike; the node, depth3dseg-train --resume / model.init and
    depth3dseg-eval).

    Returns the loaded object (tensors and plain containers only). Raises FileNotFoundError (no
    file); ModelFileError (a ValueError), one line, ``<path>: not a <what> (<reason>)``, for an
    empty file (0 bytes), a truncated or corrupt file, or a pickle that needs any other global
    (refused by PyTorch's restricted unpickler, never run; the message never advises
    weights_only=False).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'{what} not found: {path}')
    size = path.stat().st_size
    if size == 0:
        raise ModelFileError(f'{path}: not a {what} (empty file, 0 bytes)')
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (
        Exception
    ) as exc:  # UnpicklingError (unsafe global), RuntimeError (not a zip), EOFError, KeyError ...
        with open(path, 'rb') as f:
            head = f.read(8)
        why = (
            _load_failure(exc)
            if head.startswith(TORCH_MAGIC)
            else f'not a torch file: it starts with {head!r}, a torch file with {TORCH_MAGIC[0]!r}'
            ' (zip) or a pickle protocol byte'
        )
        raise ModelFileError(f'{path}: not a {what} ({size} bytes; {why})') from None


def read_model_file(path: Union[str, Path], map_location: Any = 'cpu') -> Dict[str, Any]:
    """Load and check the raw model-file dict (format, version, keys) without building the model.

    Raises FileNotFoundError (also for a directory, naming the model.pt in it when there is one);
    ModelFileError (one line naming the file) for a file that is not a
    depth3dseg model file: empty, truncated, any pickle that needs more than tensors and plain
    containers (refused by weights_only=True, never run: `load_plain`), another version, or missing
    keys.
    """
    path = Path(path)
    if path.is_dir():
        inside = path / 'model.pt'
        hint = f': give the model file in it, {inside}' if inside.is_file() else ''
        raise FileNotFoundError(f'model file {path} is a directory, not a model file{hint}')
    if not path.is_file():
        raise FileNotFoundError(f'model file not found: {path}')
    data = load_plain(
        path, map_location, 'depth3dseg model file (the model.pt that depth3dseg-train exports)'
    )
    if isinstance(data, dict) and {'model', 'optimizer', 'config'} <= set(data):
        raise ModelFileError(
            f"{path}: this is a training checkpoint (last.pt/best.pt of a run), not a "
            "model file: use the run's model.pt, or continue the run with --resume"
        )
    if not isinstance(data, dict) or data.get('format') != FORMAT:
        fmt = data.get('format') if isinstance(data, dict) else type(data).__name__
        raise ModelFileError(
            f"{path}: format={fmt!r}, expected '{FORMAT}' (a model.pt exported by "
            'depth3dseg-train)'
        )
    if data.get('version') != VERSION:
        raise ModelFileError(
            f"{path}: version={data.get('version')!r}, this package reads version {VERSION}"
        )
    for key in ('meta', 'state_dict'):
        if not isinstance(data.get(key), dict):
            raise ModelFileError(f"{path}: missing or malformed '{key}'")
    _validate_meta(data['meta'])
    return data


def load_model(
    path: Union[str, Path], map_location: Any = 'cpu'
) -> Tuple[Depth3DSeg, Dict[str, Any]]:
    """Build the `Depth3DSeg` stored in `path` (eval mode, on `map_location`) -> (model, meta);
    meta always has ``input_balance`` ('none' for files written before the key) and ``input``
    ('rgb' for files written before it).

    Raises FileNotFoundError, ModelFileError (see `read_model_file`; also for an arch/class-count
    mismatch or a state_dict that does not fit the arch: missing/unexpected/mis-shaped tensors).
    """
    data = read_model_file(path, map_location)
    meta = data['meta']
    meta.setdefault('input_balance', 'none')
    meta.setdefault('input', 'rgb')
    try:
        model = Depth3DSeg.from_arch(dict(meta['arch']))
    except ValueError as exc:
        raise ModelFileError(
            f"{path}: meta['arch'] is not a valid Depth3DSeg arch: {exc}"
        ) from None
    n = len(ClassSet.from_dict(meta['classes']))
    if n != model.num_classes:
        raise ModelFileError(
            f"{path}: {n} classes in meta but arch num_classes={model.num_classes}"
        )
    try:
        model.load_state_dict(data['state_dict'], strict=True)
    except RuntimeError as exc:
        why = ' '.join(
            str(exc).split()
        )  # torch's text spans lines (tab-indented key lists): one line
        raise ModelFileError(f'{path}: state_dict does not fit the arch: {why[:400]}') from None
    model.to(map_location).eval()
    return model, meta
