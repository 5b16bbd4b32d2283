"""Scoring a model on a dataset, as ``depth3dseg-eval`` and training's validation do (METHOD
M7/M8 metrics): the un-augmented dataset at a model file's input size, and the batched forward pass
with every metric accumulated (core.metrics.SegDepthEvaluator). The command line is
training/evaluate.py.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader

from depth3dseg_ros.core.arch import DEFAULT_ARCH
from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.late_fusion import forward_rgbd
from depth3dseg_ros.core.metrics import SegDepthEvaluator
from depth3dseg_ros.core.train_step import losses_from_outputs
from depth3dseg_ros.training.dataset import FrameDataset
from depth3dseg_ros.training.eval_report import (
    model_arch,
)

FLAT_KEYS = (
    'miou_2d',
    'miou_3d',
    'miou_fused',
    'miou_gt_fused',
    'pixel_acc_2d',
    'pixel_acc_3d',
    'pixel_acc_fused',
    'absrel',
    'rmse',
    'delta1',
    'delta2',
    'delta3',
)


def model_dataset(records: list[dict], meta: dict, classes: ClassSet) -> FrameDataset:
    """The un-augmented FrameDataset of ``records`` (training.dataset.load_records) at a model
    file's input size and normalisation (``meta`` of core.modelfile: input_size [W, H], mean, std,
    input_balance), as depth3dseg-eval feeds the model."""
    return FrameDataset(
        records=records,
        input_size=meta['input_size'],
        classes=classes,
        mean=meta['mean'],
        std=meta['std'],
        augment=None,
        balance=meta.get('input_balance', 'none'),
    )


@torch.no_grad()
def evaluate_model(
    model: torch.nn.Module,
    dataset: FrameDataset,
    classes: ClassSet,
    device: torch.device | str = 'cpu',
    batch_size: int = 8,
    loss_cfg: Any = None,
    weighting: Any = None,
    amp_ctx: Callable = nullcontext,
    full: bool = False,
    measured_depth: bool = False,
    progress: bool = False,
    per_frame: bool = False,
    geometry: Any = None,
) -> dict[str, Any]:
    """Run ``model`` (Depth3DSeg) over ``dataset`` (un-augmented FrameDataset) and return metrics.

    Returns a dict with the flat keys of FLAT_KEYS (float, None when undefined: no labelled / no
    depth pixels), ``frames`` and ``frames_per_s`` (forward passes only, batched; the first batch
    left out when there are more), ``val_loss`` (mean total of core.train_step.compute_losses,
    when ``loss_cfg`` is given) and, with ``full=True``, the nested per-class summary under
    ``seg2d``, ``seg3d``, ``fused``, ``depth``.
    The model's train/eval mode is restored afterwards. ``weighting``: the learned loss weighting
    module, when the config uses one.
    ``measured_depth``: give the model each frame's sensor depth as measured depth (the cloud and
    the 3D net use it where valid, Depth3DSeg.forward), as an RGB-D camera's node would; frames
    without depth run on the prediction alone. The depth metrics always score the network's
    predicted depth.
    ``geometry``: a core.late_fusion.GeometryBranch; with ``measured_depth``, each frame with depth
    gets the RGB-D late fusion of the two models' 2D labels (core.late_fusion.forward_rgbd).
    ``progress``: a tqdm bar over the batches on stderr (as depth3dseg-train shows; off by
    default).
    ``per_frame``: also return each frame's counts under ``per_frame``
    (core.metrics.SegDepthEvaluator.frames: numpy arrays, not JSON), for bootstrap intervals.
    """
    from tqdm import tqdm

    device = torch.device(device)
    was_training = model.training
    model.eval()
    arch = model_arch(model)
    ev = SegDepthEvaluator(
        len(classes),
        classes.void_id,
        classes.names,
        max_depth=arch.get('max_depth'),
        fusion_w3d=arch.get('fusion_w3d', DEFAULT_ARCH['fusion_w3d']),
        per_frame=per_frame,
    )
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0)
    loss_sum, n_frames, t_fwd = 0.0, 0, 0.0
    warm = None  # (frames, seconds) of the first batch: its forward pass is the cold one
    for batch in tqdm(
        loader, desc='eval', unit='batch', disable=not progress, dynamic_ncols=True, leave=False
    ):
        batch = {k: v.to(device) for k, v in batch.items()}
        if device.type == 'cuda':
            torch.cuda.synchronize()
        t = time.perf_counter()
        with amp_ctx():
            measured = batch['depth'] if measured_depth else None
            out = forward_rgbd(
                model, batch['rgb'], batch['K'], measured, geometry, classes.void_id
            )
        if device.type == 'cuda':
            torch.cuda.synchronize()
        t_fwd += time.perf_counter() - t
        if warm is None:
            warm = (len(batch['rgb']), t_fwd)
        out = {k: (v.float() if v.is_floating_point() else v) for k, v in out.items()}
        ev.update(out, batch['labels'], batch['depth'])
        if loss_cfg is not None:  # the same outputs, no second forward pass
            total = losses_from_outputs(out, batch, loss_cfg, weighting)['total']
            loss_sum += float(total) * len(batch['rgb'])
        n_frames += len(batch['rgb'])
    model.train(was_training)
    s = ev.summary()
    flat: dict[str, Any] = {
        k: s[k] for k in ('miou_2d', 'miou_3d', 'miou_fused', 'absrel', 'rmse', 'delta1')
    }
    for k, sec in (('2d', 'seg2d'), ('3d', 'seg3d'), ('fused', 'fused')):
        flat[f'pixel_acc_{k}'] = s[sec]['pixel_acc']
    flat['miou_gt_fused'] = s['fused']['miou_gt']
    flat['delta2'], flat['delta3'] = s['depth']['delta2'], s['depth']['delta3']
    flat = {k: flat[k] for k in FLAT_KEYS}
    if loss_cfg is not None:
        flat['val_loss'] = loss_sum / max(1, n_frames)
    flat['frames'] = n_frames
    # forward passes only, the first (cold: allocations, kernel selection) left out when there
    # are more; a single batch is all there is
    if warm is not None and n_frames > warm[0] and t_fwd > warm[1]:
        flat['frames_per_s'] = (n_frames - warm[0]) / (t_fwd - warm[1])
    else:
        flat['frames_per_s'] = n_frames / t_fwd if t_fwd > 0 else None
    if full:
        flat.update({k: s[k] for k in ('seg2d', 'seg3d', 'fused', 'depth')})
    if per_frame:
        flat['per_frame'] = ev.frames()
    return flat
