"""M1 DepthSegNet + combined Depth3DSeg (core/model.py): shapes, depth range, FLOPs, M3
coupling."""

import math

import pytest
import torch
import torch.nn.functional as F

from depth3dseg_ros.core.model import (
    DEFAULT_ARCH,
    Depth3DSeg,
    DepthSegNet,
    check_arch,
    count_flops,
    count_params,
)

SMALL = dict(width=0.35, dec_ch=16, head_ch=8, p_channels=[16, 16], p_head=16)


def _K(w, h, f=None, batch=1):
    f = f or 0.8 * w
    K = torch.tensor([[f, 0.0, (w - 1) / 2], [0.0, f, (h - 1) / 2], [0.0, 0.0, 1.0]])
    return K.expand(batch, 3, 3).clone()


@pytest.mark.parametrize('wh', [(64, 48), (50, 38)])
def test_forward_shapes_and_dtypes(wh):
    torch.manual_seed(0)
    w, h = wh
    model = Depth3DSeg(14, **SMALL).eval()
    x = torch.randn(2, 3, h, w)
    with torch.no_grad():
        out = model(x, _K(w, h, batch=2))
    assert set(out) == {'depth', 'seg2d', 'seg3d', 'xyz', 'valid'}
    assert out['depth'].shape == (2, 1, h, w) and out['depth'].dtype == torch.float32
    assert out['seg2d'].shape == (2, 14, h, w) and out['seg3d'].shape == (2, 14, h, w)
    assert out['xyz'].shape == (2, 3, h, w)
    assert out['valid'].shape == (2, 1, h, w) and out['valid'].dtype == torch.bool
    assert torch.isfinite(out['seg3d']).all() and torch.isfinite(out['seg2d']).all()
    # M2: xyz is the back-projection of the predicted depth (Z = d).
    assert torch.allclose(out['xyz'][:, 2:3], out['depth'])


def test_depth_positive_and_bounded_by_max_depth():
    """sigmoid range: min_depth < d < max_depth whatever the input, even at saturated logits."""
    torch.manual_seed(1)
    net = DepthSegNet(5, width=0.35, dec_ch=16, head_ch=8, min_depth=0.2, max_depth=4.0).eval()
    with torch.no_grad():
        d = net(100 * torch.randn(2, 3, 32, 40))['depth']
        assert (d > 0).all() and (d >= 0.2).all() and (d <= 4.0).all()
        for bias, bound in ((1e4, 4.0), (-1e4, 0.2)):
            net.depth_head[-1].bias.fill_(bias)
            d = net(torch.randn(1, 3, 32, 40))['depth']
            assert torch.allclose(d, torch.full_like(d, bound))


def test_untrained_depth_starts_at_init_depth():
    net = DepthSegNet(3, width=0.35, dec_ch=16, head_ch=8, init_depth=2.5).eval()
    with torch.no_grad():
        d = net(torch.randn(1, 3, 32, 32))['depth']
    assert torch.allclose(d, torch.full_like(d, 2.5), atol=1e-4)


def test_flops_of_default_model_at_320x240_within_budget():
    """Spec: the 2D+depth model <= 2 GFLOPs at 320×240 (FlopCounterMode count, not time)."""
    model = Depth3DSeg(14).eval()
    x, K = torch.randn(1, 3, 240, 320), _K(320, 240)
    flops_2d = count_flops(model.net, x)
    flops_all = count_flops(model, x, K)
    assert 0.3e9 < flops_2d <= 2e9
    assert flops_2d < flops_all <= 2e9
    assert count_params(model) > count_params(model.net) > 0


def test_seg3d_loss_reaches_depth_head():
    """M3 coupling: a loss on seg3d alone sends gradients into the depth head (through xyz)."""
    torch.manual_seed(2)
    model = Depth3DSeg(6, **SMALL).train()
    x = torch.randn(2, 3, 48, 64)
    labels = torch.randint(1, 6, (2, 48, 64))
    out = model(x, _K(64, 48, batch=2))
    F.cross_entropy(out['seg3d'], labels).backward()
    g_depth = model.net.depth_head[-1].weight.grad
    assert g_depth is not None and torch.isfinite(g_depth).all() and g_depth.abs().sum() > 0
    # the 2D segmentation head is not on that path
    g_seg = model.net.seg_head[-1].weight.grad
    assert g_seg is None or g_seg.abs().sum() == 0


def test_arch_roundtrip_and_errors():
    model = Depth3DSeg(9, **SMALL)
    assert model.arch['num_classes'] == 9 and set(model.arch) == set(DEFAULT_ARCH)
    again = Depth3DSeg.from_arch(model.arch)
    assert again.arch == model.arch
    assert [p.shape for p in again.parameters()] == [p.shape for p in model.parameters()]
    with pytest.raises(ValueError, match='unknown keys'):
        check_arch({'widht': 1.0})
    with pytest.raises(ValueError, match='max_depth'):
        Depth3DSeg(5, min_depth=2.0, max_depth=1.0)
    with pytest.raises(ValueError, match='rgb_norm'):
        model.net(torch.randn(1, 4, 32, 32))
    with pytest.raises(ValueError, match='num_classes'):
        Depth3DSeg(1)
    assert (
        check_arch({})['fusion_w3d'] == 0.5 and check_arch({'fusion_w3d': 1})['fusion_w3d'] == 1.0
    )
    for bad in (0, -0.5, 1.01, True, 'half'):
        with pytest.raises(ValueError, match=r"fusion_w3d'\]=.* must be in \(0, 1\]"):
            check_arch({'fusion_w3d': bad})


def test_depth_focal_scales_depth_to_the_camera_and_the_cloud_follows():
    """arch depth_focal (depth_calibration.focal_depth): the head's depth is that of a camera
    with fy / H = depth_focal; through K it is scaled by (fy / H) / depth_focal (clamped to the
    depth range), the cloud is built from the scaled depth, and 0 leaves the model as it was."""
    torch.manual_seed(3)
    plain = Depth3DSeg(14, **SMALL).eval()
    with torch.no_grad():
        plain.net.depth_head[-1].weight.normal_(0, 0.05)
    focal = Depth3DSeg(14, **SMALL, depth_focal=1.0).eval()
    focal.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 48, 64)
    with torch.no_grad():
        base = plain.forward_2d(x)['depth']
        for f in (48.0, 60.0):  # fy / H = 1.0 and 1.25
            K = _K(64, 48, f, batch=2)
            out = focal(x, K)
            want = (base * f / 48.0).clamp(0.1, 10.0)
            torch.testing.assert_close(out['depth'], want)
            torch.testing.assert_close(focal.forward_2d(x, K)['depth'], want)
            z = out['xyz'][:, 2:3]
            torch.testing.assert_close(z[out['valid']], want[out['valid']])
            assert torch.equal(plain(x, K)['depth'], base)  # depth_focal 0: K does not matter
        assert torch.equal(focal.forward_2d(x)['depth'], base)  # no K: the calibration camera
    with pytest.raises(ValueError, match=r"depth_focal'\]=-1"):
        check_arch({'depth_focal': -1})
    with pytest.raises(ValueError, match=r"p_colour'\]='no'"):
        check_arch({'p_colour': 'no'})


def test_default_arch_is_mobilenet_sized():
    """The default is real-time sized: ~1 GFLOP class, a few M parameters, not a toy or a giant."""
    model = Depth3DSeg(14)
    n = count_params(model)
    assert 0.3e6 < n < 5e6, n
    assert math.isclose(model.arch['max_depth'], 10.0)


def test_fold_batchnorm_keeps_outputs():
    import copy
    from depth3dseg_ros.core.model import fold_batchnorm

    torch.manual_seed(4)
    model = Depth3DSeg(6, **SMALL).eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    folded = fold_batchnorm(copy.deepcopy(model))
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    x, K = torch.randn(1, 3, 48, 64), _K(64, 48)
    with torch.no_grad():
        a, b = model(x, K), folded(x, K)
    for key in ('depth', 'seg2d', 'seg3d'):
        assert torch.allclose(a[key], b[key], atol=1e-4, rtol=1e-4), key
    assert (a['seg2d'] - b['seg2d']).abs().max() < 1e-4 and a['seg2d'].abs().max() > 1e-2


def test_fp16_model_and_autocast_training_stay_finite():
    """fp16 inference (Segmenter half=True) and mixed-precision training (AMP) keep the geometry in
    float32: finite outputs, xyz float32, finite gradients into the depth head through seg3d."""
    torch.manual_seed(5)
    half = Depth3DSeg(6, **SMALL).eval().half()
    with torch.no_grad():
        out = half(torch.randn(1, 3, 48, 64).half(), _K(64, 48))
    assert out['seg3d'].dtype == torch.float16 and out['xyz'].dtype == torch.float32
    assert all(torch.isfinite(out[k].float()).all() for k in ('depth', 'seg2d', 'seg3d'))
    model = Depth3DSeg(6, **SMALL).train()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = model(torch.randn(2, 3, 48, 64), _K(64, 48, batch=2))
        loss = F.cross_entropy(out['seg3d'].float(), torch.randint(1, 6, (2, 48, 64)))
    loss.backward()
    g = model.net.depth_head[-1].weight.grad
    assert torch.isfinite(g).all() and g.abs().sum() > 0
