"""Inference backends of core.inference.Segmenter: PyTorch (the model file) or ONNX Runtime (an
exported .onnx, core.onnx_export).

``backend='auto'`` picks ONNX Runtime when ``onnxruntime`` imports and either the model file is a
``.onnx`` or an exported ``<stem>.onnx`` sits beside the ``.pt`` whose ``source_sha256`` metadata
matches the .pt's bytes (a stale export beside a retrained .pt is not used: torch runs it, with a
warning) and whose size fits; torch otherwise (also for ``half=True``: the ONNX graph is float32).
``'torch'`` and ``'onnxruntime'`` force the choice and raise ValueError when it cannot be honoured.

ONNX Runtime execution providers: TensorRT and CUDA when the installed onnxruntime has them (the
``onnxruntime-gpu`` wheel, docs/deployment.md) and the device is not 'cpu'; CPU otherwise. Threads:
like the torch path, ``intra_op_num_threads`` = usable cores minus one by default (``num_threads``;
0 leaves ONNX Runtime's default), one inter-op thread, sequential execution.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

__all__ = [
    'BACKENDS',
    'BackendChoice',
    'choose_backend',
    'ort_available',
    'ort_providers',
    'OrtGraph',
]

BACKENDS = ('auto', 'torch', 'onnxruntime')
_log = logging.getLogger(__name__)


def ort_available() -> bool:
    """True when ``import onnxruntime`` works."""
    try:
        import onnxruntime  # noqa: F401  (availability probe)
    except ImportError:
        return False
    return True


@dataclass
class BackendChoice:
    """kind: 'torch' or 'onnxruntime'; path: the file that backend loads; why: one line for the
    log."""

    kind: str
    path: Path
    why: str


def _fits(meta: Dict[str, Any], input_size: Optional[Tuple[int, int]]) -> bool:
    return (
        input_size is None
        or bool(meta['dynamic_size'])
        or list(input_size) == list(meta['input_size'])
    )


def choose_backend(
    model_file: Union[str, Path],
    backend: str = 'auto',
    half: bool = False,
    input_size: Optional[Tuple[int, int]] = None,
) -> BackendChoice:
    """Decide which backend runs ``model_file`` (module docstring).

    Raises ValueError for an unknown backend, 'torch' with a .onnx file, 'onnxruntime' without
    onnxruntime / without an exported .onnx / with half=True / with an input_size a fixed-size
    graph does not have; FileNotFoundError / ModelFileError from reading the .onnx metadata.
    """
    from .onnx_export import read_onnx_meta, sha256_file

    if backend not in BACKENDS:
        raise ValueError(f'backend={backend!r} must be one of {BACKENDS}')
    path = Path(model_file)
    is_onnx = path.suffix.lower() == '.onnx'
    if is_onnx:
        if backend == 'torch':
            raise ValueError(
                f"backend='torch' cannot run the ONNX file {path}: give the .pt model file"
            )
        if not ort_available():
            raise ValueError(
                f'{path} is an ONNX file but onnxruntime is not installed (pip install '
                'onnxruntime, or onnxruntime-gpu: docs/deployment.md)'
            )
        if half:
            raise ValueError('half=True needs the torch backend (the ONNX graph is float32)')
        meta = read_onnx_meta(path)
        if not _fits(meta, input_size):
            raise ValueError(
                f"input_size={tuple(input_size)} but {path} was exported at fixed "
                f"{tuple(meta['input_size'])} (export with --dynamic)"
            )
        return BackendChoice('onnxruntime', path, 'model file is .onnx')
    if backend == 'torch':
        return BackendChoice('torch', path, "backend='torch'")
    beside = path.with_suffix('.onnx')
    if backend == 'onnxruntime':
        if half:
            raise ValueError('half=True needs the torch backend (the ONNX graph is float32)')
        if not ort_available():
            raise ValueError(
                "backend='onnxruntime' but onnxruntime is not installed (pip install onnxruntime)"
            )
        if not beside.is_file():
            raise ValueError(
                f"backend='onnxruntime' but no exported {beside.name} beside {path} "
                f'(depth3dseg-export {path} -o {beside})'
            )
        meta = read_onnx_meta(beside)
        if not _fits(meta, input_size):
            raise ValueError(
                f"input_size={tuple(input_size)} but {beside} was exported at fixed "
                f"{tuple(meta['input_size'])} (export with --dynamic)"
            )
        if path.is_file() and meta.get('source_sha256') != sha256_file(path):
            _log.warning(
                '%s was exported from another %s (source_sha256 differs): running it anyway '
                "(backend='onnxruntime')",
                beside,
                path.name,
            )
        return BackendChoice('onnxruntime', beside, "backend='onnxruntime'")
    # auto
    if half or not beside.is_file() or not ort_available():
        why = (
            'half=True'
            if half
            else (
                f'no {beside.name} beside it'
                if not beside.is_file()
                else 'onnxruntime not installed'
            )
        )
        return BackendChoice('torch', path, f'auto: {why}')
    try:
        meta = read_onnx_meta(beside)
    except ValueError as exc:
        _log.warning('auto backend: %s not usable (%s): torch runs %s', beside, exc, path.name)
        return BackendChoice('torch', path, f'auto: {beside.name} not usable')
    if path.is_file() and meta.get('source_sha256') != sha256_file(path):
        _log.warning(
            'auto backend: %s was exported from another %s (source_sha256 differs, stale '
            'export?): torch runs it; re-export with depth3dseg-export',
            beside,
            path.name,
        )
        return BackendChoice('torch', path, f'auto: {beside.name} is stale')
    if not _fits(meta, input_size):
        return BackendChoice(
            'torch', path, f'auto: {beside.name} has a fixed size other than input_size'
        )
    return BackendChoice('onnxruntime', beside, f'auto: exported {beside.name} beside it')


def ort_providers(device: str = 'auto') -> List[Any]:
    """Execution providers for ``device``: 'cpu' -> CPU only; 'auto' -> TensorRT, CUDA (those the
    installed onnxruntime has) then CPU; 'cuda' / 'cuda:N' -> the same on device N, ValueError when
    this onnxruntime has no CUDA provider."""
    import onnxruntime as ort

    have = set(ort.get_available_providers())
    dev = str(device)
    if dev == 'cpu':
        return ['CPUExecutionProvider']
    if dev not in ('auto', 'cuda') and not dev.startswith('cuda:'):
        raise ValueError(f"device={device!r} is not 'auto', 'cpu', 'cuda' or 'cuda:N'")
    gpu_id = int(dev.split(':', 1)[1]) if dev.startswith('cuda:') else 0
    out: List[Any] = []
    if 'TensorrtExecutionProvider' in have:
        out.append(('TensorrtExecutionProvider', {'device_id': gpu_id}))
    if 'CUDAExecutionProvider' in have:
        out.append(('CUDAExecutionProvider', {'device_id': gpu_id}))
    if dev != 'auto' and not out:
        raise ValueError(
            f'device={device!r} but this onnxruntime has no CUDA provider (available: '
            f'{sorted(have)}; install onnxruntime-gpu, docs/deployment.md)'
        )
    return out + ['CPUExecutionProvider']


class OrtGraph:
    """An ONNX Runtime session over a depth3dseg ONNX file (core.onnx_export).

    Args: path (.onnx); device (see ort_providers); num_threads: intra-op threads (None: usable
    cores minus one; 0: ONNX Runtime's default). Attributes: meta (read_onnx_meta), session,
    providers (those in use), path. ``run(rgb, K, measured_depth)`` takes numpy float32 1×3×H×W,
    1×3×3, 1×1×H×W and returns {name: ndarray} for core.onnx_graph.OUTPUT_NAMES.
    Raises ModelFileError (file without the metadata), ValueError (device), onnxruntime errors.
    """

    def __init__(
        self, path: Union[str, Path], device: str = 'auto', num_threads: Optional[int] = None
    ):
        import onnxruntime as ort
        from .inference import default_num_threads
        from .onnx_export import read_onnx_meta
        from .onnx_graph import OUTPUT_NAMES

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f'ONNX model file not found: {self.path}')
        if num_threads is not None and int(num_threads) < 0:
            raise ValueError(f'num_threads={num_threads} must be >= 0 (0 = ONNX Runtime default)')
        so = ort.SessionOptions()
        so.intra_op_num_threads = (
            default_num_threads() if num_threads is None else int(num_threads)
        )
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.path), so, providers=ort_providers(device))
        self.meta = read_onnx_meta(self.path, self.session.get_modelmeta().custom_metadata_map)
        self.providers = self.session.get_providers()
        self.on_gpu = self.providers[0] != 'CPUExecutionProvider'
        self._outputs = list(OUTPUT_NAMES)

    def run(
        self, rgb: np.ndarray, K: np.ndarray, measured_depth: np.ndarray
    ) -> Dict[str, np.ndarray]:
        """Run the session: rgb 1×3×H×W, K 1×3×3, measured_depth 1×1×H×W (float32) -> {OUTPUT_NAMES
        name: ndarray}."""
        res = self.session.run(
            self._outputs, {'rgb': rgb, 'K': K, 'measured_depth': measured_depth}
        )
        return dict(zip(self._outputs, res))
