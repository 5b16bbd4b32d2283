"""core.depth_code (the geometry code of measured depth) and the RGB-D input of the 2D network
(arch ``code_input``, core.model): planes of known orientation give known codes, holes and the
border are 0, the torch code equals the offline lever script's (scripts/geometry_input.py), and a
code_input model without depth is the same model with an all-zero code."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.arch import check_arch
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.depth_code import FAR_M, NEAR_M, depth_code, smooth_px_for
from depth3dseg_ros.core.model import Depth3DSeg

H, W = 120, 160
KN = np.array([[200.0, 0, 79.5], [0, 200.0, 59.5], [0, 0, 1]])
TINY = dict(width=0.25, depth_mult=0.5, dec_ch=16, head_ch=8, p_channels=[8, 16], p_head=16)
SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'geometry_input.py'


def _code(depth: np.ndarray, K: np.ndarray = KN, smooth_px=None) -> np.ndarray:
    d = torch.tensor(depth, dtype=torch.float32)[None, None]
    k = torch.tensor(K, dtype=torch.float32)[None]
    return depth_code(d, k, smooth_px)[0].permute(1, 2, 0).numpy()


def _rays():
    u, v = np.meshgrid(np.arange(W, dtype=np.float64), np.arange(H, dtype=np.float64))
    return (u - KN[0, 2]) / KN[0, 0], (v - KN[1, 2]) / KN[1, 1]


def test_a_wall_facing_the_camera_codes_its_log_depth_and_a_level_normal():
    code = _code(np.full((H, W), 2.0))[3:-3, 3:-3].reshape(-1, 3)
    expect = (math.log(2.0) - math.log(NEAR_M)) / (math.log(FAR_M) - math.log(NEAR_M))
    assert np.abs(code[:, 0] - expect).max() < 1e-5
    assert np.abs(code[:, 1] - 0.5).max() < 1e-5  # n_y = 0
    assert code[:, 2].max() < 1e-5  # n_x = 0


def test_a_floor_has_n_y_minus_one_and_a_side_wall_n_x_one():
    x, y = _rays()
    floor = np.where(y > 0.05, 1.2 / np.maximum(y, 1e-9), 0.0)  # 1.2 m below a level camera
    rows = _code(floor)[H // 2 + 20 : -5, 5:-5].reshape(-1, 3)
    assert rows[:, 1].max() < 0.01 and rows[:, 2].max() < 0.01
    wall = np.where(x < -0.05, -1.0 / np.minimum(x, -1e-9), 0.0)  # x = -1 m, left of the camera
    cols = _code(wall)[5:-5, 5 : W // 2 - 20].reshape(-1, 3)
    assert cols[:, 2].min() > 0.99
    assert np.abs(cols[:, 1] - 0.5).max() < 0.01


@pytest.mark.parametrize('bad', [0.0, -1.0, float('nan'), float('inf')])
def test_no_depth_holes_and_the_border_are_zero(bad):
    d = np.full((H, W), 2.0)
    d[40:60, 70:90] = bad
    code = _code(d)
    assert (code[40:60, 70:90] == 0).all()
    assert (code[0] == 0).all() and (code[-1] == 0).all()
    assert (code[:, 0] == 0).all() and (code[:, -1] == 0).all()
    assert (code[5:35, 5:-5] > 0).any(axis=-1).all()
    assert (_code(np.full((H, W), np.nan)) == 0).all()


def test_a_mirrored_frame_with_the_mirrored_k_gives_the_mirrored_code():
    x, y = _rays()
    d = 2.0 + 0.5 * x + 0.3 * y
    Km = KN.copy()
    Km[0, 2] = W - 1 - KN[0, 2]
    a, b = _code(d), _code(d[:, ::-1].copy(), Km)
    assert np.abs(a[:, ::-1] - b).max() < 1e-4


def test_the_torch_code_is_the_offline_scripts_code_within_its_rounding():
    geometry_image = runpy.run_path(str(SCRIPT))['geometry_image']
    x, y = _rays()
    rng = np.random.default_rng(3)
    d = np.where(y > 0.1, 1.3 / np.maximum(y, 1e-9), 3.0 + 0.4 * x)
    d = d + rng.normal(0, 0.01, d.shape)
    d[20:30, 10:40] = 0.0
    d[70, 100] = np.nan
    for k in (1, 3, 5):
        ref = geometry_image(d, KN, k).astype(np.float64)
        got = _code(d, KN, k).astype(np.float64) * 255
        assert np.abs(ref - got).max() <= 0.51  # float32 here, float64 there: 0.5 + rounding


def test_the_box_side_scales_with_the_width_and_stays_odd():
    assert [smooth_px_for(w) for w in (40, 80, 160, 320, 640)] == [1, 1, 3, 5, 11]


def test_bad_inputs_raise_naming_the_field():
    d = torch.ones(1, 1, H, W)
    k = torch.tensor(KN, dtype=torch.float32)
    with pytest.raises(ValueError, match='depth shape'):
        depth_code(torch.ones(1, H, W), k)
    with pytest.raises(ValueError, match='K shape'):
        depth_code(d, torch.eye(4))
    with pytest.raises(ValueError, match='fx'):
        depth_code(d, torch.zeros(3, 3))
    with pytest.raises(ValueError, match='smooth_px=4'):
        depth_code(d, k, 4)


def _model(code_input: bool) -> Depth3DSeg:
    torch.manual_seed(0)
    return Depth3DSeg(len(NYU13), code_input=code_input, **TINY).eval()


def test_a_code_input_model_sees_the_code_of_measured_depth_and_zeros_without():
    m = _model(True)
    assert m.net.encoder.stem[0].in_channels == 6
    torch.manual_seed(1)
    rgb = torch.randn(2, 3, 60, 80)
    K = torch.tensor([[100.0, 0, 39.5], [0, 100.0, 29.5], [0, 0, 1]]).expand(2, 3, 3)
    depth = 1.0 + 3 * torch.rand(2, 1, 60, 80)
    with torch.no_grad():
        plain = m(rgb, K)
        none = m(rgb, K, torch.full((2, 1, 60, 80), float('nan')))
        rgbd = m(rgb, K, depth)
        code = m.net(rgb, depth_code(depth, K))
    assert torch.equal(plain['seg2d'], none['seg2d'])  # no depth = an all-zero code
    assert not torch.allclose(plain['seg2d'], rgbd['seg2d'])
    assert torch.allclose(rgbd['seg2d'], code['seg2d'])
    with pytest.raises(ValueError, match='needs K'):
        m.forward_2d(rgb, None, depth)
    with pytest.raises(ValueError, match='code shape'):
        m.net(rgb, torch.zeros(2, 3, 30, 40))


def test_a_colour_model_ignores_measured_depth_in_its_2d_output():
    m = _model(False)
    assert m.net.encoder.stem[0].in_channels == 3
    rgb = torch.randn(1, 3, 60, 80)
    K = torch.tensor([[[100.0, 0, 39.5], [0, 100.0, 29.5], [0, 0, 1]]])
    with torch.no_grad():
        a = m.forward_2d(rgb, K)
        b = m.forward_2d(rgb, K, 1.0 + torch.rand(1, 1, 60, 80))
    assert torch.equal(a['seg2d'], b['seg2d'])


def test_code_input_must_be_a_bool_and_cannot_be_switched_on_trained_weights():
    with pytest.raises(ValueError, match="arch\\['code_input'\\]=1"):
        check_arch({'code_input': 1})
    with pytest.raises(ValueError, match='shape of the weights'):
        _model(False).with_arch(code_input=True)


def test_a_colour_model_widened_for_code_input_starts_as_the_same_model(tmp_path):
    """Depth3DSeg.with_code_input and model.init with arch code_input over a colour model's file
    (training/checkpoint.load_init_model): zero code weights, so the outputs are the colour
    model's, with or without measured depth; a second widening is an error."""
    from depth3dseg_ros.core.modelfile import save_model
    from depth3dseg_ros.training.checkpoint import load_init_model

    colour = _model(False)
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for mod in colour.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
    rgbd = colour.with_code_input()
    assert rgbd.arch['code_input'] and rgbd.net.encoder.stem[0].in_channels == 6
    rgb = torch.randn(1, 3, 60, 80)
    K = torch.tensor([[[100.0, 0, 39.5], [0, 100.0, 29.5], [0, 0, 1]]])
    depth = 1.0 + 3 * torch.rand(1, 1, 60, 80)
    with torch.no_grad():
        ref = colour(rgb, K)['seg2d']
        assert torch.allclose(rgbd(rgb, K)['seg2d'], ref, atol=1e-6)
        assert torch.allclose(rgbd.forward_2d(rgb, K, depth)['seg2d'], ref, atol=1e-6)
    with pytest.raises(ValueError, match='already has'):
        rgbd.with_code_input()
    path = tmp_path / 'colour.pt'
    save_model(path, colour, {'classes': NYU13, 'input_size': [80, 60]})
    cfg = {'model': {'init': str(path), 'arch': {'code_input': True, 'p_k': 6}}}
    model = load_init_model(cfg, NYU13)
    assert cfg['model']['arch']['code_input'] is True and cfg['model']['arch']['p_k'] == 6
    assert model.net.encoder.stem[0].in_channels == 6
    built = Depth3DSeg(len(NYU13), **{k: v for k, v in cfg['model']['arch'].items()})
    built.load_state_dict(model.state_dict())  # the run's network takes the widened weights
