"""The test run's GIL-free wedge watchdog (conftest.pytest_runtest_protocol): a test whose main
thread is stuck in a C call that keeps the GIL and does not return on a signal (FastDDS waiting on
a mutex, docs/pip_ros_stack.md §1) ends the run with every thread's stack, instead of hanging it
until CI's limit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WEDGED_TEST = '''
import ctypes, signal
import pytest

@pytest.mark.timeout(2)
def test_wedged():
    # SIGALRM blocked: pytest-timeout's signal method can never interrupt the call, like a
    # futex wait inside a C library; ctypes.PyDLL keeps the GIL during the call
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    ctypes.PyDLL(None).sleep(60)
'''


def test_a_test_wedged_holding_the_gil_ends_the_run_with_its_stacks(tmp_path):
    (tmp_path / 'test_wedged.py').write_text(WEDGED_TEST)
    env = dict(
        os.environ,
        DEPTH3DSEG_WEDGE_GRACE_S='1',
        PYTHONPATH=os.pathsep.join([str(REPO / 'test'), os.environ.get('PYTHONPATH', '')]),
    )
    t0 = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            '-m',
            'pytest',
            '-p',
            'conftest',
            '-q',
            '-p',
            'no:cacheprovider',
            str(tmp_path / 'test_wedged.py'),
        ],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=tmp_path,
        env=env,
    )
    dt = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    assert dt < 40, dt  # 2 s timeout + 1 s grace, plus start-up; the C call sleeps 60 s
    assert 'Timeout (0:00:03)!' in r.stderr and 'test_wedged.py' in r.stderr, r.stderr
