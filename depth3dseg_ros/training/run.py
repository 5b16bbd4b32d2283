"""Setting up one depth3dseg-train run: the `Run` that the training steps share, and `setup_run`,
which builds it from the command line (config as plain data, data, model, loss, optimiser,
schedule, AMP, and the state of a resumed run). training/train.py then calls the steps on it.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch.nn.parallel import DistributedDataParallel

from depth3dseg_ros.bags.dataset_writer import check_label_range
from depth3dseg_ros.core.model import Depth3DSeg, check_arch
from depth3dseg_ros.core.train_step import LossConfig, make_weighting
from depth3dseg_ros.training.class_mix import startup_line
from depth3dseg_ros.training.encoder_init import init_encoder, param_groups
from depth3dseg_ros.training.mixstyle import attach_mixstyle
from depth3dseg_ros.training.trainable import select_trainable
from depth3dseg_ros.training.class_weights import resolve_class_weights
from depth3dseg_ros.training.checkpoint import (
    load_init_model,
    load_resume,
    load_teacher,
    resume_position,
    rng_state,
    set_rng_state,
)
from depth3dseg_ros.training.config import dump_config, load_config, validate
from depth3dseg_ros.core.yamlfile import YamlFileError
from depth3dseg_ros.training.dataset import FrameDataset, load_classes, load_records, split_records
from depth3dseg_ros.training.distributed import pick_device, seed_everything, setup_distributed
from depth3dseg_ros.training.sampling import step_sizes


def lr_factor(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup over ``warmup`` steps, then cosine from 1 to ``min_ratio`` at ``total``
    steps."""
    if step < warmup:
        return (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * t))


def shared_frames(train: list[dict], val: list[dict]) -> list[str]:
    """Ids of the validation frame records that are also training ones, in validation order: the
    same frame id (depth3dseg-extract names frames by bag and index, so a bag extracted into both
    sets, or one directory named in both, shares its ids)."""
    ids = {str(r['id']) for r in train if r.get('id') is not None}
    return [str(r['id']) for r in val if r.get('id') is not None and str(r['id']) in ids]


def build_datasets(
    cfg: dict, classes, prog: str | None = 'depth3dseg-train'
) -> tuple[FrameDataset, FrameDataset]:
    """The (training, validation) datasets of a config; label ranges are checked first (C43).
    Frames whose files cannot be read are skipped, one line per directory starting ``prog`` (None:
    none, the other ranks of a DDP run; training.frame_check)."""
    d, m = cfg['data'], cfg['model']
    if not d['train']:
        raise ValueError('config data.train=[] must name at least one dataset directory')
    kind = m.get('input') or 'rgb'  # colour images, or geometry codes (core.late_fusion)
    records = load_records(d['train'], classes, kind, prog)
    if not records:
        raise ValueError(f"config data.train={d['train']}: no frame to train on")
    if d['val']:
        train_recs, val_recs = records, load_records(d['val'], classes, kind, prog)
    else:
        train_recs, val_recs = split_records(records, d['val_split'], cfg['train']['seed'])
        if not val_recs:  # nothing held out: validate on the (un-augmented) training frames
            val_recs = train_recs
    # label ids outside the class set stop the run here, before the first step, never mid-epoch
    # (C43):
    # from the index's label_max, decoding only label PNGs of datasets extracted before it was
    # recorded
    check_label_range(records if not d['val'] else records + val_recs, classes)
    common = dict(
        input_size=d['input_size'],
        classes=classes,
        mean=m['mean'],
        std=m['std'],
        balance=m['input_balance'] or 'none',
    )
    train_ds = FrameDataset(
        records=train_recs, augment=cfg['augment'], seed=cfg['train']['seed'], **common
    )
    return train_ds, FrameDataset(records=val_recs, augment=None, **common)


@dataclass
class Run:
    """What one training run holds: built by `setup_run`, advanced by `train_epoch` and
    `validate_and_checkpoint`, written out by `export`. ``epoch`` / ``samples_in_epoch`` say where
    training stands: the epoch in progress (0-based) and the positions of its global order consumed
    so far (training.sampling, C34); after a completed epoch ``epoch`` is the next one and
    ``samples_in_epoch`` 0."""

    out: Path
    cfg: dict
    classes: Any
    rank: int
    world: int
    device: torch.device
    train_ds: FrameDataset
    val_ds: FrameDataset
    model: Depth3DSeg
    ddp_model: torch.nn.Module
    loss_cfg: LossConfig
    weighting: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any
    amp_ctx: Callable
    teacher: Any = None
    writer: Any = None
    stop: Any = None  # training.interrupt.StopAtStep: a SIGINT/SIGTERM asks to stop and save
    # the sampler seed of the epoch in progress when it differs from train.seed: a run resumed
    # mid-epoch with another seed finishes that epoch in the order it began (C34)
    epoch_seed: Any = None
    epoch: int = 0
    samples_in_epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    es: dict = field(default_factory=lambda: {'best': None, 'best_epoch': -1, 'bad_epochs': 0})
    history: list = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)

    @property
    def master(self) -> bool:
        """True on rank 0 (the process that logs and writes files)."""
        return self.rank == 0

    def checkpoint(self) -> dict[str, Any]:
        """The resumable state (training.checkpoint), with the epoch position in samples and the
        batch shape that reached it (C34)."""
        tc = self.cfg['train']
        return {
            'model': self.model.state_dict(),
            'optimizer': self.optimizer.state_dict(),
            'scheduler': self.scheduler.state_dict(),
            'scaler': self.scaler.state_dict(),
            'weighting': None if self.weighting is None else self.weighting.state_dict(),
            'epoch': self.epoch,
            'step_in_epoch': self.step_in_epoch,
            'samples_in_epoch': self.samples_in_epoch,
            'batch_size': tc['batch_size'],
            'world_size': self.world,
            'sampler_seed': tc['seed'] if self.epoch_seed is None else self.epoch_seed,
            'train_samples': len(self.train_ds),
            'global_step': self.global_step,
            'early_stop': dict(self.es),
            'history': list(self.history),
            'rng': rng_state(),
            'config': self.cfg,
        }


def setup_run(args: argparse.Namespace) -> Run:
    """Config (resume: the run's own config completed from DEFAULTS, then --set / chunk flags on
    top), data, model, loss, optimiser, schedule, AMP and the resumed state. Creates the run
    directory only when all of it succeeded (a failed start leaves none)."""
    out = Path(args.out)
    rank, world, local_rank = setup_distributed()
    ckpt = None
    if args.resume:
        ckpt, cfg = load_resume(out / 'last.pt', args.set)
    else:
        if (out / 'last.pt').exists():
            raise FileExistsError(
                f'{out / "last.pt"} exists: pass --resume to continue that run, or choose '
                'another --out'
            )
        try:
            cfg = load_config(args.config, args.set)
        except YamlFileError as err:  # one line naming file, line, column (core.yamlfile)
            raise ValueError(f'--config {err}') from None
    if args.max_steps_per_epoch is not None:
        cfg['train']['max_steps_per_epoch'] = args.max_steps_per_epoch
    if args.time_limit_min is not None:
        cfg['train']['time_limit_min'] = args.time_limit_min
    cfg = validate(cfg)
    try:
        classes = load_classes(cfg['data']['classes'])
    except FileNotFoundError as err:  # a classes YAML: named by its config key
        raise FileNotFoundError(f'data.classes: {err}') from None
    except ValueError as err:  # core.yamlfile.YamlFileError: one line, file, line, column
        raise ValueError(f'data.classes: {err}') from None
    init = None  # fine-tuning: start from a model file's weights, with its arch and normalisation
    if cfg['model']['init'] and ckpt is None:
        init = load_init_model(cfg, classes)
        cfg = validate(cfg)
    if cfg['model']['input_balance'] is None:  # null without model.init: no white balance
        cfg['model']['input_balance'] = 'none'
    if cfg['model'].get('input') is None:  # null without model.init: a colour model
        cfg['model']['input'] = 'rgb'
    # before any data is read: a bad teacher file stops the run at once
    teacher = load_teacher(cfg, classes) if cfg['model']['teacher'] else None
    # every arch key goes into config.yaml and the checkpoints, so --resume rebuilds this network
    # even after core.arch.DEFAULT_ARCH changes (a resumed run stored without them:
    # checkpoint.load_resume warns)
    cfg['model']['arch'] = {
        k: v for k, v in check_arch(dict(cfg['model']['arch'])).items() if k != 'num_classes'
    }
    tc, oc = cfg['train'], cfg['optim']
    device = pick_device(tc['device'], local_rank)
    seed_everything(tc['seed'], tc['deterministic'], device)
    train_ds, val_ds = build_datasets(cfg, classes, 'depth3dseg-train' if rank == 0 else None)
    shared = shared_frames(train_ds.records, val_ds.records) if cfg['data']['val'] else []
    if shared and rank == 0:
        print(
            f'depth3dseg-train: warning: {len(shared)} of the {len(val_ds)} validation frames '
            f'(data.val) are training frames too (data.train), e.g. {shared[0]!r}: the validation '
            'figures, and the model chosen by them, will look better than on unseen frames',
            file=sys.stderr,
        )
    start_pos = 0 if ckpt is None else resume_position(ckpt, out / 'last.pt', len(train_ds))

    # 'median_freq' -> the list, from the training labels; stored in config.yaml for resumes
    cfg['loss']['class_weights'] = resolve_class_weights(
        cfg['loss'], train_ds.records, len(classes)
    )
    if cfg['loss']['class_weights'] is not None and rank == 0:
        print(f"loss.class_weights {dict(zip(classes.names, cfg['loss']['class_weights']))}")
    model = Depth3DSeg(**dict(cfg['model']['arch'], num_classes=len(classes)))
    if init is None and ckpt is None:  # a new model: its encoder from ImageNet or random
        line = init_encoder(model, cfg)
        if rank == 0:
            print(line)
    if init is not None:
        model.load_state_dict(init.state_dict())
        if rank == 0:
            print(f"initialised from {cfg['model']['init']} (model.init)")
            if cfg['model']['code_encoder_init']:
                print(
                    f"geometry encoder from {cfg['model']['code_encoder_init']} "
                    '(model.code_encoder_init)'
                )
    if (
        rank == 0
        and cfg['model']['arch']['code_input']
        and not cfg['loss']['measured_depth_for_3d']
    ):
        print(
            'depth3dseg-train: warning: an RGB-D input model (arch code_input) with '
            'loss.measured_depth_for_3d=0 never sees the geometry code in training: its code '
            'weights get no gradient; set it > 0 (e.g. 0.5)',
            file=sys.stderr,
            flush=True,
        )
    if rank == 0 and tc['class_mix'] is not None:
        line, ok = startup_line(tc['class_mix'], train_ds.records)
        print(
            line if ok else f'depth3dseg-train: warning: {line}', file=None if ok else sys.stderr
        )
    attach_mixstyle(model, tc['mixstyle'])  # training-mode forward hooks; eval is untouched
    model = model.to(device)
    if tc['channels_last']:  # NHWC convolutions (bench/bench_train.py --channels-last)
        model = model.to(memory_format=torch.channels_last)
    loss_cfg = LossConfig.from_dict(cfg['loss'])
    if loss_cfg.void_id != classes.void_id:
        raise ValueError(
            f'config loss.void_id={loss_cfg.void_id} differs from the classes\' '
            f'void_id={classes.void_id}'
        )
    weighting = make_weighting(loss_cfg)  # learned (Kendall) weights, or None
    trainable = select_trainable(model, tc['trainable'])
    if tc['trainable'] is not None and rank == 0:
        n = sum(p.numel() for p in trainable)
        total = sum(p.numel() for p in model.parameters())
        print(f"train.trainable {tc['trainable']}: {n:,} of {total:,} parameters train")
        if not cfg['model']['init'] and ckpt is None:
            print(
                'depth3dseg-train: warning: train.trainable without model.init trains part of '
                'a randomly initialised network; fine-tuning starts from --set model.init=FILE',
                file=sys.stderr,
                flush=True,
            )
    groups = param_groups(model, trainable, oc['lr'], oc['encoder_lr_mult'])
    if weighting is not None:
        weighting.to(device)
        groups.append({'params': list(weighting.parameters()), 'weight_decay': 0.0})
    optimizer = torch.optim.AdamW(
        groups, lr=oc['lr'], betas=tuple(oc['betas']), weight_decay=oc['weight_decay']
    )
    steps_per_epoch = len(
        step_sizes(len(train_ds), tc['batch_size'], world, 0, tc['max_steps_per_epoch'])
    )
    total_steps = tc['epochs'] * steps_per_epoch
    warmup = min(oc['warmup_steps'], max(0, total_steps - 1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        functools.partial(
            lr_factor, warmup=warmup, total=total_steps, min_ratio=oc['min_lr_ratio']
        ),
    )
    amp = tc['amp'] if device.type == 'cuda' else 'none'
    if tc['amp'] != 'none' and amp == 'none' and rank == 0:
        print(f"train.amp={tc['amp']!r} ignored on {device} (AMP is CUDA-only)")
    amp_ctx = (
        (lambda: torch.autocast('cuda', dtype=torch.bfloat16 if amp == 'bf16' else torch.float16))
        if amp != 'none'
        else nullcontext
    )
    scaler = torch.amp.GradScaler('cuda', enabled=amp == 'fp16')
    ddp_model = (
        DistributedDataParallel(
            model, device_ids=[device.index] if device.type == 'cuda' else None
        )
        if world > 1
        else model
    )
    if teacher is not None:
        teacher = teacher.to(device)
        if tc['channels_last']:
            teacher = teacher.to(memory_format=torch.channels_last)
        if rank == 0:
            weights = ', '.join(
                f'loss.{k}={cfg["loss"][k]:g}'
                for k in ('w_distill', 'w_distill_depth')
                if cfg['loss'].get(k)
            )
            print(f"distilling from {cfg['model']['teacher']} (model.teacher, {weights})")
    run = Run(
        out,
        cfg,
        classes,
        rank,
        world,
        device,
        train_ds,
        val_ds,
        model,
        ddp_model,
        loss_cfg,
        weighting,
        optimizer,
        scheduler,
        scaler,
        amp_ctx,
        teacher,
    )
    if ckpt is not None:
        model.load_state_dict(ckpt['model'])
        optimizer.load_state_dict(ckpt['optimizer'])
        scheduler.load_state_dict(ckpt['scheduler'])
        scaler.load_state_dict(ckpt['scaler'])
        if weighting is not None:
            weighting.load_state_dict(ckpt['weighting'])
        run.epoch, run.samples_in_epoch, run.global_step = (
            ckpt['epoch'],
            start_pos,
            ckpt['global_step'],
        )
        run.es, run.history = ckpt['early_stop'], ckpt['history']
        set_rng_state(ckpt['rng'])
        was = int(ckpt.get('sampler_seed', tc['seed']))
        if start_pos and was != tc['seed']:  # the interrupted epoch keeps the order it began in
            run.epoch_seed = was
            if rank == 0:
                print(
                    f'train.seed is {tc["seed"]} now, {was} when epoch {run.epoch + 1} began: '
                    f'its remaining samples follow seed {was}, later epochs seed {tc["seed"]}'
                )
        if rank == 0:
            shape = (ckpt.get('batch_size', tc['batch_size']), ckpt.get('world_size', world))
            note = (
                ''
                if shape == (tc['batch_size'], world)
                else (
                    f' (batch size {shape[0]} x {shape[1]} process(es) then, {tc["batch_size"]} x '
                    f'{world} now: the epoch continues with exactly the samples not yet trained)'
                )
            )
            print(
                f'resumed from {out / "last.pt"}: {run.epoch} epoch(s) done, epoch '
                f'{run.epoch + 1} from sample {start_pos} of {len(train_ds)}{note}'
            )
    if (
        rank == 0
    ):  # only now, so that a run failing to start (no data, bad config) leaves no run directory
        out.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, out / 'config.yaml')
        if cfg['log']['tensorboard']:
            from torch.utils.tensorboard import SummaryWriter

            run.writer = SummaryWriter(str(out / 'tb'))
    return run
