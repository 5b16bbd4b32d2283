"""Frame ages in /diagnostics and the node's summary line when every age was ignored (issue 54:
a bag replayed with --clock into a node not on sim time printed 'age p50 0 ms p95 0 ms')."""

from depth3dseg_ros.node.diagnostics import AGE_CLOCK_MISMATCH, AgeFilteredStats, age_values
from depth3dseg_ros.node.worker import summary_line

TIMES = {'decode': 1.0, 'inference': 2.0, 'cloud': 3.0, 'publish': 4.0, 'total': 10.0}


def _line(stats: AgeFilteredStats) -> tuple[dict, str]:
    s = stats.summary()
    s.update(received=stats.processed, dropped=0, **age_values(s, stats.age_ignored))
    return s, summary_line(s)


def test_ages_all_ignored_read_clock_mismatch_never_zero():
    stats = AgeFilteredStats()
    for _ in range(3):  # a bag's stamps 1.7e9 s old: every age ignored
        stats.add(TIMES, 5.0e13)
    s, line = _line(stats)
    assert stats.age_ignored == 3
    assert s['age_ms_p50'] == s['age_ms_p95'] == AGE_CLOCK_MISMATCH == 'n/a (clock mismatch)'
    assert 'age n/a (clock mismatch),' in line and ' 0 ms' not in line


def test_measured_ages_keep_their_numbers_and_no_frame_reads_na():
    stats = AgeFilteredStats()
    _, line = _line(stats)
    assert 'age n/a,' in line  # nothing processed yet: no age, and no clock mismatch either
    for age in (10.0, 20.0, 30.0):
        stats.add(TIMES, age)
    stats.add(TIMES, 5.0e13)  # one frame stamped 0 among measured ones
    s, line = _line(stats)
    assert s['age_ms_p50'] == 20.0 and 'age p50 20 ms p95 29 ms' in line
