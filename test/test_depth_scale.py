"""scripts/depth_scale.py: scale versus structure in a model's depth error (models/README.md, "A
scale-sensitive depth loss"). A prediction off by a global factor must show that factor and no
error after median scaling; invalid pixels must not count."""

from __future__ import annotations

import pytest
import torch

from depth3dseg_ros.core.modelfile import load_model
from trainutil import script_with_tiny_model


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('depth_scale')
    return script_with_tiny_model('depth_scale.py', real_dir, tmp)


def test_a_global_factor_is_all_scale(setup):
    stats = setup[0]['frame_scale_stats']
    gt = torch.linspace(0.5, 6.0, 48 * 64).view(1, 48, 64)
    a, s, a_s = stats(gt * 1.25, gt)  # 25 % too far everywhere
    assert a == pytest.approx(0.25) and s == pytest.approx(0.8)
    assert a_s == pytest.approx(0, abs=1e-6)  # float32 rounding of gt * 1.25
    gt2 = gt.clone()
    gt2[..., :10] = float('nan')
    gt2[..., 10:20] = 0.0
    gt2[..., 20:24] = 50.0  # beyond 10 m: not scored
    a2, s2, _ = stats(gt * 1.25, gt2)
    assert a2 == pytest.approx(0.25) and s2 == pytest.approx(0.8)
    assert stats(gt, torch.full_like(gt, float('nan'))) is None


def test_cli_on_a_dataset(setup, capsys):
    script, path, data = setup
    model, meta = load_model(path, map_location='cpu')
    r = script['depth_scale'](model.eval(), meta, str(data))
    assert r['frames'] >= 1 and r['scale'] > 0
    assert 0 <= r['scaled_absrel'] <= r['absrel'] + 1.0
    torch.set_num_threads(1)
    assert script['main'](['--data', str(data), '--model', str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith('| model | data | frames | AbsRel') and len(rows) == 3
    with pytest.raises(SystemExit):
        script['main'](['--data', str(data) + '_missing', '--model', str(path)])
