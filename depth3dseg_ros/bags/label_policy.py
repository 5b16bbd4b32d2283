"""Label ids outside the class set at extraction (case C43): the policy and its bookkeeping.

Split out of ``bags.extract`` (which re-exports these names). A label image may hold ids the class
set does not have (most often 255, "ignore"); ``--out-of-range-labels void`` (default) maps those
pixels to the void id and counts them, ``refuse`` skips the frame and counts its messages as
skipped with :func:`refused_reason`. See docs/extraction.md "Label ids outside the class set
(C43)".
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from depth3dseg_ros.bags.frames import NOT_EXTRACTED, BagFrames, FrameData
from depth3dseg_ros.core.classes import ClassSet

#: Policies for label ids outside the class set (C43): map to void and count (default), or refuse
#: the frame.
LABEL_POLICIES = ('void', 'refuse')


def refused_reason(num_classes: int) -> str:
    """Skip reason of a frame refused for out-of-range label ids (``--out-of-range-labels
    refuse``)."""
    return f'label ids outside 0..{num_classes - 1} (refused)'


class LabelRange:
    """Applies the out-of-range label policy (C43) to the frames of one bag and counts what it did.

    ``apply(frame)`` returns the frame to write (labels with out-of-range pixels, negative ones
    included, set to ``void_id`` under 'void'; unchanged when all ids are in range, signed or
    32-bit ids stored as uint8/uint16) or None under 'refuse'. ``to_dict()``:
    policy, num_classes, void_id, ``frames`` (frames with out-of-range ids), ``pixels`` (their
    count), ``ids`` (the distinct out-of-range ids, sorted).
    """

    def __init__(self, classes: ClassSet, policy: str) -> None:
        self.n, self.void, self.policy = len(classes), int(classes.void_id), policy
        self.dtype = classes.label_dtype  # signed or 32-bit ids are written as this
        self.frames = self.pixels = 0
        self.ids: set = set()

    def apply(self, fr: FrameData) -> Optional[FrameData]:
        """Apply the policy to one frame: the frame to write (out-of-range ids set to void) or None
        (refused)."""
        lab = fr.labels
        if lab is None or not lab.size or (int(lab.max()) < self.n and int(lab.min()) >= 0):
            if lab is not None and lab.dtype not in (np.uint8, np.uint16):  # signed / wide ids
                fr.labels = lab.astype(self.dtype)
            return fr
        bad = (lab >= self.n) | (lab < 0)
        self.frames += 1
        self.pixels += int(np.count_nonzero(bad))
        self.ids.update(int(i) for i in np.unique(lab[bad]))
        if self.policy == 'refuse':
            return None
        fixed = lab.copy()
        fixed[bad] = self.void
        fr.labels = fixed.astype(self.dtype, copy=False)
        return fr

    def to_dict(self) -> Dict[str, Any]:
        """The policy and its counts as a JSON-ready dict (``labels_out_of_range`` of the per-bag
        extract report)."""
        return {
            'policy': self.policy,
            'num_classes': self.n,
            'void_id': self.void,
            'frames': self.frames,
            'pixels': self.pixels,
            'ids': sorted(self.ids),
        }


def _refuse(
    bf: BagFrames, fr: FrameData, parts: Dict[str, Optional[int]], reason: str, info_used: set
) -> None:
    """Mark a refused frame's messages: rgb and labels with ``reason``, depth 'frame not
    extracted'; its CameraInfo too unless a written frame used it (a later one that does marks it
    used again)."""
    bf.status['rgb'][fr.index] = reason
    if parts.get('labels') is not None:
        bf.status['labels'][parts['labels']] = reason
    if parts.get('depth') is not None and 'depth' in bf.status:
        bf.status['depth'][parts['depth']] = NOT_EXTRACTED
    j = parts.get('camera_info')
    if j is not None and j not in info_used:
        bf.status['camera_info'][j] = NOT_EXTRACTED
