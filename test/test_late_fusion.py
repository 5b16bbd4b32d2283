"""RGB-D late fusion (core/late_fusion.py): the fused 2D distribution, the geometry model's file
marking (scripts/set_arch.py --input), the Segmenter path and what frames without depth keep."""

import copy
import json
import math
import re
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from cliutil import one_error_line
from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.fusion import class_probs
from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.late_fusion import GeometryBranch, check_weight, fuse_2d
from depth3dseg_ros.core.modelfile import ModelFileError, load_model, read_model_file, save_model
from trainutil import perturbed_tiny_model_file

SET_ARCH = runpy.run_path(str(Path(__file__).resolve().parents[1] / 'scripts' / 'set_arch.py'))
W, H = 96, 72
K = np.array([[80.0, 0, W / 2], [0, 80.0, H / 2], [0, 0, 1]])


def _room_depth() -> np.ndarray:
    """A floor plane seen from 1 m above (rows below the horizon) and a wall at 3 m: H×W metres."""
    v = np.arange(H, dtype=np.float64)[:, None] - H / 2 + 0.5
    floor = np.where(v > 0, 1.0 * 80.0 / np.maximum(v, 1e-6), np.inf)
    return np.minimum(floor, 3.0).repeat(W, 1).astype(np.float32)


@pytest.fixture(scope='module')
def models(tmp_path_factory):
    """(colour model file, geometry model file: another tiny net marked input depth_code)."""
    tmp = tmp_path_factory.mktemp('lf')
    colour = perturbed_tiny_model_file(tmp / 'colour.pt', (W, H), seed=0)
    raw = perturbed_tiny_model_file(tmp / 'raw_geo.pt', (W // 2, H // 2), seed=1)
    geo = tmp / 'geo.pt'
    done = SET_ARCH['set_arch'](str(raw), {}, str(geo), input_kind='depth_code')
    assert done == {'input': ('rgb', 'depth_code')}
    return colour, geo


def test_fuse_2d_is_the_weighted_mean_of_the_two_softmaxes_without_void():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 5, 4, 3, generator=g), torch.randn(2, 5, 4, 3, generator=g)
    for w in (0.0, 0.3, 1.0):
        p = fuse_2d(a, b, w, void_id=0).exp()
        want = (1 - w) * class_probs(a, 0) + w * class_probs(b, 0)
        assert torch.allclose(p[:, 1:], want[:, 1:], atol=1e-6)
        assert float(p[:, 0].max()) <= 1e-12 + 1e-15  # void stays out
        assert torch.isfinite(fuse_2d(a, b, w, 0)).all()
    # M7 on the fused log-probabilities gives back the fused distribution
    assert torch.allclose(class_probs(fuse_2d(a, b, 0.5, 0), 0), fuse_2d(a, b, 0.5, 0).exp(), 1e-5)
    # a frame without depth keeps the colour logits exactly
    out = fuse_2d(a, b, 0.5, 0, has_depth=torch.tensor([True, False]))
    assert torch.equal(out[1], a[1]) and not torch.equal(out[0], a[0])
    with pytest.raises(ValueError, match='geometry logits'):
        fuse_2d(a, b[:, :4], 0.5, 0)


@pytest.mark.parametrize('bad', [-0.1, 1.5, math.nan, math.inf, True, 'half', None])
def test_weight_outside_0_1_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r'geometry_weight=.* must be a number in \[0, 1\]'):
        check_weight(bad)


def test_files_say_what_their_2d_network_takes(models, tmp_path):
    colour, geo = models
    assert load_model(colour)[1]['input'] == 'rgb'  # the default, also for older files
    assert load_model(geo)[1]['input'] == 'depth_code'
    data = read_model_file(colour)
    model, meta = load_model(colour)
    with pytest.raises(ModelFileError, match=r"meta\['input'\]='hha' must be one of"):
        save_model(tmp_path / 'bad.pt', model, dict(data['meta'], input='hha'))
    with pytest.raises(ValueError, match=r"--input='hha'"):
        SET_ARCH['set_arch'](str(colour), {}, str(tmp_path / 'x.pt'), input_kind='hha')


def test_geometry_branch_refuses_a_colour_model_and_other_classes(models, tmp_path):
    colour, geo = models
    with pytest.raises(ValueError, match=r"meta\['input'\] is 'rgb', so it is not a geometry"):
        GeometryBranch(colour)
    d = NYU13.to_dict()
    d['classes'] = [dict(c, name='rug') if c['id'] == 3 else c for c in d['classes']]
    other = ClassSet.from_dict(d)
    with pytest.raises(ValueError, match='differ from the colour model'):
        GeometryBranch(geo, classes=other)
    with pytest.raises(ValueError, match='geometry_weight=2'):
        GeometryBranch(geo, weight=2)
    with pytest.raises(ValueError, match='a geometry model is not a colour model'):
        Segmenter(geo, device='cpu', backend='torch')


def test_geometry_branch_logits_and_frames_without_depth(models):
    _, geo = models
    d = torch.from_numpy(_room_depth())[None, None]
    measured = torch.cat([d, torch.zeros_like(d)])  # frame 1: a camera with no depth this frame
    Kt = torch.as_tensor(K, dtype=torch.float32)
    out = {k: torch.randn(2, len(NYU13), H, W) for k in ('seg2d', 'seg3d')}
    out['depth'] = torch.rand(2, 1, H, W)
    for heads, fused_keys in (('2d', {'seg2d'}), ('both', {'seg2d', 'seg3d'})):
        br = GeometryBranch(geo, 0.5, classes=NYU13, heads=heads)
        logits = br.logits(measured, Kt)
        assert set(logits) == fused_keys
        assert all(v.shape == (2, len(NYU13), H, W) for v in logits.values())
        fused = br.fuse(out, measured, Kt, NYU13.void_id)
        for key in ('seg2d', 'seg3d'):
            assert torch.equal(fused[key][1], out[key][1])  # the frame without depth: as it was
            assert torch.equal(fused[key][0], out[key][0]) == (key not in fused_keys)
        assert fused['depth'] is out['depth']
        assert br.fuse(out, torch.zeros_like(measured), Kt, 0) is out  # no depth at all
    # NaN / inf / negative depth is "no data", as everywhere in the package
    bad = measured.clone()
    bad[0, 0, :4] = float('nan')
    bad[0, 0, 4:8] = -1.0
    assert all(torch.isfinite(v).all() for v in br.logits(bad, Kt).values())
    with pytest.raises(ValueError, match="geometry_heads='3d' must be one of"):
        GeometryBranch(geo, heads='3d')


def test_segmenter_fuses_only_frames_with_measured_depth(models):
    colour, geo = models
    rgb = np.random.default_rng(0).integers(0, 255, (H, W, 3), np.uint8)
    depth = _room_depth()
    plain = Segmenter(colour, device='cpu', backend='torch', num_threads=0)
    fused = Segmenter(colour, device='cpu', backend='torch', num_threads=0, geometry_model=geo)
    assert fused.geometry is not None and fused.geometry.weight == 0.5
    for src in ('2d', 'fused'):  # no depth: the colour model's labels, bit for bit
        assert np.array_equal(fused.infer(rgb, K, src).labels, plain.infer(rgb, K, src).labels)
    a, b = plain.infer(rgb, K, '2d', depth), fused.infer(rgb, K, '2d', depth)
    assert not np.array_equal(a.labels, b.labels)
    assert np.array_equal(a.depth, b.depth, equal_nan=True)  # depth stays the colour model's
    # weight 1: the 2D labels are the geometry model's own
    only = Segmenter(
        colour,
        device='cpu',
        backend='torch',
        num_threads=0,
        geometry_model=geo,
        geometry_weight=1.0,
    )
    br = GeometryBranch(geo)
    g = br.logits(torch.from_numpy(depth)[None, None], torch.as_tensor(K, dtype=torch.float32))
    g = g['seg2d']
    want = class_probs(g, NYU13.void_id).argmax(1)[0].numpy()
    assert np.array_equal(only.infer(rgb, K, '2d', depth).labels, want)


def test_eval_late_fuses_frames_with_depth_and_refuses_it_without_measured_depth(
    models, real_dir, tmp_path, capsys
):
    from depth3dseg_ros.training import evaluate
    from trainutil import make_dataset_dir

    colour, geo = models
    data = make_dataset_dir(real_dir, tmp_path / 'ds', size=(W, H))
    base = ['--model', str(colour), '--data', str(data), '--only-with-depth', '--resamples', '0']

    def run(out, *extra):
        assert evaluate.main([*base, '--out', str(tmp_path / out), *extra]) == 0
        return json.loads((tmp_path / out / 'report.json').read_text())

    plain = run('plain', '--measured-depth')
    fused = run('fused', '--measured-depth', '--geometry-model', str(geo), '--grids', '1')
    assert fused['geometry_model'] == str(geo) and fused['geometry_weight'] == 0.5
    assert plain['geometry_model'] is None and plain['geometry_weight'] is None
    assert fused['frames'] == plain['frames'] > 0
    assert fused['miou_2d'] != plain['miou_2d']  # the 2D labels changed ...
    assert fused['absrel'] == plain['absrel']  # ... the depth did not
    assert (tmp_path / 'fused' / 'grid_000.png').is_file()
    capsys.readouterr()
    for extra, msg in (
        (['--geometry-model', str(geo)], 'needs --measured-depth'),
        (['--measured-depth', '--geometry-model', str(colour)], 'not a geometry model'),
        (
            ['--measured-depth', '--geometry-model', str(geo), '--geometry-weight', '1.5'],
            r'--geometry-weight=1.5 must be a number in \[0, 1\]',
        ),
    ):
        assert evaluate.main([*base, '--out', str(tmp_path / 'x'), *extra]) == 2
        assert re.search(msg, one_error_line(capsys, 'depth3dseg-eval'))


def test_a_run_on_geometry_codes_writes_a_geometry_model_and_refuses_photometric_changes():
    from depth3dseg_ros.training.config import DEFAULTS, validate
    from depth3dseg_ros.training.train import export_meta
    from trainutil import tiny_model

    cfg = copy.deepcopy(DEFAULTS)
    cfg['model']['input'] = 'depth_code'
    both = r'augment.brightness=0.2, augment.contrast=0.2, augment.saturation=0.2 with model.input'
    with pytest.raises(ValueError, match=both):
        validate(copy.deepcopy(cfg))
    for k in ('brightness', 'contrast', 'saturation'):
        cfg['augment'][k] = 0.0
    cfg['model']['input_balance'] = 'grey_world'
    with pytest.raises(ValueError, match=r"model.input_balance='grey_world' with model.input"):
        validate(copy.deepcopy(cfg))
    cfg['model']['input_balance'] = None
    cfg['augment']['camera'] = 'real_camera'
    with pytest.raises(ValueError, match=r"augment.camera='real_camera' with model.input"):
        validate(copy.deepcopy(cfg))
    cfg['augment']['camera'] = None
    cfg = validate(cfg)
    cfg['model']['input_balance'] = 'none'
    cfg['model']['input'] = 'hha'
    with pytest.raises(ValueError, match=r"config model.input='hha' must be one of"):
        validate(copy.deepcopy(cfg))
    cfg['model']['input'] = 'depth_code'
    meta = export_meta(cfg, NYU13, tiny_model(len(NYU13)), {})
    assert meta['input'] == 'depth_code'


def test_datasets_must_hold_what_the_model_takes_and_eval_says_how_it_ran(
    models, real_dir, tmp_path, capsys
):
    """A geometry model refuses colour datasets and a colour model refuses code datasets (the
    manifest's geometry_input entry, scripts/geometry_input.py), in training and evaluation; the
    geometry flags need --geometry-model; report.txt's first line says how the figures were
    made."""
    from depth3dseg_ros.dataset_format import dataset_input_kind
    from depth3dseg_ros.training import evaluate
    from depth3dseg_ros.training.dataset import load_records
    from trainutil import make_dataset_dir

    colour, geo = models
    rgb = make_dataset_dir(real_dir, tmp_path / 'rgb', size=(W, H))
    code = tmp_path / 'code'
    gi = runpy.run_path(str(Path(__file__).resolve().parents[1] / 'scripts' / 'geometry_input.py'))
    gi['convert'](rgb, code, False)
    assert dataset_input_kind(rgb) == 'rgb' and dataset_input_kind(code) == 'depth_code'
    assert load_records([code], NYU13, 'depth_code') and load_records([rgb], NYU13, 'rgb')
    with pytest.raises(ValueError, match='holds colour images but the model takes geometry codes'):
        load_records([rgb], NYU13, 'depth_code')
    with pytest.raises(ValueError, match='holds geometry codes .* --set model.input=depth_code'):
        load_records([code], NYU13, 'rgb')

    def run(*args):
        return evaluate.main([*args, '--resamples', '0', '--out', str(tmp_path / 'e')])

    rgbd = ['--model', str(colour), '--data', str(rgb), '--measured-depth']
    for args, msg in (
        (['--model', str(geo), '--data', str(rgb)], 'holds colour images'),
        (['--model', str(colour), '--data', str(code)], 'holds geometry codes'),
        ([*rgbd, '--geometry-weight', '0.3'], '--geometry-weight 0.3 needs --geometry-model'),
        (
            [*rgbd, '--geometry-model', str(tmp_path / 'nope.pt')],
            f'geometry model {tmp_path / "nope.pt"}: no such file',
        ),
        ([*rgbd, '--geometry-model', str(tmp_path)], 'is a directory: give the model file in it'),
    ):
        capsys.readouterr()
        assert run(*args) == 2, args
        assert msg in one_error_line(capsys, 'depth3dseg-eval')
    assert run('--model', str(geo), '--data', str(code)) == 0  # the geometry model alone
    assert run(*rgbd, '--geometry-model', str(geo), '--geometry-weight', '0.25') == 0
    first = (tmp_path / 'e' / 'report.txt').read_text().splitlines()[0]
    assert first == (
        f'model {colour} on {rgb} (10 frames; measured depth for the cloud; RGB-D late fusion '
        f'with {geo} (weight 0.25, heads 2d))'
    )
