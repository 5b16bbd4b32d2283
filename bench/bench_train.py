"""Training and evaluation throughput of depth3dseg-train / depth3dseg-eval on this machine (CPU or
GPU).

    python bench/bench_train.py [--batch 8] [--size 320 240] [--steps 4] [--arch '{}'] [--device
    cpu]

Builds a dataset directory from the real NYU frames (stored at 640×480, as an extraction would),
then measures with the default architecture (core.arch.DEFAULT_ARCH) at the network input size:
  * train step images/s: forward + compute_losses + backward + AdamW on a pre-loaded augmented
    batch;
  * train loop images/s: the same with the DataLoader (PNG decode + augmentation, num_workers=0);
  * eval frames/s: training.scoring.evaluate_model (batched forward + metrics);
  * with --channels-last, also the train step of a copy of the model in NHWC layout
    (``train.channels_last``), interleaved with the default one, and their ratio;
and prints ratios against the forward-only images/s of the same model measured in the same run
(the reference). Rounds are interleaved and the minimum time of each operation is used (the machine
is shared; medians are printed too). Figures go to docs/training.md with this command.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
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
    """Run the training/evaluation throughput benchmark (CLI) and print images/s and frames/s per
    stage."""
    p = argparse.ArgumentParser(description=' '.join(__doc__.split('\n\n')[0].split()))
    p.add_argument('--batch', type=int, default=8)
    p.add_argument('--size', type=int, nargs=2, default=[320, 240], metavar=('W', 'H'))
    p.add_argument('--steps', type=int, default=5, help='timed rounds after 1 warm-up step')
    p.add_argument('--arch', default='{}', help='Depth3DSeg arguments as YAML (default arch)')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--real', default=str(REPO.parent / 'shared' / 'data' / 'real'))
    p.add_argument('--channels-last', action='store_true', help='also time train.channels_last')
    a = p.parse_args()
    device = torch.device(a.device)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = make_dataset_dir(Path(a.real), Path(tmp) / 'ds', size=(640, 480))
        ds = FrameDataset([data], a.size, NYU13, augment=DEFAULTS['augment'])
        model = Depth3DSeg(num_classes=len(NYU13), **yaml.safe_load(a.arch)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loss_cfg = LossConfig()
        loader = DataLoader(
            ds, batch_size=min(a.batch, len(ds)), shuffle=True, drop_last=True, num_workers=0
        )
        batch = {k: v.to(device) for k, v in next(iter(loader)).items()}
        while len(batch['rgb']) < a.batch:  # 10 frames: repeat to fill a large batch
            batch = {k: torch.cat([v, v])[: a.batch] for k, v in batch.items()}
        print(
            f'device {device}, threads {torch.get_num_threads()}, input {a.size[0]}x{a.size[1]}, '
            f'batch {a.batch}, params {count_params(model) / 1e6:.2f} M'
        )

        def step(b, m=model, o=opt):
            losses = compute_losses(m, b, loss_cfg)
            o.zero_grad(set_to_none=True)
            losses['total'].backward()
            o.step()

        if a.channels_last:  # the same weights in NHWC layout, its own optimiser
            model_cl = copy.deepcopy(model).to(memory_format=torch.channels_last)
            opt_cl = torch.optim.AdamW(model_cl.parameters(), lr=1e-4)
            step(batch, model_cl, opt_cl)  # warm-up

        def timed(fn) -> float:
            _sync(device)
            t = time.perf_counter()
            fn()
            _sync(device)
            return time.perf_counter() - t

        def forward():
            model.eval()
            with torch.no_grad():
                model(batch['rgb'], batch['K'])
            model.train()

        it = iter(())

        def load_batch():
            nonlocal it
            try:
                return next(it)
            except StopIteration:
                it = iter(loader)
                return next(it)

        def loop_step():  # DataLoader (decode + augment) + step, as in depth3dseg-train
            step({k: v.to(device) for k, v in load_batch().items()})

        model.train()
        step(batch)  # warm-up
        forward()
        # interleaved repetitions: the machine is shared, so each op's minimum (least disturbed)
        # and median are reported, and the ratios use the minima of the same rounds
        times = {'forward': [], 'step': [], 'loop': []}
        if a.channels_last:
            times['step_cl'] = []
        for _ in range(a.steps):
            times['forward'].append(timed(forward))
            times['step'].append(timed(lambda: step(batch)))
            times['loop'].append(timed(loop_step))
            if a.channels_last:
                times['step_cl'].append(timed(lambda: step(batch, model_cl, opt_cl)))
        load = [timed(lambda i=i: ds[i]) for i in range(len(ds))]
        val = FrameDataset([data], a.size, NYU13, augment=None)
        t = time.perf_counter()
        rep = evaluate_model(model, val, NYU13, device, batch_size=a.batch)
        eval_wall = rep['frames'] / (time.perf_counter() - t)

    ips = {k: (a.batch / min(v), a.batch / statistics.median(v)) for k, v in times.items()}
    ref = ips['forward'][0]
    print(
        f"data loading (one frame):   {1000 * statistics.median(load):8.1f} ms median "
        '(PNG decode 640x480, augment, normalise)'
    )
    print(f"forward only (reference):   {ref:8.2f} images/s (median {ips['forward'][1]:.2f})")
    for key, name in (('step', 'train step:'), ('loop', 'train loop (with loading):')):
        print(
            f'{name:<27} {ips[key][0]:8.2f} images/s (median {ips[key][1]:.2f})  '
            f'{ips[key][0] / ref:.2f} x forward'
        )
    if a.channels_last:
        print(
            f"train step, channels_last:  {ips['step_cl'][0]:8.2f} images/s (median "
            f"{ips['step_cl'][1]:.2f})  {ips['step_cl'][0] / ips['step'][0]:.2f} x the default "
            'layout'
        )
    print(
        f"eval forward (batched):     {rep['frames_per_s']:8.2f} frames/s  (one pass over 10 "
        "frames)"
    )
    print(f'eval with loading+metrics:  {eval_wall:8.2f} frames/s')
    cam_ms = camera_aug_ms(a.size)
    print(
        f"camera augmentation:        {cam_ms[0]:8.1f} ms per frame with the 'real_camera' "
        f'preset, {cam_ms[1]:.1f} ms with every op on ({a.size[0]}x{a.size[1]}, RGB + depth; '
        'median of 20)'
    )


def camera_aug_ms(size) -> tuple[float, float]:
    """Median ms of training.camera_aug on one frame of ``size`` (W, H): the preset, every op
    forced on."""
    from depth3dseg_ros.training import camera_aug as ca

    w, h = size
    rgb = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    depth = np.random.default_rng(0).uniform(0.5, 5, (h, w)).astype(np.float32)
    out = []
    for spec in ('real_camera', {'preset': 'real_camera', **{op: {'p': 1.0} for op in ca.OPS}}):
        cfg = ca.resolve_camera(spec)
        runs = []
        for i in range(20):
            rng = np.random.default_rng(i)
            t = time.perf_counter()
            ca.augment_rgb(rgb, rng, cfg)
            ca.augment_depth(depth, rng, cfg)
            runs.append(time.perf_counter() - t)
        out.append(1000 * statistics.median(runs))
    return out[0], out[1]


if __name__ == '__main__':
    main()
