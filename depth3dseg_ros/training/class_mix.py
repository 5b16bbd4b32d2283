"""ClassMix onto real frames: synthetic segments pasted into the real RGB-D frames of a batch.

Olsson, Tranheden, Pinto, Svensson, "ClassMix: Segmentation-Based Data Augmentation for
Semi-Supervised Learning", WACV 2021; used across domains by Tranheden et al., "DACS: Domain
Adaptation via Cross-domain Mixed Sampling", WACV 2021. Here without pseudo-labels: the real
pixels stay unlabelled (void), so the segmentation terms learn the synthetic classes *in front of
real backgrounds*, and no teacher's mistakes on real frames are trained in.

Per training step (config ``train.class_mix``, off by default), each frame of the batch that is a
real unlabelled RGB-D frame (``has_labels`` False, ``has_depth`` True, ``has_geometry`` True; M5)
is, with probability ``p``, replaced by a mix: a labelled frame of the same batch is drawn, half
of the classes present in its label image (rounded up, void excluded) are drawn, and where its
labels are one of those the frame takes its colour, label and depth. Elsewhere the real frame's
colour and measured depth stay and the label is void. The mixed frame then trains every term it
has (METHOD M5/M6): 2D and 3D cross-entropy on the pasted pixels, depth on both parts, the
consistency term on the cloud of the collage. K stays the real frame's (the pasted pixels
back-project with it; the rendered cameras are NYU-like, as the real ones).

The draws come from ``step_generator(seed, step)``, so a resumed run mixes the same frames, and
the global RNG (augmentation, the batch order) is untouched: a run with ``p`` 0 is the run
without the option.
"""

from __future__ import annotations

from typing import Any, Dict

import torch

from depth3dseg_ros.training.config_checks import options

DEFAULTS: Dict[str, Any] = {'p': 0.5}


def check_class_mix(value: Any) -> Dict[str, Any] | None:
    """Validate config ``train.class_mix``: null (off) or a mapping with ``p`` (probability in
    [0, 1] that a real RGB-D frame of a batch is mixed; default 0.5). Returns the full mapping or
    None. Raises ValueError naming the key and the value."""
    out = options(value, 'train.class_mix', DEFAULTS, '{p: 0.5}')
    if out is None:
        return None
    p = out['p']
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f'config train.class_mix.p={p!r} must be a number in [0, 1]')
    out['p'] = float(p)
    return out


def frame_roles(records: list[dict]) -> tuple[int, int]:
    """(real RGB-D frames that can be mixed, labelled frames that can give) among dataset records
    (training.dataset.load_records: ``labels`` / ``depth`` paths, ``geometry`` False for a frame
    without a real 3D scene). A run with ``train.class_mix`` and either count 0 mixes nothing."""
    geo = [r for r in records if r.get('geometry', True) is not False]
    targets = sum(1 for r in geo if not r.get('labels') and r.get('depth'))
    donors = sum(1 for r in geo if r.get('labels'))
    return targets, donors


def startup_line(option: Dict[str, Any], records: list[dict]) -> tuple[str, bool]:
    """The line a run with ``train.class_mix`` = ``option`` prints at start-up, and whether all is
    well: False (a warning) when ``records`` (the training set) hold no frame to mix into or none
    to take classes from, so the option would silently do nothing."""
    targets, donors = frame_roles(records)
    if targets and donors:
        return (
            f"train.class_mix p={option['p']:g}: {targets} real RGB-D frames without labels to "
            f'mix into, {donors} labelled frames to take classes from',
            True,
        )
    return (
        f'train.class_mix={option} mixes nothing: data.train holds {targets} RGB-D frames '
        f'without labels (the frames it mixes into) and {donors} labelled frames (the ones it '
        'takes classes from); add a dataset of unlabelled RGB-D frames (docs/training.md, '
        '"ClassMix onto real RGB-D frames")',
        False,
    )


def step_generator(seed: int, step: int) -> torch.Generator:
    """The generator of step ``step``'s draws (a function of the run's ``train.seed`` and the
    global step only, so resumes repeat them)."""
    return torch.Generator().manual_seed(int(seed) * 1_000_003 + int(step) + 17)


def class_mix(
    batch: Dict[str, torch.Tensor], p: float, void_id: int, gen: torch.Generator
) -> tuple[Dict[str, torch.Tensor], int]:
    """Mix synthetic segments into the real RGB-D frames of ``batch`` (module docstring).

    Args:
        batch: a training batch (core.train_step): ``rgb`` B×3×H×W float, ``depth`` B×1×H×W
            metres (NaN = none), ``labels`` B×H×W int64, ``has_labels`` / ``has_depth`` /
            ``has_geometry`` B bool; other keys pass through.
        p: probability that each eligible real frame is mixed.
        void_id: the class set's void id (never pasted; the real pixels' label).
        gen: the step's generator (``step_generator``).

    Returns:
        (the batch, with new tensors where frames were mixed; the number of frames mixed). The
        input tensors are not modified. A batch without a labelled frame, or without an eligible
        real frame, comes back as it was.
    """
    has_lab = batch['has_labels'].bool()
    geo = batch.get('has_geometry', torch.ones_like(has_lab)).bool()
    real = (~has_lab) & batch['has_depth'].bool() & geo
    donors = torch.nonzero(has_lab & geo).flatten()
    targets = torch.nonzero(real).flatten()
    if not len(donors) or not len(targets):
        return batch, 0
    draws = torch.rand(len(targets), generator=gen)
    out = dict(batch)
    cloned = False
    mixed = 0
    for t, u in zip(targets.tolist(), draws.tolist()):
        if u >= p:
            continue
        d = int(donors[torch.randint(len(donors), (1,), generator=gen)])
        lab = batch['labels'][d]
        present = torch.unique(lab)
        present = present[present != void_id]
        if not len(present):
            continue
        k = (len(present) + 1) // 2
        chosen = present[torch.randperm(len(present), generator=gen)[:k]]
        mask = torch.isin(lab, chosen)
        if not cloned:
            for key in ('rgb', 'depth', 'labels', 'has_labels'):
                out[key] = batch[key].clone()
            cloned = True
        out['rgb'][t][:, mask] = batch['rgb'][d][:, mask]
        out['depth'][t][:, mask] = batch['depth'][d][:, mask]
        new_lab = torch.full_like(lab, void_id)
        new_lab[mask] = lab[mask]
        out['labels'][t] = new_lab
        out['has_labels'][t] = True
        mixed += 1
    return out, mixed
