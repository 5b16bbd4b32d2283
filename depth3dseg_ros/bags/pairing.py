"""Header-stamp pairing of an anchor stream (RGB) with partner streams (depth, labels, CameraInfo).

Pure python, no ROS imports. Offline counterpart of message_filters' ApproximateTime for a recorded
bag (docs/ros_conventions.md "Images, intrinsics, depth"; the live node uses ``ros.sync``): for
every anchor stamp the partner with the nearest header stamp within ``tolerance_ns`` is chosen.

* ``unique=True`` (images: depth, labels): a partner message is used by at most one anchor.
  Candidate pairs are taken greedily in order of increasing |dt| (ties: earlier anchor first), so
  each anchor gets its nearest partner unless a closer anchor already took it.
* ``unique=False`` (CameraInfo): a partner may serve several anchors (a driver may publish
  CameraInfo at a lower rate or once).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import List, Optional, Sequence

DEFAULT_TOLERANCE_NS = 20_000_000  # 20 ms


def match_nearest(
    anchors: Sequence[int], partners: Sequence[int], tolerance_ns: int, unique: bool = True
) -> List[Optional[int]]:
    """Index of the partner paired with each anchor, or None when none lies within tolerance.

    Args:
        anchors: anchor header stamps (ns), any order, duplicates allowed.
        partners: partner header stamps (ns), any order.
        tolerance_ns: maximum |anchor - partner| (inclusive), >= 0.
        unique: each partner is used at most once (see module docstring).

    Returns:
        list of len(anchors): an index into ``partners`` or None.

    Raises:
        ValueError: ``tolerance_ns`` is negative.
    """
    if tolerance_ns < 0:
        raise ValueError(f'tolerance_ns={tolerance_ns} must be >= 0')
    order = sorted(range(len(partners)), key=lambda j: partners[j])
    sorted_stamps = [partners[j] for j in order]
    result: List[Optional[int]] = [None] * len(anchors)
    if not partners:
        return result
    if not unique:
        for i, a in enumerate(anchors):
            k = bisect_left(sorted_stamps, a)
            best = None
            for kk in (k - 1, k):
                if 0 <= kk < len(sorted_stamps):
                    d = abs(sorted_stamps[kk] - a)
                    if d <= tolerance_ns and (best is None or d < best[0]):
                        best = (d, order[kk])
            result[i] = None if best is None else best[1]
        return result
    candidates = []
    for i, a in enumerate(anchors):
        lo = bisect_left(sorted_stamps, a - tolerance_ns)
        hi = bisect_right(sorted_stamps, a + tolerance_ns)
        for kk in range(lo, hi):
            candidates.append((abs(sorted_stamps[kk] - a), i, order[kk]))
    candidates.sort()
    used = set()
    for _, i, j in candidates:
        if result[i] is None and j not in used:
            result[i] = j
            used.add(j)
    return result
