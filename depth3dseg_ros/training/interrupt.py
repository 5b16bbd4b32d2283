"""Ctrl-C and SIGTERM during ``depth3dseg-train``: stop at a step boundary and keep the work.

A training run is resumable (M6, C34: ``--resume`` continues at the exact sample), but only from
what was saved: before this, SIGINT raised ``KeyboardInterrupt`` wherever it landed (a raw
traceback, the epoch's steps since the last validation lost) and SIGTERM (a job scheduler, ``docker
stop``, ``timeout``) killed the process with nothing written.

`StopAtStep` turns the first SIGINT/SIGTERM into a request: the trainer finishes the optimiser
step (or the validation) in progress, writes ``last.pt`` at that sample, exports what it has and
exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell expects of an
interrupted program. A second signal stops at once (`StopNow`), saving nothing more; ``last.pt``
stays the previous complete checkpoint (checkpoints are written atomically).

Unlike the ROS executables' rule (procutil.StopSignals: end within 2 s, exit 0), a training run
is worth the seconds a step takes to save, and its exit code says it did not finish.

SIGHUP (its terminal closed) counts as SIGTERM unless ``nohup`` ignores it (procutil.stop_signals).
DataLoader workers ignore the stop signals (`ignore_in_worker`): a terminal's Ctrl-C reaches the
whole process group, and a worker that died of it would fail the main process's next batch. The
main process shuts its workers down itself.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any, TextIO

from depth3dseg_ros.procutil import STOP_SIGNALS, stop_signals

__all__ = ['StopNow', 'StopAtStep', 'ignore_in_worker']


class StopNow(BaseException):
    """A second stop signal: leave at once, without saving (a BaseException, so that no ``except
    Exception`` on the way catches it). ``signum``: the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(f'{signal.Signals(signum).name} again: stopped at once')
        self.signum = signum


class StopAtStep:
    """The stop request of the first SIGINT/SIGTERM, as a context manager.

    Inside ``with StopAtStep(prog) as stop:`` (main thread only; elsewhere the handlers are left
    as they are and ``signum`` stays None) the first signal sets ``signum`` and writes one line to
    ``stream``; a second raises `StopNow` in the main thread. The previous handlers come back on
    exit.

    Attributes:
        signum: the first signal's number, or None.
    """

    def __init__(self, prog: str = 'depth3dseg-train', stream: TextIO | None = None) -> None:
        self.prog = prog
        self.stream = stream
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """True once a stop signal has arrived."""
        return self.signum is not None

    @property
    def name(self) -> str:
        """The signal's name ('SIGINT', 'SIGTERM'), or '' before one."""
        return signal.Signals(self.signum).name if self.signum is not None else ''

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 SIGINT, 143 SIGTERM); 0 before a signal."""
        return 128 + self.signum if self.signum is not None else 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            raise StopNow(signum)
        self.signum = signum
        stream = self.stream or sys.stderr
        stream.write(
            f'\n{self.prog}: {self.name} received: stopping after the current step and saving '
            'last.pt (resume with --resume; send it again to stop at once without saving)\n'
        )
        stream.flush()

    def __enter__(self) -> StopAtStep:
        if threading.current_thread() is threading.main_thread():
            for s in stop_signals():  # SIGHUP too, unless nohup ignores it
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()


def ignore_in_worker() -> None:
    """In a DataLoader worker process: ignore the stop signals (procutil.STOP_SIGNALS; the main
    process stops its workers: module docstring)."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
