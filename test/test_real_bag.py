"""The real-camera bag (depth3dseg_ros.samples.realbag, built at run time from the fetched sample
files).

Checks: readable with rosbags AnyReader; topics, counts, encodings, frame ids and 15 Hz stamps; K
equals the source K scaled to the stored size (core.geometry.resize_intrinsics, C18 convention);
depth and label pixels equal the source files' pixels (read here independently, with each source's
depth scale); a rebuild gives identical message bytes; the bag stays ≤ 6 MB.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from depth3dseg_ros.samples.realbag import build

TS = get_typestore(Stores.ROS2_KILTED)
NYU_K = (518.85790117450188, 519.46961112127485, 325.58244941119034, 253.73616633400465)


def _read(path: Path):
    """topic -> list of (bag time, raw bytes, message)."""
    out = {}
    with AnyReader([path], default_typestore=TS) as r:
        for c, t, raw in r.messages(connections=r.connections):
            out.setdefault(c.topic, []).append((t, bytes(raw), r.deserialize(raw, c.msgtype)))
    return out


@pytest.fixture(scope='module')
def bag(real_bag):
    return _read(real_bag)


def _frame_index(bag):
    """stamp -> frame number (all frames have rgb)."""
    return {t: i for i, (t, _, _) in enumerate(bag['/camera/color/image_raw'])}


def test_bag_layout_topics_counts_encodings(bag, real_bag):
    assert (real_bag / 'metadata.yaml').is_file() and len(list(real_bag.glob('*.mcap'))) == 1
    assert sum(p.stat().st_size for p in real_bag.iterdir()) <= 6_000_000
    counts = {k: len(v) for k, v in bag.items()}
    assert counts == {
        '/camera/color/image_raw': 22,
        '/camera/color/camera_info': 22,
        '/camera/depth/image_raw': 14,
        '/camera/semantic/labels': 11,
    }
    enc = {
        '/camera/color/image_raw': 'rgb8',
        '/camera/depth/image_raw': '16UC1',
        '/camera/semantic/labels': 'mono8',
    }
    for topic, msgs in bag.items():
        for t, _, m in msgs:
            assert m.header.frame_id == 'camera_color_optical_frame'
            assert t == m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            if topic in enc:
                assert m.encoding == enc[topic]
    stamps = [t for t, _, _ in bag['/camera/color/image_raw']]
    assert set(np.diff(stamps)) == {10**9 // 15}


def test_K_matches_sources(bag):
    infos = [m for _, _, m in bag['/camera/color/camera_info']]
    rgbs = [m for _, _, m in bag['/camera/color/image_raw']]
    # frame 0: NYU 0001 at 320×240 (half of 640×480): fx, cx scale by 0.5
    np.testing.assert_allclose(
        infos[0].k.reshape(3, 3),
        [[NYU_K[0] / 2, 0, NYU_K[2] / 2], [0, NYU_K[1] / 2, NYU_K[3] / 2], [0, 0, 1]],
    )
    # frame 1: NYU 1407 crop 560×425 at (41, 46) -> 280×212 (sx = 0.5, sy = 212/425)
    assert (infos[1].width, infos[1].height) == (280, 212)
    np.testing.assert_allclose(
        infos[1].k[[0, 2, 4, 5]],
        [NYU_K[0] / 2, (NYU_K[2] - 41) / 2, NYU_K[1] * 212 / 425, (NYU_K[3] - 46) * 212 / 425],
    )
    # frames 19-21: NYU 0834/0972/1096 crops 625×468 at (7, 6) -> 312×234 (sx = 312/625, sy = 0.5)
    for i in (19, 20, 21):
        assert (infos[i].width, infos[i].height) == (312, 234)
        np.testing.assert_allclose(
            infos[i].k[[0, 2, 4, 5]],
            [NYU_K[0] * 312 / 625, (NYU_K[2] - 7) * 312 / 625, NYU_K[1] / 2, (NYU_K[3] - 6) / 2],
        )
    # frame 10: TUM Freiburg-3; frames 5..9: slambook ch5
    np.testing.assert_allclose(
        infos[10].k[[0, 2, 4, 5]], [535.4 / 2, 320.1 / 2, 539.2 / 2, 247.6 / 2]
    )
    np.testing.assert_allclose(infos[5].k[[0, 2, 4, 5]], [259.0, 162.75, 259.5, 126.75])
    for info, rgb in zip(infos, rgbs):
        assert (info.width, info.height) == (rgb.width, rgb.height)
        np.testing.assert_allclose(info.p.reshape(3, 4)[:, :3], info.k.reshape(3, 3))


def _src16(real: Path, rel: str) -> np.ndarray:
    a = cv2.imread(str(real / rel), cv2.IMREAD_UNCHANGED)
    assert a is not None and a.dtype == np.uint16
    return a


@pytest.mark.parametrize(
    'frame,rel,mm_per_unit',
    [
        (0, 'depth2hha_nyu_demo/demo/0_raw.png', 0.1),  # value / 10000 m
        (1, 'rcnn_depth_nyu_demo/demo-data/rawdepth.png', 1.0),  # value / 1000 m
        (2, 'metric3d_demo/data/nyu_demo/depth/sync_depth_00000.png', 1.0),
        (9, 'slambook_rgbd/ch5/joinMap/depth/5.pgm', 1.0),
        (
            10,
            'open3d_testdata_rgbd_other_formats/examples/TestData/RGBD/other_formats/'
            'TUM_depth.png',
            0.2,
        ),  # /5000
        (12, 'slambook_rgbd/ch7/2_depth.png', 0.2),
        (18, 'multi_task_refinenet_nyu/examples/ExpNYUD_joint/depth_gt_000464.png', 0.2),  # /5000
    ],
)
def test_depth_pixels_match_sources(bag, real_dir, frame, rel, mm_per_unit):
    idx = _frame_index(bag)
    msg = next(m for t, _, m in bag['/camera/depth/image_raw'] if idx[t] == frame)
    mm = msg.data.view(np.uint16).reshape(msg.height, msg.width)
    src = _src16(real_dir, rel)
    h0, w0 = src.shape
    rng = np.random.default_rng(frame)
    for _ in range(200):
        u, v = int(rng.integers(msg.width)), int(rng.integers(msg.height))
        s = int(src[v * h0 // msg.height, u * w0 // msg.width])  # nearest: floor(i * src / dst)
        # metres go through float32 (core.depth.meters_to_16uc1, as depth_image_proc), so a source
        # value exactly on a half millimetre (0.1 mm units) may round either way: ±0.5 mm; whole-mm
        # sources exact
        assert abs(int(mm[v, u]) - s * mm_per_unit) <= 0.5 + 1e-6, (u, v, s)
        if mm_per_unit == 1.0:
            assert mm[v, u] == s
    assert 0.05 < (mm == 0).mean() < 0.5  # raw sensor holes kept as 0 = no data


def test_label_pixels_match_nyu_labels(bag, real_dir):
    idx = _frame_index(bag)
    labels = {idx[t]: m for t, _, m in bag['/camera/semantic/labels']}
    assert sorted(labels) == [0, 1, 13, 14, 15, 16, 17, 18, 19, 20, 21]
    with tarfile.open(
        real_dir / 'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz'
    ) as tar:

        def label(n):
            member = next(
                m for m in tar.getmembers() if m.name.endswith(f'new_nyu_class13_{n:04d}.png')
            )
            return cv2.imdecode(
                np.frombuffer(tar.extractfile(member).read(), np.uint8), cv2.IMREAD_UNCHANGED
            )

        crops = {1407: (46, 41, 425, 560), 834: (6, 7, 468, 625), 1096: (6, 7, 468, 625)}
        for frame, n in {0: 1, 1: 1407, 13: 46, 17: 1396, 18: 464, 19: 834, 21: 1096}.items():
            src = label(n)
            if n in crops:
                r0, c0, h, w = crops[n]
                src = src[r0 : r0 + h, c0 : c0 + w]
            m = labels[frame]
            lab = m.data.reshape(m.height, m.width)
            rows = np.arange(m.height) * src.shape[0] // m.height
            cols = np.arange(m.width) * src.shape[1] // m.width
            np.testing.assert_array_equal(lab, src[rows[:, None], cols[None, :]])
            assert lab.max() <= 13


def test_rebuild_gives_identical_messages(tmp_path, bag):
    build(tmp_path / 'rebuilt', 0.5)
    rebuilt = _read(tmp_path / 'rebuilt')
    assert rebuilt.keys() == bag.keys()
    for topic in bag:
        assert [(t, raw) for t, raw, _ in rebuilt[topic]] == [
            (t, raw) for t, raw, _ in bag[topic]
        ], topic
