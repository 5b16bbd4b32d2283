"""Header-stamp synchroniser for an image and its CameraInfo (message_filters stand-in).

message_filters is not installable with pip (docs/pip_ros_stack.md §3), so this module
pairs an ``Image`` (the *reference*) with the ``CameraInfo`` of the same ``header.stamp``, within a
slop, like ``message_filters.ApproximateTimeSynchronizer`` with two inputs (``slop = 0`` means
``TimeSynchronizer``, exact stamps). It keeps a bounded deque per input.

On top of the pairing it implements the policy of docs/ros_conventions.md ("Pair each image with
the CameraInfo of the same stamp; when only an older CameraInfo exists, use the latest one and warn
once; missing CameraInfo: publish no cloud, keep running"). The CameraInfo stamp never decides
*whether* an image is processed, and no single message delays others (issue 14): intrinsics are
static, so an image that cannot be matched goes out at once with the newest CameraInfo.

* ``matched``  -- a CameraInfo within ``slop`` of the image stamp was found (closest wins);
* ``latest``   -- no CameraInfo within ``slop``: the image is released with the newest CameraInfo;
  ``Pair.reason`` says why (the caller warns once per reason):

  - ``stale``  -- CameraInfo stamps do not keep up with the image stamps (constant, unset, offset
    by more than ``slop``, or late by a frame or more): no image waits while this holds;
  - ``far``    -- the image stamp is further ahead of the newest CameraInfo than two image periods
    (1 s before the period is known): e.g. an image stamped far in the future, or CameraInfo stamps
    that are unset or long past; or an image stamped back that the stream did not follow (below);
  - ``passed`` -- a CameraInfo newer than ``stamp + slop`` exists but none within ``slop`` (its own
    CameraInfo was lost);
  - ``late``   -- the next image arrived before this image's CameraInfo did;
* ``none``     -- no CameraInfo received (ever, or of the timeline after a jump): the image is
  released at once, without one; unless the caller says one is expected (``add_image(...,
  info_expected=True)``, e.g. a CameraInfo publisher exists): then up to ``queue_size`` images wait
  for the first CameraInfo, so the first frames of a camera whose image beats its CameraInfo still
  get a cloud.

Once a CameraInfo has arrived, at most one image waits: the newest, and only while its CameraInfo
can still come in step (the image beat its CameraInfo by a moment, the usual race between two
topics). It is released by the next CameraInfo (matched, ``passed`` or ``stale``) or by the next
image (``late``), whichever comes first, so a wait never exceeds one frame and never holds back
another image. The stream counts as *stale* when a CameraInfo arrives stamped more than ``slop``
before the oldest waiting (or, with none waiting, the latest) image, or when two images in a row
were released ``late`` without a CameraInfo arriving meanwhile (e.g. a CameraInfo published once);
a CameraInfo stamped in step ends it. Release order is arrival order.

**Time going back** (a bag played again or looped, ``--clock`` or not; a camera driver restarted
with another clock): an image or CameraInfo stamped more than ``slop`` before the newest one of its
stream starts a new timeline. The CameraInfos stamped after it belong to the old one and could
never be the right ones (a looped bag's last CameraInfo is "newer" than every image of its next
pass): they are dropped, so the images of the new pass wait for and match their own (``jumps``
counts these restarts). Images still waiting go out first, paired on the old timeline.
An image stamped back that would drop CameraInfos starts the new timeline only once the next
message goes on with it (issue 55: one hostile image stamped 0 dropped them all, and the frames
after it went out without a CameraInfo); until then it is ``held`` and nothing is dropped. A
CameraInfo stamped near it, or an image stamped back too, confirms the jump; a message stamped
past the newest image (by more than the slop) refutes it: the image goes out at once, matched if a
CameraInfo of its stamp is kept, else with the newest (``far``, as an image stamped far ahead;
``outliers_back`` counts them). A CameraInfo stamped in between (the old timeline's last on its
way, or a constant stamp) decides nothing.
Messages of the two topics travel apart, so around the jump a message of the old timeline can
still arrive after the first one of the new (issue 54: a looped bag's last CameraInfo arriving
after the first image of the next pass was paired with it, another camera size). Until the other
topic's first message of the new timeline (at most ``GUARD_MESSAGES`` messages), a message of
that topic stamped past the new timeline's newest stamp and nearer the old timeline's end is
taken as one of the old timeline: such a CameraInfo is dropped (never the latest CameraInfo of
the new timeline); such an image goes out at once with the old timeline's CameraInfo of its stamp
(else that timeline's newest), never with one of the new timeline. ``old_timeline`` counts them.

Pure Python, duck-typed: works on rclpy and rosbags messages alike (anything with
``header.stamp.sec`` / ``nanosec``). No rclpy import.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

MATCHED = 'matched'
LATEST = 'latest'
NONE = 'none'
# reasons of a LATEST pair (module docstring)
STALE = 'stale'
FAR = 'far'
PASSED = 'passed'
LATE = 'late'
FIRST_LAG_LIMIT_NS = 1_000_000_000  # 'far' bound before two image stamps give the period
GUARD_MESSAGES = 16  # messages after a time jump in which old-timeline stragglers are looked for
PERIOD_WINDOW = 8  # image-stamp gaps kept for the period (their median)


def stamp_to_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time`` (``sec``, ``nanosec``) -> integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def header_stamp_ns(msg: Any) -> int:
    """``msg.header.stamp`` in integer nanoseconds."""
    return stamp_to_ns(msg.header.stamp)


def slop_to_ns(slop: float) -> int:
    """``sync_slop`` in seconds -> integer ns. Raises ValueError (naming sync_slop) when not >=
    0."""
    if not float(slop) >= 0.0:
        raise ValueError(f'sync_slop={slop!r} must be >= 0 seconds')
    return int(round(float(slop) * 1e9))


@dataclass(frozen=True)
class Pair:
    """One released image with the CameraInfo chosen for it.

    Attributes:
        image: the reference message (Image or CompressedImage).
        info: the CameraInfo, or None when none was ever received.
        how: ``'matched'`` (stamp within slop), ``'latest'`` (newest CameraInfo), ``'none'`` (no
            CameraInfo).
        dt_ns: |image stamp - info stamp| in ns (0 for ``'none'``).
        reason: for ``'latest'``: ``'stale'``, ``'far'``, ``'passed'`` or ``'late'``; else ''.
    """

    image: Any
    info: Any | None
    how: str
    dt_ns: int = 0
    reason: str = ''


class StampSync:
    """Pairs images with CameraInfo by header stamp (ApproximateTime with two inputs, slop in s);
    images that cannot be matched go out at once with the newest CameraInfo (module docstring).

    Args:
        slop: largest |image stamp - info stamp| in seconds still paired (>= 0; 0 = exact).
        queue_size: images waiting for the first CameraInfo at most (>= 1); 2 x as many CameraInfos
            kept.

    Raises:
        ValueError: slop < 0 or queue_size < 1 (naming the field).
    """

    def __init__(self, slop: float = 0.01, queue_size: int = 5) -> None:
        if int(queue_size) < 1:
            raise ValueError(f'queue_size={queue_size!r} must be >= 1')
        self.slop_ns = slop_to_ns(slop)
        self.queue_size = int(queue_size)
        self._images: deque = deque()
        self._infos: deque = deque(maxlen=max(self.queue_size, 2) * 2)
        self._gaps: deque = deque(maxlen=PERIOD_WINDOW)  # positive gaps between image stamps, ns
        self._prev_image_ns: int | None = None  # stamp of the previous image (any)
        self._last_image_ns: int | None = None  # latest image not released as 'far'
        self.stale = False
        self._late_in_a_row = 0
        self.counts = {MATCHED: 0, LATEST: 0, NONE: 0}
        self.jumps = 0  # times the stamps went back by more than the slop (a new timeline)
        self.last_jump_ns = 0  # how far the last one went back, ns
        self.old_timeline = 0  # messages of the old timeline that arrived after a jump
        self._other: deque = deque(maxlen=self._infos.maxlen)  # the old timeline's CameraInfos
        self._guard: list | None = None  # [new timeline's newest, old one's newest, left, topic]
        self._held: tuple | None = None  # (image, newest image stamp before it): a jump to confirm
        self.outliers_back = 0  # images stamped back that the next message refuted as a jump

    def set_slop(self, slop: float) -> None:
        """Change the slop (s) from the next message on (run-time ``sync_slop``, C44). Raises
        ValueError."""
        self.slop_ns = slop_to_ns(slop)

    @property
    def latest_info(self) -> Any | None:
        """The newest CameraInfo received, or None."""
        return self._infos[-1] if self._infos else None

    @property
    def waiting(self) -> int:
        """Number of images waiting for a CameraInfo, or (`held`) for a jump's confirmation."""
        return len(self._images) + self.held

    @property
    def held(self) -> int:
        """1 while an image stamped back waits for the next message to confirm its jump, else
        0."""
        return int(self._held is not None)

    @property
    def period_ns(self) -> int | None:
        """The image period from the stamps (median of the last positive gaps), ns; None before two
        images."""
        if not self._gaps:
            return None
        return int(sorted(self._gaps)[len(self._gaps) // 2])

    def add_info(self, info: Any) -> list[Pair]:
        """Add a CameraInfo; return the waiting images it releases (in arrival order)."""
        t_info = header_stamp_ns(info)
        out = self._settle_held(t_info, 'info') if self._held is not None else []
        if self._from_old_timeline(t_info, 'info'):  # a straggler of the timeline before the jump
            return out
        newest = self._newest_info_ns()
        if newest is not None and t_info < newest - self.slop_ns:  # the CameraInfo clock went back
            out += self._new_timeline(t_info, newest, 'image')
            self._last_image_ns = None
        ref = header_stamp_ns(self._images[0]) if self._images else self._last_image_ns
        if ref is None or t_info >= ref - self.slop_ns:
            self.stale, self._late_in_a_row = False, 0  # stamped in step with the images
        else:
            self.stale = True  # behind the images: constant/unset/offset/late
        self._infos.append(info)
        while self._images:
            pair = self._decide(self._images[0])
            if pair is None:
                break
            self._images.popleft()
            out.append(pair)
        return out

    def add_image(self, image: Any, info_expected: bool = False) -> list[Pair]:
        """Add an image; return the pairs released now (older waiting images first, then possibly
        this one).

        ``info_expected``: while no CameraInfo has arrived yet, wait for the first one (bounded by
        ``queue_size`` images) instead of releasing the image without one.
        """
        t = header_stamp_ns(image)
        out = self._settle_held(t, 'image') if self._held is not None else []
        if self._from_old_timeline(t, 'image'):  # a straggler of the timeline before the jump
            info, dt = self._closest(t, self._other)
            if info is not None and dt <= self.slop_ns:
                return out + [self._emit(image, info, MATCHED, dt)]
            if self._other:
                info = self._other[-1]
                dt = abs(header_stamp_ns(info) - t)
                return out + [self._emit(image, info, LATEST, dt, LATE)]
            return out + [self._emit(image, None, NONE, 0)]
        back = self._last_image_ns is not None and t < self._last_image_ns - self.slop_ns
        if back and self._infos:  # the image clock went back: a new timeline?
            if self._newest_info_ns() > t + self.slop_ns:  # it would drop CameraInfos: held
                self._held = (image, self._last_image_ns)  # (a waiting image waits on)
                return out
            out += self._new_timeline(t, self._last_image_ns, 'info')  # it drops none
            self._last_image_ns, info_expected = t, True
        return out + self._place(image, t, info_expected)

    def _place(self, image: Any, t: int, info_expected: bool) -> list[Pair]:
        """The rest of `add_image` for an image ``image`` stamped ``t`` on the current
        timeline."""
        if self._prev_image_ns is not None and t > self._prev_image_ns:
            self._gaps.append(t - self._prev_image_ns)
        self._prev_image_ns = t
        out: list[Pair] = []
        if not self._infos:
            self._images.append(image)
            keep = self.queue_size if info_expected else 0
            while len(self._images) > keep:  # the first CameraInfo is not on its way (any more)
                out.append(self._emit(self._images.popleft(), None, NONE, 0))
            self._last_image_ns = t
            return out
        while self._images:  # superseded: the next image came first
            out.append(self._decide(self._images.popleft(), superseded=True))
            self._late_in_a_row += out[-1].reason == LATE
            if self._late_in_a_row >= 2:
                self.stale = True  # CameraInfo stopped coming (or comes once)
        pair = self._decide(image)
        if pair is None:
            self._images.append(image)
        else:
            out.append(pair)
        outlier = (
            pair is not None
            and pair.reason == FAR
            and self._last_image_ns is not None
            and abs(t - self._last_image_ns) > self._lag_limit_ns()
        )
        if not outlier:  # an image far from the last one is no reference
            self._last_image_ns = t
        return out

    def _settle_held(self, t_ns: int, topic: str) -> list[Pair]:
        """The next message (of ``topic``, stamped ``t_ns``) after an image stamped back decides
        (module docstring): a confirmed jump starts the new timeline with that image on it; a
        refuted one releases the image as an outlier. A CameraInfo stamped in between keeps it
        held."""
        image, before = self._held
        t = header_stamp_ns(image)
        near = abs(t_ns - t) <= self._lag_limit_ns() and t_ns < before - self.slop_ns
        if (topic == 'image' and t_ns < before - self.slop_ns) or (topic == 'info' and near):
            self._held = None
            out = self._new_timeline(t, before, 'info')
            self._last_image_ns = t  # the new timeline's reference
            return out + self._place(image, t, True)  # its CameraInfo is on its way
        if topic == 'info' and t_ns <= before + self.slop_ns:
            return []  # the old timeline's last CameraInfo, or one stamped far off: no word
        self._held = None
        self.outliers_back += 1
        out = [self._decide(i, superseded=True) for i in self._images]  # in arrival order
        self._images.clear()
        info, dt = self._closest(t)
        if dt <= self.slop_ns:
            return out + [self._emit(image, info, MATCHED, dt)]
        latest = self._infos[-1]
        return out + [self._emit(image, latest, LATEST, abs(header_stamp_ns(latest) - t), FAR)]

    def _newest_info_ns(self) -> int | None:
        """The newest CameraInfo stamp kept (ns), or None when none is."""
        return max((header_stamp_ns(i) for i in self._infos), default=None)

    def _new_timeline(self, t_ns: int, before_ns: int, other: str) -> list[Pair]:
        """Stamps went back from ``before_ns`` to ``t_ns``: release the images still waiting,
        paired on the old timeline (returned, in arrival order); then drop the CameraInfos stamped
        after ``t_ns + slop`` (the old timeline's: kept apart for a straggling image) and the
        stream state learnt from them. ``other``: the topic ('image' or 'info') that has not gone
        back yet, whose next messages may still be the old timeline's."""
        out = []
        while self._images:
            out.append(self._decide(self._images.popleft(), superseded=True))
        keep = [i for i in self._infos if header_stamp_ns(i) <= t_ns + self.slop_ns]
        self._other.clear()  # the old timeline's, for its stragglers
        self._other.extend(i for i in self._infos if header_stamp_ns(i) > t_ns + self.slop_ns)
        self._guard = [t_ns, before_ns, GUARD_MESSAGES, other]
        self._infos.clear()
        self._infos.extend(keep)
        self.stale, self._late_in_a_row = False, 0
        self.jumps += 1
        self.last_jump_ns = before_ns - t_ns
        return out

    def _from_old_timeline(self, t_ns: int, topic: str) -> bool:
        """Whether a message of ``topic`` ('image' or 'info') stamped ``t_ns`` is a straggler of
        the timeline before the last jump (module docstring): the topic that had not gone back
        yet, stamped past the new timeline's newest stamp (by more than the slop) and nearer the
        old timeline's newest. The look-out ends with that topic's first message of the new
        timeline, after ``GUARD_MESSAGES`` messages, or once the new timeline has caught up with
        the old one."""
        g = self._guard
        if g is None:
            return False
        new_ns, old_ns, left, other = g
        if left <= 0 or new_ns >= old_ns - self.slop_ns:
            self._guard = None
            self._other.clear()
            return False
        g[2] -= 1
        if topic == other:
            if t_ns > new_ns + self.slop_ns and old_ns - t_ns < t_ns - new_ns:
                self.old_timeline += 1
                return True
            self._guard = None  # this topic is on the new timeline too
            self._other.clear()
            return False
        g[0] = max(new_ns, t_ns)
        return False

    def _closest(self, t_ns: int, infos: Any = None) -> tuple[Any | None, int]:
        best, best_dt = None, None
        for info in self._infos if infos is None else infos:
            dt = abs(header_stamp_ns(info) - t_ns)
            if best_dt is None or dt < best_dt:
                best, best_dt = info, dt
        return best, (best_dt if best_dt is not None else 0)

    def _no_wait_reason(self, t: int) -> str | None:
        """Why an image at ``t`` (ns) without a CameraInfo within slop must not wait, or None."""
        newest = self._newest_info_ns()
        if newest > t + self.slop_ns:
            return PASSED  # CameraInfo stamps have gone past it
        if self.stale:
            return STALE
        if t - newest > self._lag_limit_ns():
            return FAR
        return None

    def _lag_limit_ns(self) -> int:
        period = self.period_ns
        return self.slop_ns + (2 * period if period is not None else FIRST_LAG_LIMIT_NS)

    def _decide(self, image: Any, superseded: bool = False) -> Pair | None:
        """The pair for ``image`` now, or None while it may still wait for its CameraInfo."""
        t = header_stamp_ns(image)
        info, dt = self._closest(t)
        if dt <= self.slop_ns:
            return self._emit(image, info, MATCHED, dt)
        reason = self._no_wait_reason(t) or (LATE if superseded else None)
        if reason is None:
            return None
        latest = self._infos[-1]
        return self._emit(image, latest, LATEST, abs(header_stamp_ns(latest) - t), reason)

    def _emit(self, image: Any, info: Any | None, how: str, dt: int, reason: str = '') -> Pair:
        self.counts[how] += 1
        if how == MATCHED:
            self._late_in_a_row = 0
        return Pair(image, info, how, dt, reason)
