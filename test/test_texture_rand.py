"""training.texture_rand: label-guided texture/colour randomisation (issue: perceive real rooms).

Labels, depth and K exactly as without it, same seed -> same bytes, each segment recoloured as one
surface (shading kept), off by default (no draw, byte-identical items), config checked.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depth3dseg_ros.training import texture_rand as tr
from depth3dseg_ros.training.config import DEFAULTS, load_config
from depth3dseg_ros.training.dataset import FrameDataset
from trainutil import make_dataset_dir

ON = {'preset': 'domain_rand', 'p': 1.0, 'p_segment': 1.0, 'blend': [1.0, 1.0], 'texture': 0.0}


@pytest.fixture(scope='module')
def scene():
    """A 60x80 frame: left half label 5 (two separate blobs of label 7 inside), right half label
    12, with a horizontal shading gradient; RGB the flat class colours times the shading."""
    lab = np.full((60, 80), 5, np.uint8)
    lab[:, 40:] = 12
    lab[5:15, 5:15] = 7
    lab[40:50, 20:30] = 7
    shade = np.linspace(0.5, 1.0, 80, dtype=np.float32)[None, :, None]
    colours = {5: (200, 40, 40), 7: (40, 200, 40), 12: (60, 60, 220)}
    rgb = np.zeros((60, 80, 3), np.float32)
    for c, col in colours.items():
        rgb[lab == c] = col
    return np.clip(rgb * shade, 0, 255).astype(np.uint8), lab


def test_default_off_and_preset():
    assert DEFAULTS['augment']['texture'] is None
    assert tr.resolve_texture(None) is None and tr.resolve_texture('none') is None
    t = tr.resolve_texture('domain_rand')
    assert t['p'] == 0.8 and set(t) == set(tr.FIELDS) | {'photo', 'photo_labels'}
    assert t['photo'] == [] and t['photo_labels'] is True
    assert tr.resolve_texture({'p': 0.0}) is None  # every field default, p 0: off
    assert (
        load_config(None, ['augment.texture=domain_rand'])['augment']['texture'] == 'domain_rand'
    )


@pytest.mark.parametrize(
    'spec, match',
    [
        ('bogus', r"augment.texture.preset='bogus' is unknown"),
        ({'hue': 1}, r'augment.texture.hue is unknown'),
        ({'p': 1.5}, r'augment.texture.p=1.5 must be a number in \[0.0, 1.0\]'),
        (
            {'p': 1, 'value': [0.9, 0.1]},
            r'augment.texture.value=\[0.9, 0.1\] must be \[min, max\]',
        ),
        (3, r'augment.texture=3 must be null'),
        ({'photo': 'data/real'}, r"augment.texture.photo='data/real' must be a list"),
        ({'photo': [1]}, r'augment.texture.photo=\[1\] must be a list'),
        ({'p_photo': -1}, r'augment.texture.p_photo=-1 must be a number'),
        ({'photo_labels': 0}, r'augment.texture.photo_labels=0 must be true or false'),
    ],
)
def test_bad_config_refused(spec, match):
    with pytest.raises(ValueError, match=match):
        tr.resolve_texture(spec)
    with pytest.raises(ValueError, match=match):
        load_config(
            None,
            [
                f'augment.texture={spec!r}'
                if not isinstance(spec, str)
                else f'augment.texture={spec}'
            ],
        )


def test_segments_split_each_label_into_connected_regions(scene):
    _, lab = scene
    seg, n = tr.segments(lab)
    assert n == 4  # label 5 (one region around the blobs), two blobs of 7, label 12
    for s in range(n):  # each segment is one label
        assert len(np.unique(lab[seg == s])) == 1
    assert len(np.unique(seg[lab == 7])) == 2


def test_same_seed_same_bytes_and_off_draws_nothing(scene):
    rgb, lab = scene
    cfg = tr.resolve_texture('domain_rand')
    cfg['p'] = 1.0
    a = tr.randomize_texture(rgb, lab, np.random.default_rng([3, 1, 2]), cfg)
    b = tr.randomize_texture(rgb, lab, np.random.default_rng([3, 1, 2]), cfg)
    c = tr.randomize_texture(rgb, lab, np.random.default_rng([3, 1, 3]), cfg)
    assert a.dtype == np.uint8 and a.shape == rgb.shape
    assert a.tobytes() == b.tobytes() != c.tobytes()
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    assert tr.randomize_texture(rgb, lab, rng, None) is rgb
    assert rng.bit_generator.state == state
    assert tr.randomize_texture(rgb, None, rng, cfg) is rgb  # no labels: nothing to guide it


def test_each_segment_one_surface_with_its_shading(scene):
    rgb, lab = scene
    cfg = tr.resolve_texture(ON)
    out = tr.randomize_texture(rgb, lab, np.random.default_rng(0), cfg).astype(np.float64)
    seg, n = tr.segments(lab)
    for s in range(n):
        m = seg == s
        px = out[m]
        # one base colour per segment (flat texture): chromaticity constant up to rounding
        chroma = px / np.maximum(px.sum(1, keepdims=True), 1.0)
        assert chroma.std(0).max() < 0.03
        # the shading gradient survives: brightness rises left to right as in the input
        cols = np.nonzero(m.any(0))[0]
        left, right = (
            out[:, cols[0]][m[:, cols[0]]].mean(),
            out[:, cols[-1]][m[:, cols[-1]]].mean(),
        )
        if cols[-1] - cols[0] > 20:
            assert right > left
    # the two blobs of the same label are recoloured independently
    b1, b2 = out[5:15, 5:15].reshape(-1, 3).mean(0), out[40:50, 20:30].reshape(-1, 3).mean(0)
    assert np.abs(b1 - b2).max() > 1.0


def test_mismatched_labels_refused(scene):
    rgb, lab = scene
    with pytest.raises(ValueError, match=r'labels shape=\(60, 79\)'):
        tr.randomize_texture(rgb, lab[:, :79], np.random.default_rng(0), tr.resolve_texture(ON))


def test_dataset_keeps_labels_depth_and_k(real_dir, tmp_path):
    d = make_dataset_dir(real_dir, tmp_path / 'd', size=(80, 60))
    base = {k: v for k, v in DEFAULTS['augment'].items()}
    plain = FrameDataset([d], input_size=(80, 60), augment=dict(base), seed=4)
    rand = FrameDataset([d], input_size=(80, 60), augment=dict(base, texture=ON), seed=4)
    changed = 0
    for i in range(len(plain)):
        a, b = plain[i], rand[i]
        for key in ('labels', 'depth', 'K', 'has_depth', 'has_labels'):
            assert np.array_equal(a[key].numpy(), b[key].numpy(), equal_nan=True), key
        changed += int(not np.array_equal(a['rgb'].numpy(), b['rgb'].numpy()))
    assert changed == sum(bool(plain[i]['has_labels']) for i in range(len(plain)))


def test_photo_textures_paint_segments_with_the_photo_under_their_shading(scene):
    rgb, lab = scene
    cfg = tr.resolve_texture(dict(ON, p_photo=1.0))
    pool = np.zeros((1, 60, 80, 3), np.uint8)
    pool[0, :, :, 1] = 160  # one pure green photo: every warp of it is pure green
    out = tr.randomize_texture(rgb, lab, np.random.default_rng(0), cfg, pool).astype(np.float64)
    assert out[..., 0].max() == 0 and out[..., 2].max() == 0
    # green is the photo times each segment's own shading: the input's gradient survives
    seg, n = tr.segments(lab)
    for s in range(n):
        m = seg == s
        cols = np.nonzero(m.any(0))[0]
        if cols[-1] - cols[0] > 20:
            g = out[..., 1]
            assert g[:, cols[-1]][m[:, cols[-1]]].mean() > g[:, cols[0]][m[:, cols[0]]].mean()
    # p_photo 0: the procedural path's draws come first, so the photo draws change nothing before
    cfg0 = tr.resolve_texture(dict(ON, p_photo=0.0))
    a = tr.randomize_texture(rgb, lab, np.random.default_rng(5), cfg0, pool)
    b = tr.randomize_texture(rgb, lab, np.random.default_rng(5), cfg0)
    assert a.tobytes() == b.tobytes()
    with pytest.raises(ValueError, match=r'photo pool size \(30, 40\)'):
        tr.randomize_texture(rgb, lab, np.random.default_rng(0), cfg, pool[:, :30, :40])


def test_photo_fields_are_real_frames_warped(scene):
    pool = np.random.default_rng(1).integers(0, 255, (2, 60, 80, 3)).astype(np.uint8)
    f = tr.photo_fields(np.random.default_rng(2), pool)
    assert f.shape == (tr.PHOTOS_PER_FRAME, 60, 80, 3) and f.dtype == np.float32
    assert 0.0 <= f.min() and f.max() <= 1.0
    g = tr.photo_fields(np.random.default_rng(2), pool)
    assert f.tobytes() == g.tobytes()


def test_dataset_photo_pool_from_unlabelled_dirs(real_dir, tmp_path):
    d = make_dataset_dir(real_dir, tmp_path / 'd', size=(80, 60))
    photos = make_dataset_dir(real_dir, tmp_path / 'p', size=(80, 60), labels=False)
    base = {k: v for k, v in DEFAULTS['augment'].items()}
    spec = dict(ON, p_photo=1.0, photo=[str(photos)])
    plain = FrameDataset([d, photos], input_size=(80, 60), augment=dict(base), seed=4)
    rand = FrameDataset([d, photos], input_size=(80, 60), augment=dict(base, texture=spec), seed=4)
    assert rand.photo_pool.shape == (len(FrameDataset([photos])), 60, 80, 3)
    for i in range(len(plain)):
        a, b = plain[i], rand[i]
        for key in ('labels', 'depth', 'K'):
            assert np.array_equal(a[key].numpy(), b[key].numpy(), equal_nan=True), key
        # labelled frames are repainted; the unlabelled photo frames stay as they are
        same = np.array_equal(a['rgb'].numpy(), b['rgb'].numpy())
        assert same == (not bool(plain[i]['has_labels']))
    with pytest.raises(FileNotFoundError, match=r'augment.texture.photo: .*nowhere'):
        FrameDataset(
            [d], input_size=(80, 60), augment=dict(base, texture=dict(spec, photo=['nowhere']))
        )


def test_photo_painted_frames_train_depth_only_without_photo_labels(real_dir, tmp_path):
    """photo_labels false: a frame repainted with photo textures on keeps its depth and K and
    loses its labels (has_labels False: depth and consistency terms only, M5)."""
    d = make_dataset_dir(real_dir, tmp_path / 'd', size=(80, 60))
    photos = make_dataset_dir(real_dir, tmp_path / 'p', size=(80, 60), labels=False)
    base = {k: v for k, v in DEFAULTS['augment'].items()}
    spec = dict(ON, p=0.5, photo=[str(photos)], photo_labels=False)
    plain = FrameDataset([d], input_size=(80, 60), augment=dict(base), seed=4)
    rand = FrameDataset([d], input_size=(80, 60), augment=dict(base, texture=spec), seed=4)
    dropped = kept = 0
    for epoch in range(3):
        plain.set_epoch(epoch)
        rand.set_epoch(epoch)
        for i in range(len(plain)):
            a, b = plain[i], rand[i]
            for key in ('depth', 'K', 'has_depth'):
                assert np.array_equal(a[key].numpy(), b[key].numpy(), equal_nan=True), key
            painted = not np.array_equal(a['rgb'].numpy(), b['rgb'].numpy())
            if not bool(a['has_labels']):
                continue
            assert bool(b['has_labels']) == (not painted)
            if painted:
                assert (b['labels'] == 0).all()  # void everywhere
                dropped += 1
            else:
                assert torch.equal(a['labels'], b['labels'])
                kept += 1
    assert dropped > 0 and kept > 0
