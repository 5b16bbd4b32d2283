"""Frames of a dataset directory whose image files cannot be read are skipped, with their reason
(issue 55: "a refused frame is counted and reported as skipped with its reason, never fatal to
the run", training's and evaluation's dataset reader included).

When the records are loaded (training.dataset.load_records), each frame's image files (``rgb``,
and ``depth`` and ``labels`` where it has them) are checked by their headers only, the way
core.image_decode checks them before it decodes: the declared size within ``max_image_pixels``
(a PNG whose header claims 100000×100000 pixels is refused before a pixel is allocated), a format
whose size can be read (JPEG, PNG, TIFF), a PNG that ends with its IEND chunk (not cut short), a
file that is there and not empty. No pixel is decoded: a file read costs its first 64 KiB and, for
a PNG, its last KiB. A frame with a bad file is left out, and the caller prints
one line per dataset directory (:func:`skipped_line`):

    depth3dseg-train: skipped 1 of 23 frames of data/ds: 1 over max_image_pixels=67108864,
    e.g. data/ds/rgb/000004.png

A file whose header and end are sound but whose data is corrupt in between (or a JPEG or TIFF cut
short) is only found when it is decoded, in the DataLoader: that still stops the run with one
error line naming the file (docs/training.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

from depth3dseg_ros.core.image_decode import (
    DEFAULT_MAX_PIXELS,
    PNG_SIGNATURE,
    ImageTooLargeError,
    check_pixel_limit,
    header_size,
)

#: bytes read from each file: a PNG's size is in its first 24, a JPEG's SOF marker within a few KB
#: (past EXIF data); a file whose size is not in them is read whole
HEAD_BYTES = 1 << 16
#: how every PNG ends: its IEND chunk (length 0, type, CRC); a PNG cut short has lost it
PNG_END = b'\x00\x00\x00\x00IEND\xaeB`\x82'
PNG_TAIL = 1024  # bytes at the end of a PNG in which IEND is looked for
#: the image files of a frame record
FILE_KEYS = ('rgb', 'depth', 'labels')
OVER = 'over'
UNREADABLE = 'unreadable'
MISSING = 'missing'
#: how a skip line names each reason, in its order
REASON_TEXT = {
    OVER: 'over max_image_pixels={max_pixels}',
    UNREADABLE: 'unreadable (not JPEG, PNG or TIFF, or cut short)',
    MISSING: 'with a missing or empty file',
}


def file_problem(path: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> str | None:
    """Why the image file ``path`` cannot be read (``'over'``, ``'unreadable'``, ``'missing'``),
    judged from its header without decoding (and, for a PNG, its last KiB: a file cut short
    ends without IEND); None when it can."""
    try:
        with open(path, 'rb') as f:
            head = f.read(HEAD_BYTES)
            if not head:
                return MISSING
            try:
                w, h, pixels = header_size(head)
            except ValueError:
                rest = f.read() if head[:2] in (b'\xff\xd8', b'II', b'MM') else b''
                if not rest:  # not JPEG or TIFF (whose size may lie further in), or all read
                    return UNREADABLE
                try:
                    w, h, pixels = header_size(head + rest)
                except ValueError:
                    return UNREADABLE
            try:
                check_pixel_limit(w, h, max_pixels, str(path), pixels)
            except ImageTooLargeError:
                return OVER
            if head.startswith(PNG_SIGNATURE):
                f.seek(-min(PNG_TAIL, f.seek(0, 2)), 2)
                if PNG_END not in f.read():  # (bytes after IEND, some writers add, are fine)
                    return UNREADABLE
    except OSError:  # not there, a directory, no permission
        return MISSING
    return None


def frame_problem(
    record: Mapping[str, Any], max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[str, str] | None:
    """(reason, path) of the first image file of a frame record (``dir`` plus its ``rgb``,
    ``depth``, ``labels`` file names) that :func:`file_problem` refuses; None when all read."""
    d = Path(record.get('dir', '.'))
    for key in FILE_KEYS:
        if record.get(key):
            path = d / record[key]
            why = file_problem(path, max_pixels)
            if why is not None:
                return why, str(path)
    return None


def check_frames(
    records: Sequence[Mapping[str, Any]], max_pixels: int = DEFAULT_MAX_PIXELS, workers: int = 8
) -> tuple[list, list[tuple[Mapping[str, Any], str, str]]]:
    """Split frame records into those whose files all read and the skipped ones.

    Returns:
        (kept records in their order, [(record, reason, path)] of the skipped ones in order).
    """
    with ThreadPoolExecutor(max(1, int(workers))) as pool:  # file reads: I/O bound
        problems = list(pool.map(lambda r: frame_problem(r, max_pixels), records))
    kept = [r for r, p in zip(records, problems) if p is None]
    skipped = [(r, *p) for r, p in zip(records, problems) if p is not None]
    return kept, skipped


def skipped_line(
    prog: str,
    directory: str | Path,
    total: int,
    skipped: Sequence[tuple[Mapping[str, Any], str, str]],
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> str:
    """The one line a program prints for the frames of ``directory`` that :func:`check_frames`
    skipped: how many of ``total``, and per reason how many with the first file, e.g.
    ``depth3dseg-eval: skipped 2 of 9 frames of ds: 1 over max_image_pixels=67108864, e.g.
    ds/rgb/a.png; 1 with a missing or empty file, e.g. ds/depth/b.png``."""
    parts = []
    for reason, text in REASON_TEXT.items():
        paths = [path for _, why, path in skipped if why == reason]
        if paths:
            what = text.format(max_pixels=max_pixels)
            parts.append(f'{len(paths)} {what}, e.g. {paths[0]}')
    return f'{prog}: skipped {len(skipped)} of {total} frames of {directory}: ' + '; '.join(parts)
