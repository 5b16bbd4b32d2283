"""StampSync: image/CameraInfo pairing by header stamp (message_filters stand-in, docs/pip_ros_stack.md §3)."""
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from depth3dseg_ros.ros.sync import LATEST, MATCHED, NONE, StampSync, header_stamp_ns, stamp_to_ns


def msg(t_ns: int, tag: str = ''):
    stamp = SimpleNamespace(sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp, frame_id='cam'), tag=tag)


MS = 1_000_000


def test_stamp_to_ns():
    assert stamp_to_ns(SimpleNamespace(sec=3, nanosec=5)) == 3_000_000_005
    assert header_stamp_ns(msg(1_234_567_890_123)) == 1_234_567_890_123


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match='sync_slop=-0.1'):
        StampSync(slop=-0.1)
    with pytest.raises(ValueError, match='queue_size=0'):
        StampSync(queue_size=0)


def test_exact_pairs_info_first_and_image_first():
    s = StampSync(slop=0.0)
    assert s.add_info(msg(100 * MS, 'i0')) == []
    (p,) = s.add_image(msg(100 * MS, 'm0'))
    assert (p.image.tag, p.info.tag, p.how) == ('m0', 'i0', MATCHED)
    # image before its info: it waits, then the info releases it
    assert s.add_image(msg(133 * MS, 'm1')) == []
    assert s.waiting == 1
    (p,) = s.add_info(msg(133 * MS, 'i1'))
    assert (p.image.tag, p.info.tag, p.how, p.dt_ns) == ('m1', 'i1', MATCHED, 0)


def test_approximate_within_slop_picks_closest():
    s = StampSync(slop=0.005)
    s.add_info(msg(96 * MS, 'a'))
    s.add_info(msg(103 * MS, 'b'))
    (p,) = s.add_image(msg(101 * MS, 'm'))
    assert p.info.tag == 'b' and p.how == MATCHED and p.dt_ns == 2 * MS


def test_no_camera_info_releases_at_once_without_info():
    s = StampSync(slop=0.01)
    (p,) = s.add_image(msg(5 * MS))
    assert p.info is None and p.how == NONE
    assert s.counts[NONE] == 1


def test_never_matching_stamps_fall_back_to_latest_without_waiting():
    """A driver stamping CameraInfo with 0: images use the latest info; after the first fallback no wait."""
    s = StampSync(slop=0.01, queue_size=2)
    s.add_info(msg(0, 'zero'))
    released = []
    for k in range(6):
        released += s.add_image(msg((1000 + 33 * k) * MS, f'm{k}'))
    assert [p.image.tag for p in released] == [f'm{k}' for k in range(6)][: len(released)]
    assert len(released) >= 4                  # at most queue_size images ever wait
    assert all(p.how == LATEST and p.info.tag == 'zero' for p in released)
    assert s.fallback
    # once in fallback, a new image is released immediately
    (p,) = s.add_image(msg(2000 * MS, 'now'))
    assert p.image.tag == 'now'
    # a real match switches fallback off again
    s.add_info(msg(2100 * MS, 'real'))
    (p,) = s.add_image(msg(2100 * MS, 'm'))
    assert p.how == MATCHED and not s.fallback


def test_image_released_when_a_newer_info_proves_it_unmatchable():
    s = StampSync(slop=0.005)
    s.add_info(msg(0, 'old'))
    assert s.add_image(msg(100 * MS, 'm')) == []          # info may still come
    (p,) = s.add_info(msg(200 * MS, 'newer'))             # newer than 100 ms + slop: it never will
    assert p.how == LATEST and p.info.tag == 'newer'


def test_lost_and_reordered_infos_like_pip_stack_measurement():
    """Every 10th frame has no CameraInfo, every (10k+5)th arrives info-first: 54/54 equal-stamp pairs."""
    s = StampSync(slop=0.0)
    s.add_info(msg(967 * MS, 'before'))     # the camera ran before the node (an image first is NONE)
    pairs = []
    for k in range(60):
        t = (1000 + 33 * k) * MS
        if k % 10 == 5:
            pairs += s.add_info(msg(t, f'i{k}'))
            pairs += s.add_image(msg(t, f'm{k}'))
        else:
            pairs += s.add_image(msg(t, f'm{k}'))
            if k % 10 != 0:
                pairs += s.add_info(msg(t, f'i{k}'))
    matched = [p for p in pairs if p.how == MATCHED]
    assert len(matched) == 54
    assert all(p.image.tag[1:] == p.info.tag[1:] for p in matched)
    # the 6 frames without info were released (with the latest info), none is stuck
    assert len(pairs) + s.waiting == 60 and s.waiting <= 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=60),
       st.floats(0, 0.02), st.integers(1, 4))
def test_property_order_kept_bounded_and_matches_within_slop(events, slop, qsize):
    s = StampSync(slop=slop, queue_size=qsize)
    released, n_images = [], 0
    for is_image, t_ms in events:
        if is_image:
            n_images += 1
            released += s.add_image(msg(t_ms * MS, str(n_images)))
        else:
            released += s.add_info(msg(t_ms * MS))
        assert s.waiting <= qsize
    assert [int(p.image.tag) for p in released] == list(range(1, len(released) + 1))
    assert len(released) + s.waiting == n_images
    for p in released:
        if p.how == MATCHED:
            assert abs(header_stamp_ns(p.image) - header_stamp_ns(p.info)) <= s.slop_ns
        if p.how == NONE:
            assert p.info is None


def test_first_images_wait_for_the_first_info_when_one_is_expected():
    s = StampSync(slop=0.0, queue_size=2)
    assert s.add_image(msg(100 * MS, 'm0'), info_expected=True) == []     # a CameraInfo publisher exists
    (p,) = s.add_info(msg(100 * MS, 'i0'))
    assert (p.image.tag, p.how) == ('m0', MATCHED)
    # bounded: a publisher that never sends releases the images after queue_size, without info
    s = StampSync(slop=0.0, queue_size=2)
    out = []
    for k in range(4):
        out += s.add_image(msg(k * MS, f'm{k}'), info_expected=True)
    assert [p.image.tag for p in out] == ['m0', 'm1'] and all(p.how == NONE for p in out)
    assert s.waiting == 2
