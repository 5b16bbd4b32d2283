"""Atomic training checkpoints (``last.pt``, ``best.pt``) loadable with
``torch.load(weights_only=True)``.

A checkpoint is a plain dict: model/optimiser/scheduler/scaler state_dicts, counters,
early-stopping state, the config, and the RNG states of Python, NumPy and torch (CPU and CUDA)
stored as tensors and lists so that the safe (weights-only) unpickler accepts them. Writing goes to
``<path>.tmp`` in the same directory, is flushed and fsync'ed, then ``os.replace``'d over the
target: a crash (SIGKILL) at any moment leaves either the old or the new checkpoint, never a torn
file (METHOD M6: resumable training).
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from depth3dseg_ros.training.config import complete_config, set_key, validate


def rng_state() -> dict[str, Any]:
    """Capture the RNG states: ``python`` (list), ``numpy`` (dict with a uint32 tensor), ``torch``
    (uint8 tensor) and ``cuda`` (list of uint8 tensors, empty without CUDA)."""
    version, state, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        'python': [int(version), list(state), gauss],
        'numpy': {
            'name': str(name),
            'keys': torch.from_numpy(keys.astype(np.int64)),
            'pos': int(pos),
            'has_gauss': int(has_gauss),
            'cached_gaussian': float(cached),
        },
        'torch': torch.get_rng_state(),
        'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` captured (CUDA states only when CUDA is present)."""
    version, py_state, gauss = state['python']
    random.setstate((int(version), tuple(int(x) for x in py_state), gauss))
    n = state['numpy']
    np.random.set_state(
        (
            n['name'],
            n['keys'].numpy().astype(np.uint32),
            n['pos'],
            n['has_gauss'],
            n['cached_gaussian'],
        )
    )
    torch.set_rng_state(state['torch'].cpu())
    if state.get('cuda') and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state['cuda']])


def plain(value: Any, where: str = 'checkpoint') -> Any:
    """``value`` with everything the weights-only unpickler refuses made plain (C33): numpy scalars
    -> int/float/bool, numpy arrays -> tensors, ``Path`` -> str, tuples kept, through dicts and
    lists; tensors and plain values unchanged.

    Raises:
        TypeError: any other object, naming where it is (``checkpoint['early_stop']['best']``)
            and its type.
    """
    if value is None or isinstance(value, (bool, int, float, str, bytes, torch.Tensor)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, dict):
        return {k: plain(v, f'{where}[{k!r}]') for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(v, f'{where}[{i}]') for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    raise TypeError(
        f'{where} is a {type(value).__name__}: a checkpoint holds only tensors and plain data, '
        'which torch.load(weights_only=True) accepts'
    )


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically (tmp file + fsync + os.replace), made `plain` first
    (C33: numpy scalars/arrays and paths would make the weights-only loader refuse it). Returns the
    path. Raises TypeError for an object that has no plain form (named)."""
    state = plain(state)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + '.tmp')
    with open(tmp, 'wb') as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = 'cpu') -> dict[str, Any]:
    """Load a checkpoint written by `save_checkpoint` with ``torch.load(weights_only=True)``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError (core.modelfile.ModelFileError): one line naming the file, for an empty (0
            bytes), truncated or corrupt file, a pickle payload (any global beyond tensors and
            plain containers:
            refused by the safe loader, never run; torch's advice to retry with weights_only off is
            never passed on), or a file that is not a training checkpoint (missing
            ``model``/``epoch`` keys).
    """
    from depth3dseg_ros.core.modelfile import load_plain

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'checkpoint {path} not found')
    state = load_plain(path, map_location, 'depth3dseg training checkpoint')
    if not isinstance(state, dict) or 'model' not in state or 'epoch' not in state:
        raise ValueError(
            f'{path} is not a depth3dseg training checkpoint (keys: '
            f'{sorted(state) if isinstance(state, dict) else type(state).__name__})'
        )
    return state


def load_resume(
    path: str | Path, sets: list[str] | tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict]:
    """``--resume``: the checkpoint at ``path`` (a run's ``last.pt``) and its config, completed
    from the current DEFAULTS (config.complete_config: keys added since the run was written take
    their default, stored keys keep their values), with the ``--set`` assignments ``sets`` on top;
    returns ``(checkpoint, validated config)``.

    Raises:
        FileNotFoundError: no checkpoint at ``path`` (naming it: nothing to resume there).
        ValueError: an empty, truncated, corrupt or unsafe (pickle payload) file, not a training
            checkpoint (see `load_checkpoint`), or a bad stored/--set key or value (naming the
            key).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f'--resume: checkpoint {path} not found (no run to continue in {path.parent}; '
            'start one there without --resume)'
        )
    ckpt = load_checkpoint(path)
    if not isinstance(ckpt.get('config'), dict):
        raise ValueError(f'{path} is not a depth3dseg training checkpoint: it stores no config')
    cfg = complete_config(ckpt['config'], f'config stored in {path}')
    stored = cfg['train']['trainable']
    for s in sets:
        set_key(cfg, s)
    now = cfg['train']['trainable']
    if stored != now:  # the optimiser state holds one entry per trainable parameter, in order
        raise ValueError(
            f'--resume: train.trainable={json.dumps(now)} differs from the run\'s own '
            f'{json.dumps(stored)} (its optimiser '
            'state belongs to those parameters); resume without changing it, or start a new run '
            'from this run\'s exported model.pt (--set model.init=...) with the new one'
        )
    missing = arch_keys_not_stored(ckpt['config'], cfg)
    if missing:
        from depth3dseg_ros.core.model import DEFAULT_ARCH

        change = ', '.join(f'{k} {old} -> {DEFAULT_ARCH[k]}' for k, (old, _) in missing.items())
        when = sorted({day for _, day in missing.values()})
        old = ' '.join(f'--set model.arch.{k}={v}' for k, (v, _) in missing.items())
        print(
            f'depth3dseg-train: warning: the config stored in {path} does not record model.arch '
            f'{", ".join(missing)}, whose defaults changed on {", ".join(when)} ({change}): '
            'resuming with the new defaults; a run started before then used the old ones: resume '
            f'it with {old}',
            file=sys.stderr,
            flush=True,
        )
    return ckpt, validate(cfg)


#: Arch keys whose default changed (core.arch.DEFAULT_ARCH), with the value runs started before
#: the change used and its date. They size no tensor, so a checkpoint that does not store them
#: (runs from before every arch key was recorded) would resume silently with the new value:
#: load_resume warns.
CHANGED_ARCH_DEFAULTS: dict[str, tuple[Any, str]] = {
    'p_stride': (4, '2026-11-30'),
    'p_k': (6, '2026-11-30'),
}


def _shapes(model: Any) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def arch_keys_not_stored(
    stored: dict[str, Any], cfg: dict[str, Any]
) -> dict[str, tuple[Any, str]]:
    """The CHANGED_ARCH_DEFAULTS entries that neither a checkpoint's stored ``config`` nor
    ``cfg['model']['arch']`` (its --set overrides) gives."""
    have = set((stored.get('model') or {}).get('arch') or {}) | set(cfg['model']['arch'])
    return {k: v for k, v in CHANGED_ARCH_DEFAULTS.items() if k not in have}


def _check_classes(key: str, path: Any, meta: dict[str, Any], classes: Any) -> None:
    """ValueError naming ``key`` and both class lists when the model file's classes (``meta``) are
    not the run's ``classes`` (names and void id; colours may differ)."""
    from depth3dseg_ros.core.classes import ClassSet

    have = ClassSet.from_dict(meta['classes'])
    if have.names != classes.names or have.void_id != classes.void_id:
        raise ValueError(
            f'config {key}={str(path)!r} was trained for classes {have.names} '
            f'(void {have.void_id}) but data.classes gives {classes.names} (void '
            f'{classes.void_id})'
        )


def load_init_model(cfg: dict[str, Any], classes: Any) -> Any:
    """Fine-tuning: the model file ``cfg['model']['init']`` (core.modelfile) as a Depth3DSeg on the
    CPU, whose state_dict the run starts from; its arch, mean and std are written into
    ``cfg['model']`` (the run trains and exports that network).
    Keys set in the run's ``model.arch`` override the file's when the weights still fit (those that
    size no tensor: ``p_stride``, ``p_window``, ``p_k``, the depth range), e.g. fine-tuning the 3D
    net at another subsampling stride. ``code_input: true`` over a colour model's file starts the
    RGB-D input from it (`Depth3DSeg.with_code_input`: zero weights on the code channels); with
    ``code_stream: true`` too, a separate geometry encoder joined at zero weight, whose weights
    come from the 2D encoder of ``cfg['model']['code_encoder_init']`` when set (random otherwise).
    Raises FileNotFoundError / ModelFileError for a bad file; ValueError when its class names or
    void id differ from the run's ``classes`` (core.classes.ClassSet; colours may differ), naming
    both, or when a ``model.arch`` key changes the shape of the file's weights, naming the key and
    both values. The file's ``encoder`` always wins (its weights are the fine-tune's start): a
    different one in ``model.arch`` (config/train.yaml names efficientnet_lite0) is dropped with a
    line on stderr."""
    from depth3dseg_ros.core.code_stream import CODE_MEAN, CODE_STD
    from depth3dseg_ros.core.model import Depth3DSeg
    from depth3dseg_ros.core.modelfile import load_model

    path = cfg['model']['init']
    model, meta = load_model(path, map_location='cpu')
    _check_classes('model.init', path, meta, classes)
    arch = {k: v for k, v in meta['arch'].items() if k != 'num_classes'}
    changed = {k: v for k, v in cfg['model']['arch'].items() if arch.get(k) != v}
    if 'encoder' in changed:  # a fine-tune keeps the file's encoder (config/train.yaml names one)
        print(
            f"depth3dseg-train: model.arch encoder {changed.pop('encoder')!r} not used: "
            f"model.init={str(path)!r} has the {arch.get('encoder')!r} encoder, whose weights the "
            'fine-tune starts from',
            file=sys.stderr,
        )
    if changed.get('code_input') is True:  # RGB-D input from a colour model: code weights 0
        stream = changed.pop('code_stream', False) is True
        geometry = None
        if cfg['model'].get('code_encoder_init'):
            geo_path = cfg['model']['code_encoder_init']
            geometry, geo_meta = load_model(geo_path, map_location='cpu')
            _check_classes('model.code_encoder_init', geo_path, geo_meta, classes)
            norm = (list(CODE_MEAN), list(CODE_STD))
            if (list(geo_meta['mean']), list(geo_meta['std'])) != norm:
                raise ValueError(
                    f'config model.code_encoder_init={str(geo_path)!r} was trained with mean '
                    f"{geo_meta['mean']} std {geo_meta['std']}; the code's encoder normalises "
                    f'with mean {norm[0]} std {norm[1]} (core.code_stream)'
                )
        model = model.with_code_input(stream=stream, geometry=geometry)
        arch.update(code_input=True, code_stream=stream)
        del changed['code_input']
    elif cfg['model'].get('code_encoder_init'):
        cei = str(cfg['model']['code_encoder_init'])
        raise ValueError(
            f'config model.code_encoder_init={cei!r} starts the geometry encoder only when '
            f'model.init is a colour model widened to code_stream; model.init={str(path)!r} '
            'already has arch code_input=true (drop code_encoder_init to fine-tune it as it is)'
        )
    if changed:
        shapes = _shapes(model)
        n = meta['arch']['num_classes']
        bad = {
            k: v
            for k, v in changed.items()
            if _shapes(Depth3DSeg(**dict(arch, **{k: v}), num_classes=n)) != shapes
        }
        if bad:
            was = {k: arch.get(k) for k in bad}
            raise ValueError(
                f'config model.arch {bad} changes the shape of the weights of model.init='
                f'{str(path)!r} (its arch has {was}): only keys that size no tensor can differ'
            )
        arch.update(
            changed
        )  # the run builds this arch and loads the file's weights into it (same shapes)
    cfg['model'].update(arch=arch, mean=list(meta['mean']), std=list(meta['std']))
    if cfg['model'].get('input_balance') is None:  # null: the init's white balance
        cfg['model']['input_balance'] = meta.get('input_balance', 'none')
    if cfg['model'].get('input') is None:  # null: what the init's 2D network takes
        cfg['model']['input'] = meta.get('input', 'rgb')
    return model


def load_teacher(cfg: dict[str, Any], classes: Any) -> Any:
    """Distillation's frozen teacher (core.distill): the model file ``cfg['model']['teacher']``
    as a Depth3DSeg on the CPU in eval mode with ``requires_grad`` off. Its arch may differ from
    the run's (a larger teacher); it sees the run's normalised input at the run's size, so its
    classes, mean, std and input size must be the run's.
    Raises ValueError naming ``model.teacher`` for a missing or unreadable file, and naming the key
    and both values when the class names, void id, mean, std or input size differ."""
    from depth3dseg_ros.core.modelfile import ModelFileError, load_model

    path = cfg['model']['teacher']
    try:
        model, meta = load_model(path, map_location='cpu')
    except (OSError, ModelFileError) as exc:
        raise ValueError(f'config model.teacher={str(path)!r}: {exc}') from None
    _check_classes('model.teacher', path, meta, classes)
    for section, name in (('model', 'mean'), ('model', 'std'), ('data', 'input_size')):
        own, run = meta[name], cfg[section][name]
        if [float(v) for v in own] != [float(v) for v in run]:
            raise ValueError(
                f'config model.teacher={str(path)!r} was trained with {name} {list(own)} but '
                f'the run has {section}.{name}={list(run)}: the teacher must see the input as it '
                'was trained'
            )
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def resume_position(ckpt: dict[str, Any], path: Path, n: int) -> int:
    """``samples_in_epoch`` of a checkpoint (C34). A checkpoint written before positions were
    recorded is accepted at an epoch boundary; mid-epoch it is refused, naming what it stores.

    Raises:
        ValueError: a mid-epoch checkpoint without ``samples_in_epoch``, or a position beyond the
            dataset, or mid-epoch with another number of training samples than it stored
            (``train_samples``: the training data changed since the checkpoint).
    """
    if 'samples_in_epoch' not in ckpt:
        if ckpt['step_in_epoch'] == 0:
            return 0
        raise ValueError(
            f"{path} stops mid-epoch (epoch {ckpt['epoch']}, step {ckpt['step_in_epoch']}) but "
            'was written before checkpoints recorded the epoch position in samples: its remaining '
            'samples cannot be identified; resume it with the version that wrote it, or start '
            'a new run from its weights (model.init with an exported model)'
        )
    pos = int(ckpt['samples_in_epoch'])
    was = ckpt.get('train_samples')
    if pos and was is not None and int(was) != n:
        raise ValueError(
            f'{path} stops mid-epoch (sample {pos} of {was}) but the training data now has {n} '
            'samples: the epoch order is drawn over the whole set, so the samples not yet trained '
            'cannot be identified; restore the datasets of that run, or start a new run from its '
            'weights (model.init with an exported model)'
        )
    if pos > n:
        raise ValueError(
            f'{path}: samples_in_epoch={pos} but the training data now has {n} samples (the '
            'datasets changed since the checkpoint)'
        )
    return pos
