"""``depth3dseg-train``: train Depth3DSeg (METHOD M1–M6) on extracted dataset directories.

Reads top to bottom like nanoGPT's train.py: ``_run`` calls the named steps in order —
`setup_run` (training/run.py: config as plain data, data, model, optimiser, schedule, resumed
state), then `train` (`train_epoch` and `validate_and_checkpoint` per epoch) and `export` — on one
`Run` that holds the state they share.
``python -m torch.distributed.run --nproc_per_node N`` (torchrun) runs the same script as DDP (nccl
on CUDA, gloo on CPU); only rank 0 validates, logs and writes files.

    depth3dseg-train --config config/train.yaml --set data.train=[ds/a,ds/b] --out runs/x
                     [--resume] [--max-steps-per-epoch N] [--time-limit-min M]

Files in ``--out``: ``config.yaml`` (resolved), ``last.pt`` / ``best.pt`` (training checkpoints,
checkpoint.py), ``model.pt`` (model file of the best epoch, or of the last state when the
directory has no best.pt, e.g. a copied last.pt resumed there; core.modelfile), ``summary.json``
(why it stopped, best metric, history), ``tb/`` (TensorBoard). Stopping (M6): early stopping on
``early_stop.metric`` with ``patience``, the ``train.epochs`` cap, the time limit of a resumable
chunk, or SIGINT/SIGTERM (training.interrupt: saved at the step, exit 130/143).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from tqdm import tqdm

from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import save_model
from depth3dseg_ros.core.train_step import LOSS_KEYS, compute_losses
from depth3dseg_ros.training.class_mix import class_mix, step_generator
from depth3dseg_ros.training.checkpoint import (
    load_checkpoint,
    save_checkpoint,
)
from depth3dseg_ros.training.config import USER_ERRORS
from depth3dseg_ros.training.early_stop import early_stop_reason, update_early_stop
from depth3dseg_ros.training.distributed import (
    agree,
    worker_init,
)
from depth3dseg_ros.training.evaluate import evaluate_model, sample_grid
from depth3dseg_ros.training.interrupt import StopNow, StopAtStep
from depth3dseg_ros.training.run import Run, setup_run
from depth3dseg_ros.training.sampling import EpochBatchSampler, steps_before
from depth3dseg_ros.training.trainable import freeze_frozen_batchnorm

#: the progress bar's short names of the longer loss keys (distinct: 'distill' and
#: 'distill_depth' must not both read 'disti')
BAR_NAMES = {'consistency': 'cons', 'distill': 'kd', 'distill_depth': 'kd_depth'}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the depth3dseg-train command line (``argv`` None: sys.argv)."""
    p = argparse.ArgumentParser(
        prog='depth3dseg-train', description=__doc__.split('\n\n')[0].replace('``', '')
    )
    p.add_argument(
        '--config', default=None, help='training YAML (defaults: config/train.yaml keys)'
    )
    p.add_argument(
        '--set',
        action='append',
        default=[],
        metavar='KEY=VALUE',
        help='override one config key, e.g. --set train.epochs=3 (repeatable)',
    )
    p.add_argument('--out', required=True, help='run directory (checkpoints, model file, logs)')
    p.add_argument('--resume', action='store_true', help='continue from <out>/last.pt exactly')
    p.add_argument(
        '--max-steps-per-epoch', type=int, default=None, help='cap the steps of an epoch'
    )
    p.add_argument(
        '--time-limit-min',
        type=float,
        default=None,
        help='stop after this many minutes of this chunk, saving last.pt (resume later)',
    )
    p.add_argument(
        '--no-progress',
        action='store_true',
        help='no progress bar (the same as --set log.progress=false)',
    )
    args = p.parse_args(argv)
    if args.no_progress:  # last, so that it wins over an earlier --set log.progress=true
        args.set.append('log.progress=false')
    return args


def train_epoch(run: Run, epoch: int, limit_s: float | None) -> bool:
    """Train ``epoch`` from ``run.samples_in_epoch`` (0 unless resumed mid-epoch) to its end; True
    when it ended, False when the time limit stopped it (last.pt then holds the position)."""
    tc, bs = run.cfg['train'], run.cfg['train']['batch_size']
    start = run.samples_in_epoch if epoch == run.epoch else 0
    if not start:
        run.epoch_seed = None  # a new epoch: train.seed's order
    batches = EpochBatchSampler(
        len(run.train_ds),
        bs,
        run.world,
        run.rank,
        tc['seed'] if run.epoch_seed is None else run.epoch_seed,
        epoch,
        start,
        tc['max_steps_per_epoch'],
    )
    run.train_ds.set_epoch(epoch)
    gen = torch.Generator().manual_seed(tc['seed'] * 100003 + epoch)  # worker seeds
    loader = DataLoader(
        run.train_ds,
        batch_sampler=batches,
        num_workers=run.cfg['data']['num_workers'],
        worker_init_fn=worker_init,
        pin_memory=run.device.type == 'cuda',
        generator=gen,
    )
    done_before = steps_before(start, len(run.train_ds), bs, run.world)
    run.epoch, run.samples_in_epoch, run.step_in_epoch = epoch, start, done_before
    run.ddp_model.train()
    if tc['freeze_bn']:  # small-batch fine-tuning: keep the running statistics (and use them)
        for m in run.ddp_model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.eval()
    if tc['trainable'] is not None:  # frozen layers keep the statistics their outputs rely on
        freeze_frozen_batchnorm(run.ddp_model)
    bar = tqdm(
        total=done_before + len(batches),
        initial=done_before,
        desc=f'epoch {epoch + 1}/{tc["epochs"]}',
        disable=not (run.master and run.cfg['log']['progress']),
        dynamic_ncols=True,
        leave=False,
    )
    mix, mixed = tc['class_mix'], 0
    for k, batch in enumerate(loader, 1):
        if mix is not None:  # training.class_mix: synthetic segments into the real frames
            batch, n = class_mix(
                batch, mix['p'], run.classes.void_id, step_generator(tc['seed'], run.global_step)
            )
            mixed += n
            if run.writer is not None:
                run.writer.add_scalar('train/class_mix_frames', n, run.global_step + 1)
        vals = train_step(
            run, {key: v.to(run.device, non_blocking=True) for key, v in batch.items()}
        )
        run.samples_in_epoch, run.step_in_epoch = batches.positions_after(k), done_before + k
        bar.set_postfix(
            {BAR_NAMES.get(key, key): f'{v:.3f}' for key, v in vals.items()}, refresh=False
        )
        bar.update(1)
        if agree(_stop_requested(run, limit_s), run.world, run.device):
            bar.close()
            if run.master:
                save_checkpoint(run.out / 'last.pt', run.checkpoint())
            return False
    bar.close()
    if mix is not None and run.master:
        print(f'epoch {epoch + 1}: train.class_mix mixed {mixed} frames in {len(batches)} steps')
    run.epoch, run.samples_in_epoch, run.step_in_epoch = epoch + 1, 0, 0
    return True


def _asked_to_stop(run: Run) -> bool:
    """This process received a stop signal (training.interrupt)."""
    return run.stop is not None and run.stop.requested


def _stop_requested(run: Run, limit_s: float | None) -> bool:
    """The chunk's time limit is reached, or a stop signal asked to stop."""
    return _asked_to_stop(run) or (limit_s is not None and time.monotonic() - run.t0 >= limit_s)


def _signalled(run: Run) -> bool:
    """Every rank: rank 0 received a stop signal."""
    return agree(_asked_to_stop(run), run.world, run.device)


def train_step(run: Run, batch: dict[str, torch.Tensor]) -> dict[str, float]:
    """One optimiser step (M6) on ``batch``; returns the loss terms as floats (also logged)."""
    with run.amp_ctx():
        losses = compute_losses(run.ddp_model, batch, run.loss_cfg, run.weighting, run.teacher)
    if not torch.isfinite(losses['total']):
        raise FloatingPointError(
            f'loss total={losses["total"].item()} at epoch {run.epoch} step {run.step_in_epoch}'
        )
    run.optimizer.zero_grad(set_to_none=True)
    run.scaler.scale(losses['total']).backward()
    if run.weighting is not None and run.world > 1:  # DDP syncs the model only
        for p in run.weighting.parameters():
            dist.all_reduce(p.grad)
            p.grad /= run.world
    clip = run.cfg['optim']['grad_clip']
    if clip:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.scheduler.step()
    run.global_step += 1
    vals = {k: float(losses[k].detach()) for k in LOSS_KEYS if k in losses}
    if run.writer is not None:
        for k, v in vals.items():
            run.writer.add_scalar(f'train/{k}', v, run.global_step)
        run.writer.add_scalar('train/lr', run.scheduler.get_last_lr()[0], run.global_step)
    return vals


def validate_and_checkpoint(run: Run, epoch: int) -> bool:
    """After ``epoch``: validate (rank 0), update early stopping, write best.pt / last.pt; returns
    whether every rank stops now (early stopping, M6)."""
    stop = False
    if run.master:
        cfg = run.cfg
        metrics = evaluate_model(
            run.model,
            run.val_ds,
            run.classes,
            run.device,
            batch_size=cfg['train']['batch_size'],
            loss_cfg=run.loss_cfg,
            weighting=run.weighting,
            amp_ctx=run.amp_ctx,
            measured_depth=cfg['early_stop']['measured_depth'],
        )
        metrics['epoch'] = epoch + 1
        run.history.append(metrics)
        improved, note = update_early_stop(
            run.es, metrics, cfg, epoch + 1
        )  # may fall back to val_loss
        if note:
            print(note, flush=True)
        print(
            f"epoch {epoch + 1}: "
            + ' '.join(f'{k}={v:.4f}' for k, v in metrics.items() if isinstance(v, float))
            + (' *' if improved else ''),
            flush=True,
        )
        if run.writer is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and k != 'epoch':
                    run.writer.add_scalar(f'val/{k}', v, epoch + 1)
            n = cfg['log']['sample_images']
            if n:
                run.writer.add_image(
                    'val/samples',
                    sample_grid(run.model, run.val_ds, run.classes, run.device, n),
                    epoch + 1,
                    dataformats='HWC',
                )
            run.writer.flush()
        state = run.checkpoint()
        if improved:
            save_checkpoint(run.out / 'best.pt', state)
        save_checkpoint(run.out / 'last.pt', state)
        stop = run.es['bad_epochs'] >= cfg['early_stop']['patience']
    return agree(stop, run.world, run.device)


def train(run: Run) -> str:
    """Epochs from where the run stands until the epoch cap, early stopping or the time limit;
    returns why it stopped."""
    tc = run.cfg['train']
    limit_s = None if tc['time_limit_min'] is None else 60.0 * tc['time_limit_min']
    if (
        run.es['bad_epochs'] >= run.cfg['early_stop']['patience']
    ):  # resuming a run that had converged
        return early_stop_reason(run.cfg, run.es)
    for epoch in range(run.epoch, tc['epochs']):
        if _signalled(run):  # before training, or during the last validation
            if run.master:  # at an epoch boundary: resumable from here
                save_checkpoint(run.out / 'last.pt', run.checkpoint())
            return _interrupted(run)
        if not train_epoch(run, epoch, limit_s):
            return (
                _interrupted(run) if _asked_to_stop(run) else 'time limit (resume with --resume)'
            )
        if validate_and_checkpoint(run, epoch):
            return early_stop_reason(run.cfg, run.es)
    return f"max epochs ({tc['epochs']})"


def _interrupted(run: Run) -> str:
    """The stop reason after a stop signal (it starts with 'interrupted'), saying where the run
    stands."""
    name = run.stop.name if _asked_to_stop(run) else 'a stop signal'  # rank 0's, on another rank
    return (
        f'interrupted by {name} at epoch {run.epoch + 1}, step {run.step_in_epoch} '
        '(resume with --resume)'
    )


def export(run: Run, stop_reason: str) -> None:
    """Rank 0: the model file (weights of best.pt, or of the last state when the run directory has
    no best.pt) and summary.json."""
    if not run.master:
        return
    out, cfg, es, history = run.out, run.cfg, run.es, run.history
    summary = {
        'stop_reason': stop_reason,
        'epochs_done': len(history),
        'global_step': run.global_step,
        'best_metric': es.get('metric', cfg['early_stop']['metric']),
        'best_value': es['best'],
        'early_stop_metric': cfg['early_stop']['metric'],
        'best_epoch': es['best_epoch'],
        'history': history,
        'chunk_seconds': round(time.monotonic() - run.t0, 1),
    }
    best = out / 'best.pt'
    if best.is_file():
        run.model.load_state_dict(load_checkpoint(best)['model'])
        summary['exported'] = f"best epoch {es['best_epoch']}"
    elif history:  # e.g. a last.pt resumed in a new directory, and no epoch since beat its best
        summary['exported'] = f'last state, epoch {len(history)}'
        print(
            f"no best.pt in {out} (best epoch {es['best_epoch']} was not saved here): exporting "
            f'the last state (epoch {len(history)})',
            flush=True,
        )
    else:
        print('no model exported: no validation has run yet (continue with --resume)', flush=True)
    if history:
        save_model(
            out / cfg['export'], run.model, export_meta(cfg, run.classes, run.model, summary)
        )
        summary['model_file'] = str(out / cfg['export'])
    (out / 'summary.json').write_text(json.dumps(summary, indent=1))
    print(f'stopped: {stop_reason}', flush=True)


def export_meta(cfg: dict, classes, model: Depth3DSeg, summary: dict) -> dict[str, Any]:
    """Model-file metadata the node/Segmenter needs: classes, input size, mean/std, input
    white balance, max_depth, arch, and a training summary (no history)."""
    return {
        'classes': classes.to_dict(),
        'input_size': list(cfg['data']['input_size']),
        'mean': list(cfg['model']['mean']),
        'std': list(cfg['model']['std']),
        'input_balance': cfg['model']['input_balance'],  # resolved by run.setup_run
        'input': cfg['model'].get('input') or 'rgb',  # rgb | depth_code (core.late_fusion)
        'max_depth': float(model.arch['max_depth']),
        'arch': dict(model.arch),
        'training': {k: v for k, v in summary.items() if k != 'history'},
    }


# ------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0, or 2 after printing ``depth3dseg-train: error: <message>``
    to stderr for a user error (config.USER_ERRORS: missing path, existing run, bad
    config/--set/model file); other exceptions keep their traceback. The process-wide determinism
    flag is restored afterwards (the trainer may be called in-process, e.g. by tests)."""
    prev = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    try:
        with StopAtStep('depth3dseg-train') as stop:
            return _run(parse_args(argv), stop)
    except StopNow as exc:  # a second signal: at once, the last complete last.pt kept
        print(f'depth3dseg-train: {exc}, nothing more saved', file=sys.stderr, flush=True)
        return 128 + exc.signum
    except USER_ERRORS as exc:
        print(
            f'depth3dseg-train: error: {" ".join(str(exc).split())}', file=sys.stderr, flush=True
        )  # one line
        return 2
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


def _run(args: argparse.Namespace, stop: StopAtStep | None = None) -> int:
    run = setup_run(args)
    run.stop = stop
    stop_reason = train(run)
    export(run, stop_reason)
    if run.writer is not None:
        run.writer.close()
    if run.world > 1:
        dist.barrier()
        dist.destroy_process_group()
    interrupted = stop_reason.startswith('interrupted')
    return stop.exit_code if interrupted and stop is not None else 0  # 130 / 143: SIGINT / SIGTERM


if __name__ == '__main__':
    sys.exit(main())
