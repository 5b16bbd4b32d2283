"""core.depth_calibration and arch['depth_gain']: the depth scale fitted to one camera's RGB-D
frames, applied to the predicted depth before the cloud (depth_calibration.focal_depth)."""

import math

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.depth_calibration import GAIN_RANGE, fit_depth_gain, frame_scale_stats
from depth3dseg_ros.core.model import Depth3DSeg, check_arch, focal_depth
from depth3dseg_ros.core.modelfile import load_model, save_model

SMALL = dict(width=0.35, dec_ch=16, head_ch=8, p_channels=[16, 16], p_head=16)


def test_a_global_factor_is_all_scale():
    gt = torch.linspace(0.5, 6.0, 48 * 64).view(1, 48, 64)
    a, s, a_s = frame_scale_stats(gt * 1.25, gt)  # 25 % too far everywhere
    assert a == pytest.approx(0.25) and s == pytest.approx(0.8)
    assert a_s == pytest.approx(0, abs=1e-6)
    gt2 = gt.clone()
    gt2[..., :10], gt2[..., 10:20], gt2[..., 20:24] = float('nan'), 0.0, 50.0  # no data
    pred = gt * 1.25
    pred[..., 30:34] = -1.0  # a prediction <= 0 is no data too
    a2, s2, _ = frame_scale_stats(pred, gt2)
    assert a2 == pytest.approx(0.25) and s2 == pytest.approx(0.8)
    assert frame_scale_stats(gt, torch.full_like(gt, float('nan'))) is None
    with pytest.raises(ValueError, match=r'pred shape \(1, 48, 64\) differs'):
        frame_scale_stats(gt, gt[..., :32])


def test_fit_is_the_median_scale_times_the_current_gain():
    assert fit_depth_gain([1.0, 1.2, 0.9, 5.0, 1.1]) == pytest.approx(1.1)  # an outlier frame
    assert fit_depth_gain([1.0, 1.2, 1.1], current_gain=1.5) == pytest.approx(1.65)


def test_fit_refuses_what_is_not_a_calibration():
    with pytest.raises(ValueError, match='2 frames with valid depth: .* at least 3'):
        fit_depth_gain([1.0, 1.1])
    with pytest.raises(ValueError, match=r'finite and > 0, got \[nan\]'):
        fit_depth_gain([1.0, float('nan'), 1.1])
    with pytest.raises(ValueError, match=r'gain 1000\.000 .* outside \[0\.25, 4\.0\]: check'):
        fit_depth_gain([1000.0] * 3)  # a 16UC1 image read as metres


def test_arch_depth_gain_is_checked():
    assert check_arch({})['depth_gain'] == 1.0
    assert check_arch({'depth_gain': 2})['depth_gain'] == 2.0
    g = check_arch({'depth_gain': np.float32(1.25)})['depth_gain']  # numpy numbers are numbers
    assert g == 1.25 and type(g) is float
    for bad in (True, 0.0, GAIN_RANGE[1] + 0.1, 'x', float('nan')):
        with pytest.raises(ValueError, match=r"depth_gain'\]="):
            check_arch({'depth_gain': bad})


def test_focal_depth_multiplies_once_and_clamps():
    d = torch.tensor([[[[1.0, 2.0], [9.0, 0.2]]]])
    K = torch.tensor([[[100.0, 0, 1], [0, 110.0, 1], [0, 0, 1]]])
    assert focal_depth(d, K, 0.0, 0.1, 10.0) is d and focal_depth(d, None, 1.0, 0.1, 10.0) is d
    got = focal_depth(d, None, 0.0, 0.1, 10.0, gain=1.2)
    assert torch.allclose(got, (d * 1.2).clamp(0.1, 10.0)) and got.max() == 10.0
    both = focal_depth(d, K, 50.0, 0.1, 10.0, gain=0.5)  # (110 / 2) / 50 · 0.5
    assert torch.allclose(both, (d * (110.0 / 2 / 50.0 * 0.5)).clamp(0.1, 10.0))


def test_the_model_applies_the_gain_everywhere_depth_is_used():
    """forward_2d with or without K, and forward: the cloud (xyz) is back-projected from the
    scaled depth, so the 3D net sees the calibrated metres."""
    torch.manual_seed(0)
    plain = Depth3DSeg(14, **SMALL).eval()
    gained = plain.with_arch(depth_gain=1.3)  # same weights
    x = torch.randn(1, 3, 48, 64)
    K = torch.tensor([[[60.0, 0, 32], [0, 60.0, 24], [0, 0, 1]]])
    with torch.no_grad():
        p, g = plain(x, K), gained(x, K)
        assert torch.allclose(g['depth'], (p['depth'] * 1.3).clamp(0.1, 10.0))
        assert torch.allclose(gained.forward_2d(x)['depth'], g['depth'])
        assert torch.allclose(g['xyz'], p['xyz'] * 1.3, atol=1e-5)  # depths below 10/1.3 m
        assert torch.equal(g['seg2d'], p['seg2d'])


def test_the_gain_round_trips_through_the_model_file(tmp_path):
    model = Depth3DSeg(len(NYU13), **SMALL, depth_gain=math.pi / 3).eval()
    save_model(tmp_path / 'm.pt', model, {'classes': NYU13, 'input_size': [64, 48]})
    back, meta = load_model(tmp_path / 'm.pt')
    assert meta['arch']['depth_gain'] == back.arch['depth_gain'] == math.pi / 3
