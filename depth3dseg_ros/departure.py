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

A node whose constructor was interrupted (a signal's ``StopRequested`` during model loading, a
start-up error) is referenced only by the frames of the exception's traceback: when the caller's
``except`` clause ends, the exception goes, the half-built node is freed and, as the context's
only node, takes the participant with it, the deletion above, under the GIL (seen once in a full
test run: the node hung 5 s after SIGTERM until the backstop ended it with exit status 1).
:func:`interrupted_node` finds that node so that the caller can pass it to :func:`leave_graph` like
a built one (docs/cases.md C40).
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


def interrupted_node(exc: BaseException) -> Any:
    """The rclpy node whose construction ``exc`` interrupted, or None.

    Call it in the ``except`` clause that caught ``exc`` (StopRequested from a signal, or a
    start-up error) and give the result to :func:`leave_graph`. ``exc`` itself is referenced until
    the process ends, so nothing its traceback's frames hold (a DDS handle that a constructor had
    not stored yet) is freed before ``os._exit``.

    Args:
        exc: an exception whose traceback passed through a ``Node.__init__`` (rclpy's, a
            subclass's, or ``rclpy.create_node``'s).

    Returns:
        The outermost ``self`` in the traceback's frames that is an ``rclpy.node.Node`` whose
        rcl handle exists; None when there is none (the exception was raised before the handle
        was made, or outside any node's constructor).
    """
    from rclpy.node import Node

    _KEPT.append(exc)
    tb = exc.__traceback__
    while tb is not None:
        obj = tb.tb_frame.f_locals.get('self')
        if isinstance(obj, Node):
            try:
                obj.handle  # noqa: B018 - set by rclpy's constructor; absent before that
            except AttributeError:
                return None
            return obj
        tb = tb.tb_next
    return None


def leave_graph(nodes: Iterable[Any], context: Any = None, settle_s: float = SETTLE_S) -> Any:
    """Destroy ``nodes`` while the DDS participant of ``context`` stays (see the module text).

    Args:
        nodes: rclpy nodes of ``context`` to destroy (``None`` entries are skipped); a node whose
            construction was interrupted (:func:`interrupted_node`) too: what it made leaves, and
            if it was interrupted inside rclpy's own constructor (destroy_node raises
            AttributeError) it is kept, unfreed, until the process ends.
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
        try:
            node.destroy_node()
        except AttributeError:  # a constructor interrupted inside rclpy's Node.__init__
            _KEPT.append(node)  # what it made stays until os._exit, the participant too
    if settle_s > 0:
        time.sleep(settle_s)
    return keeper
