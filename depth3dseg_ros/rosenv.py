"""The one place that sets the DDS environment for nodes, tools and tests.

``FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA``: without it FastDDS loses large best-effort messages
(images, clouds) between processes; measured in docs/pip_ros_stack.md §1.
``ROS_DOMAIN_ID``: tests pick one per run so parallel runs never cross-talk.
Do not combine LARGE_DATA with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (it drops the large-data
transport); ROS_LOCALHOST_ONLY=1 is fine.
"""

from __future__ import annotations

import os
import random

TRANSPORT_VAR = 'FASTDDS_BUILTIN_TRANSPORTS'
TRANSPORT_VALUE = 'LARGE_DATA'


def pick_domain_id(seed: int | None = None) -> int:
    """Return a ROS_DOMAIN_ID in 1..100 (inside the range safe on Linux, 0..101).

    Args:
        seed: optional seed; by default the process id and time make runs differ.
    """
    rng = random.Random(
        seed
        if seed is not None
        else (os.getpid() * 7919) ^ int.from_bytes(os.urandom(4), 'little')
    )
    return rng.randint(1, 100)


def apply_ros_env(env: dict | None = None, domain_id: int | None = None) -> dict:
    """Set the DDS variables in ``env`` (default ``os.environ``) and return it.

    The transport is set only when the user has not chosen one. ``domain_id`` overrides
    ROS_DOMAIN_ID; otherwise an existing ROS_DOMAIN_ID is kept.
    """
    env = os.environ if env is None else env
    env.setdefault(TRANSPORT_VAR, TRANSPORT_VALUE)
    if domain_id is not None:
        env['ROS_DOMAIN_ID'] = str(int(domain_id))
    return env
