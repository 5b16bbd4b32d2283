"""No leaked processes (test/leakguard.py): SIGTERM to a test runner ends it, and with it every
process its tests started — a child that ignores SIGTERM (an idle node, case C45) and an orphaned
grandchild alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leakguard import descendants

HERE = Path(__file__).resolve().parent
INNER_TEST = '''
import os, subprocess, sys, time

def test_starts_processes_and_waits():
    stubborn = subprocess.Popen([sys.executable, '-c',
        'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])
    orphan = subprocess.run(['bash', '-c', 'sleep 600 >/dev/null 2>&1 & echo $!'],
                            capture_output=True, text=True).stdout.strip()
    with open(os.environ['LEAK_PIDS'] + '.tmp', 'w') as f:
        f.write(f'{stubborn.pid} {orphan}')
    os.replace(os.environ['LEAK_PIDS'] + '.tmp', os.environ['LEAK_PIDS'])
    time.sleep(600)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat', 'rb') as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b')') + 2 :].split()[0] != b'Z'


@pytest.mark.timeout(120)
def test_sigterm_to_the_test_runner_leaves_no_process(tmp_path):
    (tmp_path / 'conftest.py').write_text("pytest_plugins = ['leakguard']\n")
    (tmp_path / 'test_inner.py').write_text(INNER_TEST)
    pids_file = tmp_path / 'pids'
    env = dict(
        os.environ,
        LEAK_PIDS=str(pids_file),
        PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get('PYTHONPATH', '')]),
    )
    runner = subprocess.Popen(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        end = time.monotonic() + 60
        while not pids_file.exists() and time.monotonic() < end and runner.poll() is None:
            time.sleep(0.1)
        assert pids_file.exists(), runner.communicate(timeout=10)[0]
        pids = [int(p) for p in pids_file.read_text().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        assert set(pids) <= set(
            descendants(runner.pid)
        )  # the orphan was re-parented to the runner
        runner.send_signal(signal.SIGTERM)
        out = runner.communicate(timeout=20)[0]
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 2 and 'KeyboardInterrupt' in out and 'signal 15' in out, (
        out
    )  # pytest: interrupted
    assert 'leakguard: killed 2 process(es)' in out, out
    end = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], out
