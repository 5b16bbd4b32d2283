#!/usr/bin/env python3
"""Write models/model_card.json: the shipped model's evaluation figures (machine-readable copy of
the tables in models/README.md; test/test_shipped_model.py checks the real-bag figures against it).

Usage: python scripts/model_card.py [--model models/depth3dseg_nyu13.pt] [--synth-val
                                    data/ds_synth_val] [--real-only]
Runs depth3dseg-eval (training/evaluate.py) on (a) the held-out synthetic dataset and (b) the
real-camera sample bag (depth3dseg_ros.samples: 11 NYU labelled frames, 14 NYU/TUM frames with
depth), on the CPU; (c) the 14 real frames with depth alone, with the predicted depth and with the
measured depth given to the model (``--measured-depth``); (d) the held-out real depth figures: the
labelled frames with depth alone (scripts/real_depth_split.py's labelled set, --only-with-depth),
since the shipped model's last fine-tuning trained the depth and consistency terms on the bag's 11
unlabelled RGB-D frames (``trained_on_real`` lists them; models/README.md). The mIoU of (b) is
held out (those frames have no labels); its AbsRel is not.
``--real-only`` re-measures (b)-(d) and keeps (a) from the existing card (when data/ is not
regenerated).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.samples import real_camera_bag
from depth3dseg_ros.training import evaluate
from real_depth_split import source_name, split

REPO = Path(__file__).resolve().parents[1]
KEYS = (*evaluate.FLAT_KEYS, 'frames')  # the flat figures depth3dseg-eval reports, and the count


def run_eval(model: Path, source: list[str], out: Path) -> dict:
    """Evaluate ``model`` with depth3dseg-eval; returns the figures of KEYS plus per-class IoU."""
    if evaluate.main(['--model', str(model), *source, '--out', str(out), '--device', 'cpu']) != 0:
        raise SystemExit(f'depth3dseg-eval failed on {source}')
    rep = json.loads((out / 'report.json').read_text())
    fig = {k: rep[k] for k in KEYS}
    fig['iou_fused'] = rep['fused']['iou']
    fig['ci'] = rep.get('ci')  # 95 % frame bootstrap intervals (core/bootstrap.py)
    return fig


def main() -> int:
    """Evaluate the model on the synthetic validation set and the real bag; write the model card
    JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', default=str(REPO / 'models' / 'depth3dseg_nyu13.pt'))
    ap.add_argument('--synth-val', default=str(REPO / 'data' / 'ds_synth_val'))
    ap.add_argument('--out', default=str(REPO / 'models' / 'model_card.json'))
    ap.add_argument(
        '--real-only', action='store_true', help='keep the synthetic figures of the existing card'
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        synth = (
            json.loads(Path(a.out).read_text())['synthetic_val']
            if a.real_only
            else run_eval(Path(a.model), ['--data', a.synth_val], Path(tmp) / 's')
        )
        bag = ['--bag', str(real_camera_bag())]
        card = {
            'model': Path(a.model).name,
            # the measured file's arch: its depth_gain and fusion_w3d change the figures without
            # changing the weights (test_shipped_model checks the shipped file still has it)
            'arch': load_model(a.model, map_location='cpu')[1]['arch'],
            'synthetic_val': synth,
            'real_bag': run_eval(Path(a.model), bag, Path(tmp) / 'r'),
            # the real frames with measured depth, without and with that depth given to the model
            # (an RGB-D camera's node: depth3dseg-eval --measured-depth)
            'real_with_depth': run_eval(
                Path(a.model), [*bag, '--only-with-depth'], Path(tmp) / 'd'
            ),
            'real_with_depth_measured': run_eval(
                Path(a.model), [*bag, '--only-with-depth', '--measured-depth'], Path(tmp) / 'm'
            ),
        }
        train, _, _ = split(real_camera_bag(), Path(tmp) / 'rt', Path(tmp) / 'rl')
        card['real_labelled_with_depth'] = run_eval(
            Path(a.model), ['--data', str(Path(tmp) / 'rl'), '--only-with-depth'], Path(tmp) / 'l'
        )
        card['trained_on_real'] = [source_name(r['stamp_ns']) for r in train]
    Path(a.out).write_text(json.dumps(card, indent=1) + '\n')
    print(
        json.dumps(
            {
                k: {kk: v for kk, v in d.items() if kk not in ('iou_fused', 'ci')}
                if isinstance(d, dict)
                else d
                for k, d in card.items()
            },
            indent=1,
        )
    )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
