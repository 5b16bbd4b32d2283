"""Helpers for the multi-process node tests: a tiny real model file, the node subprocess, a test
harness node.

The model is a randomly initialised ``Depth3DSeg`` with a small width saved by ``core.modelfile``:
a legitimate model (real weights file, real Segmenter), just untrained, so the tests check
plumbing, not accuracy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from depth3dseg_ros.procutil import popen_tied

REPO = Path(__file__).resolve().parents[1]
TINY_ARCH = dict(width=0.25, dec_ch=16, head_ch=8)


def make_tiny_model(path: Path, num_classes: int | None = None) -> Path:
    """Write a small randomly initialised Depth3DSeg to ``path`` and return it.

    Classes: NYU13, or ``num_classes`` generated ones (``c0`` = void, distinct colours) when given.
    """
    import torch
    from depth3dseg_ros.core.classes import NYU13, ClassSet
    from depth3dseg_ros.core.model import Depth3DSeg
    from depth3dseg_ros.core.modelfile import save_model

    torch.manual_seed(0)
    classes = NYU13
    if num_classes is not None:
        ids = np.arange(num_classes)
        colors = np.stack([ids % 256, (ids * 7) % 256, (ids * 13) % 256], axis=1)
        classes = ClassSet([f'c{i}' for i in ids], colors)
    model = Depth3DSeg(num_classes=len(classes), **TINY_ARCH)
    save_model(path, model, {'classes': classes.to_dict()})
    return path


def tiny_node_params(model: Path | str, **extra: Any) -> dict:
    """Node parameters for tests with a tiny model (:func:`make_tiny_model`): CPU, 64x48 network
    input, one torch thread, diagnostics every 0.5 s; ``extra`` added or overriding."""
    base = dict(
        model_file=str(model),
        device='cpu',
        input_width=64,
        input_height=48,
        torch_threads=1,
        diagnostics_period=0.5,
    )
    return dict(base, **extra)


class NodeProcess:
    """``depth3dseg_node`` (or a wrapper script) in a subprocess, log in a file; always stopped."""

    def __init__(
        self,
        log: Path,
        params: dict[str, Any],
        name: str = 'depth3dseg',
        script: list[str] | None = None,
        remaps: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        cmd = script or [sys.executable, '-m', 'depth3dseg_ros.node.main']
        cmd = list(cmd) + ['--ros-args', '-r', f'__node:={name}']
        for k, v in (remaps or {}).items():
            cmd += ['-r', f'{k}:={v}']
        for k, v in params.items():
            v = ('true' if v else 'false') if isinstance(v, bool) else v
            cmd += ['-p', f'{k}:={v}']
        self.log_path = log
        self._log = open(log, 'w')
        self.proc = popen_tied(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            # faulthandler: a SIGABRT from stop() dumps every thread's stack into the log
            env=dict(os.environ, PYTHONFAULTHANDLER='1', **(env or {})),
        )

    def log(self) -> str:
        """Everything the node printed so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGINT, then after ``timeout`` s SIGABRT (faulthandler writes every thread's stack to
        the log, for the failure message) and SIGKILL; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGABRT)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        self._log.close()
        return self.proc.returncode


def spin_until(
    node: Any, cond: Callable[[], bool], timeout: float, proc: NodeProcess | None = None
) -> bool:
    """Spin ``node`` until ``cond()`` (True) or ``timeout`` s / the node process died (False)."""
    import rclpy

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        if proc is not None and not proc.alive():
            return cond()
        rclpy.spin_once(node, timeout_sec=0.02)
    return cond()


def stamp_msg(t_ns: int) -> Any:
    from builtin_interfaces.msg import Time

    return Time(sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)


def stamp_ns(msg: Any) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def camera_image(w: int, h: int, t_ns: int, frame_id: str = 'cam_optical', seed: int = 0) -> Any:
    """rgb8 Image w×h with a smooth pattern (so the tiny model's output varies over the image)."""
    from depth3dseg_ros.ros.image import cv2_to_imgmsg
    from std_msgs.msg import Header

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack(
        [xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), rng.integers(0, 255, (h, w))],
        axis=-1,
    ).astype(np.uint8)
    return cv2_to_imgmsg(img, 'rgb8', Header(stamp=stamp_msg(t_ns), frame_id=frame_id))


def camera_info_msg(
    K: np.ndarray, w: int, h: int, t_ns: int, frame_id: str = 'cam_optical'
) -> Any:
    from depth3dseg_ros.ros.camera_info import make_camera_info
    from std_msgs.msg import Header

    return make_camera_info(K, w, h, Header(stamp=stamp_msg(t_ns), frame_id=frame_id))
