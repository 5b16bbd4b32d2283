"""M7 label fusion: the per-pixel class distribution of S2D, S3D or both, and labels + confidence
from it.

One rule, used by training evaluation (core.metrics), the offline evaluator and the node's
Segmenter:

- each head's distribution is a softmax over the classes with the void channel's logit set to −inf,
  so void has probability 0 and is never predicted (ARCHITECTURE conventions);
- ``'2d'``: the S2D distribution; ``'3d'``: the S3D distribution; ``'fused'``: (1 − w)·S2D + w·S3D
  with w the model's arch ``fusion_w3d`` (0.5, the mean, unless a model file says otherwise; the
  shipped model: 0.25, docs/levers.md "The fusion weight of the 3D branch");
- where a pixel has no valid 3D point (``valid`` False) the S3D scores are meaningless, so ``'3d'``
  and ``'fused'`` fall back to the S2D distribution there;
- labels = the most probable class (lowest class id on an exact tie), confidence = its probability.

All tensors are B×C×H×W float logits (any dtype, any memory format) and B×1×H×W bool masks; outputs
are float32 and contiguous. Channel operations run on the contiguous NCHW layout: on this CPU a
channel softmax is ~6x and argmax ~4x slower on channels-last tensors than on NCHW (bench in
docs/model.md).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch

from .keys import float_keys, key_bits

__all__ = [
    'LABEL_SOURCES',
    'class_probs',
    'source_probs',
    'labels_confidence',
    'source_labels',
    'all_source_labels',
    'check_w3d',
]

LABEL_SOURCES = ('2d', '3d', 'fused')


def class_probs(
    logits: torch.Tensor, void_id: Optional[int] = 0, inplace: bool = False
) -> torch.Tensor:
    """Softmax over channels with the void channel excluded (probability 0): B×C×H×W -> B×C×H×W
    float32.

    ``void_id=None`` keeps every channel. ``inplace=True`` lets a contiguous float32 input be
    overwritten (the Segmenter's fresh per-frame model output). Source: METHOD M7.
    """
    x = logits.float().contiguous()
    if x is logits and not inplace:
        x = x.clone()
    if void_id is not None:
        x[:, void_id] = -float('inf')
    return torch.softmax(x, 1)


def source_probs(
    logits2d: torch.Tensor,
    logits3d: Optional[torch.Tensor] = None,
    valid: Optional[torch.Tensor] = None,
    source: str = 'fused',
    void_id: Optional[int] = 0,
    inplace: bool = False,
    w3d: float = 0.5,
) -> torch.Tensor:
    """The class distribution B×C×H×W (float32) of ``source`` ('2d', '3d' or 'fused'; module
    docstring).

    Args: logits2d, logits3d B×C×H×W (logits3d None -> '2d' whatever the source); valid B×1×H×W
    bool, True where the pixel has a valid 3D point (None: every pixel); inplace: see class_probs;
    w3d: the weight of S3D in 'fused' (arch ``fusion_w3d``).
    Raises ValueError for an unknown source, mismatched shapes or w3d outside (0, 1].
    """
    if source not in LABEL_SOURCES:
        raise ValueError(f'label source {source!r} must be one of {LABEL_SOURCES}')
    check_w3d(w3d)
    p2 = class_probs(logits2d, void_id, inplace)
    if source == '2d' or logits3d is None:
        return p2
    p3 = class_probs(logits3d, void_id, inplace)
    return _combine(p2, p3, valid, source, overwrite_p3=True, w3d=w3d)


def check_w3d(w3d: float) -> float:
    """``w3d`` as a float; ValueError naming it unless 0 < w3d <= 1 (arch ``fusion_w3d``)."""
    if isinstance(w3d, bool) or not 0.0 < float(w3d) <= 1.0:
        raise ValueError(f'fusion weight w3d={w3d!r} must be in (0, 1] (arch fusion_w3d)')
    return float(w3d)


def _combine(
    p2: torch.Tensor,
    p3: torch.Tensor,
    valid: Optional[torch.Tensor],
    source: str,
    overwrite_p3: bool,
    w3d: float = 0.5,
) -> torch.Tensor:
    """The '3d' or 'fused' distribution from the S2D and S3D distributions (module docstring);
    ``overwrite_p3``: p3 may be reused as the output buffer; ``w3d`` already checked by the public
    callers (check_w3d). ValueError when the shapes differ."""
    if p3.shape != p2.shape:
        raise ValueError(f'logits3d shape {tuple(p3.shape)} != logits2d shape {tuple(p2.shape)}')
    p = p3
    if source == 'fused' and w3d == 0.5:  # the mean, as before the weight existed
        p = p3.add_(p2) if overwrite_p3 else p3 + p2
        p.mul_(0.5)
    elif source == 'fused':
        p = (p3.mul_(w3d) if overwrite_p3 else p3 * w3d).add_(p2, alpha=1.0 - w3d)
    if valid is not None and not bool(valid.all()):
        p = torch.where(valid.bool(), p, p2)
    return p


def labels_confidence(
    probs: torch.Tensor, inplace: bool = False
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Most probable class and its probability: B×C×H×W probabilities -> (labels B×H×W long, class
    ids; confidence B×H×W float32). An exact tie goes to the lowest class id (as torch.argmax);
    classes within 2^-(23-key_bits(C)) relative of each other tie (float_keys). Void (probability
    0) is never chosen when class_probs made the distribution. ``inplace=True`` lets a contiguous
    float32 ``probs`` be overwritten (saves a copy). Source: METHOD M7.
    """
    p = probs.float().contiguous()
    conf = p.amax(1)
    c = p.shape[1]
    kmax = float_keys(p if inplace or p is not probs else p.clone(), 1, descending=True).amax(1)
    labels = (c - 1) - (kmax & ((1 << key_bits(c)) - 1)).long()
    return labels, conf


def source_labels(
    logits2d: torch.Tensor,
    logits3d: Optional[torch.Tensor] = None,
    valid: Optional[torch.Tensor] = None,
    source: str = 'fused',
    void_id: Optional[int] = 0,
    w3d: float = 0.5,
) -> torch.Tensor:
    """Label image B×H×W (long class ids) of ``source``: labels_confidence(source_probs(...)),
    exactly what Segmenter.infer returns for the same model outputs (evaluation uses this, so the
    figures it reports are those of the labels the node publishes). Arguments as source_probs."""
    return labels_confidence(
        source_probs(logits2d, logits3d, valid, source, void_id, w3d=w3d), inplace=True
    )[0]


def all_source_labels(
    logits2d: torch.Tensor,
    logits3d: torch.Tensor,
    valid: Optional[torch.Tensor] = None,
    void_id: Optional[int] = 0,
    w3d: float = 0.5,
) -> Dict[str, torch.Tensor]:
    """``{source: source_labels(logits2d, logits3d, valid, source, void_id, w3d)}`` for every
    label source, with each head's softmax computed once (evaluation scores all three per
    batch)."""
    check_w3d(w3d)
    p2, p3 = class_probs(logits2d, void_id), class_probs(logits3d, void_id)
    return {
        '2d': labels_confidence(p2)[0],
        '3d': labels_confidence(_combine(p2, p3, valid, '3d', overwrite_p3=False))[0],
        'fused': labels_confidence(
            _combine(p2, p3, valid, 'fused', overwrite_p3=False, w3d=w3d), inplace=True
        )[0],
    }
