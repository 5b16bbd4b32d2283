"""training.dataset: index reading, missing depth/labels masks, K exact under resize/crop/flip (M2,
C18, C22)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.training.config import DEFAULTS, load_config
from depth3dseg_ros.training.dataset import (
    FrameDataset,
    flip_intrinsics,
    geometric_transform,
    read_index,
    sample_params,
    split_records,
)
from trainutil import make_dataset_dir, real_frames


@pytest.fixture(scope='module')
def ds_dir(real_dir, tmp_path_factory):
    return make_dataset_dir(real_dir, tmp_path_factory.mktemp('ds') / 'd', size=(80, 60))


@pytest.fixture(scope='module')
def nyu0001(real_dir):
    """The complete real frame NYU 0001: rgb 640x480, filled depth (m), 13-class labels, K."""
    return next(iter(real_frames(real_dir)))[1:]


def test_read_index_counts_and_keys(ds_dir):
    recs = read_index(ds_dir)
    assert len(recs) == 10
    assert sum(r['depth'] is not None for r in recs) == 5
    assert sum(r['labels'] is not None for r in recs) == 7
    assert all(r['dir'] == ds_dir for r in recs)


def test_read_index_errors(ds_dir, tmp_path):
    d = tmp_path / 'd'
    shutil.copytree(ds_dir, d)
    text = (d / 'index.jsonl').read_text()
    # a frame still being appended (no trailing newline) is skipped with a warning
    (d / 'index.jsonl').write_text(text + '{"id": "0000')
    with pytest.warns(UserWarning, match='incomplete last line'):
        assert len(read_index(d)) == 10
    (d / 'index.jsonl').write_text('{"id": \n' + text)
    with pytest.raises(ValueError, match=r'index.jsonl:1: not valid JSON'):
        read_index(d)
    rec = json.loads(text.splitlines()[0])
    del rec['K']
    (d / 'index.jsonl').write_text(text + json.dumps(rec) + '\n')
    with pytest.raises(ValueError, match=r"index.jsonl:11: frame record lacks keys \['K'\]"):
        read_index(d)
    with pytest.raises(FileNotFoundError, match='index.jsonl'):
        read_index(tmp_path)


def test_classes_mismatch_refused(ds_dir):
    other = ClassSet(['void', 'a', 'b'], np.zeros((3, 3), np.uint8))
    with pytest.raises(ValueError, match='has classes'):
        FrameDataset([ds_dir], (64, 48), classes=other)


def test_missing_depth_and_labels_masks(ds_dir):
    ds = FrameDataset([ds_dir], (64, 48))
    seen = set()
    for i in range(len(ds)):
        b = ds[i]
        rec = ds.records[i]
        assert b['rgb'].shape == (3, 48, 64) and b['rgb'].dtype == torch.float32
        assert b['depth'].shape == (1, 48, 64) and b['labels'].shape == (48, 64)
        assert bool(b['has_depth']) == (rec['depth'] is not None)
        assert bool(b['has_labels']) == (rec['labels'] is not None)
        if not b['has_depth']:
            assert torch.isnan(b['depth']).all()
        else:
            assert torch.isfinite(b['depth']).float().mean() > 0.5
        if not b['has_labels']:
            assert (b['labels'] == 0).all()
        seen.add((bool(b['has_depth']), bool(b['has_labels'])))
    assert seen == {(True, True), (False, True), (True, False)}


def test_resize_keeps_label_ids_and_scales_K(ds_dir):
    """C22: nearest keeps label ids; C18: K at input size is scaled with sx, sy (no half-pixel
    shift)."""
    ds = FrameDataset([ds_dir], (40, 30))
    rgb, depth, labels, K = ds.load_raw(0)
    b = ds[0]
    assert set(np.unique(b['labels'].numpy())) <= set(np.unique(labels))
    Kn = b['K'].numpy()
    np.testing.assert_allclose(Kn[0], [K[0, 0] * 0.5, 0, K[0, 2] * 0.5], rtol=1e-6)
    np.testing.assert_allclose(Kn[1], [0, K[1, 1] * 0.5, K[1, 2] * 0.5], rtol=1e-6)


def _source_pixel_error(depth, K, params):
    """Augment ``depth`` (real, metres) and maps of its source column/row with the same geometric
    parameters; back-project the augmented depth with the augmented K, undo the flip's x sign,
    project into the original camera and return |u_rep − u_src|, |v_rep − v_src| (source pixels) at
    valid pixels."""
    h0, w0 = depth.shape
    rgb = np.zeros((h0, w0, 3), np.uint8)
    umap = np.broadcast_to(np.arange(w0, dtype=np.float32) + 1, (h0, w0)).copy()
    vmap = np.broadcast_to(np.arange(h0, dtype=np.float32)[:, None] + 1, (h0, w0)).copy()
    d1, K1 = geometric_transform(rgb, depth, None, K, **params)[1::2]
    us = geometric_transform(rgb, umap, None, K, **params)[1] - 1
    vs = geometric_transform(rgb, vmap, None, K, **params)[1] - 1
    P1 = backproject_np(d1, K1)
    if params.get('flip'):
        P1[..., 0] *= -1
    ok = np.isfinite(d1)
    X, Y, Z = P1[ok, 0], P1[ok, 1], P1[ok, 2]
    # the same points from the original depth at their source pixels (nearest copies the value)
    P0 = backproject_np(depth, K)[vs[ok].astype(int), us[ok].astype(int)]
    assert np.allclose(Z, P0[:, 2])
    u_rep = K[0, 0] * X / Z + K[0, 2]
    v_rep = K[1, 1] * Y / Z + K[1, 2]
    return np.abs(u_rep - us[ok]), np.abs(v_rep - vs[ok]), np.abs(P1[ok] - P0)


@pytest.mark.parametrize(
    'params',
    [
        dict(scaled_wh=(320, 240)),  # plain resize
        dict(scaled_wh=(400, 300), crop_xy=(37, 21), out_wh=(320, 240)),  # scale up + crop
        dict(scaled_wh=(400, 300), crop_xy=(80, 60), out_wh=(320, 240), flip=True),
        dict(scaled_wh=(173, 131), crop_xy=(5, 9), out_wh=(160, 120), flip=True),
        dict(
            scaled_wh=(640, 480), crop_xy=(0, 0), out_wh=(640, 480), flip=True
        ),  # flip only: exact
    ],
)
def test_augmented_K_preserves_3d_points(nyu0001, params):
    """M2 with K adjusted for every geometric augmentation: back-projecting the augmented depth
    with the augmented K gives the original 3D points (x sign flipped by the flip), to within the
    nearest resize's sub-pixel offset (< 1 source pixel, ±0.5 px convention of C18)."""
    _, depth, _, K = nyu0001
    du, dv, dP = _source_pixel_error(depth, K, params)
    assert du.size > 10000
    assert du.max() < 1.0 and dv.max() < 1.0
    if params['scaled_wh'] == (640, 480):
        assert du.max() < 1e-3 and dv.max() < 1e-3 and dP.max() < 1e-5


def test_unadjusted_K_would_fail(nyu0001):
    """The check above is discriminating: the flip or crop without its K change is many pixels
    off."""
    _, depth, _, K = nyu0001
    params = dict(scaled_wh=(400, 300), crop_xy=(80, 60), out_wh=(320, 240), flip=True)
    h0, w0 = depth.shape
    rgb = np.zeros((h0, w0, 3), np.uint8)
    d1, K1 = geometric_transform(rgb, depth, None, K, **params)[1::2]
    K_noflip = flip_intrinsics(K1, 320)  # undo the flip adjustment only
    assert abs(K_noflip[0, 2] - K1[0, 2]) > 10
    umap = np.broadcast_to(np.arange(w0, dtype=np.float32) + 1, (h0, w0)).copy()
    us = geometric_transform(rgb, umap, None, K, **params)[1] - 1
    P = backproject_np(d1, K_noflip)
    P[..., 0] *= -1
    ok = np.isfinite(d1)
    u_rep = K[0, 0] * P[ok, 0] / P[ok, 2] + K[0, 2]
    assert np.abs(u_rep - us[ok]).max() > 5


def test_dataset_augmentation_uses_same_K_and_is_seeded(ds_dir):
    aug = dict(DEFAULTS['augment'], hflip=0.5, scale=[1.1, 1.5])
    ds = FrameDataset([ds_dir], (64, 48), augment=aug, seed=3)
    a, b = ds[0], ds[0]
    assert all(torch.equal(a[k], b[k]) for k in ('K', 'labels')) and torch.allclose(
        a['rgb'], b['rgb']
    )
    # the item's K is the one geometric_transform gives for the draw of (seed, epoch, index)
    p = sample_params(np.random.default_rng([3, 0, 0]), aug, (64, 48))
    rgb, depth, labels, K = ds.load_raw(0)
    K1 = geometric_transform(rgb, depth, labels, K, p.scaled_wh, (p.x0, p.y0), (64, 48), p.flip)[3]
    np.testing.assert_allclose(a['K'].numpy(), K1, rtol=1e-6)
    Ks = set()
    for epoch in range(8):
        ds.set_epoch(epoch)
        Ks.add(tuple(ds[0]['K'].numpy().round(3).ravel()))
    assert len(Ks) > 4  # a new draw each epoch


def test_scale_depth_divides_depth_by_the_zoom(ds_dir):
    """augment.scale_depth (Eigen et al. 2014): a frame zoomed by s carries depth / s, same K and
    labels; the back-projected cloud is the plain one scaled by 1/s (a similarity)."""
    aug = dict(DEFAULTS['augment'], hflip=0.0, scale=[1.2, 1.6], brightness=0.0)
    aug.update(contrast=0.0, saturation=0.0)
    plain = FrameDataset([ds_dir], (64, 48), augment=aug, seed=3)
    scaled = FrameDataset([ds_dir], (64, 48), augment=dict(aug, scale_depth=True), seed=3)
    done = 0
    for i in range(len(plain)):
        a, b = plain[i], scaled[i]
        assert torch.equal(a['K'], b['K']) and torch.equal(a['labels'], b['labels'])
        if not bool(a['has_depth']):
            continue
        p = sample_params(np.random.default_rng([3, 0, i]), aug, (64, 48))
        s = p.scaled_wh[1] / 48
        da, db = a['depth'].numpy(), b['depth'].numpy()
        ok = np.isfinite(da)
        assert np.array_equal(ok, np.isfinite(db)) and ok.any()
        np.testing.assert_allclose(db[ok], da[ok] / s, rtol=1e-6)
        done += 1
    assert done >= 2
    with pytest.raises(ValueError, match=r"augment.scale_depth='yes' must be true or false"):
        load_config(None, ["augment.scale_depth='yes'"])


def test_split_records_deterministic(ds_dir):
    recs = read_index(ds_dir)
    tr, va = split_records(recs, 0.2, seed=1)
    tr2, va2 = split_records(recs, 0.2, seed=1)
    assert [r['id'] for r in va] == [r['id'] for r in va2] and len(va) == 2 and len(tr) == 8
    assert not {r['id'] for r in tr} & {r['id'] for r in va}
    assert split_records(recs, 0.0, seed=1) == (recs, [])


def test_label_id_beyond_classes_refused(ds_dir, tmp_path):
    import cv2

    d = tmp_path / 'd'
    shutil.copytree(ds_dir, d)
    rec = read_index(d)[0]
    lab = cv2.imread(str(d / rec['labels']), cv2.IMREAD_UNCHANGED)
    lab[0, 0] = 20  # NYU13 has ids 0..13
    cv2.imwrite(str(d / rec['labels']), lab)
    with pytest.raises(ValueError, match=r'labels/000000.png has id 20 >= 14 classes'):
        FrameDataset([d], (64, 48))[0]


def test_an_empty_dataset_is_refused_naming_where_it_came_from(tmp_path):
    """No frames: the message names the directories read, or says the records given were empty
    (a split or filter that left none), never an empty directory list."""
    (tmp_path / 'none').mkdir()
    (tmp_path / 'none' / 'index.jsonl').write_text('')
    with pytest.raises(ValueError, match=r'no frames in dataset directories \[.*none'):
        FrameDataset([tmp_path / 'none'])
    with pytest.raises(ValueError, match=r'no frames in the frame records given \(records=\[\]'):
        FrameDataset(records=[])


def _jpeg_with_a_long_app_segment(path):
    """A valid 8×6 JPEG whose SOF marker lies past the first 64 KiB (two 65,533-byte APP1
    segments before it, as EXIF data can be)."""
    import cv2

    ok, enc = cv2.imencode('.jpg', np.full((6, 8, 3), 90, np.uint8))
    app = b'\xff\xe1' + (65535).to_bytes(2, 'big') + bytes(65533)
    path.write_bytes(enc.tobytes()[:2] + app * 2 + enc.tobytes()[2:])
    return path


def test_frames_whose_files_cannot_be_read_are_skipped_with_their_reason(ds_dir, tmp_path, capsys):
    """Issue 55, the dataset reader: a frame whose image file is refused before decoding (a PNG
    whose header declares 100000×100000 pixels), whose header cannot be read, a PNG cut short,
    or whose file is missing or empty is left out when the records are loaded, with one line per
    dataset naming how many of how many, each reason and a file; the other frames load and decode
    (before: the bomb stopped training mid-epoch with one error line)."""
    from bombutil import png_header_bomb

    from depth3dseg_ros.core.classes import NYU13
    from depth3dseg_ros.training.dataset import load_records
    from depth3dseg_ros.training.frame_check import file_problem

    d = tmp_path / 'd'
    shutil.copytree(ds_dir, d)
    recs = read_index(d)
    bomb, junk, gone = d / recs[2]['rgb'], d / recs[3]['labels'], d / recs[7]['depth']
    bomb.write_bytes(png_header_bomb(100000, 100000))
    junk.write_bytes(b'GIF89a not a PNG')
    cut = d / recs[5]['rgb']
    cut.write_bytes(cut.read_bytes()[:-100])  # a copy cut short: its header is whole
    gone.unlink()
    (d / recs[8]['rgb']).write_bytes(b'')
    got = load_records([d], NYU13, prog='depth3dseg-train')
    assert [r['id'] for r in got] == [
        r['id'] for k, r in enumerate(recs) if k not in (2, 3, 5, 7, 8)
    ]
    assert capsys.readouterr().err.splitlines() == [
        f'depth3dseg-train: skipped 5 of 10 frames of {d}: 1 over max_image_pixels=67108864, '
        f'e.g. {bomb}; 2 unreadable (not JPEG, PNG or TIFF, or cut short), e.g. {junk}; '
        f'2 with a missing or empty file, e.g. {gone}'
    ]
    ds = FrameDataset(records=got, input_size=(32, 24))
    assert len(ds) == 5 and all(ds[i]['rgb'].shape == (3, 24, 32) for i in range(len(ds)))
    # no line for a clean dataset, nor with prog=None (the other ranks of a DDP run)
    assert (
        len(load_records([ds_dir], NYU13, prog='x')) == 10
        and len(load_records([d], NYU13, prog=None)) == 5
    )
    assert capsys.readouterr().err == ''
    # a file read past its first 64 KiB only where the size lies further in (JPEG, TIFF)
    assert file_problem(_jpeg_with_a_long_app_segment(tmp_path / 'exif.jpg')) is None
    assert file_problem(bomb, max_pixels=10**10) is None and file_problem(bomb) == 'over'
    assert file_problem(tmp_path / 'exif.jpg', max_pixels=47) == 'over'
    assert file_problem(tmp_path) == 'missing'  # a directory
    assert file_problem(cut) == 'unreadable' and file_problem(d / recs[0]['rgb']) is None
