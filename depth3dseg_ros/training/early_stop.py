"""Early stopping and best-epoch selection (M6): the state a training run keeps in ``es``
(checkpointed with the run) and the rules that update it after each validation.

Pure: no torch, no ROS; the metric names are `depth3dseg_ros.training.config.METRIC_KEYS`.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ['is_better', 'update_early_stop', 'early_stop_reason']


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_better(value: Any, best: float | None, mode: str, min_delta: float) -> bool:
    """True when ``value`` improves on ``best`` by more than ``min_delta`` (``mode`` 'max' or
    'min'); a None/NaN ``value`` never improves, any finite one improves on ``best=None``."""
    if not _finite(value):
        return False
    if best is None:
        return True
    return value > best + min_delta if mode == 'max' else value < best - min_delta


def update_early_stop(es: dict, metrics: dict, cfg: dict, epoch: int) -> tuple[bool, str | None]:
    """Update the early-stopping state ``es`` in place with the validation ``metrics`` of 1-based
    ``epoch``; returns ``(improved, note)``.

    ``es``: ``best`` (value | None), ``best_epoch`` (-1 before any), ``bad_epochs`` (epochs without
    improvement), ``metric``/``mode`` (the selection metric in use; absent in older checkpoints:
    those of ``cfg['early_stop']``). When the configured metric is unavailable (None/NaN: no
    labelled validation pixels for the mIoU/accuracy metrics, none with depth for
    absrel/rmse/delta1) and no epoch had a value for it, the run selects its best epoch by
    ``val_loss`` (mode min) from then on, so a run that validates always has a best epoch to
    export; ``note`` is the one line saying so (None otherwise).
    """
    e = cfg['early_stop']
    metric, mode = es.setdefault('metric', e['metric']), es.setdefault('mode', e['mode'])
    note = None
    if not _finite(metrics.get(metric)) and es['best'] is None and metric != 'val_loss':
        why = (
            'no validation frames with depth'
            if metric in ('absrel', 'rmse', 'delta1')
            else 'no labelled validation frames'
        )
        note = (
            f'early_stop.metric {metric} unavailable ({why}): selecting the best epoch by val_loss'
        )
        metric, mode = es['metric'], es['mode'] = 'val_loss', 'min'
    value = metrics.get(metric)
    improved = is_better(value, es['best'], mode, e['min_delta'])
    if improved:
        es.update(best=value, best_epoch=epoch, bad_epochs=0)
    else:
        es['bad_epochs'] += 1
    return improved, note


def early_stop_reason(cfg: dict, es: dict) -> str:
    """The ``stop_reason`` of early stopping, naming the metric in use (see
    `update_early_stop`)."""
    return (
        f"early stopping: {es.get('metric', cfg['early_stop']['metric'])} did not improve for "
        f"{cfg['early_stop']['patience']} epochs (best {es['best']} at epoch {es['best_epoch']})"
    )
