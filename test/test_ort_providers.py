"""Execution-provider choice of the ONNX Runtime backend (core.backends.select_providers,
provider_entry) and the GPU benchmark's plan (bench/bench_ort_gpu.provider_plan), as pure functions
over a list of provider names: no GPU, no onnxruntime-gpu and no onnxruntime import needed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from depth3dseg_ros.core.backends import provider_entry, select_providers

REPO = Path(__file__).resolve().parents[1]
CPU = 'CPUExecutionProvider'
TRT, CUDA = 'TensorrtExecutionProvider', 'CUDAExecutionProvider'


def test_select_providers_cpu_only_install():
    have = ['AzureExecutionProvider', CPU]
    assert select_providers(have, 'cpu') == [CPU]
    assert select_providers(have, 'auto') == [CPU]
    with pytest.raises(ValueError, match='no CUDA provider.*onnxruntime-gpu'):
        select_providers(have, 'cuda')
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        select_providers(have, 'gpu')
    with pytest.raises(ValueError, match="'cuda:N'"):
        select_providers(have, 'cuda:x')


def test_select_providers_gpu_install():
    have = [TRT, CUDA, CPU]
    assert select_providers(have, 'cpu') == [CPU]
    assert select_providers(have, 'auto') == [
        (TRT, {'device_id': 0, 'trt_fp16_enable': False}),
        (CUDA, {'device_id': 0}),
        CPU,
    ]
    got = select_providers(have, 'cuda:1', fp16=True, trt_cache='/tmp/c')
    assert got[0] == (
        TRT,
        {
            'device_id': 1,
            'trt_fp16_enable': True,
            'trt_engine_cache_enable': True,
            'trt_engine_cache_path': '/tmp/c',
        },
    )
    assert got[1:] == [(CUDA, {'device_id': 1}), CPU]
    # CUDA without TensorRT (the TensorRT libraries not installed: no TRT provider listed)
    assert select_providers([CUDA, CPU], 'cuda') == [(CUDA, {'device_id': 0}), CPU]


def test_provider_entry_errors():
    with pytest.raises(ValueError, match='no fp16 option'):
        provider_entry('cuda', fp16=True)
    with pytest.raises(ValueError, match='must be one of'):
        provider_entry('rocm')
    with pytest.raises(ValueError, match='device_id'):
        provider_entry('tensorrt', -1)


def _bench_ort_gpu():
    spec = importlib.util.spec_from_file_location(
        'bench_ort_gpu', REPO / 'bench' / 'bench_ort_gpu.py'
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_bench_plan_skips_missing_providers():
    plan = _bench_ort_gpu().provider_plan
    labels = ['cpu', 'cuda fp32', 'tensorrt fp32', 'tensorrt fp16']
    cpu_only = plan([CPU])
    assert [p['label'] for p in cpu_only] == labels
    assert cpu_only[0]['providers'] == [CPU] and cpu_only[0]['skip'] is None
    for p in cpu_only[1:]:
        assert p['providers'] is None and 'onnxruntime-gpu' in p['skip']
    full = plan([TRT, CUDA, CPU], device_id=0, trt_cache='/c')
    assert all(p['skip'] is None for p in full)
    assert full[1]['providers'] == [(CUDA, {'device_id': 0}), CPU]
    trt32, trt16 = full[2]['providers'], full[3]['providers']
    assert trt32[0][0] == TRT and trt32[0][1]['trt_fp16_enable'] is False
    assert trt16[0][1]['trt_fp16_enable'] is True and trt16[0][1]['trt_engine_cache_path'] == '/c'
    assert trt16[1:] == [(CUDA, {'device_id': 0}), CPU]  # TensorRT's leftovers: CUDA, then CPU
    no_trt = plan([CUDA, CPU])
    assert no_trt[1]['skip'] is None and no_trt[2]['skip'] and no_trt[3]['skip']


def test_bench_gpu_script_parses_and_runs_the_ort_part():
    """bench/bench_gpu.sh is valid bash (``bash -n``) and calls bench_ort_gpu.py after the heredoc
    of the torch summary (a heredoc left open would swallow it)."""
    import subprocess

    script = REPO / 'bench' / 'bench_gpu.sh'
    res = subprocess.run(['bash', '-n', str(script)], capture_output=True, text=True)
    assert res.returncode == 0 and not res.stderr, res.stderr
    text = script.read_text()
    assert text.index('\nPYEOF\n') < text.index('bench/bench_ort_gpu.py --out')
