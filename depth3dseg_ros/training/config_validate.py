"""Checks of a depth3dseg-train configuration (training.config): types and ranges, section by
section, each error naming the dotted key and its value, e.g. ``config train.batch_size=0 must be
...``. No ROS, no file I/O: the config as plain data in, the same data (normalised) out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depth3dseg_ros.core.colour_balance import check_balance
from depth3dseg_ros.core.model import check_arch
from depth3dseg_ros.core.modelfile import check_input_kind
from depth3dseg_ros.core.train_step import LossConfig
from depth3dseg_ros.training.camera_aug import resolve_camera
from depth3dseg_ros.training.class_mix import check_class_mix
from depth3dseg_ros.training.config_checks import check_code_input
from depth3dseg_ros.training.encoder_init import check_encoder_init, resolve_normalisation
from depth3dseg_ros.training.fda import resolve_fda
from depth3dseg_ros.training.mixstyle import check_mixstyle
from depth3dseg_ros.training.texture_rand import resolve_texture

AMP_MODES = ('none', 'bf16', 'fp16')
METRIC_KEYS = (
    'miou_2d',
    'miou_3d',
    'miou_fused',
    'pixel_acc_fused',
    'absrel',
    'rmse',
    'delta1',
    'val_loss',
)


def _num(
    cfg: dict,
    dotted: str,
    lo: float | None = None,
    hi: float | None = None,
    integer: bool = False,
    allow_none: bool = False,
) -> None:
    parent: Any = cfg
    parts = dotted.split('.')
    for part in parts[:-1]:
        parent = parent[part]
    node = parent[parts[-1]]
    if node is None and allow_none:
        return
    if isinstance(node, str):  # YAML 1.1 reads 1e-3 (no dot) as a string: accept it as a number
        try:
            node = parent[parts[-1]] = float(node)
        except ValueError:
            pass
    ok = isinstance(node, (int, float)) and not isinstance(node, bool)
    if ok and integer:
        ok = float(node).is_integer()
        if ok:
            node = parent[parts[-1]] = int(node)
    if ok and lo is not None:
        ok = node >= lo
    if ok and hi is not None:
        ok = node <= hi
    if not ok:
        rng = (f' in [{lo}, {hi}]' if hi is not None else f' >= {lo}') if lo is not None else ''
        kind = 'an integer' if integer else 'a number'
        raise ValueError(f'config {dotted}={node!r} must be {kind}{rng}')


def validate(cfg: dict) -> dict:
    """Check types and ranges; returns ``cfg`` (normalised: dataset dirs as lists of str).

    Raises:
        ValueError: naming the dotted key and its value, e.g. ``config train.batch_size=0 must be
            ...``.
    """
    for check in (_data, _augment, _model, _loss, _optim_train, _early_stop_log):
        check(cfg)
    return cfg


def _data(cfg: dict) -> None:
    """Section ``data``: dataset lists (normalised to lists of str), input size, classes."""
    d = cfg['data']
    for key in ('train', 'val'):
        if isinstance(d[key], (str, Path)):
            d[key] = [str(d[key])]
        if not isinstance(d[key], list) or not all(isinstance(x, (str, Path)) for x in d[key]):
            raise ValueError(f'config data.{key}={d[key]!r} must be a list of dataset directories')
        d[key] = [str(x) for x in d[key]]
    size = d['input_size']
    if (
        not isinstance(size, (list, tuple))
        or len(size) != 2
        or not all(isinstance(x, int) and x >= 8 for x in size)
    ):
        raise ValueError(f'config data.input_size={size!r} must be [width, height], integers >= 8')
    d['input_size'] = [int(size[0]), int(size[1])]
    if not isinstance(d['classes'], str) or not d['classes']:
        raise ValueError(
            f"config data.classes={d['classes']!r} must be 'nyu13' or a classes YAML path"
        )
    _num(cfg, 'data.val_split', 0.0, 0.9)
    _num(cfg, 'data.num_workers', 0, 64, integer=True)


def _augment(cfg: dict) -> None:
    """Section ``augment``: flip, jitter and scale ranges; camera, texture and FDA specs."""
    a = cfg['augment']
    _num(cfg, 'augment.hflip', 0.0, 1.0)
    if not isinstance(a['scale_depth'], bool):
        raise ValueError(f"config augment.scale_depth={a['scale_depth']!r} must be true or false")
    for key in ('brightness', 'contrast', 'saturation'):
        _num(cfg, f'augment.{key}', 0.0, 1.0)
    resolve_camera(a.get('camera'))  # raises ValueError naming augment.camera.<op>.<field>
    resolve_texture(a.get('texture'))  # raises ValueError naming augment.texture.<field>
    resolve_fda(a.get('fda'))  # raises ValueError naming augment.fda.<field>
    sc = a['scale']
    if (
        not isinstance(sc, (list, tuple))
        or len(sc) != 2
        or not all(isinstance(x, (int, float)) for x in sc)
        or not (1.0 <= sc[0] <= sc[1] <= 4.0)
    ):
        raise ValueError(
            f'config augment.scale={sc!r} must be [min, max] with 1 <= min <= max <= 4 '
            '(scale up, then crop back to the input size)'
        )


def _model(cfg: dict) -> None:
    """Section ``model``: file paths, arch, normalisation, input kind and balance."""
    m = cfg['model']
    for key in ('init', 'code_encoder_init', 'teacher'):
        if m[key] is not None and (not isinstance(m[key], str) or not m[key]):
            raise ValueError(
                f'config model.{key}={m[key]!r} must be null or the path of a model file'
            )
    if not isinstance(m['arch'], dict):
        raise ValueError(
            f"config model.arch={m['arch']!r} must be a mapping of Depth3DSeg arguments"
        )
    cei = m['code_encoder_init']
    if cei is not None and not (m['init'] and m['arch'].get('code_stream') is True):
        raise ValueError(
            f'config model.code_encoder_init={cei!r} starts the geometry encoder of a colour '
            'model.init widened with model.arch code_input and code_stream true; set those too'
        )
    check_encoder_init(m['encoder_init'])
    for key in ('mean', 'std'):
        v = m[key]
        if v is None:  # the encoder's own (training.encoder_init.resolve_normalisation)
            continue
        if (
            not isinstance(v, (list, tuple))
            or len(v) != 3
            or not all(isinstance(x, (int, float)) for x in v)
        ):
            raise ValueError(f'config model.{key}={v!r} must be 3 numbers (RGB, 0..1 scale)')
    if m['std'] is not None and any(x <= 0 for x in m['std']):
        raise ValueError(f"config model.std={m['std']!r} must be > 0")
    if m['input_balance'] is not None:
        check_balance(m['input_balance'], 'config model.input_balance')
    if m['input'] is not None:
        check_input_kind(m['input'], 'config model.input')
    if m['input'] == 'depth_code':  # a geometry model's image is a code, not a photograph
        check_code_input(cfg)
    try:
        check_arch(dict(m['arch']))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"config model.arch={m['arch']!r}: {exc}") from None
    resolve_normalisation(cfg)  # null mean/std: the encoder's own (model.init's replace them)


def _loss(cfg: dict) -> None:
    """Section ``loss``: LossConfig fields, and a teacher exactly when a distillation weight
    is set."""
    if not isinstance(cfg['loss'], dict):
        raise ValueError(f"config loss={cfg['loss']!r} must be a mapping of LossConfig fields")
    try:
        loss = LossConfig.from_dict(cfg['loss'])
    except (ValueError, TypeError) as exc:
        raise ValueError(f'config loss: {exc}') from None
    m = cfg['model']
    if (m['teacher'] is None) == loss.needs_teacher():
        raise ValueError(
            f"config model.teacher={m['teacher']!r} and loss.w_distill={loss.w_distill!r} / "
            f'loss.w_distill_depth={loss.w_distill_depth!r} go together: a teacher model file '
            'needs a distillation weight > 0, and such a weight needs the file'
        )


def _optim_train(cfg: dict) -> None:
    """Sections ``optim`` and ``train``: schedule, batch, seeds, training-only options."""
    _num(cfg, 'optim.lr', 0.0, 10.0)
    _num(cfg, 'optim.weight_decay', 0.0, 10.0)
    _num(cfg, 'optim.warmup_steps', 0, None, integer=True)
    _num(cfg, 'optim.min_lr_ratio', 0.0, 1.0)
    _num(cfg, 'optim.grad_clip', 0.0, None, allow_none=True)
    _num(cfg, 'optim.encoder_lr_mult', 0.0, 10.0)
    t = cfg['train']
    _num(cfg, 'train.batch_size', 1, 4096, integer=True)
    _num(cfg, 'train.epochs', 1, 100000, integer=True)
    _num(cfg, 'train.seed', 0, 2**31 - 1, integer=True)
    _num(cfg, 'train.max_steps_per_epoch', 1, None, integer=True, allow_none=True)
    _num(cfg, 'train.time_limit_min', 0.0, None, allow_none=True)
    for key in ('freeze_bn', 'channels_last'):
        if not isinstance(t[key], bool):
            raise ValueError(f"config train.{key}={t[key]!r} must be true or false")
    tr = t['trainable']
    if tr is not None and (
        not isinstance(tr, list) or not tr or not all(isinstance(x, str) and x for x in tr)
    ):
        raise ValueError(
            f'config train.trainable={tr!r} must be null (every parameter) or a non-empty list '
            'of parameter-name prefixes, e.g. [net.depth_head]'
        )
    t['mixstyle'] = check_mixstyle(t['mixstyle'])
    t['class_mix'] = check_class_mix(t.get('class_mix'))
    if t['amp'] not in AMP_MODES:
        raise ValueError(f"config train.amp={t['amp']!r} must be one of {AMP_MODES}")
    if not isinstance(t['device'], str):
        raise ValueError(
            f"config train.device={t['device']!r} must be 'auto', 'cpu' or 'cuda[:N]'"
        )


def _early_stop_log(cfg: dict) -> None:
    """Sections ``early_stop``, ``log`` and ``export``."""
    e = cfg['early_stop']
    if e['metric'] not in METRIC_KEYS:
        raise ValueError(f"config early_stop.metric={e['metric']!r} must be one of {METRIC_KEYS}")
    if e['mode'] not in ('max', 'min'):
        raise ValueError(f"config early_stop.mode={e['mode']!r} must be 'max' or 'min'")
    _num(cfg, 'early_stop.patience', 1, None, integer=True)
    _num(cfg, 'early_stop.min_delta', 0.0, None)
    if not isinstance(e['measured_depth'], bool):
        raise ValueError(
            f"config early_stop.measured_depth={e['measured_depth']!r} must be true (validate "
            "with the frames' sensor depth as measured depth) or false"
        )
    _num(cfg, 'log.sample_images', 0, 64, integer=True)
    if not isinstance(cfg['export'], str) or not cfg['export']:
        raise ValueError(f"config export={cfg['export']!r} must be a model file name")
