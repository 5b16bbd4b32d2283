"""Child processes that die with their parent (the demo, benchmarks and tests start nodes this way).

DDS discovery between processes can rarely hang (docs/pip_ros_stack.md §1); when the
parent is then killed by a timeout, a node or replay child left running would keep publishing on the
same ROS_DOMAIN_ID and corrupt whatever runs next. On Linux ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` makes
the kernel send the child SIGTERM when its parent dies, however the parent ends (even SIGKILL).
"""
from __future__ import annotations

import ctypes
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
