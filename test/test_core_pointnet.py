"""M3 PointSegNet (core/pointnet.py): neighbours by 3D distance, invalid points masked, gradients
to xyz."""

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.pointnet import EdgeConv, PointSegNet, knn_window, subsample


def _cloud(h, w, seed=0, invalid_frac=0.0):
    g = torch.Generator().manual_seed(seed)
    v, u = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing='ij'
    )
    z = 1.0 + 2.0 * torch.rand(h, w, generator=g)
    xyz = torch.stack([(u - w / 2) * z / 50, (v - h / 2) * z / 50, z]).unsqueeze(0)
    valid = torch.rand(1, 1, h, w, generator=g) >= invalid_frac
    return xyz, valid


@pytest.mark.parametrize('k,win', [(5, 5), (3, 3), (9, 7), (1, 5)])
def test_knn_matches_brute_force_3d_distance(k, win):
    """Chosen neighbours = the k nearest by metric 3D distance among the valid window candidates
    (sort keys with 4, 5 and 6 position bits: core.keys)."""
    h, w = 9, 11
    xyz, valid = _cloud(h, w, seed=3, invalid_frac=0.25)
    idx, mask = knn_window(xyz, valid, k, win)
    assert idx.shape == (1, k, h * w) and mask.shape == (1, k, h * w)
    P = xyz[0].reshape(3, -1).T.numpy()
    V = valid.reshape(-1).numpy()
    r = win // 2
    for y in range(h):
        for x in range(w):
            i = y * w + x
            if not V[i]:
                assert not mask[0, :, i].any()
                continue
            cands = [
                yy * w + xx
                for yy in range(max(0, y - r), min(h, y + r + 1))
                for xx in range(max(0, x - r), min(w, x + r + 1))
                if V[yy * w + xx]
            ]
            d = np.linalg.norm(P[cands] - P[i], axis=1)
            expect = [cands[j] for j in np.argsort(d, kind='stable')[:k]]
            got = idx[0, :, i][mask[0, :, i]].tolist()
            assert got == expect[: len(got)] and len(got) == min(k, len(cands))
            assert got[0] == i  # the point itself, distance 0


def test_pixel_adjacent_but_3d_far_points_are_not_neighbours():
    """Interleaved columns on two planes 4 m apart: pixel neighbours across planes are never
    chosen."""
    h, w = 8, 10
    v, u = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing='ij'
    )
    z = torch.where(u.long() % 2 == 0, torch.tensor(1.0), torch.tensor(5.0))
    xyz = torch.stack([u * 0.01 * z, v * 0.01 * z, z]).unsqueeze(0)
    valid = torch.ones(1, 1, h, w, dtype=torch.bool)
    idx, mask = knn_window(xyz, valid, k=6, window=5)  # >= 6 same-plane candidates in every window
    col = idx % w
    centre_col = torch.arange(h * w).view(1, 1, -1) % w
    assert mask.all()
    assert ((col % 2) == (centre_col % 2)).all()
    # by pixel distance alone, the odd neighbours at dx = ±1 would be the nearest ones
    assert not ((col - centre_col).abs() == 1).any()


@pytest.mark.parametrize('stride', [1, 2, 4])
def test_invalid_points_never_influence_valid_outputs(stride):
    torch.manual_seed(0)
    net = PointSegNet(
        5, in_feats=3, k=6, window=5, stride=stride, channels=(16, 16), head=16
    ).train()
    xyz, valid = _cloud(24, 32, seed=1, invalid_frac=0.3)
    feats = torch.randn(1, 3, 24, 32)
    out1 = net(xyz, valid, feats)
    bad = ~valid.expand(1, 3, 24, 32)
    xyz2, feats2 = xyz.clone(), feats.clone()
    xyz2[bad] = torch.randn(int(bad.sum())) * 100.0
    xyz2[:, :, 0, 0] = float('nan') if not valid[0, 0, 0, 0] else xyz2[:, :, 0, 0]
    xyz2[bad & (torch.rand_like(xyz2) < 0.1)] = float('inf')
    feats2[bad] = 1e6
    out2 = net(xyz2, valid, feats2)
    vm = valid.expand_as(out1)
    assert torch.equal(out1[vm], out2[vm])
    with torch.no_grad():  # the in-place inference path gives the same result as the autograd path
        out3 = net(xyz2, valid, feats2)
    assert torch.allclose(out3, out2, atol=1e-6)
    assert (out1[~vm] == 0).all() and (out2[~vm] == 0).all() and torch.isfinite(out2).all()
    assert out1[vm].abs().sum() > 0


@pytest.mark.parametrize('masked', [False, True])
def test_edgeconv_equals_the_dgcnn_formula(masked):
    """EdgeConv (M3) = post(max over valid j of ReLU(W_n f_j + W_c f_i + W_g g_ij)), 0 when no
    neighbour is valid, computed edge by edge (the layer computes ReLU once after the max, and
    masked edges as -inf)."""
    torch.manual_seed(0)
    b, n, k, cin, cg, cout = 2, 30, 4, 5, 7, 6
    layer = EdgeConv(cin, cg, cout)
    f, geo = torch.randn(b, n, cin), torch.randn(b, k, n, cg)
    idx = torch.randint(0, n, (b, k, n))
    mask = torch.rand(b, k, n) > 0.4 if masked else None
    if masked:
        mask[0, :, 3] = False  # a point with no valid neighbour
    out = layer(f, geo, idx, mask)
    ref = torch.zeros(b, n, cout)
    for bi in range(b):
        for i in range(n):
            h = torch.zeros(cout)  # max over an empty set of ReLU outputs: 0
            for j in range(k):
                if mask is None or mask[bi, j, i]:
                    e = (
                        layer.wn(f[bi, idx[bi, j, i]])
                        + layer.wc(f[bi, i])
                        + layer.wg(geo[bi, j, i])
                    )
                    h = torch.maximum(h, e.relu())
            ref[bi, i] = layer.post(h).relu()
    assert torch.allclose(out, ref, atol=1e-5)
    with torch.inference_mode():  # the in-place inference path
        assert torch.allclose(layer(f, geo, idx, mask), ref, atol=1e-5)
    out.sum().backward()  # the grad path (torch.maximum, not in place) runs and is finite
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())


def test_all_invalid_frame_gives_zero_logits():
    net = PointSegNet(4, channels=(8,), head=8, k=4, window=3, stride=2)
    xyz, _ = _cloud(8, 8)
    out = net(xyz, torch.zeros(1, 1, 8, 8, dtype=torch.bool), torch.randn(1, 3, 8, 8))
    assert out.shape == (1, 4, 8, 8) and (out == 0).all()


def test_gradients_flow_into_xyz_of_valid_points_only():
    torch.manual_seed(0)
    net = PointSegNet(4, k=6, window=5, stride=2, channels=(16, 16), head=16)
    xyz, valid = _cloud(16, 20, seed=2, invalid_frac=0.2)
    xyz.requires_grad_(True)
    out = net(xyz, valid, torch.randn(1, 3, 16, 20))
    (out * torch.randn_like(out)).sum().backward()
    g = xyz.grad
    assert torch.isfinite(g).all()
    assert g[valid.expand_as(g)].abs().sum() > 0
    assert (g[~valid.expand_as(g)] == 0).all()
    # the depth (Z) channel itself gets gradient: the M3 coupling back to the depth head
    assert g[:, 2][valid[:, 0]].abs().sum() > 0


def test_upsampling_keeps_depth_edges():
    """Stride-4 logits back to full resolution take the 3D-nearest subsampled point: every pixel on
    the near plane gets the near plane's logits, also where its own block centre lies on the far
    one."""
    h, w, s = 16, 24, 4
    v, u = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing='ij'
    )
    z = torch.where(u < 9, torch.tensor(1.0), torch.tensor(3.0))  # edge not on a block boundary
    xyz = torch.stack([(u - w / 2) * z / 100, (v - h / 2) * z / 100, z]).unsqueeze(0)
    valid = torch.ones(1, 1, h, w, dtype=torch.bool)
    net = PointSegNet(2, stride=s)
    p, vv = subsample(xyz, s), subsample(valid, s)
    near = (p[:, 2] < 2).reshape(1, -1, 1).float()
    logits = torch.cat([near, 1 - near], -1)  # B×N×C: class 0 = near plane
    full = net._upsample(logits, p, vv, xyz, valid)
    assert full.shape == (1, 2, h, w)
    assert torch.equal(full.argmax(1)[0], (z >= 2).long())
    # a plain nearest upsample would get columns 8 (block centre 10 is far) wrong
    assert (z[:, 8] < 2).all()


def test_geometry_only_net_ignores_colour_and_loads_colour_weights():
    """colour=False: the logits do not depend on ``feats`` (zeros in their place), they do on the
    geometry, and a colour net's weights load into it unchanged (same shapes: model.init)."""
    torch.manual_seed(0)
    colour = PointSegNet(4, k=4, window=3, stride=2, channels=(8, 8), head=8)
    geo = PointSegNet(4, k=4, window=3, stride=2, channels=(8, 8), head=8, colour=False)
    geo.load_state_dict(colour.state_dict())
    xyz, valid = _cloud(12, 16, seed=3, invalid_frac=0.1)
    f1, f2 = torch.randn(1, 3, 12, 16), torch.randn(1, 3, 12, 16)
    with torch.no_grad():
        assert torch.equal(geo(xyz, valid, f1), geo(xyz, valid, f2))
        assert torch.equal(geo(xyz, valid, f1), colour(xyz, valid, torch.zeros_like(f1)))
        assert not torch.equal(colour(xyz, valid, f1), colour(xyz, valid, f2))
        assert not torch.equal(geo(xyz * 1.5, valid, f1), geo(xyz, valid, f1))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match='window'):
        PointSegNet(3, k=10, window=3)
    with pytest.raises(ValueError, match='window'):
        PointSegNet(3, k=2, window=4)
    net = PointSegNet(3)
    xyz, valid = _cloud(8, 8)
    with pytest.raises(ValueError, match='feats'):
        net(xyz, valid, torch.randn(1, 4, 8, 8))
    with pytest.raises(ValueError, match='valid'):
        net(xyz, valid[:, :, :4], torch.randn(1, 3, 8, 8))
