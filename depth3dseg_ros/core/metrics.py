"""Evaluation metrics accumulated over a dataset: segmentation (mIoU, per-class IoU, pixel
accuracy) for 2D, 3D and fused labels (M7), and depth (AbsRel, RMSE, δ1..δ3, M8).

Accumulation is by sums over all pixels of all frames (a confusion matrix; depth error sums), never
a mean of per-frame values: a frame with few labelled pixels weighs little, and a class absent from
one frame does not make that frame's IoU undefined (test_core_metrics shows the two differ).

mIoU convention: IoU_c = TP / (TP + FP + FN) from the summed confusion matrix; mIoU is the mean
over classes c ≠ void whose union TP + FP + FN > 0, i.e. present in the ground truth or in the
prediction (a class only predicted counts with IoU 0; a class in neither is undefined and left
out). ``miou_gt`` is the mean over the classes present in the ground truth only: a small labelled
set (the real frames hold no books and no tv) does not charge a model a 0 for each absent class it
predicts somewhere. Pixels whose ground truth is void are not counted anywhere. Pixel accuracy
= Σ TP / counted pixels. Inputs may be numpy arrays or torch tensors (any device); counting is
bincount-based.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .fusion import all_source_labels, check_w3d, source_labels, source_probs

__all__ = [
    'ConfusionMatrix',
    'DepthMetrics',
    'SegDepthEvaluator',
    'fuse_probs',
    'miou_of',
    'predict_labels',
]

Array = Union[np.ndarray, torch.Tensor]


def _f(x: float) -> Optional[float]:
    """float, or None when undefined (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


def miou_of(mats: np.ndarray, void_id: Optional[int] = 0) -> np.ndarray:
    """mIoU of each confusion matrix in ``mats`` (..., C, C), by this module's convention: the mean
    IoU over non-void classes whose union TP + FP + FN > 0. Returns float64 (...); NaN where no
    class counts."""
    m = np.asarray(mats, np.float64)
    if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
        raise ValueError(f'confusion matrices must be (..., C, C), got shape {m.shape}')
    tp = np.diagonal(m, axis1=-2, axis2=-1)
    union = m.sum(-2) + m.sum(-1) - tp
    ok = union > 0
    if void_id is not None:
        ok[..., void_id] = False
    iou = np.where(ok, tp / np.maximum(union, 1e-300), 0.0)
    n = ok.sum(-1)
    with np.errstate(invalid='ignore', divide='ignore'):
        return np.where(n > 0, iou.sum(-1) / n, np.nan)


class ConfusionMatrix:
    """C×C confusion matrix (rows = ground-truth id, columns = predicted id), int64.

    Args: num_classes C; void_id (ground-truth pixels with this id are ignored; None = none
    ignored).
    """

    def __init__(self, num_classes: int, void_id: Optional[int] = 0):
        if int(num_classes) < 1:
            raise ValueError(f'num_classes={num_classes} must be >= 1')
        if void_id is not None and not 0 <= void_id < num_classes:
            raise ValueError(f'void_id={void_id} must be in [0, {num_classes})')
        self.num_classes = int(num_classes)
        self.void_id = void_id
        self.mat = np.zeros((self.num_classes, self.num_classes), np.int64)

    def reset(self) -> None:
        """Set every count to zero."""
        self.mat[:] = 0

    def update(self, pred: Array, gt: Array, valid: Optional[Array] = None) -> None:
        """Add one batch/frame: pred and gt integer label images of the same shape (any shape);
        ``valid`` (same shape, bool) restricts the counted pixels (e.g. pixels with a 3D point).
        Raises ValueError on shape mismatch or ids outside 0..C-1 among counted pixels."""
        if tuple(pred.shape) != tuple(gt.shape):
            raise ValueError(f'pred shape {tuple(pred.shape)} != gt shape {tuple(gt.shape)}')
        if valid is not None and tuple(valid.shape) != tuple(gt.shape):
            raise ValueError(f'valid shape {tuple(valid.shape)} != gt shape {tuple(gt.shape)}')
        c = self.num_classes
        if isinstance(pred, torch.Tensor) or isinstance(gt, torch.Tensor):
            p = torch.as_tensor(pred).reshape(-1).long()
            g = torch.as_tensor(gt, device=p.device).reshape(-1).long()
            keep = (
                torch.ones_like(g, dtype=torch.bool)
                if valid is None
                else torch.as_tensor(valid, device=p.device).reshape(-1).bool()
            )
            if self.void_id is not None:
                keep = keep & (g != self.void_id)
            p, g = p[keep], g[keep]
            if p.numel():
                lo, hi = int(torch.minimum(p.min(), g.min())), int(torch.maximum(p.max(), g.max()))
                self._check_range(lo, hi)
            counts = torch.bincount(g * c + p, minlength=c * c).cpu().numpy()
        else:
            p = np.asarray(pred).reshape(-1).astype(np.int64)
            g = np.asarray(gt).reshape(-1).astype(np.int64)
            keep = np.ones(g.shape, bool) if valid is None else np.asarray(valid, bool).reshape(-1)
            if self.void_id is not None:
                keep = keep & (g != self.void_id)
            p, g = p[keep], g[keep]
            if p.size:
                self._check_range(int(min(p.min(), g.min())), int(max(p.max(), g.max())))
            counts = np.bincount(g * c + p, minlength=c * c)
        self.mat += counts.reshape(c, c).astype(np.int64)

    def _check_range(self, lo: int, hi: int) -> None:
        if lo < 0 or hi >= self.num_classes:
            raise ValueError(
                f'label ids must be in 0..{self.num_classes - 1}, got min={lo} max={hi}'
            )

    def __iadd__(self, other: 'ConfusionMatrix') -> 'ConfusionMatrix':
        if other.num_classes != self.num_classes:
            raise ValueError(
                f'cannot add confusion matrices of {other.num_classes} and '
                f'{self.num_classes} classes'
            )
        self.mat += other.mat
        return self

    @property
    def total(self) -> int:
        """Number of counted pixels."""
        return int(self.mat.sum())

    def iou(self) -> np.ndarray:
        """Per-class IoU (float64, C); NaN where the union is 0 and for the void class."""
        tp = np.diag(self.mat).astype(np.float64)
        union = self.mat.sum(0) + self.mat.sum(1) - tp
        with np.errstate(invalid='ignore', divide='ignore'):
            out = np.where(union > 0, tp / np.maximum(union, 1), np.nan)
        if self.void_id is not None:
            out[self.void_id] = np.nan
        return out

    def miou(self) -> float:
        """Mean IoU over non-void classes present in GT or prediction; NaN if there are none."""
        return float(miou_of(self.mat, self.void_id))

    def miou_gt(self) -> float:
        """Mean IoU over the non-void classes with ground-truth pixels (a class the model predicts
        but the labels never contain does not count); NaN if there are none."""
        iou = self.iou()
        present = self.mat.sum(1) > 0
        if self.void_id is not None:
            present[self.void_id] = False
        return float(np.mean(iou[present])) if present.any() else float('nan')

    def pixel_accuracy(self) -> float:
        """Σ TP / counted pixels; NaN when nothing was counted."""
        n = self.total
        return float(np.trace(self.mat)) / n if n else float('nan')

    def summary(self, names: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """JSON-serialisable {'miou', 'miou_gt', 'pixel_acc', 'iou': {name: IoU | None}, 'pixels',
        'confusion'}: ``confusion`` is the C×C matrix as nested lists of pixel counts, rows the
        ground-truth id, columns the predicted id (void row and column included)."""
        names = list(names) if names is not None else [str(i) for i in range(self.num_classes)]
        if len(names) != self.num_classes:
            raise ValueError(f'names has {len(names)} entries, expected {self.num_classes}')
        iou = self.iou()
        return {
            'miou': _f(self.miou()),
            'pixel_acc': _f(self.pixel_accuracy()),
            'iou': {n: _f(v) for i, (n, v) in enumerate(zip(names, iou)) if i != self.void_id},
            'pixels': self.total,
            'miou_gt': _f(self.miou_gt()),
            'confusion': self.mat.tolist(),
        }


class DepthMetrics:
    """Depth metrics (Eigen et al. 2014) accumulated by sums over all valid pixels of all frames.

    Valid pixel: ground truth finite and > 0 (and <= max_depth when given). AbsRel = Σ|d−g|/g / n,
    RMSE = sqrt(Σ(d−g)² / n) metres, δk = fraction with max(d/g, g/d) < 1.25^k. Predictions are
    clamped to >= 1e-6 m for the ratios; a non-finite prediction at a valid pixel counts as an
    error of max_depth (or 10 m), so a broken model cannot look good by producing NaN.
    Range: each frame's 95th percentile of predicted and of true depth over its valid pixels
    (frames: the leading dimension of a B×1×H×W batch; an H×W array is one frame); the summary's
    ``p95_ratio`` is the median over frames of predicted / true p95 (1 = the prediction spans the
    room as deep as the sensor; a depth head that stops short of real rooms shows < 1).
    """

    def __init__(self, max_depth: Optional[float] = None):
        self.max_depth = max_depth
        self.reset()

    def reset(self) -> None:
        """Forget the accumulated sums (no frames counted)."""
        self.n = 0
        self.sum_absrel = 0.0
        self.sum_sq = 0.0
        self.n_delta = [0, 0, 0]
        self.p95: List[Tuple[float, float]] = []  # per frame (predicted, true)

    def update(self, pred: Array, gt: Array, valid: Optional[Array] = None) -> None:
        """Add one frame/batch: pred and gt depth in metres, same shape; optional extra bool
        mask."""
        if tuple(pred.shape) != tuple(gt.shape):
            raise ValueError(f'depth pred shape {tuple(pred.shape)} != gt shape {tuple(gt.shape)}')
        if isinstance(pred, torch.Tensor):
            pred = pred.detach().float().cpu().numpy()
        if isinstance(gt, torch.Tensor):
            gt = gt.detach().float().cpu().numpy()
        shape = np.shape(gt)
        d = np.asarray(pred, np.float64).reshape(-1)
        g = np.asarray(gt, np.float64).reshape(-1)
        keep = np.isfinite(g) & (g > 0)
        if self.max_depth is not None:
            keep = keep & (g <= self.max_depth)
        if valid is not None:
            v = (
                valid.detach().cpu().numpy()
                if isinstance(valid, torch.Tensor)
                else np.asarray(valid)
            )
            keep = keep & v.astype(bool).reshape(-1)
        d = np.where(np.isfinite(d), d, g + (self.max_depth or 10.0))
        frames = shape[0] if len(shape) >= 3 else 1
        for df, gf, kf in zip(np.split(d, frames), np.split(g, frames), np.split(keep, frames)):
            if kf.any():
                self.p95.append(
                    (float(np.percentile(df[kf], 95)), float(np.percentile(gf[kf], 95)))
                )
        d, g = d[keep], g[keep]
        if not d.size:
            return
        d = np.maximum(d, 1e-6)
        self.n += d.size
        self.sum_absrel += float(np.sum(np.abs(d - g) / g))
        self.sum_sq += float(np.sum((d - g) ** 2))
        ratio = np.maximum(d / g, g / d)
        for k in range(3):
            self.n_delta[k] += int(np.sum(ratio < 1.25 ** (k + 1)))

    def summary(self) -> Dict[str, Any]:
        """JSON-serialisable {'absrel', 'rmse', 'delta1', 'delta2', 'delta3', 'pixels', 'p95_pred',
        'p95_gt', 'p95_ratio'} (None if empty; p95_*: medians over frames, metres)."""
        if not self.n:
            return {
                'absrel': None,
                'rmse': None,
                'delta1': None,
                'delta2': None,
                'delta3': None,
                'pixels': 0,
                'p95_pred': None,
                'p95_gt': None,
                'p95_ratio': None,
            }
        p = np.asarray(self.p95, np.float64)
        return {
            'p95_pred': float(np.median(p[:, 0])),
            'p95_gt': float(np.median(p[:, 1])),
            'p95_ratio': float(np.median(p[:, 0] / p[:, 1])),
            'absrel': self.sum_absrel / self.n,
            'rmse': math.sqrt(self.sum_sq / self.n),
            'delta1': self.n_delta[0] / self.n,
            'delta2': self.n_delta[1] / self.n,
            'delta3': self.n_delta[2] / self.n,
            'pixels': self.n,
        }


def fuse_probs(
    logits2d: torch.Tensor,
    logits3d: torch.Tensor,
    valid: Optional[torch.Tensor] = None,
    void_id: Optional[int] = 0,
    w3d: float = 0.5,
) -> torch.Tensor:
    """Fused class distribution B×C×H×W = (1 − w3d)·S2D + w3d·S3D distributions (M7; w3d 0.5:
    the mean): core.fusion's ``source_probs(..., source='fused')``, the rule the Segmenter applies
    too (void probability 0 unless ``void_id=None``; the S2D distribution alone where ``valid``
    B×1×H×W is False)."""
    return source_probs(logits2d, logits3d, valid, 'fused', void_id, w3d=w3d)


def predict_labels(scores: torch.Tensor, void_id: Optional[int] = 0) -> torch.Tensor:
    """Label image B×H×W (long) = argmax over channels of logits or probabilities B×C×H×W, with the
    void channel excluded (ARCHITECTURE conventions: predictions are never void)."""
    if void_id is not None:
        scores = scores.clone()
        scores[:, void_id] = -float('inf')
    return scores.argmax(1)


class SegDepthEvaluator:
    """Accumulates 2D, 3D and fused segmentation metrics and depth metrics over a dataset.

    update(out, labels, depth_gt=None): ``out`` is the model's dict (seg2d, seg3d B×C×H×W logits,
    depth B×1×H×W m, valid B×1×H×W); labels B×H×W (void ignored; pass None for frames without
    labels); depth_gt B×1×H×W m (NaN/0 invalid) or None. 3D metrics count pixels with a valid 3D
    point only. ``fusion_w3d``: the weight of S3D in the fused labels (the model's arch key).
    ``per_frame``: also keep each frame's counts (`frames`), for frame bootstrap intervals
    (core.bootstrap).
    """

    def __init__(
        self,
        num_classes: int,
        void_id: int = 0,
        names: Optional[Sequence[str]] = None,
        max_depth: Optional[float] = None,
        fusion_w3d: float = 0.5,
        per_frame: bool = False,
    ):
        self.names = list(names) if names is not None else None
        self.num_classes = int(num_classes)
        self.cm = {k: ConfusionMatrix(num_classes, void_id) for k in ('2d', '3d', 'fused')}
        self.depth = DepthMetrics(max_depth)
        self.void_id = void_id
        self.fusion_w3d = check_w3d(fusion_w3d)
        self.per_frame = per_frame
        self._frames: Dict[str, list] = {
            k: [] for k in ('conf_2d', 'conf_3d', 'conf_fused', 'absrel_sum', 'depth_pixels')
        }

    @torch.no_grad()
    def update(
        self,
        out: Dict[str, torch.Tensor],
        labels: Optional[torch.Tensor],
        depth_gt: Optional[torch.Tensor] = None,
    ) -> None:
        """Add one batch (see the class docstring): 2D/3D/fused confusion matrices and depth
        sums."""
        pred: Dict[str, torch.Tensor] = {}
        valid_b1 = out.get('valid')  # B×1×H×W
        valid = None if valid_b1 is None else valid_b1[:, 0]
        if labels is not None:
            # labels by core.fusion, the rule of Segmenter.infer: the figures are the node's
            # labels'
            if 'seg3d' not in out:
                pred = {'2d': source_labels(out['seg2d'], None, None, '2d', self.void_id)}
            else:
                pred = all_source_labels(
                    out['seg2d'], out['seg3d'], valid_b1, self.void_id, w3d=self.fusion_w3d
                )
            for k, p in pred.items():
                self.cm[k].update(p, labels, valid if k == '3d' else None)
        if depth_gt is not None:
            self.depth.update(out['depth'], depth_gt)
        if self.per_frame:
            self._add_frames(out['depth'].shape[0], pred, labels, valid, out['depth'], depth_gt)

    def _add_frames(self, n, pred, labels, valid, depth, depth_gt) -> None:
        """Append each of the batch's ``n`` frames' confusion matrices and depth sums."""
        for b in range(n):
            for k in ('2d', '3d', 'fused'):
                cm = ConfusionMatrix(self.num_classes, self.void_id)
                if k in pred:
                    v = valid[b] if k == '3d' and valid is not None else None
                    cm.update(pred[k][b], labels[b], v)
                self._frames[f'conf_{k}'].append(cm.mat)
            dm = DepthMetrics(self.depth.max_depth)
            if depth_gt is not None:
                dm.update(depth[b], depth_gt[b])
            self._frames['absrel_sum'].append(dm.sum_absrel)
            self._frames['depth_pixels'].append(dm.n)

    def frames(self) -> Dict[str, np.ndarray]:
        """Per-frame counts in update order (``per_frame=True``): ``conf_2d``, ``conf_3d``,
        ``conf_fused`` F×C×C int64 (zeros for a frame without labels) and ``absrel_sum`` F float64
        (Σ|d−g|/g), ``depth_pixels`` F int64 (valid depth pixels). Raises RuntimeError when the
        evaluator was made without ``per_frame``."""
        if not self.per_frame:
            raise RuntimeError('SegDepthEvaluator(per_frame=False) keeps no per-frame counts')
        c = self.num_classes
        out = {
            k: np.stack(v) if v else np.zeros((0, c, c), np.int64)
            for k, v in self._frames.items()
            if k.startswith('conf_')
        }
        out['absrel_sum'] = np.asarray(self._frames['absrel_sum'], np.float64)
        out['depth_pixels'] = np.asarray(self._frames['depth_pixels'], np.int64)
        return out

    def summary(self) -> Dict[str, Any]:
        """{'seg2d': {...}, 'seg3d': {...}, 'fused': {...}, 'depth': {...}} plus the flat keys
        miou_2d, miou_3d, miou_fused, absrel, rmse, delta1 (JSON-serialisable)."""
        out: Dict[str, Any] = {
            f'seg{k}' if k != 'fused' else 'fused': cm.summary(self.names)
            for k, cm in self.cm.items()
        }
        out['depth'] = self.depth.summary()
        for k in ('2d', '3d', 'fused'):
            out[f'miou_{k}'] = out[f'seg{k}' if k != 'fused' else 'fused']['miou']
        for k in ('absrel', 'rmse', 'delta1'):
            out[k] = out['depth'][k]
        return out
