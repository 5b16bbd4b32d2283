"""scripts/geometry_input.py: the geometry code that replaces RGB for the "geometry as the 2D
network's input" lever (docs/levers.md). Planes of known orientation give known codes."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

SCRIPT = Path(__file__).resolve().parents[1] / 'scripts' / 'geometry_input.py'
K = np.array([[200.0, 0, 79.5], [0, 200.0, 59.5], [0, 0, 1]])
H, W = 120, 160


@pytest.fixture(scope='module')
def mod():
    return runpy.run_path(str(SCRIPT))


def _rays():
    u, v = np.meshgrid(np.arange(W, dtype=np.float64), np.arange(H, dtype=np.float64))
    return (u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1]


def test_a_wall_facing_the_camera_is_mid_grey_green_and_no_blue(mod):
    code = mod['geometry_image'](np.full((H, W), 2.0), K)
    inner = code[5:-5, 5:-5].reshape(-1, 3).astype(int)
    expect_r = round((np.log(2.0) - np.log(0.4)) / (np.log(10.0) - np.log(0.4)) * 255)
    assert np.abs(inner[:, 0] - expect_r).max() <= 1
    assert np.abs(inner[:, 1] - 128).max() <= 1  # n_y = 0
    assert inner[:, 2].max() <= 1  # n_x = 0


def test_a_floor_is_dark_green_and_a_side_wall_is_bright_blue(mod):
    x, y = _rays()
    # floor 1.2 m below the optical centre, level camera: y = 1.2 -> d = 1.2 / y for rays below
    floor = np.where(y > 0.05, 1.2 / np.maximum(y, 1e-9), 0.0)
    code = mod['geometry_image'](floor, K)
    rows = code[H // 2 + 20 : -5, 5:-5].reshape(-1, 3).astype(int)
    assert rows[:, 1].max() <= 3  # n_y = -1 (normal points up, towards the camera)
    assert rows[:, 2].max() <= 3
    # a wall at x = -1 m (left of the camera): d = -1 / x for rays to the left
    wall = np.where(x < -0.05, -1.0 / np.minimum(x, -1e-9), 0.0)
    cols = mod['geometry_image'](wall, K)[5:-5, 5 : W // 2 - 20].reshape(-1, 3).astype(int)
    assert cols[:, 2].min() >= 252  # |n_x| = 1
    assert np.abs(cols[:, 1] - 128).max() <= 2


def test_holes_are_zero_and_the_code_is_mirror_symmetric(mod):
    x, y = _rays()
    d = 2.0 + 0.5 * x + 0.3 * y  # a tilted plane, symmetric code after a mirror only through |n_x|
    d[40:60, 70:90] = 0.0
    d[0, 0] = np.nan
    code = mod['geometry_image'](d, K)
    assert (code[40:60, 70:90] == 0).all() and (code[0, 0] == 0).all()
    # mirrored depth with mirrored K: G and B are those of the unmirrored plane, mirrored
    Km = K.copy()
    Km[0, 2] = W - 1 - K[0, 2]
    mirrored = mod['geometry_image'](d[:, ::-1], Km)
    np.testing.assert_allclose(
        mirrored[:, ::-1, 1:].astype(int), code[:, :, 1:].astype(int), atol=1
    )


@pytest.mark.parametrize(
    ('depth', 'k', 'smooth', 'message'),
    [
        (np.ones((2, 3, 4)), K, 5, 'depth shape'),
        (np.ones((4, 4)), np.eye(2), 5, 'K='),
        (np.ones((4, 4)), K, 4, 'smooth_px=4'),
    ],
)
def test_bad_input_names_the_value(mod, depth, k, smooth, message):
    with pytest.raises(ValueError, match=message):
        mod['geometry_image'](depth, k, smooth)


def test_convert_writes_a_dataset_with_the_code_in_place_of_rgb(mod, tmp_path):
    src = tmp_path / 'src'
    for sub in ('rgb', 'depth', 'labels'):
        (src / sub).mkdir(parents=True)
    records = []
    for i, has_depth in enumerate((True, False)):
        Image.fromarray(np.full((H, W, 3), 200, np.uint8)).save(src / 'rgb' / f'{i}.png')
        Image.fromarray(np.full((H, W), 1, np.uint8)).save(src / 'labels' / f'{i}.png')
        if has_depth:
            Image.fromarray(np.full((H, W), 2000, np.uint16)).save(src / 'depth' / f'{i}.png')
        records.append(
            {
                'id': str(i),
                'rgb': f'rgb/{i}.png',
                'depth': f'depth/{i}.png' if has_depth else None,
                'depth_scale': 0.001,
                'labels': f'labels/{i}.png',
                'K': K.reshape(-1).tolist(),
                'width': W,
                'height': H,
            }
        )
    (src / 'index.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in records))
    (src / 'manifest.json').write_text('{}')
    n, skipped = mod['convert'](src, tmp_path / 'out', False)
    assert (n, skipped) == (2, 1)
    out = tmp_path / 'out'
    with_depth = np.asarray(Image.open(out / 'rgb' / '0.png'))
    assert abs(int(with_depth[60, 80, 1]) - 128) <= 1 and with_depth[60, 80, 2] <= 1
    assert (np.asarray(Image.open(out / 'rgb' / '1.png')) == 0).all()
    assert (out / 'labels' / '0.png').is_file()
    assert json.loads((out / 'manifest.json').read_text())['geometry_input']['frames'] == 2
    n, skipped = mod['convert'](src, tmp_path / 'out2', True)
    assert (n, skipped) == (1, 1)


def test_late_fusion_ends_are_the_two_models_as_depth3dseg_eval_scores_them(real_dir, tmp_path):
    """scripts/late_fusion_eval.py: w = 0 is the colour model's 2D mIoU and w = 1 the geometry
    model's, each as evaluate_model scores it on the frames with depth; a geometry set that lacks
    one of the colour set's frames is an error naming it."""
    from depth3dseg_ros.core.classes import NYU13
    from depth3dseg_ros.core.modelfile import load_model
    from depth3dseg_ros.training.dataset import load_records
    from depth3dseg_ros.training.evaluate import evaluate_model, model_dataset
    from trainutil import make_dataset_dir, perturbed_tiny_model_file

    late = runpy.run_path(str(SCRIPT.parent / 'late_fusion_eval.py'))
    data = make_dataset_dir(real_dir, tmp_path / 'ds', size=(96, 72))
    geo = tmp_path / 'geo'
    convert = runpy.run_path(str(SCRIPT))['convert']
    convert(data, geo, False)
    colour = perturbed_tiny_model_file(tmp_path / 'c.pt', seed=0)
    geometry = perturbed_tiny_model_file(tmp_path / 'g.pt', seed=1)
    n, (s0, s1) = late['late_fusion'](str(colour), str(geometry), str(data), str(geo), [0.0, 1.0])
    for model_file, ds_dir, s in ((colour, data, s0), (geometry, geo, s1)):
        model, meta = load_model(model_file)
        recs = [r for r in load_records([ds_dir], NYU13) if r.get('depth') and r.get('labels')]
        assert len(recs) == n > 0
        ref = evaluate_model(model, model_dataset(recs, meta, NYU13), NYU13)
        assert s['miou'] == pytest.approx(ref['miou_2d'], abs=1e-9)
    assert s0['miou'] != pytest.approx(s1['miou'], abs=1e-6)  # the two models differ
    first = next(r['id'] for r in load_records([geo], NYU13) if r.get('depth'))
    keep = [line for line in (geo / 'index.jsonl').read_text().splitlines() if first not in line]
    (geo / 'index.jsonl').write_text(''.join(line + '\n' for line in keep))
    with pytest.raises(SystemExit, match=first):
        late['late_fusion'](str(colour), str(geometry), str(data), str(geo), [0.5])


def test_without_smoothing_a_pixel_beside_a_hole_has_no_code(mod):
    """The central differences of a pixel beside a hole would use the hole's point (the optical
    centre): such pixels get no code, as in core.depth_code (core.normals)."""
    d = np.full((H, W), 2.0)
    d[40:60, 70:90] = 0.0
    code = mod['geometry_image'](d, K, 1)
    assert (code[39, 70:90] == 0).all() and (code[40:60, 69] == 0).all()
    assert (code[38, 70:90] > 0).any(axis=-1).all()
