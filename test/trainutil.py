"""Build small dataset directories (docs/ARCHITECTURE.md "Dataset directory") from the real NYU
frames.

Used by the training/evaluation tests. Frames (depth3dseg_ros.samples.frames): 2 complete RGB +
depth + label + K frames (NYU 0001, 1407), 5 RGB + label frames without depth, and 3 Metric3D
NYU-raw RGB + depth frames without labels. Images are downscaled to ``size`` (K scaled with
core.geometry) to keep tests fast.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.core.geometry import resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.samples.frames import labelled_frames, load, sample_frames


def real_frames(real: Path):
    """Yield (name, rgb uint8 RGB, depth float32 m | None, labels uint8 | None, K 3×3) at full
    size: the first 7 labelled NYU frames (filled depth where the source has it) then the 3
    Metric3D NYU-raw RGB-D frames. The tests' counts are written for these 10; the 4 labelled
    frames added to the sample set later (0464, 0834, 0972, 1096) are only in the real evaluation
    bag.
    ``real``: the sample root (the ``real_dir`` fixture; it makes sure the files are fetched)."""
    assert Path(real).is_dir(), real
    for f in labelled_frames()[:7]:
        rgb, K, depth, lab = load(f, filled=True)
        yield f'nyu{f.label_idx:04d}', rgb, depth, lab, K
    for f in sample_frames():
        if f.name.startswith('metric3d_'):
            rgb, K, depth, _ = load(f)
            yield 'm3d_' + f.name[len('metric3d_') :], rgb, depth, None, K


def make_dataset_dir(
    real: Path,
    out: Path,
    size: tuple[int, int] = (160, 120),
    names: list[str] | None = None,
    labels: bool = True,
) -> Path:
    """Write a dataset directory at ``out`` with the real frames (those in ``names`` if given),
    downscaled to ``size`` = (W, H). ``labels=False``: no label images at all (an unlabelled
    dataset, e.g. bags without a label topic). Returns ``out``."""
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
        rec = {
            'id': fid,
            'rgb': f'rgb/{fid}.png',
            'depth': None,
            'depth_scale': 0.001,
            'labels': None,
            'K': resize_intrinsics(K, (w0, h0), size).reshape(-1).tolist(),
            'width': size[0],
            'height': size[1],
            'stamp_ns': k * 100_000_000,
            'bag': name,
            'topics': {},
        }
        if depth is not None:
            cv2.imwrite(
                str(out / 'depth' / f'{fid}.png'), meters_to_16uc1(resize_depth(depth, size))
            )
            rec['depth'] = f'depth/{fid}.png'
        if lab is not None and labels:
            cv2.imwrite(str(out / 'labels' / f'{fid}.png'), resize_labels(lab, size))
            rec['labels'] = f'labels/{fid}.png'
        lines.append(json.dumps(rec))
    (out / 'manifest.json').write_text(
        json.dumps(
            {
                'version': 1,
                'classes': NYU13.to_dict(),
                'counts': {'frames': len(lines)},
                'sources': ['real'],
            }
        )
    )
    (out / 'index.jsonl').write_text(''.join(line + '\n' for line in lines))
    return out


#: A tiny Depth3DSeg for tests (core.arch.DEFAULT_ARCH keys).
TINY_ARCH = (
    '{width: 0.25, depth_mult: 0.5, dec_ch: 16, head_ch: 8, p_channels: [8, 16], p_head: 16}'
)


def tiny_train_args(data: Path, out: Path, *extra: str, epochs: int = 2) -> list[str]:
    """depth3dseg-train arguments for a fast CPU run: 64×48 input, tiny arch, batch 2, no
    TensorBoard unless asked (``'--set', 'log.tensorboard=true'`` in ``extra``), validation on a
    seeded 30 % split."""
    return [
        '--out',
        str(out),
        '--set',
        f'data.train=[{data}]',
        '--set',
        'data.val_split=0.3',
        '--set',
        'data.input_size=[64,48]',
        '--set',
        f'model.arch={TINY_ARCH}',
        '--set',
        'train.batch_size=2',
        '--set',
        f'train.epochs={epochs}',
        '--set',
        'optim.warmup_steps=2',
        '--set',
        'log.progress=false',
        '--set',
        'log.sample_images=2',
        '--set',
        'log.tensorboard=false',
        *extra,
    ]


def tiny_model(num_classes: int = 4, seed: int = 0, **arch):
    """A seeded, tiny ``Depth3DSeg`` (width 0.25, 16/8 decoder and head channels, one 8-channel
    point layer) for unit tests of training pieces; ``arch`` overrides or adds arch keys."""
    import torch

    from depth3dseg_ros.core.model import Depth3DSeg

    torch.manual_seed(seed)
    kw = dict(width=0.25, dec_ch=16, head_ch=8, p_channels=[8], p_head=8)
    return Depth3DSeg(num_classes, **dict(kw, **arch))


def perturbed_tiny_model_file(path: Path, input_size=(96, 72), seed: int = 0) -> Path:
    """Save a TINY_ARCH Depth3DSeg (NYU13 classes) with every weight perturbed by 0.3·N(0, 1) to
    ``path`` (a model file, core.modelfile): an untrained net answers nearly the same everywhere,
    so tests of inference-time variants would see no difference between them."""
    import torch
    import yaml

    from depth3dseg_ros.core.model import Depth3DSeg
    from depth3dseg_ros.core.modelfile import save_model

    torch.manual_seed(seed)
    model = Depth3DSeg(len(NYU13), **yaml.safe_load(TINY_ARCH)).eval()
    with torch.no_grad():
        for prm in model.parameters():
            prm.add_(0.3 * torch.randn_like(prm))
    save_model(path, model, {'classes': NYU13, 'input_size': list(input_size)})
    return Path(path)


def geometry_model_file(path: Path, input_size=(32, 24), seed: int = 1) -> Path:
    """A geometry model file at ``path``: a perturbed_tiny_model_file marked ``input:
    depth_code`` by scripts/set_arch.py (``--input depth_code``), as a team marks its own."""
    import runpy

    path = Path(path)
    raw = perturbed_tiny_model_file(path.with_name(path.stem + '_raw.pt'), input_size, seed)
    script = Path(__file__).resolve().parents[1] / 'scripts' / 'set_arch.py'
    runpy.run_path(str(script))['set_arch'](str(raw), {}, str(path), input_kind='depth_code')
    return path


def script_with_tiny_model(script: str, real_dir: Path, tmp: Path):
    """(the globals of ``scripts/<script>`` run as a module, a perturbed_tiny_model_file, a
    96×72 make_dataset_dir of the real frames) under ``tmp``: the setup of the tests of the
    inference-time lever scripts (docs/levers.md)."""
    import runpy

    path = Path(__file__).resolve().parents[1] / 'scripts' / script
    data = make_dataset_dir(real_dir, tmp / 'ds', size=(96, 72))
    return runpy.run_path(str(path)), perturbed_tiny_model_file(tmp / 'tiny.pt'), data


def copy_dataset_with(src: Path, dst: Path, **fields) -> Path:
    """A copy of the dataset directory ``src`` at ``dst`` whose every index record has ``fields``
    set (e.g. ``labels=None``: an unlabelled copy; ``depth=None``: RGB only). Returns ``dst``."""
    shutil.copytree(src, dst)
    idx = Path(dst) / 'index.jsonl'
    recs = [json.loads(line) for line in idx.read_text().splitlines() if line.strip()]
    idx.write_text(''.join(json.dumps(dict(r, **fields)) + '\n' for r in recs))
    return Path(dst)
