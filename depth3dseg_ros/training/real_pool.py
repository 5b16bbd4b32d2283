"""The RGB of every frame of some dataset directories, resized once to the network input size: the
pool of real images that appearance augmentations draw from (training.fda's style spectra,
training.texture_rand's photo textures). numpy/cv2, no ROS."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from depth3dseg_ros.core.image_decode import read_image_file
from depth3dseg_ros.dataset_format import INDEX, read_index


def load_rgb_pool(dirs: Sequence[str | Path], wh: tuple[int, int], where: str) -> np.ndarray:
    """RGB of every frame of the dataset directories ``dirs`` (depth3dseg-extract format), each
    resized to ``wh`` = (W, H) with INTER_AREA: uint8 N×H×W×3.

    ``where`` is the config key the directories came from; every error names it.
    Raises FileNotFoundError naming a missing directory or unreadable image, ValueError when the
    directories hold no frame.
    """
    w, h = int(wh[0]), int(wh[1])
    out = []
    for d in dirs:
        d = Path(d)
        if not (d / INDEX).is_file():
            raise FileNotFoundError(
                f'{where}: {d} is not a dataset directory (no {INDEX}); '
                'write one with depth3dseg-extract'
            )
        for rec in read_index(d):
            bgr = read_image_file(str(d / rec['rgb']), cv2.IMREAD_COLOR)
            if bgr is None:
                raise FileNotFoundError(f"{where}: image {d / rec['rgb']} unreadable")
            small = cv2.resize(bgr, (w, h), interpolation=cv2.INTER_AREA)
            out.append(cv2.cvtColor(small, cv2.COLOR_BGR2RGB))
    if not out:
        raise ValueError(f'{where}: no frames in {[str(d) for d in dirs]}')
    return np.stack(out)
