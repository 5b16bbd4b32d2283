#!/usr/bin/env python3
"""Write a copy of a model file with arch keys changed that size no tensor (core.arch).

Such keys change how the trained weights are used, not the weights: ``fusion_w3d`` (the weight of
the 3D labels in the fused ones, METHOD M7), ``depth_focal``, ``p_stride`` / ``p_window`` /
``p_k`` (the 3D net's sampling), the depth range (``max_depth`` also sets the file's top-level
``max_depth``). ``depth_gain`` has its own command, ``depth3dseg-calibrate``, which measures it and
records how. Values are YAML scalars (numbers such as ``1e-1`` too); the new arch is checked
(core.arch.check_arch) and the weights must load unchanged into the new network, else nothing is
written. ``--input-balance`` sets the file's ``input_balance`` (the white balance of the input
before mean/std, core.colour_balance: ``none`` | ``grey_world``), a preprocessing choice that also
leaves the weights as they are; ``--input depth_code`` marks a model that was *trained* on the
geometry code of depth images (scripts/geometry_input.py's datasets) without ``model.input`` set,
as a geometry model for the RGB-D late fusion (core.late_fusion; ``rgb`` marks a colour model).
Marking a colour model does not make it one: it has never seen a code. Metadata other than
``arch``, ``created`` and what is set is kept; ``--out`` must be a new file.

Usage: python scripts/set_arch.py --model M [--set fusion_w3d=0.25 ...] [--input-balance B]
       [--input rgb|depth_code] --out M2
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from depth3dseg_ros.core.arch import DEFAULT_ARCH
from depth3dseg_ros.core.colour_balance import BALANCES, check_balance
from depth3dseg_ros.core.modelfile import INPUT_KINDS, check_input_kind, load_model, save_model

__all__ = ['set_arch', 'main']


def set_arch(
    model_path: str,
    changes: dict,
    out: str,
    input_balance: str | None = None,
    input_kind: str | None = None,
) -> dict:
    """Write ``out``: the model file ``model_path`` with ``changes`` (arch key -> value) applied
    and, unless None, its ``input_balance`` and ``input`` (``input_kind``) set; returns {key: (old,
    new)} (those two among them when set). Raises ValueError naming the key for an unknown key, a
    bad value (check_arch, check_balance, check_input_kind) or a key that changes the weights'
    shapes, and when ``out`` is the input file."""
    if input_balance is not None:
        check_balance(input_balance, '--input-balance')
    if input_kind is not None:
        check_input_kind(input_kind, '--input')
    if Path(out).resolve() == Path(model_path).resolve():
        raise ValueError(f'--out {out} is the input model file: write a new file')
    if Path(out).exists():
        raise ValueError(f'--out {out} exists: write a new file')
    if 'num_classes' in changes:
        raise ValueError(
            f"num_classes={changes['num_classes']!r}: it sizes the heads and cannot change "
            'without retraining'
        )
    if 'depth_gain' in changes:
        raise ValueError('depth_gain: fit it with depth3dseg-calibrate, which records how')
    model, meta = load_model(model_path, map_location='cpu')
    changes = {  # an integer for a float key is that float (max_depth=8 -> 8.0)
        k: float(v) if isinstance(DEFAULT_ARCH.get(k), float) and type(v) is int else v
        for k, v in changes.items()
    }
    new = model.with_arch(**changes)  # check_arch, and the weights' shapes kept
    keep = {k: v for k, v in meta.items() if k not in ('arch', 'created')}
    if 'max_depth' in changes:  # the file's top-level depth range follows the network's
        keep['max_depth'] = float(new.arch['max_depth'])
    done = {k: (model.arch[k], new.arch[k]) for k in changes}
    if input_balance is not None:
        done['input_balance'] = (meta['input_balance'], input_balance)
        keep['input_balance'] = input_balance
    if input_kind is not None:
        done['input'] = (meta['input'], input_kind)
        keep['input'] = input_kind
    save_model(out, new, keep)
    return done


def main(argv: list[str] | None = None) -> int:
    """Command line; exit 0, or 2 with one error line for bad input."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', required=True)
    ap.add_argument('--set', action='append', default=[], metavar='KEY=VALUE')
    ap.add_argument('--input-balance', choices=BALANCES, default=None)
    ap.add_argument('--input', choices=INPUT_KINDS, default=None, dest='input_kind')
    ap.add_argument('--out', required=True)
    a = ap.parse_args(argv)
    if not a.set and a.input_balance is None and a.input_kind is None:
        ap.error('nothing to change: give --set KEY=VALUE, --input-balance and/or --input')
    try:
        changes = {}
        for item in a.set:
            key, sep, value = item.partition('=')
            if not sep or not key:
                raise ValueError(f'--set {item!r} must be KEY=VALUE')
            v = yaml.safe_load(value)
            if isinstance(v, str):  # YAML 1.1 reads 1e-1 as a string
                try:
                    v = float(v)
                except ValueError:
                    pass
            changes[key.strip()] = v
        for k, (old, new) in set_arch(
            a.model, changes, a.out, a.input_balance, a.input_kind
        ).items():
            print(f'{k}: {old!r} -> {new!r}')
    except (ValueError, OSError) as e:
        ap.error(' '.join(str(e).split()))
    print(f'wrote {a.out}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
