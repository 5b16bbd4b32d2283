"""procutil.popen_tied: a child started by a process that is then SIGKILLed dies too (no orphan
node keeps publishing on the test run's ROS_DOMAIN_ID)."""

import os
import signal
import subprocess
import sys
import time

import pytest

PARENT = (
    "import sys, time; from depth3dseg_ros.procutil import popen_tied; "
    "c = popen_tied([sys.executable, '-c', 'import time; time.sleep(120)']); "
    "print(c.pid, flush=True); time.sleep(120)"
)


def _alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as fh:
            return fh.read().split()[2] != 'Z'
    except FileNotFoundError:
        return False


@pytest.mark.timeout(60)
def test_child_dies_with_sigkilled_parent():
    parent = subprocess.Popen([sys.executable, '-c', PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert _alive(child)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    end = time.monotonic() + 10
    while _alive(child) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(child)


# -- StopSignals' deadline: clean-up after an asynchronous StopRequested is bounded (C40)

STARTED = (
    'import os, signal, sys, threading, time\n'
    'from depth3dseg_ros.procutil import STARTING, StopRequested, StopSignals\n'
    'stop = StopSignals("prog")\n'
    'stop.backstop_s = 3.0\n'
    'stop.set_phase(STARTING)\n'
    'lock = threading.Lock()\n'
    'try:\n'
    '    os.kill(os.getpid(), signal.SIGTERM)\n'
    '    time.sleep(30)\n'
    'except StopRequested:\n'
)


def _run(code: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60)
    return time.monotonic() - t0, r


@pytest.mark.timeout(90)
def test_c40_clean_up_deadlocked_after_the_signal_still_ends_the_process():
    """StopRequested landed where a lock was held (simulated: the clean-up acquires a lock twice,
    as a library's lock left held by the asynchronous exception would block it): the deadline
    thread ends the process deadline_s after the signal, exit 0, one line, no traceback."""
    dt, r = _run(STARTED + '    lock.acquire(); lock.acquire()\nprint("not reached")\n')
    assert r.returncode == 0, r.stderr
    assert 'clean-up after the signal did not end within 1.5 s' in r.stderr
    assert 'not reached' not in r.stdout and 'Traceback' not in r.stderr
    assert dt < 20  # the interpreter start and imports included; the lock waits for ever


@pytest.mark.timeout(90)
def test_c40_clean_up_holding_the_gil_meets_the_backstop():
    """A clean-up stuck in a C call that keeps the GIL (no Python thread runs): the GIL-free
    backstop ends the process after backstop_s with the stuck stack, exit status 1."""
    dt, r = _run(STARTED + '    import ctypes; ctypes.PyDLL(None).sleep(30)\n')
    assert r.returncode == 1 and 'Timeout' in r.stderr, r.stderr
    assert dt < 20


@pytest.mark.timeout(90)
@pytest.mark.parametrize('end', ['finished', 'restore'])
def test_c40_a_finished_clean_up_disarms_the_deadline(end):
    """After finished() (the executables) or restore() (in-process callers) the process lives on:
    neither the deadline thread nor the backstop ends it."""
    dt, r = _run(
        STARTED + f'    stop.{end}()\ntime.sleep(3.5)\nprint("alive", flush=True)\nsys.exit(3)\n'
    )
    assert r.returncode == 3 and 'alive' in r.stdout, r.stderr
    assert 'did not end' not in r.stderr and 'Timeout' not in r.stderr


def test_sighup_stops_unless_nohup_ignores_it():
    """SIGHUP (terminal closed) is a stop signal like SIGINT/SIGTERM, except where the process was
    started to ignore it (nohup): that wish is kept."""
    import signal

    from depth3dseg_ros.procutil import stop_signals

    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        assert stop_signals() == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        assert stop_signals() == (signal.SIGINT, signal.SIGTERM)
    finally:
        signal.signal(signal.SIGHUP, before)
