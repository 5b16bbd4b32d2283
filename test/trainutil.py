"""Build small dataset directories (docs/ARCHITECTURE.md "Dataset directory") from the real NYU frames.

Used by the training/evaluation tests. Frames (NYU_LABEL_PAIRS.md): 2 complete RGB + depth + label + K
frames (NYU 0001, 1407), 5 RGB + label frames without depth, and 3 Metric3D NYU-raw RGB + depth frames
without labels. Images are downscaled to ``size`` (K scaled with core.geometry) to keep tests fast.
"""
from __future__ import annotations

import csv
import json
import tarfile
from pathlib import Path

import cv2
import numpy as np

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.depth import depth_to_meters, meters_to_16uc1
from depth3dseg_ros.core.geometry import resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels

LABEL_TGZ = 'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz'


def _labels_from_tgz(real: Path, names: set[str]) -> dict[str, np.ndarray]:
    out = {}
    with tarfile.open(real / LABEL_TGZ) as tf:
        for m in tf.getmembers():
            base = Path(m.name).name
            if base in names:
                buf = np.frombuffer(tf.extractfile(m).read(), np.uint8)
                out[base] = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    return out


def real_frames(real: Path):
    """Yield (name, rgb uint8 RGB, depth float32 m | None, labels uint8 | None, K 3×3) at full size."""
    rows = list(csv.DictReader(open(real / 'nyu_label_pairs.csv')))
    labels = _labels_from_tgz(real, {r['label_png_in_tgz'] for r in rows})
    for r in rows:
        rgb = cv2.cvtColor(cv2.imread(str(real / r['rgb'])), cv2.COLOR_BGR2RGB)
        lab = labels[r['label_png_in_tgz']]
        r0, c0 = int(r['label_crop_row0']), int(r['label_crop_col0'])
        lab = lab[r0:r0 + rgb.shape[0], c0:c0 + rgb.shape[1]]
        depth = None
        if r['depth_filled']:
            raw = cv2.imread(str(real / r['depth_filled']), cv2.IMREAD_UNCHANGED)
            depth = depth_to_meters(raw, '16UC1', 1.0 / float(r['depth_divisor_to_m']))
        K = np.array([[float(r['fx']), 0, float(r['cx'])], [0, float(r['fy']), float(r['cy'])], [0, 0, 1]])
        yield f"nyu{int(r['nyu_index']):04d}", rgb, depth, lab, K
    m3d = real / 'metric3d_demo'
    for f in json.loads((m3d / 'data/nyu_demo/test_annotations.json').read_text())['files']:
        rgb = cv2.cvtColor(cv2.imread(str(m3d / f['rgb'])), cv2.COLOR_BGR2RGB)
        raw = cv2.imread(str(m3d / f['depth']), cv2.IMREAD_UNCHANGED)
        depth = depth_to_meters(raw, '16UC1', 1.0 / f['depth_scale'])
        fx, fy, cx, cy = f['cam_in']
        K = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], dtype=np.float64)
        yield 'm3d_' + Path(f['rgb']).stem, rgb, depth, None, K


def make_dataset_dir(real: Path, out: Path, size: tuple[int, int] = (160, 120),
                     names: list[str] | None = None, labels: bool = True) -> Path:
    """Write a dataset directory at ``out`` with the real frames (those in ``names`` if given),
    downscaled to ``size`` = (W, H). ``labels=False``: no label images at all (an unlabelled dataset,
    e.g. bags without a label topic). Returns ``out``."""
    out = Path(out)
    for sub in ('rgb', 'depth', 'labels'):
        (out / sub).mkdir(parents=True, exist_ok=True)
    lines = []
    for k, (name, rgb, depth, lab, K) in enumerate(real_frames(real)):
        if names is not None and name not in names:
            continue
        h0, w0 = rgb.shape[:2]
        fid = f'{k:06d}'
        rgb_s = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
        cv2.imwrite(str(out / 'rgb' / f'{fid}.png'), cv2.cvtColor(rgb_s, cv2.COLOR_RGB2BGR))
        rec = {'id': fid, 'rgb': f'rgb/{fid}.png', 'depth': None, 'depth_scale': 0.001, 'labels': None,
               'K': resize_intrinsics(K, (w0, h0), size).reshape(-1).tolist(),
               'width': size[0], 'height': size[1], 'stamp_ns': k * 100_000_000, 'bag': name,
               'topics': {}}
        if depth is not None:
            cv2.imwrite(str(out / 'depth' / f'{fid}.png'), meters_to_16uc1(resize_depth(depth, size)))
            rec['depth'] = f'depth/{fid}.png'
        if lab is not None and labels:
            cv2.imwrite(str(out / 'labels' / f'{fid}.png'), resize_labels(lab, size))
            rec['labels'] = f'labels/{fid}.png'
        lines.append(json.dumps(rec))
    (out / 'manifest.json').write_text(json.dumps({
        'version': 1, 'classes': NYU13.to_dict(), 'counts': {'frames': len(lines)}, 'sources': ['real']}))
    (out / 'index.jsonl').write_text(''.join(line + '\n' for line in lines))
    return out



#: A tiny Depth3DSeg for tests (core.model.DEFAULT_ARCH keys).
TINY_ARCH = '{width: 0.25, depth_mult: 0.5, dec_ch: 16, head_ch: 8, p_channels: [8, 16], p_head: 16}'


def tiny_train_args(data: Path, out: Path, *extra: str, epochs: int = 2) -> list[str]:
    """depth3dseg-train arguments for a fast CPU run: 64×48 input, tiny arch, batch 2, no TensorBoard
    unless asked, validation on a seeded 30 % split."""
    return ['--out', str(out), '--set', f'data.train=[{data}]', '--set', 'data.val_split=0.3',
            '--set', 'data.input_size=[64,48]', '--set', f'model.arch={TINY_ARCH}',
            '--set', 'train.batch_size=2', '--set', f'train.epochs={epochs}', '--set', 'optim.warmup_steps=2',
            '--set', 'log.progress=false', '--set', 'log.sample_images=2', *extra]
