"""bags.prefetch: a generator run in a reader thread behaves like the generator itself (items,
order, exceptions, early stop), a bounded number of items ahead (issue 15)."""

import threading

import pytest

from depth3dseg_ros.bags.prefetch import prefetch


def _gen(n, log, fail_at=None):
    try:
        for i in range(n):
            if i == fail_at:
                raise ValueError(f'bad item {i}')
            log.append(('made', i, threading.current_thread().name))
            yield i
    finally:
        log.append(('closed',))


@pytest.mark.parametrize('depth', [0, 1, 2, 5])
def test_same_items_same_order(depth):
    log = []
    assert list(prefetch(_gen(20, log), depth)) == list(range(20))
    assert log[-1] == ('closed',)
    threads = {t for _, *rest in log[:-1] for t in rest[1:]}
    assert threads == ({'MainThread'} if depth == 0 else {'depth3dseg-prefetch'})


def test_exception_after_the_items_before_it():
    got = []
    with pytest.raises(ValueError, match='bad item 3'):
        for x in prefetch(_gen(10, [], fail_at=3), 2):
            got.append(x)
    assert got == [0, 1, 2]


def test_early_stop_closes_the_producer_and_joins_its_thread():
    log = []
    before = threading.active_count()
    it = prefetch(_gen(1000, log), 2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert log[-1] == ('closed',) and threading.active_count() == before
    assert sum(e[0] == 'made' for e in log) <= 3 + 2 + 1  # never more than depth (+1) ahead


def test_consumer_error_stops_the_producer():
    log = []
    with pytest.raises(RuntimeError, match='writer failed'):
        for x in prefetch(_gen(1000, log), 2):
            if x == 4:
                raise RuntimeError('writer failed')
    assert log[-1] == ('closed',) and sum(e[0] == 'made' for e in log) <= 4 + 1 + 2 + 1
