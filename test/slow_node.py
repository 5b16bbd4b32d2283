"""Test script: depth3dseg_node whose real Segmenter sleeps before each inference (C26 slow model).

Usage: python test/slow_node.py DELAY_S --ros-args ...   (the sleep is added here, in the test, not
through a node parameter: the node itself has no slow-down switch).
"""

import sys
import time

from depth3dseg_ros.node.main import main
from depth3dseg_ros.node.node import default_segmenter


class SlowedSegmenter:
    """Wraps a real Segmenter: ``infer`` sleeps ``delay`` seconds, then runs the real inference;
    ``warmup`` (before any topic exists) is the real one."""

    def __init__(self, seg, delay: float) -> None:
        self.seg, self.delay, self.classes = seg, delay, seg.classes

    def infer(self, *args, **kwargs):
        time.sleep(self.delay)
        return self.seg.infer(*args, **kwargs)

    def warmup(self, *args, **kwargs):
        return self.seg.warmup(*args, **kwargs)


if __name__ == '__main__':
    delay = float(sys.argv.pop(1))
    sys.exit(
        main(
            sys.argv,
            segmenter_factory=lambda p, f: SlowedSegmenter(default_segmenter(p, f), delay),
        )
    )
