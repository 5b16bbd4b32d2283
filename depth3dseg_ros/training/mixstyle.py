"""MixStyle: mixing feature statistics between the frames of a batch while training.

Zhou, Yang, Qiao, Xiang, "Domain Generalization with MixStyle", ICLR 2021. The channel mean and
standard deviation of an early CNN feature map carry an image's *style* (colour, contrast,
illumination, texture statistics) more than its content. With probability ``p`` per forward pass,
each frame's statistics are replaced by a convex mix of its own and those of a random other frame
of the batch (``lam ~ Beta(alpha, alpha)`` per frame), so a synthetic frame's labels train under a
real frame's feature style and vice versa. Training only: in eval mode the hook is the identity,
so the model file, the node and every backend are unchanged. Applied by forward hooks on the 2D
encoder's stages (``core.encoder.Encoder.stages``; M1's encoder); config ``train.mixstyle``.
"""

from __future__ import annotations

from typing import Any, Dict, List

import torch
from torch import nn

from depth3dseg_ros.training.config_checks import options

DEFAULTS: Dict[str, Any] = {'p': 0.5, 'alpha': 0.1, 'stages': [1, 2, 3], 'eps': 1.0e-6}


def check_mixstyle(value: Any, n_stages: int = 7) -> Dict[str, Any] | None:
    """Validate config ``train.mixstyle``: null (off), or a mapping with any of ``p`` (0–1),
    ``alpha`` (> 0), ``stages`` (non-empty list of encoder stage indices 0..n_stages-1) and
    ``eps``; missing keys take ``DEFAULTS``. Returns the full mapping or None.
    Raises ValueError naming the key and the value."""
    out = options(value, 'train.mixstyle', DEFAULTS, '{p: 0.5, stages: [1, 2, 3]}')
    if out is None:
        return None
    p, alpha, eps, stages = out['p'], out['alpha'], out['eps'], out['stages']
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f'config train.mixstyle.p={p!r} must be a probability in [0, 1]')
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
        raise ValueError(f'config train.mixstyle.alpha={alpha!r} must be a number > 0')
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f'config train.mixstyle.eps={eps!r} must be a number > 0')
    if (
        not isinstance(stages, list)
        or not stages
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in stages)
        or not all(0 <= s < n_stages for s in stages)
        or len(set(stages)) != len(stages)
    ):
        raise ValueError(
            f'config train.mixstyle.stages={stages!r} must be a non-empty list of distinct '
            f'encoder stage indices 0..{n_stages - 1} (stage i ends at stride 2, 4, 8, 16, 16, '
            '32, 32)'
        )
    return {'p': float(p), 'alpha': float(alpha), 'stages': list(stages), 'eps': float(eps)}


def mix_statistics(
    x: torch.Tensor, lam: torch.Tensor, perm: torch.Tensor, eps: float = 1.0e-6
) -> torch.Tensor:
    """MixStyle's feature transform. x: B×C×H×W float; lam: B (mixing weights in [0, 1]);
    perm: B long (partner of each frame). Returns B×C×H×W: x normalised by its own per-channel
    mean μ and std σ (over H×W, detached) and re-scaled by λ·σ + (1−λ)·σ[perm], shifted by
    λ·μ + (1−λ)·μ[perm]. λ = 1 returns x (up to eps rounding)."""
    mu = x.mean(dim=(2, 3), keepdim=True).detach()
    sig = (x.var(dim=(2, 3), keepdim=True) + eps).sqrt().detach()
    lam = lam.to(x.dtype).view(-1, 1, 1, 1)
    mu_mix = lam * mu + (1 - lam) * mu[perm]
    sig_mix = lam * sig + (1 - lam) * sig[perm]
    return (x - mu) / sig * sig_mix + mu_mix


class MixStyleHook:
    """A forward hook for one module: while that module is in training mode, with probability
    ``p`` (one draw per forward, torch's global RNG, so runs are seeded by ``train.seed``) its
    output is passed through ``mix_statistics`` with λ ~ Beta(alpha, alpha) per frame and a random
    permutation of the batch as partners. Batches of one frame and eval mode pass unchanged."""

    def __init__(self, p: float, alpha: float, eps: float):
        self.p, self.eps = p, eps
        self.beta = torch.distributions.Beta(torch.tensor(alpha), torch.tensor(alpha))

    def __call__(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor:
        """The hook: output B×C×H×W of ``module`` -> the same shape, mixed or unchanged."""
        if not module.training or output.shape[0] < 2 or torch.rand(()) >= self.p:
            return output
        b = output.shape[0]
        lam = self.beta.sample((b,)).to(output.device)
        perm = torch.randperm(b).to(output.device)
        return mix_statistics(output, lam, perm, self.eps)


def attach_mixstyle(model: nn.Module, cfg: Dict[str, Any] | None) -> List[Any]:
    """Register MixStyle hooks on the 2D encoder stages ``cfg['stages']`` of a ``Depth3DSeg``
    (``model.net.encoder.stages``; the blocks of an efficientnet_lite0 encoder); cfg as returned
    by ``check_mixstyle`` (None: nothing). Returns the hook handles (``handle.remove()``
    detaches). Raises ValueError when the model has no such stage."""
    if cfg is None:
        return []
    enc = model.net.encoder  # mobilenet_v2: its 7 stages; efficientnet_lite0: its 16 blocks
    stages = enc.stages if hasattr(enc, 'stages') else enc.blocks
    handles = []
    for s in cfg['stages']:
        if not 0 <= s < len(stages):
            raise ValueError(
                f'config train.mixstyle.stages: stage {s} does not exist (the encoder has '
                f'{len(stages)} stages)'
            )
        hook = MixStyleHook(cfg['p'], cfg['alpha'], cfg['eps'])
        handles.append(stages[s].register_forward_hook(hook))
    return handles
