"""C44: one parameter snapshot per frame. A change that lands while a frame is being processed
applies from the next frame, all of it at once (no torn update: never the new overlay_alpha with
the old max_depth).

In-process, real rclpy node (the run-wide context) and the real Segmenter with the tiny model,
wrapped so that ``infer`` itself changes two parameters atomically mid-frame, the way a
``~/set_parameters`` call on the executor thread can at any moment while the worker thread is
inside a frame. The node's ``_publish`` is replaced on the instance to record what each frame would
publish.
"""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.parameter import Parameter

from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.node.node import Depth3DSegNode, default_segmenter
from depth3dseg_ros.ros.image import imgmsg_to_cv2
from depth3dseg_ros.ros.sync import MATCHED, Pair
from nodeutil import camera_image, camera_info_msg, make_tiny_model

K = np.array([[70.0, 0, 39.5], [0, 72.0, 29.5], [0, 0, 1]])


class ChangesMidFrame:
    """The real Segmenter; ``infer`` applies ``change`` (a parameter list) to ``node`` once, before
    inferring."""

    def __init__(self, seg):
        self.seg, self.classes, self.node, self.change, self.results = (
            seg,
            seg.classes,
            None,
            None,
            [],
        )

    def warmup(self, **kw):
        return self.seg.warmup(**kw)

    def infer(self, *args, **kw):
        if self.change:
            self.results.append(self.node.set_parameters_atomically(self.change))
            self.change = None
        return self.seg.infer(*args, **kw)


@pytest.mark.timeout(120)
def test_c44_change_during_a_frame_applies_whole_from_the_next_frame(tmp_path, ros):
    model = make_tiny_model(tmp_path / 'tiny.pt')
    wrapper = {}
    overrides = [
        Parameter('model_file', value=str(model)),
        Parameter('device', value='cpu'),
        Parameter('input_width', value=64),
        Parameter('input_height', value=48),
        Parameter('torch_threads', value=1),
        Parameter('lazy_outputs', value=False),  # no subscriber here: publish every output
    ]

    def factory(p, model_file):
        return wrapper.setdefault('w', ChangesMidFrame(default_segmenter(p, model_file)))

    node = Depth3DSegNode(
        segmenter_factory=factory,
        node_name='d3s_snapshot',
        parameter_overrides=overrides,
    )
    try:
        seg = wrapper['w']
        seg.node = node
        published = []
        node._publish = lambda name, msg: published.append((name, msg))
        palette = np.asarray(NYU13.colors, np.uint8)

        def frame(t):
            published.clear()
            node._process(Pair(camera_image(80, 60, t), camera_info_msg(K, 80, 60, t), MATCHED))
            got = dict(published)
            labels, ov, depth = (imgmsg_to_cv2(got[k]) for k in ('labels', 'overlay', 'depth'))
            return labels, ov, depth, got

        seg.change = [Parameter('overlay_alpha', value=1.0), Parameter('max_depth', value=0.5)]
        labels, ov, depth, got = frame(10**18)  # changed while inferring
        assert [r.successful for r in seg.results] == [True]
        assert node.get_parameter('overlay_alpha').value == 1.0 and node.p.max_depth == 0.5
        assert not np.array_equal(ov, palette[labels])  # still alpha 0.5 ...
        assert np.nanmax(depth) > 0.5  # ... and still max_depth 10
        assert 'points' in got
        labels, ov, depth, got = frame(10**18 + 10**8)  # the next frame: both new values
        assert np.array_equal(ov, palette[labels]) and np.isnan(depth).all()
    finally:
        node.destroy_node()
