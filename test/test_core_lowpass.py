"""core.lowpass and arch['input_blur']: the fixed Gaussian low-pass in front of the encoder."""

import cv2
import numpy as np
import pytest
import torch

from depth3dseg_ros.core.lowpass import InputLowPass, gaussian_blur, gaussian_kernel1d
from depth3dseg_ros.core.model import Depth3DSeg, check_arch
from depth3dseg_ros.core.modelfile import load_model, save_model
from depth3dseg_ros.core.classes import NYU13

SMALL = dict(width=0.35, dec_ch=16, head_ch=8, p_channels=[16, 16], p_head=16)


@pytest.mark.parametrize('sigma', [0.6, 1.0, 2.5])
def test_blur_equals_cv2_gaussian_blur(sigma):
    """The separable blur is cv2.GaussianBlur with the same σ, radius ceil(3σ) and its default
    border (BORDER_REFLECT_101), on every channel."""
    rng = np.random.default_rng(0)
    img = rng.random((37, 53, 3)).astype(np.float32)
    k = gaussian_kernel1d(sigma)
    r = k.numel() // 2
    assert r == max(1, int(np.ceil(3 * sigma))) and abs(float(k.sum()) - 1) < 1e-6
    want = cv2.GaussianBlur(img, (2 * r + 1, 2 * r + 1), sigma, borderType=cv2.BORDER_REFLECT_101)
    got = gaussian_blur(torch.from_numpy(img).permute(2, 0, 1)[None], k)[0].permute(1, 2, 0)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


def test_blur_errors_name_the_value():
    for bad in (0, -1.0, float('nan')):
        with pytest.raises(ValueError, match='sigma='):
            gaussian_kernel1d(bad)
    for bad in (-0.5, float('inf')):
        with pytest.raises(ValueError, match='input_blur='):
            InputLowPass(bad)
    with pytest.raises(ValueError, match='blur radius 6'):
        gaussian_blur(torch.zeros(1, 3, 5, 40), gaussian_kernel1d(2.0))
    for bad in (-1, True, 11, 'x'):
        with pytest.raises(ValueError, match=r"input_blur'\]="):
            check_arch({'input_blur': bad})


def test_zero_blur_is_the_identity_and_state_dicts_match():
    """σ 0 changes nothing (the shipped default); the kernel is not in the state dict, so a model
    with the blur loads the weights of one without it (fine-tuning with model.init)."""
    x = torch.randn(1, 3, 8, 8)
    assert InputLowPass(0.0)(x) is x
    torch.manual_seed(0)
    plain = Depth3DSeg(14, **SMALL).eval()
    blurred = Depth3DSeg(14, **SMALL, input_blur=1.5).eval()
    assert set(plain.state_dict()) == set(blurred.state_dict())
    blurred.load_state_dict(plain.state_dict())  # strict
    assert plain.arch['input_blur'] == 0.0 and blurred.arch['input_blur'] == 1.5


def test_blur_acts_on_texture_not_on_flat_images():
    """Same weights: on a constant image (nothing to remove) the blurred model gives the plain
    model's outputs; on a noise texture its 2D input, and so its depth, differ."""
    torch.manual_seed(1)
    plain = Depth3DSeg(14, **SMALL).eval()
    with torch.no_grad():
        plain.net.depth_head[-1].weight.normal_(0, 0.05)
    blurred = Depth3DSeg(14, **SMALL, input_blur=1.0).eval()
    blurred.load_state_dict(plain.state_dict())
    flat = torch.full((1, 3, 48, 64), 0.3)
    noise = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        for k in ('depth', 'seg2d'):
            torch.testing.assert_close(blurred.forward_2d(flat)[k], plain.forward_2d(flat)[k])
        d_plain = plain.forward_2d(noise)['depth']
        d_blur = blurred.forward_2d(noise)['depth']
        want = plain.forward_2d(blurred.net.lowpass(noise))['depth']
    assert (d_plain - d_blur).abs().max() > 1e-4
    torch.testing.assert_close(d_blur, want)


def test_model_file_keeps_the_blur(tmp_path):
    """The σ is stored in the model file's arch and rebuilt on load (the node applies it)."""
    model = Depth3DSeg(len(NYU13), **SMALL, input_blur=1.25).eval()
    save_model(tmp_path / 'm.pt', model, {'classes': NYU13, 'input_size': [64, 48]})
    back, meta = load_model(tmp_path / 'm.pt', map_location='cpu')
    assert meta['arch']['input_blur'] == 1.25
    assert back.net.lowpass.sigma == 1.25
