"""Issue 14, CameraInfo pairing across processes: a CameraInfo stamp never decides whether a frame
is processed.

A camera driver that stamps its CameraInfo with a constant time (common: stale, constant or unset
stamps) used to leave each image waiting for a CameraInfo of its own stamp that never came, until
three newer images piled up (ros/sync.py). Now every frame is processed at once with the latest
CameraInfo (its K:
the cloud is there) and the node warns once. The node runs as a subprocess (test_node's harness);
input QoS is reliable here so that no frame is lost on the way and each one must come back by
itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from depth3dseg_ros.ros.image import imgmsg_to_cv2
from nodeutil import camera_image, camera_info_msg, make_tiny_model
from test_node import H, K_CAM, NH, NW, W, _start


@pytest.mark.timeout(300)
def test_constant_stamped_camera_info_does_not_hold_frames_back(ros, tmp_path):
    name = 'd3s_ci'
    model = make_tiny_model(tmp_path / 'tiny.pt')
    proc, h = _start(tmp_path, model, name, input_reliability='reliable', input_depth=5)
    const = 1_000_000_000  # the driver stamps every CameraInfo 1 s
    t0 = 2_050_000_000_000_000_000  # (sec stays within int32)
    try:
        for k in range(4):  # one frame at a time: no later image may free it
            t = t0 + k * 100_000_000
            h.pub_info.publish(camera_info_msg(K_CAM, W, H, const))
            h.pub_img.publish(camera_image(W, H, t, seed=k))
            assert h.wait(
                proc,
                lambda: all(
                    t in h.got[key] for key in ('labels', 'depth', 'depth/camera_info', 'points')
                ),
                60 if k == 0 else 30,
            ), f'frame {k} not processed on its own:\n' + proc.log()
            ci = h.got['depth/camera_info'][t]
            assert ci.header.stamp.sec * 10**9 + ci.header.stamp.nanosec == t  # the image's stamp
            expect = K_CAM * np.array([[NW / W], [NH / H], [1.0]])  # the CameraInfo's K, scaled
            assert np.allclose(np.reshape(ci.k, (3, 3)), expect, atol=1e-9)
            assert (
                h.got['points'][t].width == NW
                and np.isfinite(imgmsg_to_cv2(h.got['depth'][t])).any()
            )
        log = proc.log()
        assert log.count('using the latest CameraInfo') == 1, log  # warned once
        assert 'Traceback' not in log
    finally:
        assert h.close(proc) == 0, proc.log()
