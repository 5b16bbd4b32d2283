"""Leave the ROS graph without deleting the DDS participant (processes that end with ``os._exit``).

Why (docs/pip_ros_stack.md §1): FastDDS 3.2's TCP transport (the LARGE_DATA mode this package
uses) can deadlock when a participant is deleted while a TCP peer is alive: the channel's
disconnect waits for a read that never completes (eProsima/Fast-DDS PR 6066), inside an rclpy
call that keeps the GIL, so nothing in the process runs again. rmw_fastrtps deletes a context's
participant when the context's *last* node is destroyed. So a process that is about to end does
this instead:

1. create a small hidden node (``_<name>_leaving``: no /rosout, no parameter services, no global
   ``--ros-args``) so the context keeps a node;
2. destroy the real nodes: their publishers, subscriptions and services are deleted, peers see
   them leave at once (topic matches drop, ``ros2 node list`` no longer lists them);
3. give those announcements ``settle_s`` to go out;

and the caller then ends the process with ``os._exit``: the kernel closes the sockets, so peers'
reads end (no peer can deadlock on this process either), and peers drop the participant itself
(which now holds only the hidden node) at the end of its lease.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

#: Seconds given to the endpoints' "gone" announcements before the process may end.
SETTLE_S = 0.2

#: The hidden nodes, referenced until the process ends: a node whose last reference goes is
#: destroyed (rclpy frees its handle), and the last one would take the participant with it.
_KEPT: list = []


def keep_participant(name: str, context: Any = None) -> Any:
    """Create a hidden node that keeps ``context``'s DDS participant until the process ends.

    Args:
        name: node name; a leading ``_`` hides it from ``ros2 node list`` (``-a`` shows it).
        context: the rclpy context (default: rclpy's default context), initialised.

    Returns:
        The node (no /rosout, no parameter services, no global ``--ros-args``: a
        ``-r __node:=...`` remap must not rename it). This module holds a reference until the
        process ends; do not destroy it.
    """
    import rclpy

    keeper = rclpy.create_node(
        name,
        context=context,
        use_global_arguments=False,
        enable_rosout=False,
        start_parameter_services=False,
    )
    _KEPT.append(keeper)
    return keeper


def leave_graph(nodes: Iterable[Any], context: Any = None, settle_s: float = SETTLE_S) -> Any:
    """Destroy ``nodes`` while the DDS participant of ``context`` stays (see the module text).

    Args:
        nodes: rclpy nodes of ``context`` to destroy (``None`` entries are skipped).
        context: the rclpy context (default: rclpy's default context); it must still be valid
            (not shut down).
        settle_s: seconds to wait after the destruction, for the announcements to go out.

    Returns:
        The hidden node that now keeps the participant (``None`` when ``nodes`` was empty); this
        module also holds a reference until the process ends. Do not destroy it: end the process
        (``os._exit``) instead.

    Raises:
        rclpy's errors if ``context`` is not valid (then nothing was destroyed).
    """
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        return None
    keeper = keep_participant(f'_{nodes[0].get_name()}_leaving_{os.getpid()}', context)
    for node in nodes:
        node.destroy_node()
    if settle_s > 0:
        time.sleep(settle_s)
    return keeper
