#!/usr/bin/env python3
"""Split the real-camera sample bag into a real depth-training set and the labelled evaluation set
(docs/levers.md "Real-camera levers", real RGB-D frames for the depth term, METHOD M5).

The 22-frame real sample bag (``python -m depth3dseg_ros.samples bag``; frames listed in
depth3dseg_ros/samples/frames.py) is extracted with ``depth3dseg-extract``'s API
(bags.extract.extract) into a temporary directory, then its frames are written to two dataset
directories in the same format (docs/ARCHITECTURE.md "Dataset directory"):

* ``--train-out`` (default data/ds_real_depth_train): frames WITHOUT labels that HAVE depth (the 11
  unlabelled NYU raw / slambook / TUM frames). They may train the depth and consistency terms: no
  evaluation set scores their labels, since they have none. Evaluating depth on them afterwards is
  an in-sample (trained-on) figure.
* ``--labelled-out`` (default data/ds_real_labelled): frames WITH labels (the 11 NYU test frames,
  3 of them with depth), the real evaluation set; none of them may train.

Frames with neither depth nor labels would go to neither (the sample bag has none). Each frame is
named by its sample frame (samples.frames.SampleFrame.name and RGB file) and bag stamp, from the
bag's fixed stamp layout (samples.realbag: frame i at START_NS + i × PERIOD_NS). The output
directories are replaced; they belong under data/ (git-ignored: third-party frames are never
committed).

Usage: DEPTH3DSEG_SAMPLE_DATA=... python scripts/real_depth_split.py [--bag BAG]
       [--train-out DIR] [--labelled-out DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import tempfile
from pathlib import Path

from depth3dseg_ros.bags.extract import extract
from depth3dseg_ros.bags.extract_config import ExtractConfig
from depth3dseg_ros.dataset_format import MANIFEST, read_index, read_manifest, write_index
from depth3dseg_ros.samples.frames import sample_frames
from depth3dseg_ros.samples.realbag import PERIOD_NS, START_NS, real_camera_bag


def source_name(stamp_ns: int) -> str:
    """'<sample frame name> (<rgb file>)' of the real-bag frame stamped ``stamp_ns``."""
    i = round((int(stamp_ns) - START_NS) / PERIOD_NS)
    frames = sample_frames()
    if not 0 <= i < len(frames):
        return f'unknown (frame {i})'
    return f'{frames[i].name} ({frames[i].rgb})'


def write_split(src: Path, dst: Path, records: list[dict], what: str) -> None:
    """Write ``records`` of dataset directory ``src`` as the dataset directory ``dst`` (replaced):
    their PNGs copied, index.jsonl in the same order, manifest.json with counts and label
    statistics recomputed for these frames and ``split`` saying what the directory holds."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for r in records:
        for role in ('rgb', 'depth', 'labels'):
            if r.get(role):
                (dst / r[role]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / r[role], dst / r[role])
    write_index(dst, records)
    manifest = copy.deepcopy(read_manifest(src) or {})
    labelled = [r for r in records if r.get('labels')]
    known = [int(r['label_max']) for r in labelled if r.get('label_max') is not None]
    manifest['counts'] = {
        'frames': len(records),
        'with_depth': sum(1 for r in records if r.get('depth')),
        'with_labels': len(labelled),
    }
    if 'labels' in manifest:
        manifest['labels'].update(
            max_id=max(known) if known else None,
            frames=len(labelled),
            frames_without_max=len(labelled) - len(known),
        )
    manifest['split'] = what
    (dst / MANIFEST).write_text(json.dumps(manifest, indent=1) + '\n', encoding='utf-8')


def split(bag: Path, train_out: Path, labelled_out: Path) -> tuple[list, list, list]:
    """Extract ``bag`` and write the two dataset directories (module docstring); returns the
    index records of (train, labelled, skipped) frames."""
    with tempfile.TemporaryDirectory(prefix='real_split_') as tmp:
        src = Path(tmp) / 'ds'
        extract([bag], src, ExtractConfig())
        records = read_index(src)
        train = [r for r in records if r.get('depth') and not r.get('labels')]
        labelled = [r for r in records if r.get('labels')]
        skipped = [r for r in records if not r.get('depth') and not r.get('labels')]
        write_split(src, train_out, train, 'real frames without labels, with depth (may train)')
        write_split(src, labelled_out, labelled, 'real labelled frames (evaluation only)')
    return train, labelled, skipped


def main() -> int:
    """Extract, split, print where each frame went; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--bag', type=Path, help='real sample bag (default: built/cached one)')
    ap.add_argument('--train-out', type=Path, default=Path('data/ds_real_depth_train'))
    ap.add_argument('--labelled-out', type=Path, default=Path('data/ds_real_labelled'))
    args = ap.parse_args()
    bag = args.bag or real_camera_bag()
    train, labelled, skipped = split(bag, args.train_out, args.labelled_out)
    splits = ((args.train_out, train), (args.labelled_out, labelled), ('skipped', skipped))
    for out, recs in splits:
        print(f'{out}: {len(recs)} frames')
        for r in recs:
            roles = '+'.join(k for k in ('depth', 'labels') if r.get(k)) or 'rgb only'
            print(f"  {r['id']}  stamp {r['stamp_ns']}  {roles:12s}  {source_name(r['stamp_ns'])}")
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
