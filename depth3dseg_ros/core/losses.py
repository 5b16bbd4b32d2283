"""M4 consistency variants, M5 supervised losses, and their weighting (fixed or learned
uncertainty).

Every term returns a `Term(value, count)`: ``value`` a scalar tensor (a mean over its valid
elements), ``count`` the number of elements that entered it (pixels/points; a Python int). A term
with no valid element (no labels in the batch, no valid depth, no valid 3D point) is ``value = 0``
— still attached to the graph, so ``backward()`` works and gives zero gradients, never NaN — and
``count = 0`` ("absent").

Conventions: logits B×C×H×W (channel i = class id i, void channel included); label images B×H×W
long with the void id as ignore index; depth B×1×H×W metres; masks bool. Per-sample masks
``has_labels`` / ``has_depth`` (B bool) switch a sample's supervised term off (M5: frames without a
label still train on the terms they have). Averages are over all valid elements of the batch
(pixel-weighted), except the scale-invariant log loss, which is per image (Eigen et al. 2014) and
then averaged over images.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    'Term',
    'seg_ce',
    'depth_loss',
    'consistency',
    'pixel_consistency',
    'weighted_total',
    'UncertaintyWeighting',
    'DEPTH_LOSSES',
    'CONSISTENCY_KINDS',
]

DEPTH_LOSSES = ('silog', 'l1', 'berhu')
CONSISTENCY_KINDS = ('sym_kl', 'kl', 'js', 'mse')


class Term(NamedTuple):
    """One loss term: value (0-d tensor, mean over valid elements) and count (int; 0 = absent)."""

    value: torch.Tensor
    count: int

    @property
    def present(self) -> bool:
        """True when the term has at least one valid element (count > 0)."""
        return self.count > 0


def _zero(like: torch.Tensor) -> torch.Tensor:
    """A 0-d zero connected to `like`'s graph (gradient 0, never NaN)."""
    return (like * 0).sum()


def _sample_mask(
    mask: Optional[torch.Tensor], b: int, device, name: str
) -> Optional[torch.Tensor]:
    if mask is None:
        return None
    mask = torch.as_tensor(mask, device=device).reshape(-1).bool()
    if mask.numel() != b:
        raise ValueError(f'{name} must have one entry per sample (B={b}), got {mask.numel()}')
    return mask


def frames_mask(mask: torch.Tensor, frames: Optional[torch.Tensor], name: str) -> torch.Tensor:
    """A B×1×H×W bool ``mask`` restricted to the frames whose flag in ``frames`` (B bool, or None
    = every frame) is True. Raises ValueError (naming ``name``) for a flag count other than B."""
    hd = _sample_mask(frames, mask.shape[0], mask.device, name)
    return mask if hd is None else mask & hd.view(-1, 1, 1, 1)


# ----------------------------------------------------------------------------------------------
# M5 segmentation cross-entropy (2D and 3D)
# ----------------------------------------------------------------------------------------------


def seg_ce(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = 0,
    has_labels: Optional[torch.Tensor] = None,
    point_valid: Optional[torch.Tensor] = None,
    class_weights: Optional[torch.Tensor] = None,
) -> Term:
    """M5 cross-entropy of B×C×H×W logits against a B×H×W label image, mean over counted pixels.

    Counted: label != ignore_index (void), sample's ``has_labels`` True, and (3D loss)
    ``point_valid`` B×1×H×W True (a pixel with a valid 3D point). Used for S2D with the 2D labels
    and for S3D with the 3D labels (by default the pixel's label: each point takes the label of its
    pixel). With ``class_weights`` (C floats >= 0, e.g. median-frequency balancing, Eigen & Fergus
    2015) each counted pixel's term is weighted by its label's weight and the sum is divided by
    the sum of those weights (a weighted mean; equal weights give the plain mean). Raises
    ValueError on shape mismatch, a label outside 0..C-1 (other than the ignore id) or
    ``class_weights`` not of length C.
    """
    if logits.dim() != 4:
        raise ValueError(f'logits must be B×C×H×W, got {tuple(logits.shape)}')
    b, c, h, w = logits.shape
    if tuple(labels.shape) != (b, h, w):
        raise ValueError(f'labels shape {tuple(labels.shape)} != (B, H, W)={(b, h, w)}')
    labels = labels.long()
    keep = labels != ignore_index
    hl = _sample_mask(has_labels, b, logits.device, 'has_labels')
    if hl is not None:
        keep = keep & hl.view(b, 1, 1)
    if point_valid is not None:
        keep = keep & point_valid.reshape(b, h, w).bool()
    n = int(keep.sum())
    if n == 0:
        return Term(_zero(logits), 0)
    lab = labels[keep]
    if int(lab.min()) < 0 or int(lab.max()) >= c:
        raise ValueError(
            f'label ids must be in 0..{c - 1}, got min={int(lab.min())} max={int(lab.max())}'
        )
    target = torch.where(keep, labels, torch.full_like(labels, -100))
    if class_weights is None:
        loss = F.cross_entropy(logits, target, ignore_index=-100, reduction='sum') / n
        return Term(loss, n)
    wt = torch.as_tensor(class_weights, dtype=logits.dtype, device=logits.device).reshape(-1)
    if wt.numel() != c:
        raise ValueError(f'class_weights has {wt.numel()} entries, expected C={c}')
    total_w = wt[lab].sum()
    if not float(total_w) > 0:
        return Term(_zero(logits), 0)
    loss = F.cross_entropy(logits, target, weight=wt, ignore_index=-100, reduction='sum')
    return Term(loss / total_w, n)


# ----------------------------------------------------------------------------------------------
# M5 depth losses
# ----------------------------------------------------------------------------------------------
def depth_loss(
    pred: torch.Tensor,
    target: torch.Tensor,
    kind: str = 'silog',
    has_depth: Optional[torch.Tensor] = None,
    silog_lambda: float = 0.5,
    berhu_c: float = 0.2,
    eps: float = 1e-6,
) -> Term:
    """M5 depth loss of predicted B×1×H×W depth (m) against the depth label (m) on valid label
    pixels.

    Valid: target finite and > 0 and the sample's ``has_depth`` True. ``kind``:
      - ``silog`` (default): scale-invariant log loss, Eigen, Puhrsch, Fergus, NeurIPS 2014, eq. 4,
        per image: mean(g²) − λ·mean(g)² with g = log pred − log target, averaged over images with
        depth; λ = ``silog_lambda`` (0.5, the paper's training value; 0 = plain log-L2, 1 = fully
        scale-invariant). Why default: errors in log space are relative errors (Kinect/TUM depth
        noise grows with range, and the reported metrics AbsRel/δ are relative); the variance part
        learns scene structure when the absolute scale is ambiguous from one image, while λ = 0.5
        keeps half of the global-scale error so the output stays metric, which M2's metric cloud
        requires.
      - ``l1``: mean |pred − target| (metres).
      - ``berhu``: reverse Huber (Laina et al., 3DV 2016): |r| if |r| <= c else (r² + c²)/(2c),
        with c = ``berhu_c`` · max |r| over the batch's valid pixels (detached).
    pred is clamped to >= eps before the log (silog). Raises ValueError on an unknown kind or
    shapes.
    """
    if kind not in DEPTH_LOSSES:
        raise ValueError(f'depth_loss kind={kind!r} not in {DEPTH_LOSSES}')
    if pred.shape != target.shape or pred.dim() != 4 or pred.shape[1] != 1:
        raise ValueError(
            f'depth pred {tuple(pred.shape)} and target {tuple(target.shape)} must both be B×1×H×W'
        )
    valid = frames_mask(torch.isfinite(target) & (target > 0), has_depth, 'has_depth')
    n = int(valid.sum())
    if n == 0:
        return Term(_zero(pred), 0)
    tgt = torch.where(valid, target, torch.ones_like(target))  # finite filler, masked out below
    if kind == 'silog':
        g = torch.where(
            valid, torch.log(pred.clamp_min(eps)) - torch.log(tgt), torch.zeros_like(pred)
        )
        cnt = valid.flatten(1).sum(1)
        has = cnt > 0
        cnt_f = cnt.clamp_min(1).to(pred.dtype)
        mean_g = g.flatten(1).sum(1) / cnt_f
        mean_g2 = (g * g).flatten(1).sum(1) / cnt_f
        per_image = mean_g2 - silog_lambda * mean_g * mean_g
        loss = per_image[has].mean()
        return Term(loss, n)
    r = torch.where(valid, pred - tgt, torch.zeros_like(pred))
    a = r.abs()
    if kind == 'l1':
        return Term(a.sum() / n, n)
    c = (berhu_c * a.max()).detach().clamp_min(eps)
    per_px = torch.where(a <= c, a, (r * r + c * c) / (2 * c))
    return Term(torch.where(valid, per_px, torch.zeros_like(per_px)).sum() / n, n)


# ----------------------------------------------------------------------------------------------
# M4 consistency between S2D and S3D
# ----------------------------------------------------------------------------------------------
def pixel_consistency(
    logits2d: torch.Tensor, logits3d: torch.Tensor, kind: str = 'sym_kl'
) -> torch.Tensor:
    """Per-pixel divergence B×H×W between the class distributions p = softmax(S2D), q =
    softmax(S3D).

    M4 variants (natural log):
      - ``sym_kl`` (default): ½[KL(p‖q) + KL(q‖p)] = ½ Σ_c (p_c − q_c)(log p_c − log q_c);
        gradients reach both heads. Symmetric; each summand is >= 0, so it is exactly 0 iff p = q.
      - ``kl``: KL(sg(p)‖q) with the 2D distribution as a detached target (xMUDA, Jaramillo et al.,
        CVPR 2020): only the 3D branch (and, through the cloud, the depth head) is pulled. Not
        symmetric.
      - ``js``: Jensen–Shannon ½KL(p‖m) + ½KL(q‖m), m = (p+q)/2, computed from the log-ratio
        δ = log q − log p as −½Σ p·log1p(expm1(δ)/2) − ½Σ q·log1p(expm1(−δ)/2) so that p = q gives
        exactly 0. Symmetric, bounded by log 2.
      - ``mse``: Σ_c (p_c − q_c)² (squared Euclidean distance of the probability vectors).
        Symmetric.
    Raises ValueError for an unknown kind or mismatched shapes.
    """
    if kind not in CONSISTENCY_KINDS:
        raise ValueError(f'consistency kind={kind!r} not in {CONSISTENCY_KINDS}')
    if logits2d.shape != logits3d.shape or logits2d.dim() != 4:
        raise ValueError(
            f'seg2d {tuple(logits2d.shape)} and seg3d {tuple(logits3d.shape)} must both be B×C×H×W'
        )
    lp = F.log_softmax(logits2d, dim=1)
    lq = F.log_softmax(logits3d, dim=1)
    if kind == 'kl':
        lp = lp.detach()
        return (lp.exp() * (lp - lq)).sum(1)
    p, q = lp.exp(), lq.exp()
    if kind == 'sym_kl':
        return 0.5 * ((p - q) * (lp - lq)).sum(1)
    if kind == 'mse':
        return ((p - q) ** 2).sum(1)
    d = (lq - lp).clamp(-80.0, 80.0)  # beyond ±80 the weight p (or q) is < e^-80: negligible
    return -0.5 * (p * torch.log1p(torch.expm1(d) / 2)).sum(1) - 0.5 * (
        q * torch.log1p(torch.expm1(-d) / 2)
    ).sum(1)


def consistency(
    logits2d: torch.Tensor,
    logits3d: torch.Tensor,
    point_valid: torch.Tensor,
    kind: str = 'sym_kl',
    sample_mask: Optional[torch.Tensor] = None,
) -> Term:
    """M4: mean of `pixel_consistency` over pixels with a valid 3D point (point_valid B×1×H×W
    bool).

    Needs no labels, so it applies to every frame (``sample_mask`` B bool can restrict it).
    """
    div = pixel_consistency(logits2d, logits3d, kind)
    b, h, w = div.shape
    keep = point_valid.reshape(b, h, w).bool()
    sm = _sample_mask(sample_mask, b, div.device, 'sample_mask')
    if sm is not None:
        keep = keep & sm.view(b, 1, 1)
    n = int(keep.sum())
    if n == 0:
        return Term(_zero(div), 0)
    return Term(torch.where(keep, div, torch.zeros_like(div)).sum() / n, n)


# ----------------------------------------------------------------------------------------------
# weighting
# ----------------------------------------------------------------------------------------------
class UncertaintyWeighting(nn.Module):
    """Learned homoscedastic-uncertainty weighting (Kendall, Gal, Cipolla, CVPR 2018).

    Holds one log-variance s_i = log σ_i² per term (nn.Parameter, initialised to 0 = weight 1; add
    this module's parameters to the optimiser). Kendall's eq. 7 in log-variance form:
      regression terms (``regression``, default {'depth'}): ½·exp(−s)·L + ½·s
      classification terms (cross-entropy, consistency):    exp(−s)·L + ½·s
    Absent terms (count 0) add nothing, not even their s regulariser, so s does not drift on
    batches without that label.
    """

    def __init__(self, names: Iterable[str], regression: Iterable[str] = ('depth',)):
        super().__init__()
        self.names = list(names)
        if not self.names or len(set(self.names)) != len(self.names):
            raise ValueError(
                f'UncertaintyWeighting names={self.names} must be non-empty and unique'
            )
        self.regression = set(regression)
        self.log_vars = nn.Parameter(torch.zeros(len(self.names)))

    def forward(
        self, terms: Dict[str, Term], weights: Optional[Dict[str, float]] = None
    ) -> torch.Tensor:
        """Total over the present terms; ``weights`` (fixed, optional) multiply each L first."""
        total = None
        for i, name in enumerate(self.names):
            t = terms.get(name)
            if t is None or not t.present:
                continue
            w = 1.0 if weights is None else float(weights.get(name, 1.0))
            s = self.log_vars[i]
            k = 0.5 if name in self.regression else 1.0
            part = k * torch.exp(-s) * (w * t.value) + 0.5 * s
            total = part if total is None else total + part
        if total is None:
            return _zero(self.log_vars)
        return total

    def weights(self) -> Dict[str, float]:
        """Current effective weights exp(−s_i) (× ½ for regression terms), for logging."""
        return {
            n: float(math.exp(-float(s)) * (0.5 if n in self.regression else 1.0))
            for n, s in zip(self.names, self.log_vars.detach().cpu())
        }


def weighted_total(terms: Dict[str, Term], weights: Dict[str, float]) -> torch.Tensor:
    """Fixed-weight total Σ w_i · L_i over present terms (absent ones are 0, so adding them is
    exact)."""
    total = None
    for name, t in terms.items():
        w = float(weights.get(name, 0.0))
        if w == 0.0 or not t.present:
            continue
        part = w * t.value
        total = part if total is None else total + part
    if total is None:
        ref = next(iter(terms.values())).value if terms else torch.zeros(())
        return _zero(ref)
    return total
