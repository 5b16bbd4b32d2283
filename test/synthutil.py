"""Checks shared by the synthetic-generator tests (test_synth.py, test_synth_handheld.py).

* ``world_points(frame)``: a render's depth back-projected with its own K (M2,
  core.geometry.backproject_np) and moved to the room with the camera pose: H×W×3 float64, m.
* ``plane_residuals(frame, size)``: |distance| (m) of the floor / ceiling / wall pixels to their
  planes (floor z = 0, ceiling z = Hc, walls x ∈ {0, Lx}, y ∈ {0, Ly}) for a room of ``size``.
* ``read_all(path)``: every message of a bag as (topic, msgtype, bag time ns, raw CDR bytes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.synth.scene import CLS

TS = get_typestore(Stores.ROS2_KILTED)


def world_points(frame):
    """H×W×3 float64 world points (m) of ``frame.depth`` with ``frame.K`` and ``T_world_cam``."""
    pts = backproject_np(frame.depth, frame.K).reshape(-1, 3).astype(np.float64)
    T = frame.T_world_cam
    return (pts @ T[:3, :3].T + T[:3, 3]).reshape(frame.depth.shape + (3,))


def plane_residuals(frame, size):
    """{'floor', 'ceiling', 'wall'}: |distance| of those pixels to their plane (m, 1-D arrays)."""
    lx, ly, hc = size
    P = world_points(frame)
    out = {}
    fl = frame.labels == CLS['floor']
    out['floor'] = np.abs(P[fl][:, 2])
    out['ceiling'] = np.abs(P[frame.labels == CLS['ceiling']][:, 2] - hc)
    wall = P[frame.labels == CLS['wall']]
    d = np.min(
        np.abs(np.stack([wall[:, 0], wall[:, 0] - lx, wall[:, 1], wall[:, 1] - ly], 1)), axis=1
    )
    out['wall'] = d
    return out


def read_all(path: Path):
    """[(topic, msgtype, bag time ns, raw bytes)] of every message in the bag at ``path``."""
    out = []
    with AnyReader([path], default_typestore=TS) as r:
        for c, t, raw in r.messages(connections=r.connections):
            out.append((c.topic, c.msgtype, t, bytes(raw)))
    return out
