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
