"""``depth3dseg-demo``'s output folder (issue 54): a fresh one per run, and the scale of its
depth pictures.

``--out`` must be new, empty, or a folder the demo made (its :data:`MARKER` file): then what the
demo wrote there before (:data:`DEMO_ENTRIES`) is cleared, so that a report never sits beside
the pictures of an earlier run (before: 19 overlays of two runs beside a report of 10 frames).
Anything else is refused with one line, nothing deleted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from depth3dseg_ros.node.demo_report import FRAME_DIRS, REPORT_FILES

#: the file that marks a folder as made by the demo (so that a next run may clear it)
MARKER = '.depth3dseg-demo'
#: everything the demo writes into its folder
DEMO_ENTRIES = (MARKER, 'node.log', 'synthetic_bag', *REPORT_FILES, *FRAME_DIRS)


def prepare_out(out: Path) -> str | None:
    """Make ``out`` an empty folder for this run: create it (with the marker), or clear what an
    earlier demo run wrote there (:data:`DEMO_ENTRIES`, when the marker says it made the folder).
    Returns None, or the one-line reason it refuses: ``out`` is a file, or a non-empty folder the
    demo did not make, or holds something besides the demo's files (named, nothing deleted)."""
    if out.exists() and not out.is_dir():
        return f'--out {out} is a file, not a folder'
    present = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if present and MARKER not in present:
        return (
            f'--out {out} is not empty and was not made by depth3dseg-demo (no {MARKER} in it; '
            f'it holds {", ".join(present[:3])}{", ..." if len(present) > 3 else ""}): give a new '
            'or empty folder'
        )
    foreign = [name for name in present if name not in DEMO_ENTRIES]
    if foreign:
        return (
            f'--out {out} holds files depth3dseg-demo did not write ({", ".join(foreign[:3])}'
            f'{", ..." if len(foreign) > 3 else ""}): move them, or give a new or empty folder'
        )
    for name in present:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text('made by depth3dseg-demo: the next run clears this folder\n')
    return None


def model_max_depth(model: Path) -> float:
    """The model file's max depth (m): the top of the demo's depth colour scale."""
    from depth3dseg_ros.core.modelfile import read_model_file

    meta = read_model_file(model)['meta']
    return float(meta.get('max_depth') or meta['arch']['max_depth'])
