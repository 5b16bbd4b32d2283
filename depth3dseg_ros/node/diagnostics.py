"""The node's ``/diagnostics`` status: windowed rates, levels, frame ages (issue 14; REP-107
levels).

Pure logic, no rclpy (the node turns :class:`Report` into a ``diagnostic_msgs/DiagnosticStatus``),
so every rule is unit-tested with made-up times (test/test_diagnostics.py).

Rules (the thresholds are the documented constants below, docs/node.md "Diagnostics"):

* **Rates are windowed.** ``rate_hz`` (processed frames/s) and ``input_rate_hz`` (received
  frames/s) count the frames of the last :data:`WINDOW_S` seconds (from counter samples taken at
  each report), so they decay to 0 within one window and one report period after the input stops.
  (Before: the mean over the last 300 frames, which still read 7.8 Hz 30 s after the last frame.)
* **Levels** (diagnostic_msgs/DiagnosticStatus, REP-107): ERROR when no frame has arrived for
  :data:`STALE_S` seconds (or none since start-up, after STALE_S); WARN when, over the window, more
  than :data:`DROP_WARN_RATIO` of the received frames were dropped (model slower than the camera,
  C26), the processed rate is below :data:`RATE_WARN_HZ` while frames arrive, or frames were
  skipped (malformed, C04), refused (over max_image_pixels) or publishes failed (C25) within the
  window (a fault long past no longer keeps the level at WARN); OK otherwise. The message names the
  first problem.
* **hardware_id** is the camera: the ``header.frame_id`` of the latest image ('' before the first).
* **Frame ages** (node clock now - header.stamp) outside [:data:`AGE_MIN_S`, :data:`AGE_MAX_S`] are
  not counted in the percentiles (a frame stamped 0, a bag replayed without ``use_sim_time``,
  another machine's clock far off): they are counted in ``age_ignored`` instead. (Before: p95 read
  7e11 ms.)
* **Time going backwards resets, never stalls.** Every time here is the steady (monotonic) clock,
  which never jumps; should a caller's ``now`` still go back, the window history is dropped and
  starts again from that sample. The node runs its diagnostics timer on the steady clock, so a
  ``/clock`` jump back (a looped bag with ``use_sim_time``) no longer stops it for good; only the
  DiagnosticArray header stamp and the frame ages use the node clock (sim time when asked).
* **No input is also said on the console** (:func:`no_input_hint`): /diagnostics is not where a
  user looks first, and a wrong topic name is the usual cause, so the node logs a throttled WARN
  naming its input topic, its publishers and the image topics the graph has.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from depth3dseg_ros.node.worker import LatestSlot, StageStats

WINDOW_S = 5.0  # s: rates and the drop ratio are taken over this window
STALE_S = 5.0  # s without any input frame -> ERROR
DROP_WARN_RATIO = 0.25  # dropped / received over the window above this -> WARN
RATE_WARN_HZ = 1.0  # processed frames/s below this while input arrives -> WARN
AGE_MIN_S = -1.0  # frame ages outside [AGE_MIN_S, AGE_MAX_S] are ignored (stamp 0, clock skew)
AGE_MAX_S = 60.0

# diagnostic_msgs/DiagnosticStatus levels (REP-107), repeated here to keep this module rclpy-free
OK, WARN, ERROR, STALE = 0, 1, 2, 3


def age_is_valid(age_ms: float | None) -> bool:
    """True when a frame age in ms is plausible: finite and within [AGE_MIN_S, AGE_MAX_S]
    seconds."""
    return age_ms is not None and AGE_MIN_S * 1e3 <= age_ms <= AGE_MAX_S * 1e3


#: the frame-age value when every age of the window was ignored (clock mismatch: a bag's
#: recording time against a node not on its /clock, a far-off clock)
AGE_CLOCK_MISMATCH = 'n/a (clock mismatch)'


def age_values(summary: dict, age_ignored: int) -> dict:
    """``age_ms_p50`` / ``age_ms_p95`` of a ``StageStats.summary()`` as reported: the numbers
    when ages were measured; else ``'n/a (clock mismatch)'`` when ages were ignored
    (``age_ignored`` > 0), ``'n/a'`` before any frame. Never 0 ms for an age not measured."""
    if summary.get('age_ms_p50') is not None:
        return {k: summary[k] for k in ('age_ms_p50', 'age_ms_p95')}
    text = AGE_CLOCK_MISMATCH if age_ignored > 0 else 'n/a'
    return {'age_ms_p50': text, 'age_ms_p95': text}


class AgeFilteredStats(StageStats):
    """``StageStats`` whose frame ages ignore implausible values (:func:`age_is_valid`), counting
    them in ``age_ignored``: one frame stamped 0 no longer makes p95 read 7e11 ms."""

    def __init__(self, window: int = 300) -> None:
        super().__init__(window)
        self.age_ignored = 0

    def add(self, timings_ms: dict[str, float], age_ms: float | None) -> None:
        """As StageStats.add; an implausible ``age_ms`` (ms) is counted and left out of the
        ages."""
        if age_ms is not None and not age_is_valid(age_ms):
            self.age_ignored += 1
            age_ms = None
        super().add(timings_ms, age_ms)


class CameraSlot(LatestSlot):
    """``LatestSlot`` that also keeps what diagnostics needs of each frame put in: the steady time
    of the latest one (``last_put``, ``time.monotonic()`` s; None before the first) and its camera
    ``frame_id`` (the image header's, via ``item.image.header`` for a ros.sync.Pair)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_put: float | None = None
        self.frame_id = ''

    def put(self, item: Any) -> bool:
        """As LatestSlot.put, recording the time and the frame_id."""
        self.last_put = time.monotonic()
        image = getattr(item, 'image', item)
        frame_id = getattr(getattr(image, 'header', None), 'frame_id', None)
        if isinstance(frame_id, str):
            self.frame_id = frame_id
        return super().put(item)


@dataclass
class Counts:
    """Cumulative counters at one moment (what the node's slot and stats hold)."""

    received: int = 0
    processed: int = 0
    dropped: int = 0
    skipped: int = 0
    refused: int = 0
    publish_errors: int = 0


@dataclass
class Report:
    """One diagnostics report: ``level`` (OK/WARN/ERROR), ``message`` (the first problem, or 'ok'),
    ``values`` (key -> number for the KeyValues), ``hardware_id`` (camera frame_id)."""

    level: int
    message: str
    values: dict[str, float] = field(default_factory=dict)
    hardware_id: str = ''


class Health:
    """Windowed rates and levels from cumulative counters sampled at each report (thread-safe).

    Args:
        start: steady time (s) the node started (for "no input since start-up").
        window_s, stale_s, drop_warn_ratio, rate_warn_hz: the thresholds (defaults: module
            constants).
    """

    def __init__(
        self,
        start: float,
        window_s: float = WINDOW_S,
        stale_s: float = STALE_S,
        drop_warn_ratio: float = DROP_WARN_RATIO,
        rate_warn_hz: float = RATE_WARN_HZ,
    ) -> None:
        self.start, self.window_s, self.stale_s = float(start), float(window_s), float(stale_s)
        self.drop_warn_ratio, self.rate_warn_hz = float(drop_warn_ratio), float(rate_warn_hz)
        self._samples: deque[tuple[float, Counts]] = deque()
        self._lock = threading.Lock()
        self.resets = 0  # times ``now`` went backwards

    def _window(self, now: float, counts: Counts) -> tuple[float, Counts]:
        """Add the sample; return (seconds covered, counter increase) over the window ending
        now."""
        if self._samples and now < self._samples[-1][0]:  # time went backwards: start again
            self._samples.clear()
            self.resets += 1
            self.start = min(self.start, now)
        if self._samples and (counts.received < self._samples[-1][1].received):
            self._samples.clear()  # counters reset (a new slot)
        self._samples.append((now, counts))
        # keep the newest sample at or before now - window (the window's base) and everything after
        # it
        while len(self._samples) > 2 and self._samples[1][0] <= now - self.window_s:
            self._samples.popleft()
        t0, c0 = self._samples[0]
        if len(self._samples) == 1:  # the first report: count from start-up, all frames so far
            t0, c0 = min(self.start, now), Counts()
        dt = now - t0
        delta = Counts(
            **{k: getattr(counts, k) - getattr(c0, k) for k in Counts.__dataclass_fields__}
        )
        return dt, delta

    def report(
        self,
        now: float,
        counts: Counts,
        last_input: float | None,
        frame_id: str = '',
        extra: dict[str, float] | None = None,
    ) -> Report:
        """The report at steady time ``now`` (s) for cumulative ``counts``; ``last_input`` is the
        steady time of the latest received frame (None: none yet); ``extra`` values are passed
        through."""
        with self._lock:
            dt, d = self._window(now, counts)
        rate = d.processed / dt if dt > 0 else 0.0
        in_rate = d.received / dt if dt > 0 else 0.0
        drop_ratio = d.dropped / d.received if d.received > 0 else 0.0
        since = now - (self.start if last_input is None else last_input)
        if last_input is not None and since < 0:  # the input time is from before a clock reset
            since = 0.0
        problems: list[tuple[int, str]] = []
        if since >= self.stale_s:
            what = 'no input frame since start-up' if last_input is None else 'no input frame'
            problems.append((ERROR, f'{what} for {since:.1f} s (> {self.stale_s:g} s)'))
        else:
            if d.received and drop_ratio > self.drop_warn_ratio:
                problems.append(
                    (
                        WARN,
                        f'{drop_ratio:.0%} of the frames of the last {dt:.0f} s dropped '
                        f'(> {self.drop_warn_ratio:.0%}): model slower than the camera',
                    )
                )
            if d.received and rate < self.rate_warn_hz:
                problems.append(
                    (
                        WARN,
                        f'processing {rate:.2f} Hz (< {self.rate_warn_hz:g} Hz) while '
                        f'receiving {in_rate:.2f} Hz',
                    )
                )
        if d.skipped:
            problems.append(
                (WARN, f'{d.skipped} malformed or empty frames skipped in the last {dt:.0f} s')
            )
        if d.refused:
            problems.append(
                (WARN, f'{d.refused} frames over max_image_pixels refused in the last {dt:.0f} s')
            )
        if d.publish_errors:
            problems.append((WARN, f'{d.publish_errors} publishes failed in the last {dt:.0f} s'))
        level = max((lvl for lvl, _ in problems), default=OK)
        message = next((text for lvl, text in problems if lvl == level), 'ok')
        values: dict[str, float] = dict(extra or {})
        values.update(
            rate_hz=rate,
            input_rate_hz=in_rate,
            window_s=dt,
            drop_ratio=drop_ratio,
            seconds_since_input=since if last_input is not None else -1.0,
            received=counts.received,
            processed=counts.processed,
            dropped=counts.dropped,
            skipped=counts.skipped,
            refused=counts.refused,
            publish_errors=counts.publish_errors,
        )
        return Report(level=level, message=message, values=values, hardware_id=frame_id)


def format_value(v: Any) -> str:
    """A KeyValue value: floats with 3 decimals, the rest as str."""
    return f'{v:.3f}' if isinstance(v, float) else str(v)


IMAGE_TYPES = ('sensor_msgs/msg/Image', 'sensor_msgs/msg/CompressedImage')


def transport_hint(transport: str | None) -> str:
    """The DDS-transport clause of `no_input_hint`: processes whose FASTDDS_BUILTIN_TRANSPORTS
    differ (LARGE_DATA here, the default in a camera driver started without it) deliver nothing
    to each other, small messages included, though their topics may show in the graph (measured
    in docs/pip_ros_stack.md §1). ``transport``: this process's value, None when unset."""
    var = 'FASTDDS_BUILTIN_TRANSPORTS'
    here = f'{var}={transport}' if transport else f'{var} unset (the default transports)'
    same = f'export {var}={transport}' if transport else f'unset {var}'
    return (
        f'; this node runs with {here}: a publisher started with another value delivers '
        f"nothing to it, so give the camera driver the same ('{same}' in its shell)"
    )


def no_input_hint(
    topic: str,
    publishers: int,
    graph: list[tuple[str, list[str]]],
    own_prefix: str = '',
    transport: str | None = None,
    own_inputs: tuple[str, ...] = (),
) -> str:
    """Why no frame arrives on the input ``topic`` (resolved name), for the console WARN that goes
    with the ERROR "no input frame" (docs/node.md "Diagnostics").

    ``publishers``: the publisher count on ``topic``; ``graph``: ``get_topic_names_and_types()``;
    topics under ``own_prefix`` (the node's own outputs, e.g. ``/depth3dseg/``) are left out;
    ``transport``: this process's FASTDDS_BUILTIN_TRANSPORTS (None = unset), named at the end
    (`transport_hint`), since a mismatch looks exactly like a missing or silent camera;
    ``own_inputs``: the node's other image inputs (its ``depth`` topic), left out too.
    Returns e.g. ``no publisher on /camera/rgb/image_raw; image topics in the graph:
    ['/camera/color/image_raw'] (remap with -r image:=TOPIC); this node runs with
    FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA: ...``.
    """
    if publishers:
        return (
            f'{publishers} publisher(s) on {topic} but no frame received: is it publishing, and '
            'do the QoS settings match (input_reliability=reliable needs a reliable publisher)?'
            + transport_hint(transport)
        )
    seen = sorted(
        name
        for name, types in graph
        if name != topic
        and not (own_prefix and name.startswith(own_prefix))
        and name not in own_inputs
        and any(t in IMAGE_TYPES for t in types)
    )
    return (
        f'no publisher on {topic}; image topics in the graph: {seen if seen else "none"} '
        '(remap with -r image:=TOPIC)' + transport_hint(transport)
    )
