"""pytest plugin: no process a test starts outlives the test run, however the run ends.

* SIGTERM (and SIGHUP) to the test runner becomes KeyboardInterrupt, so pytest stops as on Ctrl-C:
  fixtures tear down, ``subprocess.run`` kills its child on the exception, ``finally`` blocks stop
  theirs.
* The runner is made a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a grandchild whose
  parent died (a node started by a killed demo, a double-forked helper) is re-parented to the
  runner instead of to init, so it can still be found.
* At the end of the session every remaining descendant gets SIGTERM, then SIGKILL 2 s later (an
  idle process that ignores SIGTERM, case C45, still goes).
* A SIGKILLed runner cannot clean up: the package's ``procutil.popen_tied`` children then get
  SIGTERM from the kernel (PR_SET_PDEATHSIG).

Loaded by ``conftest.py`` (``pytest_plugins``); ``test/test_no_leaks.py`` proves it with a real
runner.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36


def _children_of() -> dict[int, list[int]]:
    """ppid -> child pids, read from /proc (Linux)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat', 'rb') as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b')') + 2 :].split()
        if fields[0] == b'Z':  # a zombie is already dead; only its parent's wait is due
            continue
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def descendants(pid: int) -> list[int]:
    """Pids of every live process below ``pid`` (children, grandchildren, …)."""
    tree, todo, found = _children_of(), [pid], []
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(grace_s: float = 2.0) -> list[int]:
    """SIGTERM every descendant of this process, SIGKILL whatever is left after ``grace_s``; reap.
    Returns the pids found at the start."""
    me = os.getpid()
    first = descendants(me)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
        for p in descendants(me):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait_s
        while time.monotonic() < end and descendants(me):
            _reap()
            time.sleep(0.05)
    _reap()
    return first


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(f'signal {signum}')


def pytest_configure(config) -> None:
    """Install the signal handlers and become a subreaper (main process only, not xdist
    workers)."""
    if sys.platform.startswith('linux'):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)


def pytest_unconfigure(config) -> None:
    """Stop every process the run left behind."""
    if sys.platform.startswith('linux'):
        left = kill_descendants()
        if left:
            print(
                f'\nleakguard: killed {len(left)} process(es) the tests left running: {left}',
                file=sys.stderr,
            )
