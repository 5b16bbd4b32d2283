"""Child processes that die with their parent (the demo, benchmarks and tests start nodes this
way).

DDS discovery between processes can rarely hang (docs/pip_ros_stack.md §1); when the
parent is then killed by a timeout, a node or replay child left running would keep publishing on
the same ROS_DOMAIN_ID and corrupt whatever runs next. On Linux ``prctl(PR_SET_PDEATHSIG,
SIGTERM)`` makes the kernel send the child SIGTERM when its parent dies, however the parent ends
(even SIGKILL).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import subprocess
import sys
from typing import Any, Sequence

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def popen_tied(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)`` whose child gets SIGTERM when this process dies (Linux).

    On other systems it is a plain Popen (callers still stop their children in ``finally``).
    """
    if sys.platform.startswith('linux'):
        kwargs.setdefault('preexec_fn', _die_with_parent)
    return subprocess.Popen(cmd, **kwargs)


# -- SIGINT / SIGTERM for the package's executables (docs/cases.md C40, C45)
# -------------------------

IMPORTING, STARTING, RUNNING, STOPPING = 'importing', 'starting', 'running', 'stopping'


class StopRequested(BaseException):
    """Raised by :class:`StopSignals` in the ``starting`` phase (and in ``running`` with
    ``raise_running``):
    a SIGINT/SIGTERM asked the program to end. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` on the way swallows it; the executable catches it and exits cleanly."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: the signals that ask an executable to stop: Ctrl-C, kill / launch / docker stop, and SIGHUP (the
#: terminal or SSH session that started it closed: it then leaves the graph cleanly too)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_signals() -> tuple:
    """:data:`STOP_SIGNALS` less SIGHUP when it is ignored (``nohup``: the user asked the process
    to outlive its terminal)."""
    ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    return tuple(s for s in STOP_SIGNALS if not (s == signal.SIGHUP and ignored))


class StopSignals:
    """Python-level SIGINT/SIGTERM handling with phases; install it first thing in ``main`` (C40,
    C45).

    The rule for every executable of the package (depth3dseg_node, depth3dseg-replay,
    depth3dseg-demo): one SIGINT or SIGTERM at any moment ends the process within about 2 s,
    without a traceback, with exit code :data:`EXIT_CODE` (0: a requested stop is a normal end, as
    ``ros2 launch`` reports "process has finished cleanly"; see docs/node.md "Stopping"). What a
    signal does depends on ``phase``:

    * ``importing`` (before rclpy.init: heavy imports, argument checks): nothing to clean up, the
      process ends at once (``os._exit``, stdout/stderr flushed).
    * ``starting`` (rclpy initialised, node being built: model loading, warm-up): raises
      :class:`StopRequested` in the main thread; ``main`` catches it and shuts rclpy down.
    * ``running``: sets :attr:`event` (the main thread waits on it; rclpy is initialised with
      ``SignalHandlerOptions.NO`` so that rclpy neither shuts the context down under a worker that
      is still publishing, rclpy #937, nor replaces these handlers), or raises StopRequested when
      ``raise_running`` (a main thread that loops in Python, e.g. depth3dseg-replay).
    * ``stopping`` (a second signal while shutting down): ends the process at once, like the
      ``importing`` phase: a second signal hurries the shutdown, never prints a traceback.

    The window before ``main`` runs (interpreter start, about 50 ms) keeps Python's default
    handling.

    Raising StopRequested is an asynchronous exception: it lands at whatever bytecode the main
    thread is running, possibly inside a library between a lock's acquire and the ``try`` that
    would release it (the hazard of KeyboardInterrupt, CPython bpo-29988). The clean-up that
    follows can then block on that lock for ever, with no watchdog running yet in this phase.
    So each time StopRequested is raised, a deadline starts: a daemon thread that ends the process
    (one line on stderr, :data:`EXIT_CODE`) if it is still alive :attr:`deadline_s` s later,
    and a GIL-free ``faulthandler`` backstop after :attr:`backstop_s` s (every thread's stack on
    stderr, exit status 1) for a clean-up stuck in a C call that holds the GIL, where no Python
    thread can run.
    """

    EXIT_CODE = 0
    deadline_s = 1.5  # the rule is 2 s from the signal (C40); a normal clean-up takes < 0.5 s
    backstop_s = 5.0

    def __init__(self, prog: str, raise_running: bool = False) -> None:
        import threading

        self.prog, self.raise_running = prog, raise_running
        self.phase = IMPORTING
        self.signum: int | None = None
        self.event = threading.Event()
        self._done = threading.Event()  # set by finished()/restore(): no deadline needed
        self._deadline: threading.Thread | None = None
        self._previous = {s: signal.signal(s, self._handle) for s in stop_signals()}

    @property
    def requested(self) -> bool:
        """True once a SIGINT/SIGTERM arrived."""
        return self.signum is not None

    def set_phase(self, phase: str) -> None:
        """Enter ``phase`` (IMPORTING, STARTING, RUNNING, STOPPING). Entering RUNNING after a
        signal that arrived in an earlier phase without being acted on raises StopRequested."""
        self.phase = phase
        if phase == RUNNING and self.requested and self.raise_running:
            raise StopRequested(self.signum)

    def _handle(self, signum: int, frame: Any) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if self.phase in (IMPORTING, STOPPING) or not first:
            self.exit_now()
        self.event.set()
        if self.phase == STARTING or (self.phase == RUNNING and self.raise_running):
            self._start_deadline()
            raise StopRequested(signum)

    def _start_deadline(self) -> None:
        """Bound the clean-up that StopRequested starts (see the class text)."""
        import threading

        if self._deadline is not None:
            return
        faulthandler.dump_traceback_later(self.backstop_s, exit=True)
        self._deadline = threading.Thread(
            target=self._end_after_deadline, name=f'{self.prog}-stop-deadline', daemon=True
        )
        self._deadline.start()

    def _end_after_deadline(self) -> None:
        if self._done.wait(self.deadline_s):
            return
        print(
            f'{self.prog}: clean-up after the signal did not end within {self.deadline_s:g} s; '
            'exiting anyway',
            file=sys.stderr,
        )
        self.exit_now()

    def exit_now(self, code: int | None = None) -> None:
        """Flush stdout/stderr and end the process with ``code`` (default EXIT_CODE) at once,
        skipping the interpreter's own teardown. Executables call it after their clean-up too:
        tearing down torch, OpenCV and the DDS libraries takes about 1 s on an idle 2-core machine
        (more under load), which would break the 2 s rule (C40); nothing in it is needed once rclpy
        has been shut down."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe must not stop the exit
                pass
        os._exit(self.EXIT_CODE if code is None else int(code))

    def _disarm(self) -> None:
        """The clean-up has ended: stop the deadline and the backstop, if a signal started them."""
        self._done.set()
        if self._deadline is not None:
            faulthandler.cancel_dump_traceback_later()

    def finished(self) -> None:
        """Call when clean-up is done and the process is about to exit: SIGINT/SIGTERM are ignored
        from here on. Python's finalisation puts SIG_DFL back for Python-level handlers (a signal
        then kills the process, exit -15) but leaves SIG_IGN alone; there is nothing left to
        hurry."""
        self.phase = STOPPING
        self._disarm()
        for s in self._previous:
            signal.signal(s, signal.SIG_IGN)

    def restore(self) -> None:
        """Put back the handlers found at construction (tests that call ``main`` in-process)."""
        self._disarm()
        for s, h in self._previous.items():
            signal.signal(s, h)
