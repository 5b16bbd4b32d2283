"""A separate encoder for the geometry code of measured depth, joined to the colour encoder at each
of its taps (arch ``code_stream``; RGB-D input, issue 12).

Mid-level fusion as in FuseNet (Hazirbas et al., ACCV 2016): the 3-channel geometry code of the
measured depth (core.depth_code) runs through its own MobileNetV2-style encoder, the same size as
the colour one, and after each stage whose output feeds the decoder (strides 2, 4, 8, 16, 32) its
features are added to the colour encoder's through a 1×1 convolution, so the colour stages after
it and the decoder see both. The joins start at zero weight (as ControlNet's zero convolutions,
Zhang et al., ICCV 2023), so a colour model widened with a stream starts as exactly that model,
and the geometry encoder can start from a model trained on the code alone
(`core.model.Depth3DSeg.with_code_input`, docs/levers.md "Geometry as the 2D network's input").

Without a code, or with an all-zero code (no measured depth anywhere in the frame), the stream adds
nothing: the output is that of the colour path alone, in torch and in the exported ONNX graph.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from torch import nn

__all__ = ['CODE_MEAN', 'CODE_STD', 'CodeStream']

#: The code is normalised as the images of the geometry models were (scripts/geometry_input.py
#: wrote the code as an 8-bit RGB image, which training normalised with the ImageNet mean/std of
#: every shipped model file): per channel (code - mean) / std.
CODE_MEAN = (0.485, 0.456, 0.406)
CODE_STD = (0.229, 0.224, 0.225)


class CodeStream(nn.Module):
    """The geometry encoder and its joins (module docstring).

    Args:
        encoder: a fresh `core.encoder.Encoder` with 3 input channels, the same width and depth
            multiplier as the colour encoder (its stages line up with the colour ones).
        taps: the stage indices whose outputs feed the decoder (`core.encoder._TAPS`).
    ``encode(colour_encoder, x, code)`` runs both encoders stage by stage.
    """

    def __init__(self, encoder: nn.Module, taps: Sequence[int]):
        super().__init__()
        self.encoder = encoder
        self.taps = tuple(int(t) for t in taps)
        self.joins = nn.ModuleList(
            nn.Conv2d(encoder.channels[t], encoder.channels[t], 1, bias=False) for t in self.taps
        )
        for j in self.joins:
            nn.init.zeros_(j.weight)

    def encode(
        self, colour: nn.Module, x: torch.Tensor, code: Optional[torch.Tensor]
    ) -> List[torch.Tensor]:
        """The colour encoder's 5 tapped feature maps (``colour.forward``'s list,
        B×C_s×⌈H/s⌉×⌈W/s⌉, s = 2 … 32) with the geometry stream joined in.

        colour: the colour `Encoder` (its stem and stages); x B×3×H×W float, its normalised
        (and low-passed) input; code B×3×H×W float in [0, 1] (core.depth_code) or None. Each image
        whose code is all zero gets none of the stream (its features are the colour encoder's);
        ``code=None`` skips the stream's arithmetic altogether. Shapes are the caller's to check
        (core.model.DepthSegNet.forward).
        """
        if code is None:
            return colour(x)
        mean = torch.tensor(CODE_MEAN, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(CODE_STD, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        code = code.to(x)
        # 1 for an image with any measured depth, 0 for none (its code is all zero)
        gate = (code.flatten(1).amax(dim=1) > 0).to(x.dtype).view(-1, 1, 1, 1)
        c, g = colour.stem(x), self.encoder.stem((code - mean) / std)
        feats = []
        joins = iter(self.joins)
        for i, (stage_c, stage_g) in enumerate(zip(colour.stages, self.encoder.stages)):
            c, g = stage_c(c), stage_g(g)
            if i in self.taps:
                c = c + gate * next(joins)(g)
                feats.append(c)
        return feats
