"""Training configuration as plain data: defaults, YAML load/merge, ``--set key=value``,
validation.

The config is a nested ``dict`` of YAML scalars/lists (nanoGPT style: no config classes), so it can
be written to a checkpoint (``torch.load(weights_only=True)``), to the run's ``config.yaml`` and to
the model file's metadata unchanged. ``DEFAULTS`` below is the single source of the keys; the
shipped ``config/train.yaml`` lists the same keys with comments (test/test_train_cli.py keeps them
equal).

Sections (METHOD M1–M6):
  data      train/val dataset dirs (format: docs/ARCHITECTURE.md "Dataset directory"), val_split,
            classes ('nyu13' or a classes YAML), input_size [W, H], num_workers.
  augment   hflip probability, scale range (random scale + crop back to input size, K adjusted),
            colour jitter; camera (camera-true photometric + depth-sensor ops, training.camera_aug;
            off by default, preset 'real_camera'); texture (training.texture_rand); fda (Fourier
            domain adaptation towards real frames, training.fda).
  model     arch (kwargs of core.model.Depth3DSeg), mean/std (RGB normalisation, 0..1 scale), init
            (a model file to start from: fine-tuning; its arch/mean/std replace the config's).
  loss      kwargs of core.train_step.LossConfig (weights and variants, M4/M5).
  optim     AdamW lr/betas/weight_decay, cosine schedule with linear warmup, grad clipping.
  train     batch_size, epochs, seed, device, amp, deterministic, max_steps_per_epoch,
  time_limit_min, freeze_bn, channels_last, trainable, mixstyle (training.mixstyle),
  class_mix (training.class_mix).
  early_stop  patience rule on a validation metric (M6 convergence; training.early_stop).
  log       tensorboard, progress bar, number of sample images.
  export    model file name (relative to the run dir).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable

import yaml

from depth3dseg_ros.core.modelfile import ModelFileError
from depth3dseg_ros.core.train_step import LossConfig
from depth3dseg_ros.core.yamlfile import load_yaml_file
from depth3dseg_ros.training.config_validate import AMP_MODES, METRIC_KEYS, validate

# validate, AMP_MODES and METRIC_KEYS live in training.config_validate (imported from here too)
__all__ = [
    'AMP_MODES',
    'DEFAULTS',
    'METRIC_KEYS',
    'USER_ERRORS',
    'complete_config',
    'dump_config',
    'load_config',
    'merge',
    'set_key',
    'validate',
]

DEFAULTS: dict[str, Any] = {
    'data': {
        'train': [],
        'val': [],
        'val_split': 0.1,
        'classes': 'nyu13',
        'input_size': [320, 240],
        'num_workers': 0,
    },
    'augment': {
        'enabled': True,
        'hflip': 0.5,
        'scale': [1.0, 1.25],
        # divide the depth by the zoom factor of `scale` (Eigen et al. 2014): the zoomed frame then
        # shows the scene 1/s times smaller at 1/s the depth, so the image-to-depth relation of the
        # frame's own focal length holds for the depth head (it sees no K); K is scaled as always
        'scale_depth': False,
        'brightness': 0.2,
        'contrast': 0.2,
        'saturation': 0.2,
        # camera-true augmentation (training.camera_aug): null = off, a preset name ('real_camera':
        # all ops on) or {preset?: NAME, OP: {p: ..., ...}} (ops: camera_aug.OP_DEFAULTS)
        'camera': None,
        # label-guided texture/colour randomisation (training.texture_rand): null = off,
        # 'domain_rand' (the preset) or {preset?: NAME, p: ..., p_segment: ..., ...}
        'texture': None,
        # Fourier domain adaptation towards real images (training.fda): null = off, or
        # {style: [dataset dirs of real frames], p: 0.5, beta: [0.0, 0.01]}
        'fda': None,
    },
    'model': {
        # the encoder started from ImageNet (encoder_init); {} = the MobileNetV2-style one
        'arch': {'encoder': 'efficientnet_lite0'},
        # RGB normalisation (0..1 scale); null = the encoder's own (training.encoder_init)
        'mean': None,
        'std': None,
        # 'imagenet': an encoder that has ImageNet weights (efficientnet_lite0) starts from them;
        # null = random (training.encoder_init)
        'encoder_init': 'imagenet',
        # white balance of the input before mean/std (core.colour_balance): 'none', 'grey_world',
        # or null = model.init's (none without model.init)
        'input_balance': None,
        # what the 2D network's image is (core.modelfile INPUT_KINDS): 'rgb', or 'depth_code' for
        # a geometry model trained on scripts/geometry_input.py's datasets (RGB-D late fusion,
        # core.late_fusion); null = model.init's (rgb without model.init)
        'input': None,
        'init': None,
        # with model.init and arch code_stream: the model file whose 2D encoder, trained on the
        # geometry code as its image, starts the code's encoder (core.code_stream); null = random
        'code_encoder_init': None,
        # a frozen model file that loss.w_distill or loss.w_distill_depth > 0 distils from
        # (core.distill); null = none
        'teacher': None,
    },
    'loss': LossConfig().to_dict(),
    'optim': {
        'lr': 1.0e-3,
        'betas': [0.9, 0.999],
        'weight_decay': 1.0e-4,
        'warmup_steps': 100,
        'min_lr_ratio': 0.05,
        'grad_clip': 1.0,
        # the 2D encoder's learning rate is lr times this (training.encoder_init.param_groups)
        'encoder_lr_mult': 1.0,
    },
    'train': {
        'batch_size': 8,
        'epochs': 50,
        'seed': 0,
        'device': 'auto',
        'amp': 'none',
        'deterministic': True,
        'max_steps_per_epoch': None,
        'time_limit_min': None,
        'freeze_bn': False,
        'channels_last': False,
        'trainable': None,
        'mixstyle': None,
        'class_mix': None,
    },
    'early_stop': {
        'metric': 'miou_fused',
        'mode': 'max',
        'patience': 10,
        'min_delta': 0.0,
        # validate with each frame's sensor depth as measured depth (RGB-D cameras; what an
        # arch code_input model's 2D net sees only then)
        'measured_depth': False,
    },
    'log': {
        'tensorboard': True,
        'progress': True,
        'sample_images': 4,
    },
    'export': 'model.pt',
}

#: The errors a user's input causes (missing path, existing run, bad config / --set / model file):
#: the depth3dseg-train and depth3dseg-eval CLIs print these as one ``<prog>: error: <message>``
#: line, exit 2.
USER_ERRORS = (FileNotFoundError, FileExistsError, ValueError, ModelFileError)


def merge(base: dict, override: dict, where: str = '') -> dict:
    """Deep-merge ``override`` into a copy of ``base``; returns the merged dict.

    Raises:
        ValueError: a key of ``override`` is not in ``base`` (a typo must not be silently ignored),
            naming the dotted key. ``model.arch`` takes any keys (checked by
            core.arch.check_arch).
    """
    out = copy.deepcopy(base)
    for key, val in (override or {}).items():
        dotted = f'{where}{key}'
        if key not in out and not where.startswith('model.arch.'):
            raise ValueError(f'config key {dotted!r} is unknown (known: {sorted(out)})')
        if isinstance(out.get(key), dict) and isinstance(val, dict):
            out[key] = merge(out[key], val, f'{dotted}.')
        else:
            out[key] = copy.deepcopy(val)
    return out


def complete_config(stored: Any, source: str) -> dict:
    """A config stored by a run (a checkpoint's ``config``, possibly written by an older version),
    completed from DEFAULTS: keys it lacks (added since) take their default, keys it has keep their
    stored values. Returns a new, not yet validated dict.

    Raises:
        ValueError: ``stored`` is not a mapping, or holds a key DEFAULTS does not know (as for a
            YAML file), the message prefixed with ``source`` (e.g. the checkpoint path).
    """
    if not isinstance(stored, dict):
        raise ValueError(f'{source}: config={stored!r:.80} must be a mapping')
    try:
        return merge(DEFAULTS, stored)
    except ValueError as exc:
        raise ValueError(f'{source}: {exc}') from None


def set_key(cfg: dict, assignment: str) -> dict:
    """Apply one ``--set`` assignment ``a.b.c=value`` in place; the value is parsed as YAML.

    ``--set train.epochs=3``, ``--set data.train=[d1,d2]``, ``--set train.time_limit_min=null``.

    Raises:
        ValueError: no ``=``, an empty key, a value that is not valid YAML (one line naming the
            assignment and the parser's reason with its column, e.g. ``--set 'train.epochs=[1,'``),
            or a dotted key not present in the config (except under model.arch).
    """
    if '=' not in assignment:
        raise ValueError(f'--set {assignment!r} must look like key=value')
    key, text = assignment.split('=', 1)
    if not key.strip():
        raise ValueError(f'--set {assignment!r} has no key before "="')
    parts = key.strip().split('.')
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        problem = (
            getattr(exc, 'problem', None) or getattr(exc, 'context', None) or type(exc).__name__
        )
        mark = getattr(exc, 'problem_mark', None) or getattr(exc, 'context_mark', None)
        where = f' at column {mark.column + 1}' if mark is not None else ''
        raise ValueError(
            f'--set {assignment!r}: the value {text!r} is not valid YAML ({problem}{where})'
        ) from None
    node = cfg
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node.get(part), dict):
            raise ValueError(
                f'--set key {key!r}: {".".join(parts[: i + 1])!r} is not a config section '
                f'(sections here: {sorted(k for k, v in node.items() if isinstance(v, dict))})'
            )
        node = node[part]
    free = parts[:2] == ['model', 'arch']
    if parts[-1] not in node and not free:
        raise ValueError(f'--set key {key!r} is unknown (known here: {sorted(node)})')
    node[parts[-1]] = value
    return cfg


def load_config(path: str | Path | None = None, sets: Iterable[str] = ()) -> dict:
    """DEFAULTS, merged with the YAML file at ``path`` (if given), then the ``--set`` assignments.

    Returns the validated config dict. Raises FileNotFoundError / ValueError (see `validate`; a
    file that does not parse: core.yamlfile.YamlFileError, one line naming file, line, column).
    """
    cfg = copy.deepcopy(DEFAULTS)
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f'config file {p} not found')
        data = load_yaml_file(p) or {}  # a parse error: one line (core.yamlfile)
        if not isinstance(data, dict):
            raise ValueError(f'config file {p} must hold a mapping, got {type(data).__name__}')
        cfg = merge(cfg, data)
    for s in sets:
        set_key(cfg, s)
    return validate(cfg)


def dump_config(cfg: dict, path: str | Path) -> None:
    """Write ``cfg`` as YAML (the run's resolved config)."""
    Path(path).write_text(yaml.safe_dump(cfg, sort_keys=False))
