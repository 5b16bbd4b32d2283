"""core.code_stream (arch ``code_stream``): the geometry code of measured depth through its own
encoder, joined to the colour encoder at its taps. A colour model widened with a stream starts as
that model; an image without measured depth gets none of the stream, in a batch beside one that
has it; the geometry encoder's weights come from a model trained on the code (model.init +
model.code_encoder_init); bad archs and files raise naming the key."""

from __future__ import annotations

import copy

import pytest
import torch

from depth3dseg_ros.core.arch import check_arch
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.depth_code import depth_code
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import save_model
from depth3dseg_ros.training.checkpoint import load_init_model
from depth3dseg_ros.training.config import DEFAULTS, validate

TINY = dict(width=0.25, depth_mult=0.5, dec_ch=16, head_ch=8, p_channels=[8, 16], p_head=16)
K1 = torch.tensor([[[100.0, 0, 39.5], [0, 100.0, 29.5], [0, 0, 1]]])


def _colour(seed: int = 0, **arch) -> Depth3DSeg:
    torch.manual_seed(seed)
    m = Depth3DSeg(len(NYU13), **dict(TINY, **arch)).eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
    return m


def _joined(model: Depth3DSeg) -> Depth3DSeg:
    """The model with non-zero joins, as after training."""
    torch.manual_seed(3)
    with torch.no_grad():
        for j in model.net.code_stream.joins:
            j.weight.normal_(std=0.2)
    return model


def test_a_widened_stream_model_starts_as_the_colour_model_and_takes_the_geometry_encoder():
    colour, geometry = _colour(0), _colour(1)
    rgbd = colour.with_code_input(stream=True, geometry=geometry)
    assert rgbd.arch['code_input'] and rgbd.arch['code_stream']
    assert rgbd.net.encoder.stem[0].in_channels == 3  # the stem keeps its 3 channels
    geo = geometry.net.encoder.state_dict()
    for k, v in rgbd.net.code_stream.encoder.state_dict().items():
        assert torch.equal(v, geo[k]), k
    rgb, depth = torch.randn(1, 3, 60, 80), 1.0 + 3 * torch.rand(1, 1, 60, 80)
    with torch.no_grad():
        ref = colour(rgb, K1, depth)
        got = rgbd(rgb, K1, depth)
    for key in ('depth', 'seg2d', 'seg3d'):
        assert torch.allclose(got[key], ref[key], atol=1e-6), key


def test_the_stream_moves_images_with_depth_and_leaves_images_without_depth_alone():
    """In one batch: image 0 has measured depth, image 1 has none (all NaN, an all-zero code).
    Image 1's 2D output is the colour path's, as without any depth or with no code at all."""
    m = _joined(_colour(0).with_code_input(stream=True))
    torch.manual_seed(1)
    rgb = torch.randn(2, 3, 60, 80)
    K = K1.expand(2, 3, 3)
    depth = 1.0 + 3 * torch.rand(2, 1, 60, 80)
    depth[1] = float('nan')
    with torch.no_grad():
        plain = m.forward_2d(rgb, K)
        mixed = m.forward_2d(rgb, K, depth)
        zero = m.net(m.net.lowpass(rgb), torch.zeros(2, 3, 60, 80))
        direct = m.net(rgb, depth_code(depth, K))
    assert not torch.allclose(mixed['seg2d'][0], plain['seg2d'][0], atol=1e-4)
    assert torch.allclose(mixed['seg2d'][1], plain['seg2d'][1], atol=1e-6)
    assert torch.allclose(zero['seg2d'], plain['seg2d'], atol=1e-6)
    assert torch.allclose(direct['seg2d'], mixed['seg2d'], atol=1e-6)
    with pytest.raises(ValueError, match='code shape'):
        m.net(rgb, torch.zeros(2, 3, 30, 40))


def test_the_stream_trains_from_zero_joins():
    """Zero joins still get a gradient (the geometry features are not zero), so training starts."""
    m = _colour(0).with_code_input(stream=True).train()
    rgb, depth = torch.randn(2, 3, 60, 80), 1.0 + 3 * torch.rand(2, 1, 60, 80)
    out = m.forward_2d(rgb, K1.expand(2, 3, 3), depth)
    out['seg2d'].square().mean().backward()
    assert all(j.weight.grad.abs().sum() > 0 for j in m.net.code_stream.joins)


def test_bad_archs_and_geometry_models_raise_naming_the_key():
    with pytest.raises(ValueError, match="arch\\['code_stream'\\]=true needs"):
        check_arch({'code_stream': True})
    with pytest.raises(ValueError, match="arch\\['code_stream'\\]='yes'"):
        check_arch({'code_input': True, 'code_stream': 'yes'})
    colour = _colour(0)
    with pytest.raises(ValueError, match='needs stream=True'):
        colour.with_code_input(geometry=_colour(1))
    with pytest.raises(ValueError, match="'width': 0.5"):
        colour.with_code_input(stream=True, geometry=_colour(1, width=0.5))
    with pytest.raises(ValueError, match='geometry model has arch code_input=true'):
        colour.with_code_input(stream=True, geometry=_colour(1).with_code_input())
    with pytest.raises(ValueError, match='shape of the weights'):
        colour.with_code_input().with_arch(code_stream=True)


def _save(path, model, mean=None):
    meta = {'classes': NYU13, 'input_size': [80, 60]}
    if mean is not None:
        meta['mean'] = mean
    save_model(path, model, meta)
    return str(path)


def test_model_init_widens_with_a_stream_from_the_code_encoder_file(tmp_path):
    colour, geometry = _colour(0), _colour(1)
    cfg = {
        'model': {
            'init': _save(tmp_path / 'colour.pt', colour),
            'code_encoder_init': _save(tmp_path / 'geo.pt', geometry),
            'arch': {'code_input': True, 'code_stream': True},
        }
    }
    model = load_init_model(cfg, NYU13)
    assert cfg['model']['arch']['code_stream'] is True
    assert torch.equal(
        model.net.code_stream.encoder.stem[0].weight, geometry.net.encoder.stem[0].weight
    )
    built = Depth3DSeg(len(NYU13), **cfg['model']['arch'])
    built.load_state_dict(model.state_dict())  # the run's network takes the widened weights
    geo_file = cfg['model']['code_encoder_init']
    cfg['model']['code_encoder_init'] = _save(tmp_path / 'g2.pt', geometry, mean=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match='code_encoder_init=.*mean'):
        load_init_model(cfg, NYU13)
    # an init that already has the RGB-D input would ignore code_encoder_init: refused
    cfg = {
        'model': {
            'init': _save(tmp_path / 'stream.pt', model),
            'code_encoder_init': geo_file,
            'arch': {'code_input': True, 'code_stream': True},
        }
    }
    with pytest.raises(ValueError, match='already has arch code_input=true'):
        load_init_model(cfg, NYU13)


def test_config_code_encoder_init_needs_init_and_a_stream_and_measured_validation_a_bool():
    cfg = copy.deepcopy(DEFAULTS)
    cfg['model']['code_encoder_init'] = 'geo.pt'
    with pytest.raises(ValueError, match='model.code_encoder_init=.*code_stream'):
        validate(cfg)
    cfg = copy.deepcopy(DEFAULTS)
    cfg['early_stop']['measured_depth'] = 1
    with pytest.raises(ValueError, match='early_stop.measured_depth=1'):
        validate(cfg)


def test_a_stream_fine_tune_from_the_cli_trains_the_joins_only_when_batches_see_depth(
    real_dir, tmp_path, capsys
):
    """depth3dseg-train over a colour model.init with arch code_input + code_stream and
    model.code_encoder_init: it says where the geometry encoder came from; with
    loss.measured_depth_for_3d=0 it warns that the code never trains (the joins stay 0); with
    depth on every batch (and validation with it, early_stop.measured_depth) the joins move."""
    from depth3dseg_ros.core.modelfile import load_model
    from depth3dseg_ros.training import train
    from trainutil import make_dataset_dir, tiny_train_args

    ds = make_dataset_dir(real_dir, tmp_path / 'd', size=(80, 60))
    base = tmp_path / 'base'
    assert train.main(tiny_train_args(ds, base, epochs=1)) == 0
    capsys.readouterr()
    stream = [
        '--set', f'model.init={base / "model.pt"}',
        '--set', f'model.code_encoder_init={base / "model.pt"}',
        '--set', 'model.arch.code_input=true', '--set', 'model.arch.code_stream=true',
    ]  # fmt: skip
    joins = 'net.code_stream.joins.'
    for p, moves in ((0.0, False), (1.0, True)):
        out = tmp_path / f'ft{p}'
        extra = [*stream, '--set', f'loss.measured_depth_for_3d={p}']
        extra += ['--set', f'early_stop.measured_depth={str(moves).lower()}']
        assert train.main(tiny_train_args(ds, out, *extra, epochs=1)) == 0
        text = capsys.readouterr()
        assert f'geometry encoder from {base / "model.pt"}' in text.out
        assert ('never sees the geometry code' in text.err) is not moves
        sd = load_model(out / 'model.pt')[0].state_dict()
        moved = any(sd[k].abs().sum() > 0 for k in sd if k.startswith(joins))
        assert moved is moves
