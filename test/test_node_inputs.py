"""Issue 14 ("Inputs") across processes: depth3dseg_node (subprocess, compressed input) keeps
publishing what needs no geometry when the geometry is unusable, rectifies distorted input, and
refuses an image whose header claims too many pixels before decoding it.

One node, one frame at a time (CameraInfo then the png CompressedImage, same stamp):
degenerate K (fx = 5e-324), absurd binning, a CameraInfo for another image size (repeated: the
error repeats while it lasts), a plumb_bob D (rectified: cloud, outputs with D = 0), the
641-byte-class JPEG claiming 30000x30000 pixels (refused, counted in /diagnostics), then a good
frame.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import Header

from depth3dseg_ros.ros.compressed import encode_compressed
from depth3dseg_ros.ros.image import imgmsg_to_cv2
from nodeutil import NodeProcess, camera_image, camera_info_msg, make_tiny_model, stamp_msg
from test_node import NH, NW, RELIABLE, H, Harness, K_CAM, W
from bombutil import jpeg_bomb

NAME = 'd3s_in'
IMAGES = ('labels', 'overlay', 'mask', 'depth')
# Every frame keeps the stream's period: an image stamped further ahead of the newest CameraInfo
# than two periods is released at once with that CameraInfo ('far', ros/sync.py), so a 1 s step
# would pair a frame whose image beat its changed CameraInfo over DDS with the previous one.
STEP = 100_000_000


def diag_value(h, key):
    vals = [
        int(kv.value)
        for d in h.diag
        for s in d.status
        if s.name.startswith(NAME)
        for kv in s.values
        if kv.key == key
    ]
    return vals[-1] if vals else None


@pytest.mark.timeout(300)
def test_inputs_without_usable_geometry_still_publish_2d_outputs(ros, tmp_path):
    model = make_tiny_model(tmp_path / 'tiny.pt')
    proc = NodeProcess(
        tmp_path / f'{NAME}.log',
        dict(
            model_file=str(model),
            device='cpu',
            input_width=NW,
            input_height=NH,
            torch_threads=1,
            diagnostics_period=0.5,
            use_compressed=True,
            input_reliability='reliable',
            input_depth=5,
        ),
        name=NAME,
        remaps={'image': f'/{NAME}_cam/image', 'camera_info': f'/{NAME}_cam/camera_info'},
    )
    h = Harness(NAME, f'/{NAME}_cam/unused', f'/{NAME}_cam/camera_info')
    pub_c = h.node.create_publisher(CompressedImage, f'/{NAME}_cam/image/compressed', RELIABLE)
    rgb = imgmsg_to_cv2(camera_image(W, H, 0))

    def send(t, info):
        if info is not None:
            h.pub_info.publish(info)
        pub_c.publish(
            encode_compressed(
                rgb, 'rgb8', 'png', Header(stamp=stamp_msg(t), frame_id='cam_optical')
            )
        )

    def frame(t, info, keys=IMAGES, timeout=30.0):
        send(t, info)
        assert h.wait(proc, lambda: all(t in h.got[k] for k in keys), timeout), proc.log()
        h.wait(proc, lambda: False, 0.5)  # a cloud or camera_info would have come with them

    try:
        assert h.wait(proc, lambda: bool(h.classes), 90), proc.log()
        assert h.wait(
            proc,
            lambda: pub_c.get_subscription_count() and h.pub_info.get_subscription_count(),
            30,
        )
        t = 2_100_000_000_000_000_000
        for _ in range(300):  # stream until the first cloud is back
            t += STEP
            send(t, camera_info_msg(K_CAM, W, H, t))
            if h.wait(proc, lambda: t in h.got['points'], 0.2):
                break
        assert t in h.got['points'], proc.log()

        t += STEP  # (a) fx = 5e-324
        bad = K_CAM.copy()
        bad[0, 0] = 5e-324
        frame(t, camera_info_msg(bad, W, H, t))
        assert t not in h.got['points'] and t not in h.got['depth/camera_info']
        assert (
            'CameraInfo.k fx=5e-324 is not a plausible focal length for a 80x60 image'
            in proc.log()
        )

        t += STEP  # (b) absurd binning
        info = camera_info_msg(K_CAM, W, H, t)
        info.binning_x = 2**32 - 1
        frame(t, info)
        assert (
            t not in h.got['points']
            and 'binning_x=4294967295 binning_y=1 leaves a 0x60 image' in proc.log()
        )

        start = time.monotonic()  # (c) CameraInfo for 40x30, 6 s long
        while time.monotonic() - start < 6.5:
            t += STEP
            frame(t, camera_info_msg(K_CAM * [[0.5], [0.5], [1]], W // 2, H // 2, t))
            assert t not in h.got['points'] and t not in h.got['labels/camera_info']
        text = (
            'image is 80x60 but its CameraInfo describes 40x30 (after binning and ROI): K not '
            'rescaled'
        )
        assert proc.log().count(text) >= 2, proc.log()  # throttled (5 s), repeated while it lasts

        t += STEP  # (d) plumb_bob distortion: rectified
        info = camera_info_msg(K_CAM, W, H, t)
        info.d = [-0.28, 0.07, 0.001, -0.002, 0.0]
        frame(t, info, IMAGES + ('points', 'depth/camera_info'))
        ci = h.got['depth/camera_info'][t]
        assert list(ci.d) == [0.0] * 5 and ci.distortion_model == 'plumb_bob'
        assert np.allclose(np.reshape(ci.k, (3, 3)), K_CAM * [[NW / W], [NH / H], [1]])

        t += STEP  # (e) 30000x30000 JPEG header: refused
        bomb = CompressedImage(
            header=Header(stamp=stamp_msg(t), frame_id='cam_optical'),
            format='jpeg',
            data=jpeg_bomb(30000, 30000),
        )
        h.pub_info.publish(camera_info_msg(K_CAM, W, H, t))
        pub_c.publish(bomb)
        assert h.wait(
            proc, lambda: 'refusing image' in proc.log() and diag_value(h, 'refused') == 1, 30
        ), proc.log()
        assert (
            "refusing image: CompressedImage (format='jpeg') header says 30000x30000 = 900000000 "
            'pixels > max_image_pixels=67108864'
        ) in proc.log()
        assert all(t not in h.got[k] for k in IMAGES)

        t += STEP  # (f) and a good frame again
        frame(t, camera_info_msg(K_CAM, W, H, t), IMAGES + ('points',))
        assert proc.alive() and 'Traceback' not in proc.log() and 'frame failed' not in proc.log()
    finally:
        assert h.close(proc) == 0, proc.log()
