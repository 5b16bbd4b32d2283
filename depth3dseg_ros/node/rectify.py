"""Rectification of a raw camera image, as image_proc's rectify node and image_geometry do: which
camera models need it (:func:`has_distortion`), the model of the rectified image
(:func:`rectified_intrinsics`: K = P[:, :3], D = 0, R = I) and the undistort-rectify maps
(:class:`Rectifier`, cached per camera model). Pure (numpy, cv2); node/frame.py's ``plan_input``
uses them and re-exports them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import cv2
import numpy as np

from depth3dseg_ros.ros.camera_info import Intrinsics

#: distortion models :class:`Rectifier` undistorts ('' = unnamed, taken as plumb_bob, REP 104)
RECTIFIABLE = ('plumb_bob', 'rational_polynomial', 'equidistant', '')


def has_distortion(intr: Intrinsics) -> bool:
    """True when ``intr`` describes a raw image (K, not P) with a non-zero D."""
    return not intr.rectified and bool(np.any(np.asarray(intr.D) != 0))


def rectified_intrinsics(intr: Intrinsics) -> Intrinsics:
    """The model of ``intr``'s image after rectification (image_geometry): K = P[:, :3], P kept,
    D = 0 (5 values, plumb_bob), R = identity, ``rectified`` True."""
    return replace(
        intr,
        K=np.asarray(intr.P, np.float64)[:, :3].copy(),
        D=np.zeros(5),
        distortion_model='plumb_bob',
        R=np.eye(3),
        rectified=True,
    )


class Rectifier:
    """Undistort-rectify maps per camera model, cached (image_proc's rectify, image_geometry's
    ``initRectificationMaps``): ``cv2.initUndistortRectifyMap(K, D, R, P, size)`` for plumb_bob and
    rational_polynomial, ``cv2.fisheye.initUndistortRectifyMap`` (D[:4]) for equidistant; float32
    maps, bilinear remap. Keeps the ``size`` most recent models (the key is K, D, R, P, model,
    size)."""

    def __init__(self, size: int = 4) -> None:
        self._maps: OrderedDict = OrderedDict()
        self._size = int(size)
        self.built = 0  # maps computed (cache misses), for tests and diagnostics

    def maps(self, intr: Intrinsics) -> tuple[np.ndarray, np.ndarray]:
        """(map_x, map_y), each height×width float32, for ``intr`` (at its own size).

        Raises:
            ValueError: a distortion model not in ``RECTIFIABLE`` or a D of the wrong length for
                it.
        """
        model = intr.distortion_model or ''
        D = np.asarray(intr.D, np.float64).reshape(-1)
        key = (
            intr.K.tobytes(),
            D.tobytes(),
            np.asarray(intr.R).tobytes(),
            np.asarray(intr.P).tobytes(),
            model,
            intr.width,
            intr.height,
        )
        if key in self._maps:
            self._maps.move_to_end(key)
            return self._maps[key]
        size, K, R = (
            (intr.width, intr.height),
            np.asarray(intr.K, np.float64),
            np.asarray(intr.R, np.float64),
        )
        newK = np.asarray(intr.P, np.float64)[:, :3]
        if model == 'equidistant':
            if D.size < 4:
                raise ValueError(f'CameraInfo.d has {D.size} values; equidistant needs 4')
            m = cv2.fisheye.initUndistortRectifyMap(K, D[:4], R, newK, size, cv2.CV_32FC1)
        elif model in RECTIFIABLE:
            if D.size not in (4, 5, 8, 12, 14):
                raise ValueError(
                    f'CameraInfo.d has {D.size} values; {model or "plumb_bob"} needs 4, 5 or 8'
                )
            m = cv2.initUndistortRectifyMap(K, D, R, newK, size, cv2.CV_32FC1)
        else:
            raise ValueError(
                f'CameraInfo.distortion_model={model!r} cannot be rectified '
                f'(supported: plumb_bob, rational_polynomial, equidistant)'
            )
        self.built += 1
        self._maps[key] = m
        while len(self._maps) > self._size:
            self._maps.popitem(last=False)
        return m
