#!/usr/bin/env python3
"""Few-shot adaptation figure for the model card: what labelling a handful of frames of your own
site gives.

The 11 labelled real frames of the real-camera sample bag (depth3dseg_ros.samples) are split into
two folds (alternate frames in bag order: 6 and 5). The shipped model is fine-tuned on one fold
(``model.init``, the shipped training config, a fixed number of epochs; the exported weights are
chosen on the training fold itself, never on the held-out one) and evaluated with depth3dseg-eval
on the other; then the folds swap. Writes ``OUT/few_shot.json`` (per fold: before/after figures;
mean of both) and prints a table.

    python scripts/few_shot.py --out runs/few_shot [--epochs 40] [--lr 2e-4]
    python scripts/few_shot.py --out runs/fs_fbn --epochs 10 --set train.freeze_bn=true

``--repeat N --replay DIR --steps S --batch B`` mix the fold (listed N times) with other training
data (e.g. synthetic rooms, so that the fine-tune keeps what it learnt) for S steps per epoch.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from depth3dseg_ros.bags.extract import extract, load_extract_config
from depth3dseg_ros.samples import real_camera_bag
from depth3dseg_ros.training import evaluate, train
from depth3dseg_ros.dataset_format import read_index

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / 'models' / 'depth3dseg_nyu13.pt'
KEYS = ('miou_2d', 'miou_3d', 'miou_fused', 'pixel_acc_fused', 'absrel', 'frames')


def subset(src: Path, dst: Path, ids: set[str]) -> Path:
    """A dataset directory ``dst`` with the frames ``ids`` of ``src`` (index lines filtered, image
    folders linked, manifest copied)."""
    dst.mkdir(parents=True, exist_ok=True)
    for sub in ('rgb', 'depth', 'labels'):
        if (src / sub).is_dir() and not (dst / sub).exists():
            os.symlink((src / sub).resolve(), dst / sub)
    (dst / 'manifest.json').write_text((src / 'manifest.json').read_text())
    lines = [
        ln
        for ln in (src / 'index.jsonl').read_text().splitlines()
        if ln.strip() and json.loads(ln)['id'] in ids
    ]
    (dst / 'index.jsonl').write_text(''.join(ln + '\n' for ln in lines))
    return dst


def evaluate_on(model: Path, data: Path, out: Path) -> dict:
    """Run depth3dseg-eval of ``model`` on ``data`` (report in ``out``); returns the figures of
    KEYS."""
    assert (
        evaluate.main(
            ['--model', str(model), '--data', str(data), '--out', str(out), '--device', 'cpu']
        )
        == 0
    )
    rep = json.loads((out / 'report.json').read_text())
    return {k: rep[k] for k in KEYS}


def fine_tune_args(a: argparse.Namespace, train_fold: Path, run: Path) -> list[str]:
    """depth3dseg-train arguments that fine-tune ``a.model`` on ``train_fold`` into ``run``:
    the shipped config, the fold listed ``a.repeat`` times in data.train followed by the
    ``a.replay`` directories, weights chosen on the training fold (data.val), no early stop, then
    ``a.set`` (KEY=VALUE, last wins)."""
    train_dirs = ','.join([str(train_fold)] * a.repeat + [str(d) for d in a.replay])
    sets = [
        f'model.init={a.model}',
        f'data.train=[{train_dirs}]',
        f'data.val=[{train_fold}]',
        f'train.epochs={a.epochs}',
        f'train.batch_size={a.batch}',
        f'optim.lr={a.lr}',
        'optim.warmup_steps=5',
        f'early_stop.patience={a.epochs}',
        'log.tensorboard=false',
        'log.progress=false',
    ]
    if a.steps is not None:
        sets.append(f'train.max_steps_per_epoch={a.steps}')
    args = ['--config', str(REPO / 'config' / 'train_shipped.yaml'), '--out', str(run)]
    for kv in sets + list(a.set):
        args += ['--set', kv]
    return args


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (its defaults are the recipe of the model card's first rows)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', type=Path, default=REPO / 'runs' / 'few_shot')
    ap.add_argument(
        '--model', type=Path, default=MODEL, help='model file to adapt (default: shipped)'
    )
    ap.add_argument('--epochs', type=int, default=40)
    ap.add_argument('--lr', type=float, default=2e-4)
    ap.add_argument('--batch', type=int, default=4, help='batch size')
    ap.add_argument(
        '--steps', type=int, default=None, help='optimiser steps per epoch (default: one pass)'
    )
    ap.add_argument(
        '--repeat',
        type=int,
        default=1,
        help='list the fold N times in data.train',
    )
    ap.add_argument(
        '--replay',
        action='append',
        default=[],
        metavar='DIR',
        help='dataset directory mixed into every fold\'s training data (e.g. synthetic rooms); '
        'repeatable',
    )
    ap.add_argument(
        '--set',
        action='append',
        default=[],
        metavar='KEY=VALUE',
        help='extra depth3dseg-train --set',
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the two-fold few-shot fine-tuning and evaluation (CLI); returns the exit status."""
    ap = build_parser()
    a = ap.parse_args(argv)
    for name in ('epochs', 'batch', 'repeat', 'steps'):
        v = getattr(a, name)
        if v is not None and v < 1:
            ap.error(f'--{name} {v} must be at least 1')
    a.out.mkdir(parents=True, exist_ok=True)
    ds = a.out / 'ds_all'
    if not (ds / 'index.jsonl').is_file():
        extract([str(real_camera_bag())], ds, load_extract_config(None, None))
    labelled = [r['id'] for r in read_index(ds) if r.get('labels')]
    folds = [set(labelled[0::2]), set(labelled[1::2])]
    dirs = [subset(ds, a.out / f'fold{k}', f) for k, f in enumerate(folds)]
    result = {
        'model': str(a.model),
        'frames_per_fold': [len(f) for f in folds],
        'epochs': a.epochs,
        'lr': a.lr,
        'batch': a.batch,
        'steps': a.steps,
        'repeat': a.repeat,
        'replay': [str(d) for d in a.replay],
        'set': a.set,
        'folds': [],
    }
    for k in (0, 1):
        tr, te = dirs[k], dirs[1 - k]
        run = a.out / f'ft_on_fold{k}'
        if not (run / 'model.pt').is_file():
            args = fine_tune_args(a, tr, run)
            if (run / 'last.pt').is_file():
                args = ['--out', str(run), '--resume']
            assert train.main(args) == 0
        result['folds'].append(
            {
                'train_fold': k,
                'test_fold': 1 - k,
                'before': evaluate_on(a.model, te, a.out / f'eval_before_{1 - k}'),
                'after': evaluate_on(run / 'model.pt', te, a.out / f'eval_after_{1 - k}'),
            }
        )
    mean = {}
    for when in ('before', 'after'):
        mean[when] = {
            key: (
                None
                if any(x[when][key] is None for x in result['folds'])
                else sum(x[when][key] for x in result['folds']) / 2
            )
            for key in KEYS
            if key != 'frames'
        }
    result['mean'] = mean
    (a.out / 'few_shot.json').write_text(json.dumps(result, indent=1) + '\n')

    def f(v):
        return '-' if v is None else f'{v:.3f}'

    print(
        '| fold (train -> test) | frames | mIoU fused before | after | mIoU 2D before | after | '
        'AbsRel before | after |'
    )
    print('|---|---|---|---|---|---|---|---|')
    rows = [
        (f"{x['train_fold']} -> {x['test_fold']}", x['before']['frames'], x['before'], x['after'])
        for x in result['folds']
    ] + [('mean', '', mean['before'], mean['after'])]
    for name, n, b, af in rows:
        print(
            f"| {name} | {n} | {f(b['miou_fused'])} | {f(af['miou_fused'])} | {f(b['miou_2d'])} | "
            f"{f(af['miou_2d'])} | {f(b['absrel'])} | {f(af['absrel'])} |"
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
