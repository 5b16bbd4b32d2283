"""Process-level set-up for depth3dseg-train: DDP process group, device, seeds, DataLoader worker
seeds, and rank 0's decisions shared with every process."""

from __future__ import annotations

import datetime
import os
import random

import numpy as np
import torch
import torch.distributed as dist

from depth3dseg_ros.core.inference import resolve_device


def setup_distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's env; init_process_group when WORLD_SIZE >
    1."""
    world = int(os.environ.get('WORLD_SIZE', '1'))
    if world > 1:
        backend = 'nccl' if torch.cuda.is_available() else 'gloo'
        # rank 0 validates alone while the others wait in a broadcast: allow a long validation
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(hours=2))
        return dist.get_rank(), world, int(os.environ.get('LOCAL_RANK', '0'))
    return 0, 1, 0


def pick_device(name: str, local_rank: int) -> torch.device:
    """core.inference.resolve_device (auto -> cuda when available, else cpu; ValueError for CUDA
    without CUDA), with an index-less cuda device made ``cuda:<local_rank>`` (one GPU per DDP
    process)."""
    try:
        dev = resolve_device(name)
    except ValueError as exc:
        raise ValueError(f'config train.device: {exc}') from None
    if dev.type == 'cuda':
        if dev.index is None:
            dev = torch.device('cuda', local_rank)
        torch.cuda.set_device(dev)
    return dev


def seed_everything(seed: int, deterministic: bool, device: torch.device) -> None:
    """Seed Python, NumPy and torch; with ``deterministic`` also ask torch (and cuBLAS) for
    deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        if device.type == 'cuda':
            os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
            torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)


def worker_init(worker_id: int) -> None:
    """Seed Python/NumPy in each DataLoader worker from its torch seed (generator-derived); the
    worker ignores SIGINT/SIGTERM (the main process stops it: training.interrupt)."""
    from depth3dseg_ros.training.interrupt import ignore_in_worker

    ignore_in_worker()
    s = torch.initial_seed() % 2**32
    random.seed(s)
    np.random.seed(s)


def agree(flag: bool, world: int, device: torch.device) -> bool:
    """Rank 0's ``flag`` on every rank (DDP ranks must leave the loop together, or the others hang
    in the next all-reduce); the flag itself when single-process."""
    if world == 1:
        return bool(flag)
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.broadcast(t, src=0)
    return bool(t.item())
