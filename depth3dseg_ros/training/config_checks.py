"""Checks shared by the augmentation configs (training.camera_aug, training.texture_rand): a value
in a range, a [min, max] pair, and the spelling of an augmentation spec (null / 'none' / a preset
name / a mapping); a null-or-mapping training option (options: train.mixstyle, train.class_mix);
and what a geometry model's run may not switch on (check_code_input). Every error names the dotted
config key and the value."""

from __future__ import annotations

from typing import Any


def spec_mapping(spec: Any, where: str, presets: dict) -> dict | None:
    """``spec`` as a mapping: None for null / 'none' / 'off' / '', ``{'preset': NAME}`` for a
    string, the mapping itself otherwise. Raises ValueError (naming ``where``) for anything
    else."""
    if spec is None or (isinstance(spec, str) and spec.lower() in ('none', 'off', '')):
        return None
    if isinstance(spec, str):
        return {'preset': spec}
    if not isinstance(spec, dict):
        raise ValueError(
            f'config {where}={spec!r} must be null, a preset name {sorted(presets)} or a mapping'
        )
    return spec


def check_range(v: Any, where: str, lo: float, hi: float, integer: bool = False) -> list:
    """``v`` as [min, max] floats (ints with ``integer``), lo <= min <= max <= hi. Raises
    ValueError naming ``where`` and ``v`` otherwise."""
    ok = (
        isinstance(v, (list, tuple))
        and len(v) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
        and lo <= v[0] <= v[1] <= hi
        and (not integer or all(float(x).is_integer() for x in v))
    )
    if not ok:
        raise ValueError(
            f'config {where}={v!r} must be [min, max] with {lo} <= min <= max <= {hi}'
        )
    return [int(x) for x in v] if integer else [float(x) for x in v]


def check_number(v: Any, where: str, lo: float, hi: float, integer: bool = False) -> float:
    """``v`` as a float (int with ``integer``) in [lo, hi]; bools refused. Raises ValueError
    naming ``where`` and ``v`` otherwise."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi
    if ok and integer:
        ok = float(v).is_integer()
    if not ok:
        kind = 'an integer' if integer else 'a number'
        raise ValueError(f'config {where}={v!r} must be {kind} in [{lo}, {hi}]')
    return int(v) if integer else float(v)


def check_code_input(cfg: dict[str, Any]) -> None:
    """With model.input depth_code the images are geometry codes (core.depth_code): a photometric
    augmentation or white balance would change what each channel means. Raises ValueError naming
    every such key that is on."""
    a, m = cfg['augment'], cfg['model']
    on = [f'augment.{k}={a[k]!r}' for k in ('brightness', 'contrast', 'saturation') if a[k]]
    on += [f'augment.{k}={a[k]!r}' for k in ('camera', 'texture', 'fda') if a.get(k)]
    if m['input_balance'] not in (None, 'none'):
        on.append(f"model.input_balance={m['input_balance']!r}")
    if on:
        raise ValueError(
            f"config {', '.join(on)} with model.input depth_code (set, or model.init's): "
            'photometric changes corrupt the geometry code; set each to 0 / null / none'
        )


def options(value: Any, where: str, defaults: dict, example: str = '') -> dict | None:
    """A training option given as null (off) or a mapping of some of ``defaults``' keys: None,
    or the mapping completed with ``defaults``. Raises ValueError naming ``where`` (e.g.
    ``train.mixstyle``) for anything but null or a mapping, and for keys ``defaults`` lacks;
    ``example`` (e.g. ``{p: 0.5}``) is shown with the first."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            f'config {where}={value!r} must be null or a mapping with keys {list(defaults)}'
            + (f", e.g. --set '{where}={example}'" if example else '')
        )
    unknown = sorted(set(value) - set(defaults))
    if unknown:
        raise ValueError(f'config {where}: unknown key(s) {unknown}; known: {list(defaults)}')
    return dict(defaults, **value)
