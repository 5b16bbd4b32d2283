"""Output that libraries write straight to the process's file descriptors, kept off the terminal
when it is noise (issue 55: no banner or library noise before an error line).

* :func:`silenced_fd`: drop what is written to stdout and stderr meanwhile (pybullet's build-time
  banner, printed by its C code on stderr when it is imported).
* :func:`held_fd`: keep what is written meanwhile and write it out afterwards, unless the caller
  discards it because it reports the same failure in its own one line (rcl's
  ``[ERROR] ... Failed to parse global arguments`` before the CLI's error line).

Both work on the descriptor (OpenCV, rcl and pybullet write from C, past ``sys.stdout``), and
flush C's stdio buffers at both ends (into a pipe, C's printf output waits in its buffer until the
process ends, long after the block).
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from contextlib import contextmanager
from typing import Iterator


def _flush() -> None:
    """Flush Python's and C's standard streams."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # closed or replaced streams
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # every C stdio stream
    except (OSError, AttributeError):  # pragma: no cover - no C library to ask
        pass


@contextmanager
def silenced_fd(*fds: int) -> Iterator[None]:
    """Within the block, whatever is written to the descriptors ``fds`` (default 1 and 2, stdout
    and stderr) is dropped; a Python exception still propagates (and is printed later)."""
    fds = fds or (1, 2)
    _flush()
    saved = [os.dup(fd) for fd in fds]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(null, fd)
        yield
    finally:
        _flush()
        for fd, old in zip(fds, saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(null)


class HeldOutput:
    """What :func:`held_fd` kept; :meth:`discard` drops it instead of writing it out."""

    def __init__(self) -> None:
        self.discarded = False

    def discard(self) -> None:
        """Drop the held output (the caller reports the failure it belongs to itself)."""
        self.discarded = True


@contextmanager
def held_fd(fd: int = 2) -> Iterator[HeldOutput]:
    """Within the block, what is written to ``fd`` (2 = stderr) is held in a temporary file;
    afterwards it is written to ``fd`` unless :meth:`HeldOutput.discard` was called."""
    held = HeldOutput()
    _flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), fd)
            yield held
        finally:
            _flush()
            os.dup2(saved, fd)
            os.close(saved)
            if not held.discarded:
                tmp.seek(0)
                data = tmp.read()
                if data:
                    os.write(fd, data)
