"""``depth3dseg-demo``'s report: what it writes into ``--out`` from the recorder (issue 54).

* ``figures.json``: the figures that depend only on the bag and the model (frames in and out,
  the frames without output, accuracy against the bag's ground truth, per-frame depth
  percentiles, the cloud's point count): byte for byte the same from run to run of the same bag
  and model, since the paced replay loses no frame;
* ``report.json`` (those figures and the timing: output rate, latency, the node's stage timings)
  and ``report.md`` + ``index.html`` (the same, readable; a panel per frame);
* per frame, named by its stamp: ``overlay/`` (the node's overlay with the class legend),
  ``mask/`` (its labels in the class colours, with the legend), ``depth/`` (its depth on the fixed
  scale 0..the model's max depth, with the colour bar in metres) and ``panels/`` (camera image,
  overlay, predicted depth and, where the frame has them, measured depth and ground-truth labels,
  side by side, with the colour bar and the legend: core/visual.py);
* ``cloud.ply``: the last labelled cloud.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.core import visual
from depth3dseg_ros.node.demo_record import Recorder, ground_truth_metrics

#: what the report writes, besides the per-frame folders (node/demo.py clears them all)
REPORT_FILES = ('figures.json', 'report.json', 'report.md', 'index.html', 'cloud.ply')
FRAME_DIRS = ('overlay', 'mask', 'depth', 'panels')


def _png(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f'could not write {path}')


def _p(depth: np.ndarray | None, q: float) -> float | None:
    """Percentile ``q`` of the valid depth (m), 3 decimals; None without valid pixels."""
    if depth is None:
        return None
    v = depth[np.isfinite(depth) & (depth > 0)]
    return round(float(np.percentile(v, q)), 3) if v.size else None


def class_table(classes: dict) -> tuple[list[str], np.ndarray, int]:
    """Names, C×3 uint8 RGB colours and void id from the node's ``~/classes`` JSON."""
    entries = sorted(classes['classes'], key=lambda c: c['id'])
    colors = np.array([c['color'] for c in entries], dtype=np.uint8).reshape(-1, 3)
    return [c['name'] for c in entries], colors, int(classes.get('void_id', 0))


def frame_pictures(
    out: Path, rec: Recorder, t: int, k: int, n: int, max_depth: float, classes: dict
) -> dict[str, str]:
    """Write frame ``t``'s pictures (module docstring); returns {kind: path relative to out}."""
    names, colors, void_id = class_table(classes)
    pred, gt, files = rec.pred.get(t, {}), rec.gt.get(t, {}), {}
    tiles = []
    if t in rec.rgb:
        tiles.append(('camera image', rec.rgb[t]))
    if t in rec.overlay:
        tiles.append(('overlay (predicted classes)', rec.overlay[t]))
        pic = visual.stack([rec.overlay[t], visual.legend(names, colors, 320)])
        _png(out / 'overlay' / f'{t}.png', pic)
        files['overlay'] = f'overlay/{t}.png'
    if 'labels' in pred:
        mask = visual.labels_picture(pred['labels'], colors)
        _png(out / 'mask' / f'{t}.png', visual.stack([mask, visual.legend(names, colors, 320)]))
        files['mask'] = f'mask/{t}.png'
    if 'depth' in pred:
        dep = visual.depth_on_scale(pred['depth'], max_depth)
        tiles.append(('predicted depth', dep))
        _png(out / 'depth' / f'{t}.png', visual.stack([dep, visual.colour_bar(320, max_depth)]))
        files['depth'] = f'depth/{t}.png'
    if 'depth' in gt:
        tiles.append(('measured depth', visual.depth_on_scale(gt['depth'], max_depth)))
    if 'labels' in gt:
        tiles.append(('ground-truth labels', visual.labels_picture(gt['labels'], colors, void_id)))
    if tiles:
        title = f'frame {k}/{n}, stamp {t}'
        panel = visual.frame_panel(tiles, max_depth, names, colors, title=title)
        _png(out / 'panels' / f'{t}.png', panel)
        files['panel'] = f'panels/{t}.png'
    return files


def write_cloud(out: Path, rec: Recorder) -> int:
    """``cloud.ply`` from the last labelled cloud (invalid points left out); its point count."""
    from depth3dseg_ros.ros.pointcloud2 import read_points, unpack_rgb, write_ply

    if rec.last_cloud is None:
        return 0
    pts = read_points(rec.last_cloud)
    xyz = np.stack([pts['x'], pts['y'], pts['z']], axis=-1)
    rgb = unpack_rgb(pts['rgb']) if 'rgb' in pts.dtype.names else None
    labels = pts['label'] if 'label' in pts.dtype.names else None
    return write_ply(out / 'cloud.ply', xyz, rgb, labels)


def write_report(out: Path, rec: Recorder, info: dict, max_depth: float) -> dict:
    """Write everything of the module docstring from ``rec`` into ``out``; returns the report
    dict (report.json). ``info``: bag, note, model, rate, device, domain_id, replay (the run's
    settings); ``max_depth``: the model's (m), the top of every depth picture's scale."""
    stamps = sorted(set(rec.t_in) | set(rec.t_out))
    n = len(rec.t_in)
    frames = []
    for k, t in enumerate(stamps, 1):
        files = frame_pictures(out, rec, t, k, n, max_depth, rec.classes)
        pred, gt = rec.pred.get(t, {}), rec.gt.get(t, {})
        frames.append(
            dict(
                frame=k,
                stamp_ns=t,
                out=t in rec.t_out,
                latency_ms=(
                    round((rec.t_out[t] - rec.t_in[t]) * 1e3, 1)
                    if t in rec.t_out and t in rec.t_in
                    else None
                ),
                predicted_depth_p50_m=_p(pred.get('depth'), 50),
                predicted_depth_p95_m=_p(pred.get('depth'), 95),
                measured_depth_p95_m=_p(gt.get('depth'), 95),
                labelled='labels' in gt,
                **files,
            )
        )
    names = [c['name'] for c in rec.classes['classes']]
    figures = dict(
        bag=info['bag'],
        model=info['model'],
        frames_in=rec.counts['input'],
        frames_out=len(rec.t_out),
        frames_without_output=[f['frame'] for f in frames if not f['out']],
        classes=names,
        max_depth_m=max_depth,
        ground_truth=ground_truth_metrics(rec, len(names), rec.classes['void_id']),
        cloud_ply_points=write_cloud(out, rec),
        depth_m=[
            [f['frame'], f['predicted_depth_p50_m'], f['predicted_depth_p95_m']]
            + [f['measured_depth_p95_m']]
            for f in frames
        ],
    )
    (out / 'figures.json').write_text(json.dumps(figures, indent=1, sort_keys=True) + '\n')
    lat = np.array([f['latency_ms'] for f in frames if f['latency_ms'] is not None])
    outs = sorted(rec.t_out.values())
    span = outs[-1] - outs[0] if len(outs) > 1 else 0.0
    report = dict(
        info,
        **figures,
        outputs=rec.counts,
        fps_out=round((len(outs) - 1) / span, 2) if span > 0 else 0.0,
        latency_ms_p50=round(float(np.percentile(lat, 50)), 1) if lat.size else None,
        latency_ms_p95=round(float(np.percentile(lat, 95)), 1) if lat.size else None,
        frame_ids=sorted(rec.frame_ids),
        node_diagnostics={k: v for k, v in rec.diag.items() if not k.startswith('age_')},
        frames=frames,
    )
    (out / 'report.json').write_text(json.dumps(report, indent=2))
    (out / 'report.md').write_text(report_markdown(report))
    (out / 'index.html').write_text(report_html(report))
    return report


def _fmt(v: Any) -> str:
    return f'{v:.3f}' if isinstance(v, float) else ('–' if v is None else str(v))


def summary_rows(r: dict) -> list[tuple[str, str]]:
    """(quantity, value) rows of the report's summary table, figures first, then timing."""
    gt = r['ground_truth']
    missing = r['frames_without_output']
    return [
        ('frames in (replayed images received)', str(r['frames_in'])),
        ('frames out (images with outputs)', str(r['frames_out'])),
        ('frames without output', ', '.join(map(str, missing)) if missing else 'none'),
        (
            'labelled frames / fused mIoU / pixel acc',
            f"{gt['labelled_frames']} / {_fmt(gt['miou'])} / {_fmt(gt['pixel_acc'])}",
        ),
        (
            'depth frames / AbsRel / RMSE (m) / δ1',
            f"{gt['depth_frames']} / {_fmt(gt['absrel'])} "
            f"/ {_fmt(gt['rmse_m'])} / {_fmt(gt['delta1'])}",
        ),
        ('cloud.ply points (last frame)', str(r['cloud_ply_points'])),
        (
            'depth colour scale',
            f"0 to {r['max_depth_m']:g} m (the model's max depth), every picture",
        ),
        ('output rate (paced: one frame in flight)', f"{r['fps_out']} fps"),
        (
            'latency p50 / p95 (input arrival -> first output arrival)',
            f"{r['latency_ms_p50']} / {r['latency_ms_p95']} ms",
        ),
        ('outputs received', str(r['outputs'])),
        ('output frame_id', ', '.join(r['frame_ids'])),
    ]


NOTE_PACED = (
    'The replay was paced by the node (depth3dseg-replay --pace): each image was sent once the '
    "node's labels for the previous one had arrived, so no frame was dropped however slow the "
    'node; the figures above the rate are the same from run to run (figures.json). The rate '
    'and latency are measured as the node ran them, one frame at a time, on this machine '
    '(no queueing: a free-running camera faster than the node would see frames dropped, '
    'the newest processed).'
)


def report_markdown(r: dict) -> str:
    """report.md: the summary table, the per-frame depth figures, the node's diagnostics and a
    panel per frame."""
    lines = ['# depth3dseg demo report', '']
    if r.get('note'):
        lines += [f"**{r['note']}**", '']
    lines += [f"Bag `{r['bag']}`, model `{r['model']}`, replay rate {r['rate']}.", '']
    lines += ['| quantity | value |', '|---|---|']
    lines += [f'| {q} | {v} |' for q, v in summary_rows(r)]
    lines += ['', NOTE_PACED, '', '## Depth per frame (m; predicted vs measured)', '']
    lines += ['| frame | predicted p50 | predicted p95 | measured p95 |', '|---|---|---|---|']
    lines += [f'| {k} | {_fmt(a)} | {_fmt(b)} | {_fmt(c)} |' for k, a, b, c in r['depth_m']]
    lines += ['', "## Node diagnostics (last /diagnostics)", '']
    lines += [f'- {k}: {v}' for k, v in r['node_diagnostics'].items()]
    lines += ['', '## Frames', '']
    lines += [
        'Camera image, overlay, predicted depth and, where the frame has them, measured depth '
        'and ground-truth labels; depth on one scale (colour bar, metres; black = no data). '
        'Per frame also `overlay/`, `mask/`, `depth/` (with legend or colour bar).',
        '',
    ]
    for f in r['frames']:
        if 'panel' in f:
            lines += [f"![frame {f['frame']}]({f['panel']})", '']
    return '\n'.join(lines) + '\n'


def report_html(r: dict) -> str:
    """index.html: the same as report.md, for a browser (no script, images beside it)."""
    e = html.escape
    rows = ''.join(f'<tr><td>{e(q)}</td><td>{e(v)}</td></tr>' for q, v in summary_rows(r))
    depth = ''.join(
        f'<tr><td>{k}</td><td>{_fmt(a)}</td><td>{_fmt(b)}</td><td>{_fmt(c)}</td></tr>'
        for k, a, b, c in r['depth_m']
    )
    panels = ''.join(
        f'<figure><img src="{e(f["panel"])}" alt="frame {f["frame"]}"></figure>'
        for f in r['frames']
        if 'panel' in f
    )
    note = f'<p class="note">{e(r["note"])}</p>' if r.get('note') else ''
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<title>depth3dseg demo report</title><style>'
        'body{font-family:sans-serif;margin:1.5em;max-width:1700px}'
        'table{border-collapse:collapse;margin:0.5em 0}'
        'td,th{border:1px solid #bbb;padding:2px 8px;text-align:left}'
        'figure{margin:0 0 1.2em 0}img{max-width:100%}.note{font-weight:bold;color:#a00}'
        '</style></head><body>\n'
        f'<h1>depth3dseg demo report</h1>{note}'
        f'<p>Bag <code>{e(r["bag"])}</code>, model <code>{e(r["model"])}</code>, replay rate '
        f'{e(str(r["rate"]))}.</p>\n<table>{rows}</table><p>{e(NOTE_PACED)}</p>\n'
        '<h2>Depth per frame (m; predicted vs measured)</h2><table><tr><th>frame</th>'
        '<th>predicted p50</th><th>predicted p95</th><th>measured p95</th></tr>'
        f'{depth}</table>\n<h2>Frames</h2>\n{panels}\n</body></html>\n'
    )
