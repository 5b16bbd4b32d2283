"""Where the package's installed files are: the shipped model, config files, the bundled bag.

Looks in the ament share directory first (``colcon build`` / ``pip install`` put files under
``<prefix>/share/depth3dseg_ros``), then in the source tree (editable install, a clone).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = 'depth3dseg_ros'
SOURCE_ROOT = Path(__file__).resolve().parents[1]


def share_dir() -> Path:
    """Return the package's share directory (installed) or the source tree root
    (editable/clone)."""
    for prefix in filter(None, os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep)):
        cand = Path(prefix) / 'share' / PACKAGE
        if (cand / 'package.xml').is_file() and (cand / 'models').is_dir():
            return cand
    return SOURCE_ROOT


def share_file(*parts: str) -> Path:
    """Path of a file under the share dir, e.g. ``share_file('models', 'depth3dseg_nyu13.pt')``.

    Raises:
        FileNotFoundError: naming both places looked in.
    """
    for root in (share_dir(), SOURCE_ROOT):
        p = root.joinpath(*parts)
        if p.exists():
            return p
    raise FileNotFoundError(f'{"/".join(parts)} not found under {share_dir()} or {SOURCE_ROOT}')
