"""core.colour_balance and the model file's ``input_balance``: the grey-world white balance of the
network input, the same at training (FrameDataset), evaluation and inference (both backends)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.colour_balance import (
    MAX_GAIN,
    check_balance,
    grey_world,
    grey_world_,
    grey_world_gains,
)
from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import FORMAT, VERSION, ModelFileError, load_model, save_model
from depth3dseg_ros.training.checkpoint import load_init_model
from depth3dseg_ros.training.config import DEFAULTS, load_config, validate
from depth3dseg_ros.training.dataset import FrameDataset

SMALL = dict(width=0.35, dec_ch=16, head_ch=8, p_channels=[16, 16], p_head=16, p_stride=2)
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _scene(h=60, w=80, seed=0) -> np.ndarray:
    """A uint8 H×W×3 image with texture and regions of several colours, none saturated."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(40, 160, size=(4, 4, 3))
    img = np.kron(base, np.ones((h // 4, w // 4, 1))) + rng.normal(0, 8, size=(h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _cast(rgb: np.ndarray, gains=(1.25, 1.0, 0.7)) -> np.ndarray:
    """The same scene under another white balance: per-channel factors, rounded to uint8."""
    return np.clip(np.rint(rgb.astype(np.float64) * np.asarray(gains)), 0, 255).astype(np.uint8)


def test_grey_world_makes_the_mean_grey_and_keeps_brightness():
    rgb = _cast(_scene())
    out = grey_world(rgb, 255.0)
    assert out.dtype == np.float32 and out.shape == rgb.shape
    m_in, m_out = rgb.reshape(-1, 3).mean(0), out.reshape(-1, 3).mean(0)
    np.testing.assert_allclose(m_out, m_in.mean(), rtol=1e-3)  # grey, same brightness
    # float 0..1 input gives the same image on its scale
    np.testing.assert_allclose(grey_world(rgb / 255.0, 1.0) * 255.0, out, rtol=1e-5)


def test_a_cast_is_removed_up_to_rounding():
    """Two white balances of one scene give the same balanced image up to uint8 rounding and
    the brightness the cast changed (grey-world keeps each image's mean brightness)."""
    rgb = _scene(seed=3)
    a = grey_world(rgb, 255.0)
    b = grey_world(_cast(rgb), 255.0)
    b *= a.mean() / b.mean()
    assert np.abs(a - b).mean() < 0.6 and np.abs(a - b).max() < 3.0


def test_torch_in_place_equals_numpy():
    rgb = _cast(_scene(seed=1), (0.8, 1.1, 1.3))
    t = torch.from_numpy(rgb).permute(2, 0, 1).float().contiguous()
    out = grey_world_(t, 255.0)
    assert out is t
    np.testing.assert_allclose(t.permute(1, 2, 0).numpy(), grey_world(rgb, 255.0), atol=1e-3)
    # a channels-last view (the Segmenter's buffer) too
    t2 = (
        torch.from_numpy(rgb)
        .permute(2, 0, 1)
        .float()[None]
        .contiguous(memory_format=torch.channels_last)[0]
    )
    grey_world_(t2, 255.0)
    np.testing.assert_allclose(t2.permute(1, 2, 0).numpy(), grey_world(rgb, 255.0), atol=1e-3)


def test_degenerate_images_are_bounded():
    """A black image is left as it is; a single-colour image gets gains of at most MAX_GAIN,
    and the output stays within the input's range."""
    black = np.zeros((8, 8, 3), np.uint8)
    assert np.array_equal(grey_world(black, 255.0), black)
    assert np.array_equal(grey_world_gains([0, 0, 0]), [1, 1, 1])
    red = np.zeros((8, 8, 3), np.uint8)
    red[..., 0] = 200
    g = grey_world_gains(red.reshape(-1, 3).mean(0))
    assert g.max() <= MAX_GAIN and g.min() >= 1 / MAX_GAIN
    out = grey_world(red, 255.0)
    assert out.min() >= 0 and out.max() <= 255.0
    t = torch.zeros(3, 4, 4)
    assert torch.equal(grey_world_(t, 255.0), torch.zeros(3, 4, 4))


def test_errors_name_the_value():
    for bad in ('greyworld', None, 1, 'None'):
        with pytest.raises(ValueError, match='input_balance='):
            check_balance(bad)
    with pytest.raises(ValueError, match='channel means'):
        grey_world_gains([1, 2])
    with pytest.raises(ValueError, match='channel means'):
        grey_world_gains([1, -2, 3])
    with pytest.raises(ValueError, match='H×W×3'):
        grey_world(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match='3×H×W'):
        grey_world_(torch.zeros(1, 3, 4, 4))
    with pytest.raises(ValueError, match='balance='):
        FrameDataset(records=[{}], balance='auto')


def _model() -> Depth3DSeg:
    torch.manual_seed(0)
    model = Depth3DSeg(len(NYU13), **SMALL)
    with torch.no_grad():  # a depth head that depends on the image (it starts at zero weights)
        model.net.depth_head[-1].weight.normal_(0, 0.5)
    return model.eval()


def _save(path, model, balance=None):
    meta = {'classes': NYU13.to_dict(), 'input_size': [80, 60], 'mean': MEAN, 'std': STD}
    if balance is not None:
        meta['input_balance'] = balance
    return save_model(path, model, meta)


def test_model_file_carries_the_balance(tmp_path):
    _, meta = load_model(_save(tmp_path / 'a.pt', _model()))
    assert meta['input_balance'] == 'none'
    _, meta = load_model(_save(tmp_path / 'b.pt', _model(), 'grey_world'))
    assert meta['input_balance'] == 'grey_world'
    with pytest.raises(ModelFileError, match=r"input_balance'\]='auto'"):
        _save(tmp_path / 'c.pt', _model(), 'auto')
    # a file written before the key existed loads as 'none'
    model = _model()
    meta = {
        'classes': NYU13.to_dict(),
        'input_size': [80, 60],
        'mean': MEAN,
        'std': STD,
        'max_depth': 10.0,
        'arch': dict(model.arch),
    }
    torch.save(
        {'format': FORMAT, 'version': VERSION, 'meta': meta, 'state_dict': model.state_dict()},
        tmp_path / 'old.pt',
    )
    _, meta = load_model(tmp_path / 'old.pt')
    assert meta['input_balance'] == 'none'


def _dataset_dir(tmp_path, rgb: np.ndarray):
    d = tmp_path / 'ds'
    (d / 'rgb').mkdir(parents=True)
    Image.fromarray(rgb).save(d / 'rgb' / 'f0.png')
    h, w = rgb.shape[:2]
    rec = {'id': 'f0', 'rgb': 'rgb/f0.png', 'depth': None, 'labels': None}
    rec['K'] = [60.0, 0, w / 2, 0, 60.0, h / 2, 0, 0, 1]
    rec.update(width=w, height=h)
    (d / 'index.jsonl').write_text(json.dumps(rec) + '\n')
    (d / 'manifest.json').write_text(json.dumps({'classes': NYU13.to_dict()}))
    return d


def test_frame_dataset_balances_before_normalising(tmp_path):
    rgb = _cast(_scene(seed=2))
    d = _dataset_dir(tmp_path, rgb)
    plain = FrameDataset([d], input_size=(80, 60), mean=MEAN, std=STD)[0]['rgb']
    bal = FrameDataset([d], input_size=(80, 60), mean=MEAN, std=STD, balance='grey_world')[0][
        'rgb'
    ]
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    raw = (plain * std + mean).permute(1, 2, 0).numpy()
    np.testing.assert_allclose(raw * 255.0, rgb, atol=1e-3)
    want = grey_world(raw, 1.0)
    np.testing.assert_allclose((bal * std + mean).permute(1, 2, 0).numpy(), want, atol=1e-5)
    # augmented frames are balanced after the colour jitter
    aug = dict(DEFAULTS['augment'], brightness=0.3)
    ds = FrameDataset(
        [d], input_size=(80, 60), mean=MEAN, std=STD, augment=aug, balance='grey_world'
    )
    m = (ds[0]['rgb'] * std + mean).mean(dim=(1, 2))
    assert float(m.max() - m.min()) < 0.01


def test_segmenter_applies_the_files_balance(tmp_path):
    """Torch backend: the outputs are the network's on the balanced, normalised input, and a
    white-balance change of the camera barely moves them (an unbalanced model moves more)."""
    model = _model()
    seg = Segmenter(_save(tmp_path / 'gw.pt', model, 'grey_world'), device='cpu')
    plain = Segmenter(_save(tmp_path / 'none.pt', model), device='cpu')
    assert seg.balance == 'grey_world' and plain.balance == 'none'
    rgb = _scene(seed=4)
    K = np.array([[60.0, 0, 40], [0, 60.0, 30], [0, 0, 1]])
    x = (grey_world(rgb, 255.0) / 255.0 - np.array(MEAN)) / np.array(STD)
    with torch.no_grad():
        ref = model(
            torch.from_numpy(x.transpose(2, 0, 1)).float()[None], torch.tensor(K).float()[None]
        )
    res = seg.infer(rgb, K, 'fused')
    np.testing.assert_allclose(res.depth, ref['depth'][0, 0].numpy(), rtol=1e-4)
    cast = _cast(rgb)
    d_bal = np.abs(seg.infer(cast, K, 'fused').depth - res.depth).mean()
    d_plain = np.abs(plain.infer(cast, K).depth - plain.infer(rgb, K).depth).mean()
    assert d_bal < 0.2 * d_plain


def test_fine_tune_inherits_or_sets_the_balance(tmp_path):
    init = str(_save(tmp_path / 'gw.pt', _model(), 'grey_world'))
    cfg = validate(load_config(None, [f'model.init={init}']))
    assert cfg['model']['input_balance'] is None
    load_init_model(cfg, NYU13)
    assert cfg['model']['input_balance'] == 'grey_world'  # null: the init's
    cfg = validate(load_config(None, [f'model.init={init}', 'model.input_balance=none']))
    load_init_model(cfg, NYU13)
    assert cfg['model']['input_balance'] == 'none'  # set: the run's
    with pytest.raises(ValueError, match='config model.input_balance='):
        validate(load_config(None, ['model.input_balance=auto']))
