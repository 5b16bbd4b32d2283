"""The order in which an epoch's samples are trained, and where a resumed run continues in it (case
C34).

Each epoch has one **global order**: a permutation of the ``n`` training samples drawn from
``(seed, epoch)`` alone, the same whatever the batch size or the number of processes. A step
consumes the next ``batch_size × world_size`` positions of that order; process ``rank`` takes the
``rank``-th slice of ``batch_size`` of them. A checkpoint therefore needs one number to say where
the epoch stands: ``samples_in_epoch``, the positions consumed so far. A run resumed with another
batch size or process count continues from that position with its own batch shape, so every sample
of an interrupted epoch is trained exactly once across the chunks.

The last step of an epoch takes what is left when fewer than a full global batch remain: the
remainder is shared out in near-equal slices (every process gets at least one sample, so DDP
processes keep taking the same number of steps). Only when fewer samples than processes remain are
they left out of that epoch (at most ``world_size − 1``, and never in a single-process run).
``max_steps`` caps the steps an epoch takes from position 0 (``--max-steps-per-epoch``); the
samples past the cap are not trained in that epoch.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

import torch
from torch.utils.data import Sampler


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The epoch's global order: a permutation of ``range(n)`` (int64) drawn from (seed, epoch)
    alone."""
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(epoch))
    return torch.randperm(int(n), generator=g)


def step_sizes(
    n: int, batch_size: int, world_size: int, start: int = 0, max_steps: Optional[int] = None
) -> List[int]:
    """Global samples consumed by each step of an epoch of ``n`` samples, from position ``start``.

    Full steps consume ``batch_size × world_size``; a last partial step consumes the remainder when
    it is at least ``world_size`` (module docstring). ``max_steps`` counts steps from position 0 of
    the epoch.

    Raises:
        ValueError: batch_size or world_size < 1, or start outside 0..n.
    """
    if batch_size < 1 or world_size < 1:
        raise ValueError(f'batch_size={batch_size} and world_size={world_size} must be >= 1')
    if not 0 <= start <= n:
        raise ValueError(f'samples_in_epoch={start} outside 0..{n} (the dataset has {n} samples)')
    full = batch_size * world_size
    sizes = [full] * ((n - start) // full)
    rest = (n - start) % full
    if rest >= world_size:
        sizes.append(rest)
    if max_steps is not None:
        done = steps_before(start, n, batch_size, world_size)
        sizes = sizes[: max(0, max_steps - done)]
    return sizes


def steps_before(start: int, n: int, batch_size: int, world_size: int) -> int:
    """Steps an epoch has taken to reach position ``start`` with this batch shape (for a resumed
    epoch measured in the new shape: the number of full global batches in ``start``, rounded
    up)."""
    full = batch_size * world_size
    return -(-start // full)


class EpochBatchSampler(Sampler[List[int]]):
    """Batches of sample indices of one epoch for process ``rank`` (a DataLoader
    ``batch_sampler``).

    Args:
        n: dataset length; batch_size: per process; world_size, rank: DDP layout (1, 0
            single-process);
        seed, epoch: the global order (`epoch_order`); start: positions already consumed in this
        epoch (a checkpoint's ``samples_in_epoch``); max_steps: the epoch's step cap (None = no
        cap).
    ``positions_after(k)`` = the epoch position after this sampler's first ``k`` steps (what a
    checkpoint taken then stores).
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        world_size: int,
        rank: int,
        seed: int,
        epoch: int,
        start: int = 0,
        max_steps: Optional[int] = None,
    ):
        if not 0 <= rank < world_size:
            raise ValueError(f'rank={rank} outside 0..{world_size - 1}')
        self.rank, self.world_size, self.start = rank, world_size, start
        self.sizes = step_sizes(n, batch_size, world_size, start, max_steps)
        self.order = epoch_order(n, seed, epoch)

    def __len__(self) -> int:
        return len(self.sizes)

    def __iter__(self) -> Iterator[List[int]]:
        pos = self.start
        for size in self.sizes:
            base, extra = divmod(
                size, self.world_size
            )  # near-equal slices, the first `extra` one larger
            lo = pos + self.rank * base + min(self.rank, extra)
            hi = lo + base + (1 if self.rank < extra else 0)
            yield self.order[lo:hi].tolist()
            pos += size

    def positions_after(self, steps: int) -> int:
        """Epoch position after the first ``steps`` steps of this sampler."""
        return self.start + sum(self.sizes[:steps])
