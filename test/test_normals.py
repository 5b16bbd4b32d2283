"""core.normals: surface normals of a depth image and the normal term on the depth
(loss.w_normal)."""

from __future__ import annotations

import math

import pytest
import torch

from depth3dseg_ros.core.normals import normal_loss, surface_normals
from depth3dseg_ros.core.train_step import LossConfig, losses_from_outputs

H, W = 60, 80
FX = 60.0


def _K(b: int = 1) -> torch.Tensor:
    return torch.tensor([[FX, 0.0, W / 2], [0.0, FX, H / 2], [0.0, 0.0, 1.0]]).expand(b, 3, 3)


def _plane(n: tuple[float, float, float], offset: float) -> torch.Tensor:
    """1×1×H×W depth of the plane n·p = offset seen by _K (0 where the ray misses it)."""
    v, u = torch.meshgrid(torch.arange(H).float(), torch.arange(W).float(), indexing='ij')
    rx, ry = (u - W / 2) / FX, (v - H / 2) / FX
    denom = n[0] * rx + n[1] * ry + n[2]
    z = torch.where(denom.abs() > 1e-6, offset / denom, torch.zeros_like(denom))
    return torch.where((z > 0) & (z < 50), z, torch.zeros_like(z))[None, None]


@pytest.mark.parametrize(
    'n', [(0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.6, 0.0, 0.8), (0.3, -0.5, 0.81)]
)
def test_normals_of_a_plane_are_its_normal_towards_the_camera(n):
    norm = math.sqrt(sum(c * c for c in n))
    n = tuple(c / norm for c in n)
    d = _plane(n, 1.5)
    # the plane n·p = 1.5 > 0 faces away from the origin along n: towards the camera is -n
    want = -torch.tensor(n)[:, None]
    normals, ok, _ = surface_normals(d, _K(), 1)
    assert ok.sum() > 500
    got = normals[0][:, ok[0, 0]]
    assert torch.allclose(got, want.expand_as(got), atol=1e-4)
    assert torch.allclose(normals.norm(dim=1)[ok[:, 0]], torch.ones(int(ok.sum())), atol=1e-5)
    # the box smoothing averages depth, not points: near a plane's horizon, where depth curves
    # fast, the normals bend; most of the plane keeps its normal
    normals, ok, _ = surface_normals(d, _K(), 5)
    cos = (normals[0][:, ok[0, 0]] * want).sum(0).clamp(-1, 1)
    assert torch.rad2deg(torch.acos(cos)).median() < 1.0


def test_normals_are_zero_and_undefined_at_holes_and_the_border():
    d = _plane((0.0, 0.0, 1.0), 2.0)
    d[..., 20:30, 20:30] = 0.0
    d[..., 40, 40] = float('nan')
    normals, ok, _ = surface_normals(d, _K(), 1)
    assert not ok[..., 20:30, 20:30].any() and not ok[..., 40, 40].any()
    assert not ok[..., 0, :].any() and not ok[..., :, -1].any()
    assert (normals[:, :, ~ok[0, 0]] == 0).all()


def test_normal_loss_is_zero_on_the_label_and_one_for_a_floor_seen_as_a_wall():
    floor = _plane((0.0, 1.0, 0.0), 1.2)
    same = normal_loss(floor.clone().requires_grad_(True), floor, _K())
    assert same.count > 500 and same.value.item() < 1e-6
    wall = torch.full_like(floor, 2.0, requires_grad=True)
    t = normal_loss(wall, floor, _K())
    assert t.value.item() == pytest.approx(1.0, abs=0.05)
    t.value.backward()
    assert torch.isfinite(wall.grad).all() and wall.grad.abs().sum() > 0


def test_normal_loss_gradient_is_finite_where_the_prediction_is_degenerate():
    """A constant-zero or NaN-free but flat prediction must not give NaN gradients (the clamped
    rsqrt), and holes in the label give no gradient."""
    label = _plane((0.0, 0.0, 1.0), 2.0)
    label[..., :, :40] = 0.0
    pred = torch.zeros_like(label)
    pred[..., :, 40:] = 1.0
    pred.requires_grad_(True)
    t = normal_loss(pred, label, _K())
    t.value.backward()
    assert torch.isfinite(pred.grad).all()
    assert (pred.grad[..., :, :35] == 0).all()


def test_normal_loss_has_depth_masks_frames_and_no_pixel_is_a_connected_zero():
    floor = _plane((0.0, 1.0, 0.0), 1.2)
    wall = torch.full_like(floor, 2.0)
    pred = torch.cat([floor, wall]).requires_grad_(True)
    label = torch.cat([floor, floor])
    only_first = normal_loss(pred, label, _K(2), torch.tensor([True, False]))
    assert only_first.value.item() < 1e-6
    none = normal_loss(pred, label, _K(2), torch.tensor([False, False]))
    assert none.count == 0 and none.value.item() == 0.0
    none.value.backward()
    assert (pred.grad == 0).all()


def test_normal_loss_rejects_bad_shapes_and_box_sizes():
    d = _plane((0.0, 0.0, 1.0), 2.0)
    with pytest.raises(ValueError, match='B×1×H×W'):
        normal_loss(d, d[..., :-1], _K())
    with pytest.raises(ValueError, match='smooth_px=4'):
        normal_loss(d, d, _K(), smooth_px=4)


def test_loss_config_w_normal_adds_the_term_to_the_total():
    with pytest.raises(ValueError, match='w_normal'):
        LossConfig(w_normal=-1.0)
    with pytest.raises(ValueError, match='w_normal'):
        LossConfig(w_normal=True)
    floor = _plane((0.0, 1.0, 0.0), 1.2)
    c = 14
    out = {
        'seg2d': torch.zeros(1, c, H, W),
        'seg3d': torch.zeros(1, c, H, W),
        'valid': torch.ones(1, H, W, dtype=torch.bool),
        'depth': torch.full_like(floor, 2.0),
    }
    batch = {'depth': floor, 'K': _K()}
    off = losses_from_outputs(out, batch, LossConfig())
    on = losses_from_outputs(out, batch, LossConfig(w_normal=0.5))
    assert 'normal' not in off
    assert on['normal'].item() == pytest.approx(1.0, abs=0.05) and int(on['n_normal']) > 500
    assert (on['total'] - off['total']).item() == pytest.approx(0.5 * on['normal'].item())
