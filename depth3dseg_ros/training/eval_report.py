"""depth3dseg-eval's human-readable outputs: the metrics table (report.txt), the fused-label
confusion lines, and the sample grids (rgb | ground truth | fused prediction | predicted depth)
that depth3dseg-eval and depth3dseg-train write. Formatting only: the figures come from
training/evaluate.py (METHOD M7/M8 metrics, core.metrics).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from depth3dseg_ros.core.arch import DEFAULT_ARCH
from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.fusion import source_labels
from depth3dseg_ros.core import visual
from depth3dseg_ros.core.imageops import colorize_labels
from depth3dseg_ros.core.late_fusion import forward_rgbd
from depth3dseg_ros.training.dataset import FrameDataset

__all__ = ['denormalize', 'sample_grid', 'confusion_lines', 'format_table', 'model_arch']


def model_arch(model: torch.nn.Module) -> dict[str, Any]:
    """The arch dict of a Depth3DSeg, also inside a DDP wrapper (``.module``); {} for a model
    without one (stand-ins in tests)."""
    return getattr(getattr(model, 'module', model), 'arch', {})


def denormalize(rgb: torch.Tensor, mean, std) -> np.ndarray:
    """3×H×W normalised tensor -> H×W×3 uint8 RGB."""
    x = rgb.detach().float().cpu().numpy().transpose(1, 2, 0) * np.asarray(std) + np.asarray(mean)
    return (np.clip(x, 0, 1) * 255 + 0.5).astype(np.uint8)


@torch.no_grad()
def sample_grid(
    model: torch.nn.Module,
    dataset: FrameDataset,
    classes: ClassSet,
    device: torch.device | str = 'cpu',
    n: int = 4,
    start: int = 0,
    measured_depth: bool = False,
    geometry: Any = None,
) -> np.ndarray:
    """Rows of rgb | ground-truth labels | fused predicted labels | predicted depth for frames
    ``start..start+n-1`` of ``dataset``, and under them the key: the depth colour bar (0 to the
    model's max depth, metres: the scale of every depth picture, core/visual.py) and the class
    legend; returns an H'×W'×3 uint8 RGB image (ground truth of frames without labels is all
    void). ``measured_depth``, ``geometry`` (a
    core.late_fusion.GeometryBranch): the labels as depth3dseg-eval scores them with those options
    (core.late_fusion.forward_rgbd)."""
    was_training = model.training
    model.eval()
    idx = list(range(start, min(len(dataset), start + n)))
    items = [dataset[i] for i in idx]
    rgb = torch.stack([b['rgb'] for b in items]).to(device)
    K = torch.stack([b['K'] for b in items]).to(device)
    depth = torch.stack([b['depth'] for b in items]).to(device) if measured_depth else None
    out = forward_rgbd(model, rgb, K, depth, geometry, classes.void_id)
    model.train(was_training)
    arch = model_arch(model)
    w3d = arch.get('fusion_w3d', DEFAULT_ARCH['fusion_w3d'])
    pred = source_labels(
        out['seg2d'], out['seg3d'], out['valid'], 'fused', classes.void_id, w3d=w3d
    )
    pred = pred.cpu().numpy()
    max_depth = arch.get('max_depth') or DEFAULT_ARCH['max_depth']
    rows = []
    for k, b in enumerate(items):
        depth = out['depth'][k, 0].float().cpu().numpy()
        rows.append(
            np.concatenate(
                [
                    denormalize(b['rgb'], dataset.mean, dataset.std),
                    colorize_labels(b['labels'].numpy(), classes.colors),
                    colorize_labels(pred[k], classes.colors),
                    visual.depth_on_scale(depth, max_depth),
                ],
                axis=1,
            )
        )
    grid = np.concatenate(rows, axis=0)
    return grid_key(grid, max_depth, classes)


def grid_key(grid: np.ndarray, max_depth: float, classes: ClassSet) -> np.ndarray:
    """``grid`` (H×W×3 uint8 RGB) with the depth colour bar (0..``max_depth`` m) and the class
    legend of ``classes`` under it, as wide as the grid."""
    w = grid.shape[1]
    key = [
        visual.colour_bar(min(max(w, 64), 640), max_depth),
        visual.legend(classes.names, classes.colors, w),
    ]
    return visual.stack([grid, *key], max(w, key[0].shape[1]))


def confusion_lines(confusion: list[list[int]], names: list[str]) -> list[str]:
    """The fused confusion matrix as text: one row per class with ground-truth pixels, the
    percentage of its pixels given each predicted class (rows sum to 100; void column left out),
    and its pixel count. ``confusion``: C×C counts, rows = ground truth (core.metrics)."""
    m = np.asarray(confusion, dtype=np.float64)
    cols = [i for i in range(1, len(names))]
    lines = ['fused labels: % of each class\'s pixels (rows) given each class (columns)']
    lines.append(f"{'':<10}" + ''.join(f'{names[j][:5]:>6}' for j in cols) + '  pixels')
    for i in cols:
        n = m[i].sum()
        if n == 0:
            continue
        lines.append(
            f'{names[i][:10]:<10}'
            + ''.join(f'{100 * m[i, j] / n:6.0f}' for j in cols)
            + f'  {int(n)}'
        )
    return lines


def source_line(report: dict[str, Any]) -> str:
    """The report's first line: which model ran on which data, and how (the cloud's depth, the
    RGB-D late fusion), so that two report.txt files say what differs."""
    data = ', '.join(map(str, report['data']))
    how = 'measured depth for the cloud' if report['measured_depth'] else 'predicted depth'
    if report.get('geometry_model'):
        how += (
            f"; RGB-D late fusion with {report['geometry_model']} (weight "
            f"{report['geometry_weight']:g}, heads {report['geometry_heads']})"
        )
    return f"model {report['model']} on {data} ({report['frames']} frames; {how})"


def format_table(report: dict[str, Any], names: list[str]) -> str:
    """Readable table: per-class IoU for 2D/3D/fused, then the summary metrics."""

    def f(v):
        return '   -  ' if v is None else f'{v:6.3f}'

    lines = [f"{'class':<14}{'IoU 2D':>8}{'IoU 3D':>8}{'fused':>8}"]
    for name in names:
        if name not in report['seg2d']['iou']:
            continue
        lines.append(
            f'{name:<14}'
            + ''.join(f'  {f(report[s]["iou"][name])}' for s in ('seg2d', 'seg3d', 'fused'))
        )
    lines.append(
        f"{'mIoU':<14}  {f(report['miou_2d'])}  {f(report['miou_3d'])}  {f(report['miou_fused'])}"
    )
    lines.append(
        f"{'mIoU GT cls':<14}"
        + ''.join(f'  {f(report[s].get("miou_gt"))}' for s in ('seg2d', 'seg3d', 'fused'))
    )
    lines.append(
        f"{'pixel acc':<14}  {f(report['pixel_acc_2d'])}  {f(report['pixel_acc_3d'])}  "
        f"{f(report['pixel_acc_fused'])}"
    )
    lines.append('')
    if report['fused'].get('confusion') is not None:
        lines += confusion_lines(report['fused']['confusion'], names)
        lines.append('')
    lines.append(
        'depth: '
        + '  '.join(
            f'{k} {f(report[k]).strip()}' for k in ('absrel', 'rmse', 'delta1', 'delta2', 'delta3')
        )
    )
    rng = report.get('depth') or {}
    if rng.get('p95_ratio') is not None:  # core.metrics.DepthMetrics: does it span the room?
        lines.append(
            f"depth range: 95th percentile {rng['p95_pred']:.2f} m predicted, "
            f"{rng['p95_gt']:.2f} m measured (median over frames; ratio {rng['p95_ratio']:.2f})"
        )
    fps = report.get('frames_per_s')
    wall = report.get('wall_frames_per_s')
    lines.append(
        f"frames: {report['frames']}  frames/s: {'-' if fps is None else f'{fps:.1f}'} forward, "
        f"{'-' if wall is None else f'{wall:.1f}'} with loading+metrics "
        f"(batch {report['batch_size']}, {report['device']})"
    )
    return '\n'.join(lines)
