"""training.fda: Fourier domain adaptation towards real images (issue: perceive real rooms).

The swap replaces exactly the low-frequency amplitude (DC alone at b = 0: a per-channel offset, so
every edge stays), keeps the phase; the dataset keeps labels, depth and K exactly as without it,
leaves frames of the style directories alone, is deterministic; the config is checked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from depth3dseg_ros.training import fda
from depth3dseg_ros.training.config import DEFAULTS, load_config
from depth3dseg_ros.training.dataset import FrameDataset
from trainutil import make_dataset_dir


def _smooth(seed: int, lo: float, hi: float, h: int = 48, w: int = 64) -> np.ndarray:
    """A random H×W×3 uint8 image with values in [lo, hi] (no clipping in the tests' swaps)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, (h, w, 3)).round().astype(np.uint8)


def test_off_by_default_and_resolved():
    assert DEFAULTS['augment']['fda'] is None
    assert fda.resolve_fda(None) is None and fda.resolve_fda('none') is None
    t = fda.resolve_fda({'style': 'data/real'})
    assert t == {'style': ['data/real'], 'p': 0.5, 'beta': [0.0, 0.01]}
    assert fda.resolve_fda({'style': ['a'], 'p': 0}) is None
    cfg = load_config(None, ["augment.fda={style: [d], beta: [0.01, 0.02]}"])
    assert cfg['augment']['fda'] == {'style': ['d'], 'beta': [0.01, 0.02]}


@pytest.mark.parametrize(
    'spec, match',
    [
        ('real', r"augment.fda='real' must be null or a mapping"),
        ({'p': 0.5}, r'augment.fda.style=None must be a non-empty list'),
        ({'style': []}, r'augment.fda.style=\[\] must be a non-empty list'),
        ({'style': ['d'], 'alpha': 1}, r'augment.fda.alpha is unknown'),
        ({'style': ['d'], 'p': 2}, r'augment.fda.p=2 must be a number in \[0.0, 1.0\]'),
        ({'style': ['d'], 'beta': [0.0, 0.5]}, r'augment.fda.beta=\[0.0, 0.5\] must be'),
    ],
)
def test_bad_config_refused(spec, match):
    with pytest.raises(ValueError, match=match):
        fda.resolve_fda(spec)
    with pytest.raises(ValueError, match=match):
        load_config(None, [f'augment.fda={spec!r}'])


def test_dc_swap_is_a_per_channel_offset():
    src, style = _smooth(0, 60, 120), _smooth(1, 100, 160)
    out = fda.swap_low_amplitude(src, fda.amplitude(style), 0)
    diff = out.astype(np.int32) - src.astype(np.int32)
    for c in range(3):  # the same offset everywhere (± rounding): no edge moved
        assert diff[..., c].max() - diff[..., c].min() <= 1
        assert abs(out[..., c].mean() - style[..., c].mean()) < 0.6


def test_swap_replaces_exactly_the_low_square():
    src, style = _smooth(2, 80, 170), _smooth(3, 90, 160)
    b = 3
    out = fda.swap_low_amplitude(src, fda.amplitude(style), b)
    a_out, a_src, a_sty = fda.amplitude(out), fda.amplitude(src), fda.amplitude(style)
    h = src.shape[0]
    low = np.zeros(a_out.shape[:2], bool)
    low[np.r_[0 : b + 1, h - b : h], : b + 1] = True
    scale = a_sty[0, 0].max()
    # rounding to uint8 adds white noise of ~0.29 grey levels per pixel: sqrt(H*W)*0.29 per bin
    tol = 0.3 * np.sqrt(src.shape[0] * src.shape[1]) * 3
    assert np.abs(a_out[low] - a_sty[low]).max() < tol < 0.01 * scale
    assert np.abs(a_out[~low] - a_src[~low]).max() < tol
    # phase kept: the frame is still the source frame's content
    assert np.corrcoef(out[..., 0].ravel(), src[..., 0].ravel())[0, 1] > 0.95


def test_own_amplitude_is_identity_and_bad_shapes_refused():
    src = _smooth(4, 0, 255)
    assert np.array_equal(fda.swap_low_amplitude(src, fda.amplitude(src), 10), src)
    with pytest.raises(ValueError, match=r'style amplitude shape=\(48, 32, 3\)'):
        fda.swap_low_amplitude(src, np.zeros((48, 32, 3), np.float32), 1)
    with pytest.raises(ValueError, match='b=-1'):
        fda.swap_low_amplitude(src, fda.amplitude(src), -1)


def test_apply_draws_from_rng_only():
    src = _smooth(5, 30, 200)
    pool = np.stack([fda.amplitude(_smooth(s, 100, 200)) for s in (6, 7)])
    cfg = fda.resolve_fda({'style': ['x'], 'p': 1.0, 'beta': [0.0, 0.1]})
    a = fda.apply_fda(src, np.random.default_rng(9), cfg, pool)
    b = fda.apply_fda(src, np.random.default_rng(9), cfg, pool)
    assert np.array_equal(a, b) and not np.array_equal(a, src)
    off = fda.resolve_fda({'style': ['x'], 'p': 1e-9})
    assert fda.apply_fda(src, np.random.default_rng(9), off, pool) is src


def test_missing_style_dir_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'augment.fda.style: .*nowhere is not a dataset'):
        fda.load_style_pool([tmp_path / 'nowhere'], (32, 24))


def test_dataset_keeps_labels_depth_k_and_style_frames(real_dir, tmp_path):
    synth = make_dataset_dir(real_dir, tmp_path / 'synth', size=(80, 60))
    real = make_dataset_dir(real_dir, tmp_path / 'real', size=(80, 60), labels=False)
    base = dict(DEFAULTS['augment'])
    on = dict(base, fda={'style': [str(real)], 'p': 1.0, 'beta': [0.02, 0.05]})
    plain = FrameDataset([synth, real], input_size=(80, 60), augment=base, seed=3)
    styled = FrameDataset([synth, real], input_size=(80, 60), augment=on, seed=3)
    again = FrameDataset([synth, real], input_size=(80, 60), augment=on, seed=3)
    assert styled.fda_pool.shape == (len(plain) // 2, 60, 41, 3)
    for i in range(len(plain)):
        a, b = plain[i], styled[i]
        for key in ('labels', 'depth', 'K', 'has_depth', 'has_labels'):
            assert np.array_equal(a[key].numpy(), b[key].numpy(), equal_nan=True), key
        same = np.array_equal(a['rgb'].numpy(), b['rgb'].numpy())
        from_style_dir = Path(styled.records[i]['dir']).resolve() == real.resolve()
        assert same == from_style_dir, (i, styled.records[i]['dir'])
        assert np.array_equal(b['rgb'].numpy(), again[i]['rgb'].numpy())
