"""The node's start-up parameter ``backend`` (auto | torch | onnxruntime) reaches the Segmenter
(node.node.default_segmenter); an .onnx model_file runs in ONNX Runtime. No DDS needed."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip('onnx')
pytest.importorskip('onnxruntime')

from depth3dseg_ros.core.classes import NYU13  # noqa: E402
from depth3dseg_ros.core.model import Depth3DSeg  # noqa: E402
from depth3dseg_ros.core.modelfile import save_model  # noqa: E402
from depth3dseg_ros.core.onnx_export import export_onnx  # noqa: E402
from depth3dseg_ros.node.node import default_segmenter  # noqa: E402
from depth3dseg_ros.node.params import validate  # noqa: E402


@pytest.fixture(scope='module')
def pt_and_onnx(tmp_path_factory):
    d = tmp_path_factory.mktemp('nb')
    pt = d / 'm.pt'
    save_model(
        pt,
        Depth3DSeg(
            len(NYU13),
            width=0.25,
            depth_mult=0.5,
            dec_ch=16,
            head_ch=8,
            p_channels=[8, 16],
            p_head=16,
        ).eval(),
        {'classes': NYU13, 'input_size': [64, 48]},
    )
    export_onnx(pt, pt.with_suffix('.onnx'))
    return pt, pt.with_suffix('.onnx')


def _params(**kw):
    return validate(dict({'device': 'cpu', 'torch_threads': 1}, **kw))


def test_backend_parameter_reaches_the_segmenter(pt_and_onnx, tmp_path):
    pt, onnx_file = pt_and_onnx
    assert _params().backend == 'auto'
    assert default_segmenter(_params(backend='torch'), str(pt)).backend == 'torch'
    assert default_segmenter(_params(backend='onnxruntime'), str(pt)).backend == 'onnxruntime'
    assert default_segmenter(_params(), str(pt)).backend == 'onnxruntime'  # export beside the .pt
    assert default_segmenter(_params(), str(onnx_file)).backend == 'onnxruntime'
    alone = tmp_path / 'alone.pt'
    shutil.copy(pt, alone)
    assert default_segmenter(_params(), str(alone)).backend == 'torch'  # nothing beside it
    with pytest.raises(ValueError, match="parameter backend='tensorrt' is not one of"):
        _params(backend='tensorrt')
    with pytest.raises(ValueError, match="backend='torch' cannot run"):
        default_segmenter(_params(backend='torch'), str(onnx_file))
