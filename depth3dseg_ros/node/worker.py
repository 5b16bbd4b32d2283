"""Newest-frame slot, worker thread and per-stage timing statistics (docs/cases.md C26).

A camera at 30 Hz and a model at 10 Hz must not build a backlog: the subscription callback only
puts the frame into a one-element slot (replacing, and counting as dropped, a frame the worker has
not taken yet) and a worker thread processes whatever is newest. Output age then stays about one
inference time plus one frame period instead of growing by 2 frames per processed frame.

No rclpy import: the node passes plain callables.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable, Iterable

import numpy as np


class LatestSlot:
    """Thread-safe one-frame mailbox: ``put`` replaces, ``take`` waits for a frame and empties the
    slot."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: Any = None
        self._has = False
        self._closed = False
        self.put_count = 0
        self.dropped = 0

    def put(self, item: Any) -> bool:
        """Store ``item``; returns True when it replaced an unprocessed frame (counted in
        ``dropped``)."""
        with self._cond:
            replaced = self._has
            self._item, self._has = item, True
            self.put_count += 1
            if replaced:
                self.dropped += 1
            self._cond.notify()
            return replaced

    def take(self, timeout: float | None = None) -> Any | None:
        """The newest frame, or None after ``timeout`` seconds / once closed."""
        with self._cond:
            if not self._has and not self._closed:
                self._cond.wait(timeout)
            if not self._has:
                return None
            item, self._item, self._has = self._item, None, False
            return item

    def close(self) -> None:
        """Wake the worker for shutdown; later ``take`` calls return None once empty."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """True after ``close``."""
        return self._closed


class Worker:
    """A daemon thread calling ``process(item)`` for each newest frame of ``slot``.

    ``process`` must not raise; anything it does raise is passed to ``on_error`` and the loop goes
    on (a malformed message never kills the node, C04).
    """

    def __init__(
        self,
        slot: LatestSlot,
        process: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        name: str = 'depth3dseg-worker',
    ) -> None:
        self.slot, self.process, self.on_error = slot, process, on_error
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def _run(self) -> None:
        while not self.slot.closed:
            item = self.slot.take(timeout=0.2)
            if item is None:
                continue
            try:
                self.process(item)
            except BaseException as err:  # noqa: BLE001 - never let the worker die
                self.on_error(err)

    def stop(self, timeout: float = 5.0) -> bool:
        """Close the slot and join the thread (at most ``timeout`` s); True when it has ended."""
        self.slot.close()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()


STAGES = ('decode', 'inference', 'cloud', 'publish', 'total')


class StageStats:
    """Rolling per-stage timings (ms) and frame ages over the last ``window`` frames;
    thread-safe."""

    def __init__(self, window: int = 300) -> None:
        self._lock = threading.Lock()
        self._t = {s: deque(maxlen=window) for s in STAGES}
        self._age = deque(maxlen=window)
        self._done = deque(maxlen=window)  # monotonic completion times, for the rate
        self.processed = 0
        self.skipped = 0  # malformed / empty frames
        self.refused = 0  # over max_image_pixels (refused before decoding)
        self.publish_errors = 0

    def add(self, timings_ms: dict[str, float], age_ms: float | None) -> None:
        """Record one processed frame: ``{stage: ms}`` and its age (now - header.stamp) in ms."""
        with self._lock:
            for s in STAGES:
                if s in timings_ms:
                    self._t[s].append(float(timings_ms[s]))
            if age_ms is not None:
                self._age.append(float(age_ms))
            self._done.append(time.monotonic())
            self.processed += 1

    def summary(self) -> dict[str, float]:
        """``{<stage>_ms: mean, age_ms_p50, age_ms_p95, rate_hz, processed, skipped, refused,
        publish_errors}``; the ages are None while no frame age was recorded."""
        with self._lock:
            out: dict[str, float] = {
                f'{s}_ms': (float(np.mean(v)) if v else 0.0) for s, v in self._t.items()
            }
            ages = np.asarray(self._age) if self._age else np.zeros(0)
            # no age measured (none yet, or every one ignored): None, never a made-up 0 ms
            out['age_ms_p50'] = float(np.percentile(ages, 50)) if ages.size else None
            out['age_ms_p95'] = float(np.percentile(ages, 95)) if ages.size else None
            done = list(self._done)
            out['rate_hz'] = (
                ((len(done) - 1) / (done[-1] - done[0]))
                if len(done) > 1 and done[-1] > done[0]
                else 0.0
            )
            out.update(
                processed=self.processed,
                skipped=self.skipped,
                refused=self.refused,
                publish_errors=self.publish_errors,
            )
            return out


def age_text(s: dict) -> str:
    """The frame-age part of the summary line: ``age p50 12 ms p95 30 ms``; a value that is not a
    number (``n/a (clock mismatch)``: node/diagnostics.age_values) is said as it is once."""
    p50, p95 = s.get('age_ms_p50'), s.get('age_ms_p95')
    if isinstance(p50, (int, float)) and isinstance(p95, (int, float)):
        return f'age p50 {p50:.0f} ms p95 {p95:.0f} ms'
    return f'age {p50 if isinstance(p50, str) else "n/a"}'


def summary_line(s: dict) -> str:
    """The node's periodic log line from a ``StageStats.summary()`` completed with ``received`` and
    ``dropped``: rate, frame age, mean ms per stage and the frame counts."""
    return (
        f"{s['rate_hz']:.1f} Hz, {age_text(s)}, "
        f"decode {s['decode_ms']:.1f} / inference {s['inference_ms']:.1f} / cloud "
        f"{s['cloud_ms']:.1f}"
        f" / publish {s['publish_ms']:.1f} ms, received {s['received']}, processed "
        f"{s['processed']}, dropped {s['dropped']}, skipped {s['skipped']}, refused {s['refused']}"
        + (f", outputs {s['outputs']}" if 'outputs' in s else '')
    )


def outputs_text(keys: Iterable[str] | None) -> str:
    """The /diagnostics ``outputs`` value: the output keys (node/outputs.py) the latest frame
    published, sorted and comma-separated (``labels,labels/camera_info,points``); ``none`` when it
    published nothing (lazy outputs, no subscriber), ``-`` before the first frame."""
    if keys is None:
        return '-'
    return ','.join(sorted(keys)) or 'none'
