"""``depth3dseg-extract``'s progress bar (issue 14): one tqdm bar per bag over the messages read,
on stderr and only when stderr is a terminal (``--no-progress`` turns it off), as
``depth3dseg-eval`` and ``depth3dseg-train`` show theirs.

A bag is read in two passes (bags.frames): pass 1 reads the stamps of the selected image topics and
the CameraInfo messages, pass 2 the image messages again to decode the chosen frames. The bar
counts both: its total is those message counts from the bag's index (rosbag2 metadata, MCAP
summary, ROS 1 index); a cut-off recording (C38: no metadata.yaml, an MCAP not closed) has no
trustworthy counts, so its bar shows the messages read without a total.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional

from tqdm import tqdm


def show_progress(no_progress: bool, stream: Any = None) -> bool:
    """Whether depth3dseg-extract shows its bar: not with ``--no-progress``, and only when
    ``stream`` (default stderr, where tqdm writes) is a terminal (no bar in logs, pipes or CI);
    the rule of ``depth3dseg-eval``."""
    stream = sys.stderr if stream is None else stream
    return not no_progress and bool(getattr(stream, 'isatty', lambda: False)())


def bar_total(counts: Dict[str, int], role_topic: Dict[str, str], cut_off: bool) -> Optional[int]:
    """Messages a bag's extraction reads: pass 1 every selected role's messages, pass 2 the image
    roles' (rgb, depth, labels) again. None for a cut-off recording (``cut_off``: counts unknown).

    Args:
        counts: topic -> message count from the bag's index. role_topic: role -> selected topic.
    """
    if cut_off:
        return None
    once = sum(counts.get(t, 0) for t in role_topic.values())
    images = sum(counts.get(t, 0) for r, t in role_topic.items() if r != 'camera_info')
    return once + images


class BagBar:
    """A tqdm bar for one bag (``enabled`` False: nothing is shown and :meth:`tick` costs a call).

    Args:
        name: the bag's frame-id prefix (bar label). total: :func:`bar_total` (None: no total).
        enabled: show the bar (see :func:`show_progress`).
    """

    def __init__(self, name: str, total: Optional[int], enabled: bool) -> None:
        self.name = name
        self._bar = (
            tqdm(
                total=total,
                desc=f'{name}: scan',
                unit='msg',
                dynamic_ncols=True,
                leave=False,
                file=sys.stderr,
            )
            if enabled
            else None
        )
        self.tick: Callable[[], None] = self._bar.update if self._bar is not None else _nothing

    def phase(self, what: str, frames: Optional[int] = None) -> None:
        """Relabel the bar for a pass (``'frames'``), with the number of frames to write."""
        if self._bar is not None:
            self._bar.set_description_str(
                f'{self.name}: {what}' + (f' ({frames})' if frames is not None else '')
            )

    def close(self) -> None:
        """Draw the final count, then remove the bar from the terminal (``leave=False``); again:
        nothing."""
        if self._bar is not None and not self._bar.disable:
            self._bar.refresh()
            self._bar.close()

    def __enter__(self) -> 'BagBar':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _nothing() -> None:
    """The tick of a hidden bar."""
