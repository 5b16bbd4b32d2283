"""``depth3dseg-train``: train Depth3DSeg (METHOD M1–M6) on extracted dataset directories.

Reads top to bottom like nanoGPT's train.py: config as plain data, then data, model, optimiser, the
loop, validation, checkpoints, export. ``python -m torch.distributed.run --nproc_per_node N`` (torchrun)
runs the same script as DDP (nccl on CUDA, gloo on CPU); only rank 0 validates, logs and writes files.

    depth3dseg-train --config config/train.yaml --set data.train=[ds/a,ds/b] --out runs/x [--resume]
                     [--max-steps-per-epoch N] [--time-limit-min M]

Files in ``--out``: ``config.yaml`` (resolved), ``last.pt`` / ``best.pt`` (training checkpoints,
checkpoint.py), ``model.pt`` (model file of the best epoch, or of the last state when the
directory has no best.pt, e.g. a copied last.pt resumed there; core.modelfile), ``summary.json`` (why it
stopped, best metric, history), ``tb/`` (TensorBoard). Stopping (M6): early stopping on
``early_stop.metric`` with ``patience``, the ``train.epochs`` cap, or the time limit of a resumable chunk.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import random
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, Sampler
from tqdm import tqdm

from depth3dseg_ros.bags.dataset_writer import check_label_range
from depth3dseg_ros.core.model import Depth3DSeg, check_arch
from depth3dseg_ros.core.modelfile import save_model
from depth3dseg_ros.core.train_step import LossConfig, compute_losses, make_weighting
from depth3dseg_ros.training.checkpoint import (load_checkpoint, load_init_model, load_resume, rng_state,
                                                 save_checkpoint, set_rng_state)
from depth3dseg_ros.training.config import (USER_ERRORS, dump_config, early_stop_reason, load_config,
                                             update_early_stop, validate)
from depth3dseg_ros.training.dataset import FrameDataset, load_classes, load_records, split_records
from depth3dseg_ros.training.evaluate import evaluate_model, sample_grid

LOSS_KEYS = ('total', 'seg2d', 'seg3d', 'depth', 'consistency')


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog='depth3dseg-train',
                                description=__doc__.split('\n\n')[0].replace('``', ''))
    p.add_argument('--config', default=None, help='training YAML (defaults: config/train.yaml keys)')
    p.add_argument('--set', action='append', default=[], metavar='KEY=VALUE',
                   help='override one config key, e.g. --set train.epochs=3 (repeatable)')
    p.add_argument('--out', required=True, help='run directory (checkpoints, model file, logs)')
    p.add_argument('--resume', action='store_true', help='continue from <out>/last.pt exactly')
    p.add_argument('--max-steps-per-epoch', type=int, default=None, help='cap the steps of an epoch')
    p.add_argument('--time-limit-min', type=float, default=None,
                   help='stop after this many minutes of this chunk, saving last.pt (resume later)')
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------ setup
def setup_distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's env; init_process_group when WORLD_SIZE > 1."""
    world = int(os.environ.get('WORLD_SIZE', '1'))
    if world > 1:
        backend = 'nccl' if torch.cuda.is_available() else 'gloo'
        # rank 0 validates alone while the others wait in a broadcast: allow a long validation
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(hours=2))
        return dist.get_rank(), world, int(os.environ.get('LOCAL_RANK', '0'))
    return 0, 1, 0


def pick_device(name: str, local_rank: int) -> torch.device:
    """'auto' -> cuda:<local_rank> when available, else cpu; otherwise the named device."""
    if name == 'auto':
        name = f'cuda:{local_rank}' if torch.cuda.is_available() else 'cpu'
    dev = torch.device(name)
    if dev.type == 'cuda' and dev.index is None:
        dev = torch.device('cuda', local_rank)
    if dev.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f'config train.device={name!r} but CUDA is not available')
        torch.cuda.set_device(dev)
    return dev


def seed_everything(seed: int, deterministic: bool, device: torch.device) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        if device.type == 'cuda':
            os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
            torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)


def _worker_init(worker_id: int) -> None:
    """Seed Python/NumPy in each DataLoader worker from its torch seed (generator-derived)."""
    s = torch.initial_seed() % 2**32
    random.seed(s)
    np.random.seed(s)


class SkipSampler(Sampler):
    """The indices of ``base`` after dropping the first ``skip`` (mid-epoch resume)."""

    def __init__(self, base: Sampler, skip: int):
        self.base, self.skip = base, int(skip)

    def __iter__(self):
        for k, i in enumerate(self.base):
            if k >= self.skip:
                yield i

    def __len__(self) -> int:
        return max(0, len(self.base) - self.skip)


def lr_factor(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup over ``warmup`` steps, then cosine from 1 to ``min_ratio`` at ``total`` steps."""
    if step < warmup:
        return (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * t))


def build_datasets(cfg: dict, classes) -> tuple[FrameDataset, FrameDataset]:
    d, m = cfg['data'], cfg['model']
    if not d['train']:
        raise ValueError('config data.train=[] must name at least one dataset directory')
    records = load_records(d['train'], classes)
    if d['val']:
        train_recs, val_recs = records, load_records(d['val'], classes)
    else:
        train_recs, val_recs = split_records(records, d['val_split'], cfg['train']['seed'])
        if not val_recs:  # nothing held out: validate on the (un-augmented) training frames
            val_recs = train_recs
    # label ids outside the class set stop the run here, before the first step, never mid-epoch (C43):
    # from the index's label_max, decoding only label PNGs of datasets extracted before it was recorded
    check_label_range(records if not d['val'] else records + val_recs, classes)
    common = dict(input_size=d['input_size'], classes=classes, mean=m['mean'], std=m['std'])
    train_ds = FrameDataset(records=train_recs, augment=cfg['augment'], seed=cfg['train']['seed'], **common)
    return train_ds, FrameDataset(records=val_recs, augment=None, **common)


def _agree(flag: bool, world: int, device: torch.device) -> bool:
    """Rank 0's ``flag`` on every rank (DDP ranks must leave the loop together, or the others hang in
    the next all-reduce); the flag itself when single-process."""
    if world == 1:
        return bool(flag)
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.broadcast(t, src=0)
    return bool(t.item())


# ------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0, or 2 after printing ``depth3dseg-train: error: <message>`` to stderr
    for a user error (config.USER_ERRORS: missing path, existing run, bad config/--set/model file); other
    exceptions keep their traceback. The process-wide determinism flag is restored afterwards (the
    trainer may be called in-process, e.g. by tests)."""
    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        return _run(parse_args(argv))
    except USER_ERRORS as exc:
        print(f'depth3dseg-train: error: {" ".join(str(exc).split())}', file=sys.stderr, flush=True)  # one line
        return 2
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


def _run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    rank, world, local_rank = setup_distributed()
    master = rank == 0

    # ---- config (resume: the run's own config completed from DEFAULTS, then --set / chunk flags on top)
    ckpt = None
    if args.resume:
        ckpt, cfg = load_resume(out / 'last.pt', args.set)
    else:
        if (out / 'last.pt').exists():
            raise FileExistsError(f'{out / "last.pt"} exists: pass --resume to continue that run, or choose '
                                  'another --out')
        cfg = load_config(args.config, args.set)
    if args.max_steps_per_epoch is not None:
        cfg['train']['max_steps_per_epoch'] = args.max_steps_per_epoch
    if args.time_limit_min is not None:
        cfg['train']['time_limit_min'] = args.time_limit_min
    cfg = validate(cfg)
    classes = load_classes(cfg['data']['classes'])
    init = None  # fine-tuning: start from a model file's weights, with its arch and normalisation
    if cfg['model']['init'] and ckpt is None:
        init = load_init_model(cfg, classes)
        cfg = validate(cfg)
    # every arch key goes into config.yaml and the checkpoints, so --resume rebuilds this network even
    # after core.model.DEFAULT_ARCH changes (a resumed run stored without them: checkpoint.load_resume warns)
    cfg['model']['arch'] = {k: v for k, v in check_arch(dict(cfg['model']['arch'])).items()
                            if k != 'num_classes'}
    tc, oc = cfg['train'], cfg['optim']
    device = pick_device(tc['device'], local_rank)
    seed_everything(tc['seed'], tc['deterministic'], device)

    # ---- data
    train_ds, val_ds = build_datasets(cfg, classes)
    bs = tc['batch_size']
    sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, seed=tc['seed'])
    drop_last = len(sampler) > bs
    steps_full = len(sampler) // bs if drop_last else math.ceil(len(sampler) / bs)
    steps_per_epoch = min(steps_full, tc['max_steps_per_epoch'] or steps_full)
    loader_kw = dict(batch_size=bs, num_workers=cfg['data']['num_workers'], worker_init_fn=_worker_init,
                     pin_memory=device.type == 'cuda')

    # ---- model, loss, optimiser, schedule, AMP
    arch = dict(cfg['model']['arch'], num_classes=len(classes))
    model = Depth3DSeg(**arch)
    if init is not None:
        model.load_state_dict(init.state_dict())
        if master:
            print(f"initialised from {cfg['model']['init']} (model.init)")
    model = model.to(device)
    loss_cfg = LossConfig.from_dict(cfg['loss'])
    if loss_cfg.void_id != classes.void_id:
        raise ValueError(f'config loss.void_id={loss_cfg.void_id} differs from the classes\' '
                         f'void_id={classes.void_id}')
    weighting = make_weighting(loss_cfg)  # learned (Kendall) weights, or None
    groups = [{'params': list(model.parameters())}]
    if weighting is not None:
        weighting.to(device)
        groups.append({'params': list(weighting.parameters()), 'weight_decay': 0.0})
    optimizer = torch.optim.AdamW(groups, lr=oc['lr'], betas=tuple(oc['betas']),
                                  weight_decay=oc['weight_decay'])
    total_steps = tc['epochs'] * steps_per_epoch
    warmup = min(oc['warmup_steps'], max(0, total_steps - 1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, functools.partial(lr_factor, warmup=warmup, total=total_steps,
                                     min_ratio=oc['min_lr_ratio']))
    amp = tc['amp'] if device.type == 'cuda' else 'none'
    if tc['amp'] != 'none' and amp == 'none' and master:
        print(f"train.amp={tc['amp']!r} ignored on {device} (AMP is CUDA-only)")
    amp_ctx = (lambda: torch.autocast('cuda', dtype=torch.bfloat16 if amp == 'bf16' else torch.float16)) \
        if amp != 'none' else nullcontext
    scaler = torch.amp.GradScaler('cuda', enabled=amp == 'fp16')

    # ---- state (fresh or resumed)
    es = {'best': None, 'best_epoch': -1, 'bad_epochs': 0}
    start_epoch, start_step, global_step, history = 0, 0, 0, []
    if ckpt is not None:
        model.load_state_dict(ckpt['model'])
        optimizer.load_state_dict(ckpt['optimizer'])
        scheduler.load_state_dict(ckpt['scheduler'])
        scaler.load_state_dict(ckpt['scaler'])
        if weighting is not None:
            weighting.load_state_dict(ckpt['weighting'])
        start_epoch, start_step, global_step = ckpt['epoch'], ckpt['step_in_epoch'], ckpt['global_step']
        es, history = ckpt['early_stop'], ckpt['history']
        set_rng_state(ckpt['rng'])
        if master:
            print(f'resumed from {out / "last.pt"}: epoch {start_epoch}, step {start_step}')
    ddp_model = DistributedDataParallel(model, device_ids=[device.index] if device.type == 'cuda' else None) \
        if world > 1 else model
    if master:  # only now, so that a run failing to start (no data, bad config) leaves no run directory
        out.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, out / 'config.yaml')
    writer = None
    if master and cfg['log']['tensorboard']:
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(str(out / 'tb'))

    def checkpoint(epoch: int, step_in_epoch: int) -> dict[str, Any]:
        return {'model': model.state_dict(), 'optimizer': optimizer.state_dict(),
                'scheduler': scheduler.state_dict(), 'scaler': scaler.state_dict(),
                'weighting': None if weighting is None else weighting.state_dict(), 'epoch': epoch,
                'step_in_epoch': step_in_epoch, 'global_step': global_step, 'early_stop': dict(es),
                'history': list(history), 'rng': rng_state(), 'config': cfg}

    # ---- the loop
    t0 = time.monotonic()
    limit_s = None if tc['time_limit_min'] is None else 60.0 * tc['time_limit_min']
    stop_reason = f"max epochs ({tc['epochs']})"
    if es['bad_epochs'] >= cfg['early_stop']['patience']:  # resuming a run that had already converged
        start_epoch = tc['epochs']
        stop_reason = early_stop_reason(cfg, es)
    for epoch in range(start_epoch, tc['epochs']):
        train_ds.set_epoch(epoch)
        sampler.set_epoch(epoch)
        skip = start_step if epoch == start_epoch else 0
        gen = torch.Generator().manual_seed(tc['seed'] * 100003 + epoch)
        loader = DataLoader(train_ds, sampler=SkipSampler(sampler, skip * bs), drop_last=drop_last,
                            generator=gen, **loader_kw)
        ddp_model.train()
        bar = tqdm(total=steps_per_epoch, initial=skip, desc=f'epoch {epoch + 1}/{tc["epochs"]}',
                   disable=not (master and cfg['log']['progress']), dynamic_ncols=True, leave=False)
        step, timed_out = skip, False
        for batch in (loader if skip < steps_per_epoch else ()):
            if step >= steps_per_epoch:
                break
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            with amp_ctx():
                losses = compute_losses(ddp_model, batch, loss_cfg, weighting)
            if not torch.isfinite(losses['total']):
                raise FloatingPointError(f'loss total={losses["total"].item()} at epoch {epoch} step {step}')
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(losses['total']).backward()
            if weighting is not None and world > 1:  # DDP syncs the model only
                for p in weighting.parameters():
                    dist.all_reduce(p.grad)
                    p.grad /= world
            if oc['grad_clip']:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), oc['grad_clip'])
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            step += 1
            global_step += 1
            vals = {k: float(losses[k].detach()) for k in LOSS_KEYS if k in losses}
            bar.set_postfix({k[:5]: f'{v:.3f}' for k, v in vals.items()}, refresh=False)
            bar.update(1)
            if writer is not None:
                for k, v in vals.items():
                    writer.add_scalar(f'train/{k}', v, global_step)
                writer.add_scalar('train/lr', scheduler.get_last_lr()[0], global_step)
            if limit_s is not None and _agree(time.monotonic() - t0 >= limit_s, world, device):
                timed_out = True
                break
        bar.close()
        if timed_out:
            stop_reason = 'time limit (resume with --resume)'
            if master:
                save_checkpoint(out / 'last.pt', checkpoint(epoch, step))
            break
        # ---- validation (rank 0), early stopping, checkpoints
        stop = False
        if master:
            metrics = evaluate_model(model, val_ds, classes, device, batch_size=bs, loss_cfg=loss_cfg,
                                     weighting=weighting, amp_ctx=amp_ctx)
            metrics['epoch'] = epoch + 1
            history.append(metrics)
            improved, note = update_early_stop(es, metrics, cfg, epoch + 1)  # may fall back to val_loss
            if note:
                print(note, flush=True)
            print(f"epoch {epoch + 1}: " + ' '.join(f'{k}={v:.4f}' for k, v in metrics.items()
                                                   if isinstance(v, float)) + (' *' if improved else ''),
                  flush=True)
            if writer is not None:
                for k, v in metrics.items():
                    if isinstance(v, (int, float)) and k != 'epoch':
                        writer.add_scalar(f'val/{k}', v, epoch + 1)
                n = cfg['log']['sample_images']
                if n:
                    writer.add_image('val/samples', sample_grid(model, val_ds, classes, device, n),
                                     epoch + 1, dataformats='HWC')
                writer.flush()
            state = checkpoint(epoch + 1, 0)
            if improved:
                save_checkpoint(out / 'best.pt', state)
            save_checkpoint(out / 'last.pt', state)
            stop = es['bad_epochs'] >= cfg['early_stop']['patience']
        if _agree(stop, world, device):
            stop_reason = early_stop_reason(cfg, es)
            break

    # ---- summary and export (rank 0)
    if master:
        summary = {'stop_reason': stop_reason, 'epochs_done': len(history), 'global_step': global_step,
                   'best_metric': es.get('metric', cfg['early_stop']['metric']), 'best_value': es['best'],
                   'early_stop_metric': cfg['early_stop']['metric'],
                   'best_epoch': es['best_epoch'], 'history': history,
                   'chunk_seconds': round(time.monotonic() - t0, 1)}
        best = out / 'best.pt'
        if best.is_file():
            model.load_state_dict(load_checkpoint(best)['model'])
            summary['exported'] = f"best epoch {es['best_epoch']}"
        elif history:  # e.g. a last.pt resumed in a new directory, and no epoch since beat its best
            summary['exported'] = f'last state, epoch {len(history)}'
            print(f"no best.pt in {out} (best epoch {es['best_epoch']} was not saved here): exporting the "
                  f'last state (epoch {len(history)})', flush=True)
        else:
            print('no model exported: no validation has run yet (continue with --resume)', flush=True)
        if history:
            save_model(out / cfg['export'], model, export_meta(cfg, classes, model, summary))
            summary['model_file'] = str(out / cfg['export'])
        (out / 'summary.json').write_text(json.dumps(summary, indent=1))
        if writer is not None:
            writer.close()
        print(f'stopped: {stop_reason}', flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


def export_meta(cfg: dict, classes, model: Depth3DSeg, summary: dict) -> dict[str, Any]:
    """Model-file metadata the node/Segmenter needs: classes, input size, mean/std, max_depth, arch,
    and a training summary (no history)."""
    return {'classes': classes.to_dict(), 'input_size': list(cfg['data']['input_size']),
            'mean': list(cfg['model']['mean']), 'std': list(cfg['model']['std']),
            'max_depth': float(model.arch['max_depth']), 'arch': dict(model.arch),
            'training': {k: v for k, v in summary.items() if k != 'history'}}


if __name__ == '__main__':
    sys.exit(main())
