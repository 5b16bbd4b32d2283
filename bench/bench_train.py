"""Training and evaluation throughput of depth3dseg-train / depth3dseg-eval on this machine (CPU or GPU).

    python bench/bench_train.py [--batch 8] [--size 320 240] [--steps 4] [--arch '{}'] [--device cpu]

Builds a dataset directory from the real NYU frames (stored at 640×480, as an extraction would), then
measures with the default architecture (core.model.DEFAULT_ARCH) at the network input size:
  * train step images/s: forward + compute_losses + backward + AdamW on a pre-loaded augmented batch;
  * train loop images/s: the same with the DataLoader (PNG decode + augmentation, num_workers=0);
  * eval frames/s: training.evaluate.evaluate_model (batched forward + metrics);
and prints ratios against the forward-only images/s of the same model measured in the same run
(the reference). Figures go to docs/training.md with this command.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml
from torch.utils.data import DataLoader

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))

from depth3dseg_ros.core.classes import NYU13  # noqa: E402
from depth3dseg_ros.core.model import Depth3DSeg, count_params  # noqa: E402
from depth3dseg_ros.core.train_step import LossConfig, compute_losses  # noqa: E402
from depth3dseg_ros.training.config import DEFAULTS  # noqa: E402
from depth3dseg_ros.training.dataset import FrameDataset  # noqa: E402
from depth3dseg_ros.training.evaluate import evaluate_model  # noqa: E402
from trainutil import make_dataset_dir  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--batch', type=int, default=8)
    p.add_argument('--size', type=int, nargs=2, default=[320, 240], metavar=('W', 'H'))
    p.add_argument('--steps', type=int, default=3, help='timed steps after 1 warm-up step')
    p.add_argument('--arch', default='{}', help='Depth3DSeg arguments as YAML (default arch)')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--real', default=str(REPO.parent / 'shared' / 'data' / 'real'))
    a = p.parse_args()
    device = torch.device(a.device)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = make_dataset_dir(Path(a.real), Path(tmp) / 'ds', size=(640, 480))
        ds = FrameDataset([data], a.size, NYU13, augment=DEFAULTS['augment'])
        model = Depth3DSeg(num_classes=len(NYU13), **yaml.safe_load(a.arch)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loss_cfg = LossConfig()
        loader = DataLoader(ds, batch_size=min(a.batch, len(ds)), shuffle=True, drop_last=True, num_workers=0)
        batch = {k: v.to(device) for k, v in next(iter(loader)).items()}
        while len(batch['rgb']) < a.batch:  # 10 frames: repeat to fill a large batch
            batch = {k: torch.cat([v, v])[:a.batch] for k, v in batch.items()}
        print(f'device {device}, threads {torch.get_num_threads()}, input {a.size[0]}x{a.size[1]}, '
              f'batch {a.batch}, params {count_params(model) / 1e6:.2f} M')

        def step(b):
            losses = compute_losses(model, b, loss_cfg)
            opt.zero_grad(set_to_none=True)
            losses['total'].backward()
            opt.step()

        model.train()
        step(batch)  # warm-up
        _sync(device)
        t = time.perf_counter()
        for _ in range(a.steps):
            step(batch)
        _sync(device)
        train_ips = a.steps * a.batch / (time.perf_counter() - t)

        n, t = 0, time.perf_counter()
        while n < a.steps * a.batch:  # the loader cycles over the 10 frames (full batches only)
            for b in loader:
                b = {k: v.to(device) for k, v in b.items()}
                step(b)
                n += len(b['rgb'])
                if n >= a.steps * a.batch:
                    break
        _sync(device)
        loop_ips = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for i in range(len(ds)):
            ds[i]
        load_ms = 1000 * (time.perf_counter() - t) / len(ds)

        model.eval()
        with torch.no_grad():
            model(batch['rgb'], batch['K'])
            _sync(device)
            t = time.perf_counter()
            for _ in range(a.steps):
                model(batch['rgb'], batch['K'])
            _sync(device)
        fwd_ips = a.steps * a.batch / (time.perf_counter() - t)

        val = FrameDataset([data], a.size, NYU13, augment=None)
        t = time.perf_counter()
        rep = evaluate_model(model, val, NYU13, device, batch_size=a.batch)
        eval_wall = rep['frames'] / (time.perf_counter() - t)

    print(f'data loading (one frame):   {load_ms:8.1f} ms (PNG decode 640x480, augment, normalise)')
    print(f'forward only (reference):   {fwd_ips:8.2f} images/s')
    print(f'train step:                 {train_ips:8.2f} images/s  ({train_ips / fwd_ips:.2f} x forward)')
    print(f'train loop (with loading):  {loop_ips:8.2f} images/s  ({loop_ips / fwd_ips:.2f} x forward)')
    print(f"eval forward (batched):     {rep['frames_per_s']:8.2f} frames/s  "
          f"({rep['frames_per_s'] / fwd_ips:.2f} x forward)")
    print(f'eval with loading+metrics:  {eval_wall:8.2f} frames/s  ({eval_wall / fwd_ips:.2f} x forward)')


if __name__ == '__main__':
    main()
