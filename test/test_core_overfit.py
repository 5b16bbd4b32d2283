"""M1–M6 end to end: the model, trained with core.train_step.compute_losses (all four loss terms),
can fit two real NYU frames (0001 and 1407: RGB + metric depth + 13-class labels + K) at 64×48.

A capacity/wiring check of the whole method: 2D and 3D mIoU near 1 and depth AbsRel near 0 after a
few hundred Adam steps. K is scaled to 64×48 with core.geometry (case C18), labels/depth are
resized nearest.
"""

import numpy as np
import torch

from depth3dseg_ros.core.geometry import resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.core.metrics import ConfusionMatrix, DepthMetrics, predict_labels
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.train_step import LossConfig, compute_losses
from trainutil import real_frames

W, H = 64, 48
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
ARCH = dict(
    width=0.5,
    depth_mult=0.35,
    dec_ch=32,
    head_ch=32,
    p_stride=1,
    p_window=5,
    p_k=8,
    p_channels=[48, 48],
    p_head=64,
    max_depth=10.0,
)


def _batch(real_dir):
    import cv2

    rgbs, depths, labels, Ks = [], [], [], []
    for name, rgb, depth, lab, K in real_frames(real_dir):
        if depth is None or lab is None:
            continue
        h0, w0 = rgb.shape[:2]
        small = cv2.resize(rgb, (W, H), interpolation=cv2.INTER_AREA)
        rgbs.append((small / 255.0 - MEAN) / STD)
        depths.append(resize_depth(depth, (W, H)))
        labels.append(resize_labels(lab, (W, H)))
        Ks.append(resize_intrinsics(K, (w0, h0), (W, H)))
    assert len(rgbs) == 2  # NYU 0001 and 1407
    return {
        'rgb': torch.tensor(np.stack(rgbs), dtype=torch.float32).permute(0, 3, 1, 2).contiguous(),
        'depth': torch.tensor(np.stack(depths), dtype=torch.float32).unsqueeze(1),
        'labels': torch.tensor(np.stack(labels).astype(np.int64)),
        'K': torch.tensor(np.stack(Ks), dtype=torch.float32),
    }


def _evaluate(model, batch):
    """Metrics of the model on the batch: 2D mIoU, 3D mIoU (valid points), depth AbsRel.

    The forward runs in train mode (BatchNorm with the batch's own statistics, no_grad): at 64×48
    the 1/32 feature map has 2×2 cells per frame, so BatchNorm's running variance (unbiased, over 8
    values) is not the normalisation the weights were fitted with; this is a capacity test, not a
    generalisation test.
    """
    with torch.no_grad():
        out = model(batch['rgb'], batch['K'])
    cm2, cm3, dm = ConfusionMatrix(14), ConfusionMatrix(14), DepthMetrics()
    cm2.update(predict_labels(out['seg2d']), batch['labels'])
    cm3.update(predict_labels(out['seg3d']), batch['labels'], out['valid'][:, 0])
    dm.update(out['depth'], batch['depth'])
    return cm2.miou(), cm3.miou(), dm.summary()['absrel']


def test_overfit_two_real_nyu_frames(real_dir):
    torch.manual_seed(0)
    batch = _batch(real_dir)
    assert batch['labels'].max() <= 13 and (batch['labels'] > 0).float().mean() > 0.5
    model = Depth3DSeg(14, **ARCH).train()
    cfg = LossConfig(depth_loss='l1')
    assert min(cfg.weights().values()) > 0  # all four terms on
    steps = 250
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=1e-2, total_steps=steps, pct_start=0.15
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # tiny tensors: one thread avoids OpenMP waits on the shared 2-core CPU
    try:
        before = _evaluate(model, batch)
        for _ in range(steps):
            losses = compute_losses(model, batch, cfg)
            assert all(
                int(losses[f'n_{t}']) > 0 for t in ('seg2d', 'seg3d', 'depth', 'consistency')
            )
            opt.zero_grad()
            losses['total'].backward()
            opt.step()
            sched.step()
        miou2, miou3, absrel = _evaluate(model, batch)
    finally:
        torch.set_num_threads(threads)
    print(f'before {before} after: 2D mIoU {miou2:.3f} 3D mIoU {miou3:.3f} AbsRel {absrel:.4f}')
    assert (
        before[0] < 0.3 and before[1] < 0.3 and before[2] > 0.1
    )  # the untrained model is far off
    assert miou2 >= 0.9 and miou3 >= 0.9 and absrel <= 0.05
