"""scripts/train_pack.py: a noise-free render packed and rebuilt equals the ``--noise`` render (RGB
and labels exactly, depth up to the millimetre rounding the noise acts on)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.dataset_format import MANIFEST, write_index
from depth3dseg_ros.synth.cli import render_frames

_spec = importlib.util.spec_from_file_location(
    'train_pack', Path(__file__).resolve().parents[1] / 'scripts' / 'train_pack.py'
)
tp = importlib.util.module_from_spec(_spec)
sys.modules['train_pack'] = tp  # the unpack workers unpickle its functions by module name
_spec.loader.exec_module(tp)

SEED, SCENES, FPS, W, H = 5, 2, 3, 80, 60


def test_depth_dx_round_trip_and_range():
    rng = np.random.default_rng(0)
    d = rng.integers(0, 65536, (2, 7, 9), dtype=np.uint16)
    d[..., ::2] = 0  # jumps of up to 65535 mm do not fit int16
    with pytest.raises(ValueError, match='int16'):
        tp.depth_to_dx(d)
    d = rng.integers(0, 30000, (2, 7, 9), dtype=np.uint16)
    assert np.array_equal(tp.dx_to_depth(tp.depth_to_dx(d)), d)
    with pytest.raises(ValueError, match='uint16'):
        tp.depth_to_dx(d.astype(np.float32))


def _write_dataset(root: Path, frames) -> None:
    for sub in ('rgb', 'depth', 'labels'):
        (root / sub).mkdir(parents=True)
    recs = []
    for i, (_, frame, depth_m) in enumerate(frames):
        name = f'f_{i:03d}.png'
        cv2.imwrite(str(root / 'rgb' / name), frame.rgb)
        cv2.imwrite(str(root / 'labels' / name), frame.labels)
        cv2.imwrite(str(root / 'depth' / name), meters_to_16uc1(depth_m))
        recs.append(
            {
                'id': f'f_{i:03d}',
                'rgb': f'rgb/{name}',
                'depth': f'depth/{name}',
                'labels': f'labels/{name}',
                'K': np.asarray(frame.K).ravel().tolist(),
                'width': W,
                'height': H,
                'depth_scale': 0.001,
            }
        )
    write_index(root, recs)
    (root / MANIFEST).write_text(json.dumps({'version': 1}))


def test_pack_unpack_rebuilds_the_noisy_render(tmp_path):
    clean = list(render_frames(SCENES, FPS, W, H, SEED, noise=False))
    noisy = list(render_frames(SCENES, FPS, W, H, SEED, noise=True))
    _write_dataset(tmp_path / 'clean', clean)
    tp.main(
        [
            'pack',
            str(tmp_path / 'clean'),
            str(tmp_path / 'pack'),
            '--seed',
            str(SEED),
            '--frames-per-scene',
            str(FPS),
        ]
    )
    assert {p.name for p in (tmp_path / 'pack').iterdir()} >= {'rgb.raw.xz', 'pack.json'}
    tp.main(['unpack', str(tmp_path / 'pack'), str(tmp_path / 'out'), '--workers', '2'])
    out = tmp_path / 'out'
    assert not (out / '.raw').exists()
    recs = [json.loads(x) for x in (out / 'index.jsonl').read_text().splitlines()]
    assert len(recs) == SCENES * FPS
    diffs, holes_ref, holes_out = [], 0, 0
    for r, (_, frame, depth_m) in zip(recs, noisy):
        assert np.array_equal(cv2.imread(str(out / r['rgb']), cv2.IMREAD_UNCHANGED), frame.rgb)
        assert np.array_equal(
            cv2.imread(str(out / r['labels']), cv2.IMREAD_UNCHANGED), frame.labels
        )
        got = cv2.imread(str(out / r['depth']), cv2.IMREAD_UNCHANGED).astype(np.int64)
        ref = meters_to_16uc1(depth_m).astype(np.int64)
        both = (got > 0) & (ref > 0)
        diffs.append(np.abs(got[both] - ref[both]))
        holes_ref += int((ref == 0).sum())
        holes_out += int((got == 0).sum())
    d = np.concatenate(diffs)
    # the noise acts on rounded millimetres with the same draws: the mean difference stays under a
    # millimetre
    # (an independent noise field would differ by centimetres at room depths)
    assert d.mean() < 1.0, d.mean()
    assert abs(holes_out - holes_ref) <= 0.01 * SCENES * FPS * W * H
