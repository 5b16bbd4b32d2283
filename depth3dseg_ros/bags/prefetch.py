"""Run a generator in a background thread, a few items ahead of its consumer (issue 15).

``depth3dseg-extract`` reads and decodes a bag's frames (sqlite/MCAP reads, rosbags
deserialization: mostly Python, holding the GIL) while it writes the previous ones (pixel copies,
checksums and file writes: numpy, zlib-ng and the OS, mostly without the GIL). :func:`prefetch`
overlaps the two: the producer runs in its own thread and hands items over through a queue of at
most ``depth`` items, so memory holds a handful of frames, never the bag.

Semantics are those of iterating the generator directly: same items, same order; an exception
raised by the producer is raised in the consumer at the same place in the sequence (after the items
produced before it); when the consumer stops early (``break``, an exception, ``close()``), the
producer is told to stop, its generator is closed and its thread joined before control returns, so
nothing runs on after the caller has gone on (e.g. to close the bag the producer reads).
"""

from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar('T')

_DONE = object()


class _Raised:
    """A producer exception in transit."""

    def __init__(self, err: BaseException) -> None:
        self.err = err


def prefetch(source: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Iterate ``source`` (a generator) in a background thread, at most ``depth`` items ahead.

    Args:
        source: the producer; it runs only in the background thread while this iterator lives.
        depth: items buffered ahead (>= 1). ``depth <= 0`` iterates ``source`` in the caller's
            thread (no thread at all).
    Yields:
        the items of ``source`` in order.
    Raises:
        whatever ``source`` raises, in the consumer, after the items produced before it.
    """
    if depth <= 0:
        yield from source
        return
    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        """Queue ``item`` unless the consumer has gone; False when it has."""
        while not stop.is_set():
            try:
                items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in source:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as err:  # handed to the consumer, raised there
            put(_Raised(err))
        finally:
            close = getattr(source, 'close', None)
            if close is not None:
                close()

    thread = threading.Thread(target=run, name='depth3dseg-prefetch', daemon=True)
    thread.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.err
            yield item
    finally:
        stop.set()
        thread.join()
