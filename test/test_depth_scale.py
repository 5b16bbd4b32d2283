"""scripts/depth_scale.py: scale versus structure in a model's depth error (docs/levers.md, "A
scale-sensitive depth loss"). The per-frame statistics are core.depth_calibration's
(test_core_depth_calibration.py); here the script's table."""

from __future__ import annotations

import pytest
import torch

from depth3dseg_ros.core.modelfile import load_model
from trainutil import script_with_tiny_model


@pytest.fixture(scope='module')
def setup(real_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('depth_scale')
    return script_with_tiny_model('depth_scale.py', real_dir, tmp)


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
