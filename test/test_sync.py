"""StampSync: image/CameraInfo pairing by header stamp (message_filters stand-in,
docs/pip_ros_stack.md §3)."""

from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from depth3dseg_ros.ros.sync import (
    FAR,
    LATE,
    LATEST,
    MATCHED,
    NONE,
    PASSED,
    STALE,
    StampSync,
    header_stamp_ns,
    stamp_to_ns,
)


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


def _stream(s, frames, info_first=True):
    """Feed ``frames`` [(image stamp ns, info stamp ns or None)]; return {image tag: index of the
    frame whose arrival released it} and the pairs, in release order."""
    released_at, pairs = {}, []
    for k, (t_img, t_info) in enumerate(frames):
        out = []
        if t_info is not None and info_first:
            out += s.add_info(msg(t_info, f'i{k}'))
        out += s.add_image(msg(t_img, f'm{k}'))
        if t_info is not None and not info_first:
            out += s.add_info(msg(t_info, f'i{k}'))
        for p in out:
            released_at[p.image.tag] = k
        pairs += out
    return released_at, pairs


@pytest.mark.parametrize(
    'info_stamp',
    [lambda t: 0, lambda t: 5 * 10**9, lambda t: t - 3 * 10**9],
    ids=['unset', 'constant', 'offset_3s'],
)
def test_info_stamped_long_before_the_images_releases_each_image_at_once(info_stamp):
    """Issue 14: an unset (0), constant or stale CameraInfo stamp never holds an image back: each
    image is released by its own arrival with the latest CameraInfo (before: it waited for 3 more
    images)."""
    s = StampSync(slop=0.01, queue_size=3)
    frames = [((100 + k / 30) * 10**9, None) for k in range(8)]
    frames = [(int(t), int(info_stamp(int(t)))) for t, _ in frames]
    released_at, pairs = _stream(s, frames)
    assert released_at == {f'm{k}': k for k in range(8)}
    assert all(
        p.how == LATEST
        and p.reason in (FAR, STALE)
        and p.info.tag == p.image.tag.replace('m', 'i')
        for p in pairs
    )
    assert s.waiting == 0 and s.counts == {MATCHED: 0, LATEST: 8, NONE: 0}


@pytest.mark.parametrize('info_first', [True, False])
def test_info_stamped_a_little_before_the_images_waits_at_most_for_the_next_message(info_first):
    """CameraInfo stamped 50 ms before its image (more than the slop, less than a second): the
    first image may wait for the next CameraInfo (it could still be the matching one); from then on
    the stream is stale and every image is released at once."""
    s = StampSync(slop=0.01, queue_size=3)
    frames = [((100 + k / 30) * 10**9, None) for k in range(8)]
    frames = [(int(t), int(t) - 50 * MS) for t, _ in frames]
    released_at, pairs = _stream(s, frames, info_first=info_first)
    assert released_at['m0'] <= 1
    assert all(released_at[f'm{k}'] == k for k in range(1, 8))
    assert all(p.how == LATEST for p in pairs[1:]) and pairs[0].how == (
        LATEST if info_first else NONE
    )
    assert s.stale


def test_info_stamped_after_the_images_releases_each_image_at_once():
    """CameraInfo stamped 20 ms after its image (e.g. at publish time): a CameraInfo newer than the
    image already exists, so no match can come: released at once ('passed'); within slop it is
    matched."""
    s = StampSync(slop=0.01, queue_size=3)
    frames = [
        (int((100 + k / 30) * 10**9), int((100 + k / 30) * 10**9) + 20 * MS) for k in range(6)
    ]
    released_at, pairs = _stream(s, frames)
    assert released_at == {f'm{k}': k for k in range(6)}
    assert all(p.how == LATEST and p.reason == PASSED for p in pairs)
    s = StampSync(slop=0.03, queue_size=3)
    released_at, pairs = _stream(s, frames)
    assert released_at == {f'm{k}': k for k in range(6)} and all(p.how == MATCHED for p in pairs)


@pytest.mark.parametrize('info_first', [True, False])
def test_far_future_image_is_released_at_once_and_delays_no_later_frame(info_first):
    """An image stamped 1000 s in the future has no CameraInfo near it: released at once ('far');
    the matched frames after it are released as soon as their CameraInfo is there (before: it sat
    at the head of the queue until three newer images piled up, then all went out in a burst)."""
    s = StampSync(slop=0.01, queue_size=3)
    t = [int((100 + k / 30) * 10**9) for k in range(12)]
    frames = (
        [(t[k], t[k]) for k in range(4)]
        + [(t[4] + 1000 * 10**9, None)]
        + [(t[k], t[k]) for k in range(5, 12)]
    )
    released_at, pairs = _stream(s, frames, info_first=info_first)
    assert released_at == {f'm{k}': k for k in range(12)}
    far = [p for p in pairs if p.image.tag == 'm4']
    assert far[0].how == LATEST and far[0].reason == FAR
    assert all(
        p.how == MATCHED and p.info.tag[1:] == p.image.tag[1:]
        for p in pairs
        if p.image.tag not in ('m0', 'm4')
    )
    assert pairs[0].how == (MATCHED if info_first else NONE)  # image first: no CameraInfo yet
    assert [p.image.tag for p in pairs] == [f'm{k}' for k in range(12)]  # arrival order


def test_info_published_once_holds_only_the_first_image_until_the_next():
    """A CameraInfo published once (latched driver), stamped 50 ms before the first image: the
    first image waits for the next message at most (its CameraInfo could still come: 'late'); every
    later image is released at once, the CameraInfo being more than two image periods behind
    ('far')."""
    s = StampSync(slop=0.01, queue_size=3)
    s.add_info(msg(99_950 * MS, 'once'))
    released_at, pairs = _stream(s, [(int((100 + k / 30) * 10**9), None) for k in range(8)])
    assert released_at == dict({f'm{k}': k for k in range(8)}, m0=1)
    assert all(p.how == LATEST and p.info.tag == 'once' for p in pairs)
    assert [p.reason for p in pairs] == [LATE] + [FAR] * 7 and s.waiting == 0


def test_two_images_released_late_in_a_row_make_the_stream_stale():
    """CameraInfo stops coming while its stamps are still close to the images (1 Hz camera): each
    image waits for the next one ('late') at most twice, then images are released at once
    ('stale')."""
    s = StampSync(slop=0.01, queue_size=3)
    s.add_info(msg(99_500 * MS, 'last'))
    released_at, pairs = _stream(s, [(100 * 10**9 + k * 10**9, None) for k in range(6)])
    assert [p.reason for p in pairs] == [LATE, LATE] + [STALE] * 4 and s.stale
    assert released_at == dict({f'm{k}': k for k in range(6)}, m0=1, m1=2)


def test_stale_stream_recovers_when_stamps_come_in_step_again():
    s = StampSync(slop=0.0, queue_size=3)
    t = [int((100 + k / 30) * 10**9) for k in range(10)]
    _stream(s, [(t[k], 0) for k in range(4)])
    assert s.stale
    released_at, pairs = _stream(s, [(t[k], t[k]) for k in range(4, 10)], info_first=False)
    assert not s.stale and s.counts[MATCHED] >= 5


def test_set_slop_applies_to_the_next_message():
    s = StampSync(slop=0.0)
    s.add_info(msg(100 * MS, 'i'))
    (p,) = s.add_image(msg(97 * MS, 'a'))
    assert p.how == LATEST and p.reason == PASSED
    s.set_slop(0.005)
    (p,) = s.add_image(msg(98 * MS, 'b'))
    assert p.how == MATCHED and p.dt_ns == 2 * MS and s.slop_ns == 5 * MS
    with pytest.raises(ValueError, match='sync_slop=-1'):
        s.set_slop(-1)


def test_image_released_when_a_newer_info_proves_it_unmatchable():
    s = StampSync(slop=0.005)
    s.add_info(msg(0, 'old'))
    assert s.add_image(msg(100 * MS, 'm')) == []  # info may still come
    (p,) = s.add_info(msg(200 * MS, 'newer'))  # newer than 100 ms + slop: it never will
    assert p.how == LATEST and p.info.tag == 'newer'


def test_lost_and_reordered_infos_like_pip_stack_measurement():
    """Every 10th frame has no CameraInfo, every (10k+5)th arrives info-first: 54/54 equal-stamp
    pairs."""
    s = StampSync(slop=0.0)
    s.add_info(msg(967 * MS, 'before'))  # the camera ran before the node (an image first is NONE)
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
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=60),
    st.floats(0, 0.02),
    st.integers(1, 4),
)
def test_property_order_kept_bounded_and_matches_within_slop(events, slop, qsize):
    s = StampSync(slop=slop, queue_size=qsize)
    released, n_images = [], 0
    for is_image, t_ms in events:
        if is_image:
            n_images += 1
            released += s.add_image(msg(t_ms * MS, str(n_images)))
            if s.latest_info is not None:
                # no image waits behind another (issue 14); besides, at most one image stamped
                # back is held until the next message confirms or refutes its jump (issue 55)
                assert s.waiting - s.held <= 1
        else:
            released += s.add_info(msg(t_ms * MS))
        assert s.waiting - s.held <= qsize and s.held <= 1
    assert [int(p.image.tag) for p in released] == list(range(1, len(released) + 1))
    assert len(released) + s.waiting == n_images
    for p in released:
        if p.how == MATCHED:
            assert abs(header_stamp_ns(p.image) - header_stamp_ns(p.info)) <= s.slop_ns
        if p.how == NONE:
            assert p.info is None


def test_first_images_wait_for_the_first_info_when_one_is_expected():
    s = StampSync(slop=0.0, queue_size=2)
    assert (
        s.add_image(msg(100 * MS, 'm0'), info_expected=True) == []
    )  # a CameraInfo publisher exists
    (p,) = s.add_info(msg(100 * MS, 'i0'))
    assert (p.image.tag, p.how) == ('m0', MATCHED)
    # bounded: a publisher that never sends releases the images after queue_size, without info
    s = StampSync(slop=0.0, queue_size=2)
    out = []
    for k in range(4):
        out += s.add_image(msg(k * MS, f'm{k}'), info_expected=True)
    assert [p.image.tag for p in out] == ['m0', 'm1'] and all(p.how == NONE for p in out)
    assert s.waiting == 2


def _pass_of_a_bag(n=8, t0=100.0, period=1 / 15):
    """n frames (more than the 6 CameraInfos kept), image and CameraInfo of the same stamp."""
    return [(int((t0 + k * period) * 10**9),) * 2 for k in range(n)]


@pytest.mark.parametrize('info_first', [True, False])
@pytest.mark.parametrize('passes', [2, 3])
def test_bag_played_again_pairs_each_image_with_its_own_camera_info(info_first, passes):
    """A bag replayed again or looped: the stamps go back to the bag's start. Each image of every
    pass is matched with the CameraInfo of its own stamp (before: the first images of a pass went
    out with the previous pass's last CameraInfo, 'passed', often of another camera size: no
    cloud)."""
    s = StampSync(slop=0.01, queue_size=3)
    frames = _pass_of_a_bag() * passes
    released_at, pairs = _stream(s, frames, info_first=info_first)
    assert [p.image.tag for p in pairs] == [f'm{k}' for k in range(len(frames))]
    # image first, the very first image has no CameraInfo yet (none expected): NONE
    rest = pairs if info_first else pairs[1:]
    assert all(p.how == MATCHED and p.dt_ns == 0 for p in rest)
    assert all(header_stamp_ns(p.info) == header_stamp_ns(p.image) for p in rest)
    # released by its own frame's messages (image first: by its CameraInfo, in the same frame)
    assert released_at == {f'm{k}': k for k in range(len(frames))}
    assert s.jumps == passes - 1 and s.last_jump_ns == frames[7][0] - frames[0][0]
    assert not s.stale and s.waiting == 0


def test_time_jump_releases_the_waiting_image_of_the_old_timeline_with_its_info():
    """An image of the old timeline still waiting when the stamps go back goes out first, with the
    old timeline's CameraInfo, once the new timeline's CameraInfo confirms the jump; the new image
    is matched with its own."""
    s = StampSync(slop=0.01, queue_size=3)
    _stream(s, _pass_of_a_bag(3))
    assert s.add_image(msg(int(100.2 * 10**9), 'old')) == []  # waits for its CameraInfo
    assert s.add_image(msg(50 * 10**9, 'new')) == []  # the stamps go back before it came: held
    assert s.waiting == 2 and s.held == 1 and s.jumps == 0
    out = s.add_info(msg(50 * 10**9, 'i-new'))  # the new timeline goes on: the jump is confirmed
    assert [(p.image.tag, p.how, p.info.tag) for p in out] == [
        ('old', LATEST, 'i2'),
        ('new', MATCHED, 'i-new'),
    ]
    assert s.waiting == 0 and s.jumps == 1 and s.latest_info.tag == 'i-new'


@pytest.mark.parametrize('info_stamp', [0, 5 * 10**9], ids=['unset', 'constant'])
def test_time_jump_keeps_a_camera_info_of_unset_or_constant_stamp(info_stamp):
    """A CameraInfo stamped 0 or constant is not after the new timeline's start: kept, and each
    image of the second pass still goes out at once with it, also when it was published once."""
    s = StampSync(slop=0.01, queue_size=3)
    frames = [(t, info_stamp) for t, _ in _pass_of_a_bag()] * 2
    released_at, pairs = _stream(s, frames)
    assert released_at == {f'm{k}': k for k in range(len(frames))}
    assert all(p.how == LATEST and p.info.tag[1:] == p.image.tag[1:] for p in pairs)
    s = StampSync(slop=0.01, queue_size=3)
    s.add_info(msg(info_stamp, 'once'))  # latched, published once
    _, pairs = _stream(s, [(t, None) for t, _ in _pass_of_a_bag()] * 2)
    assert len(pairs) == 16 and all(p.info.tag == 'once' for p in pairs)


def test_camera_info_clock_going_back_alone_drops_the_old_timeline():
    """A camera driver restarted with another clock: its CameraInfo goes back first; the old
    CameraInfos are dropped so the new images match the new ones."""
    s = StampSync(slop=0.01, queue_size=3)
    _stream(s, [(t + 50 * 10**9, t + 50 * 10**9) for t, _ in _pass_of_a_bag()])
    released_at, pairs = _stream(s, _pass_of_a_bag())
    assert all(p.how == MATCHED and p.info.tag == p.image.tag.replace('m', 'i') for p in pairs)
    assert s.jumps == 1


def sized(t_ns: int, tag: str, size: tuple[int, int]):
    """A message with a stamp and the camera size it belongs to (the frame's, image or
    CameraInfo)."""
    m = msg(t_ns, tag)
    m.size = size
    return m


@pytest.mark.parametrize('n_frames', [2, 3, 8, 22])
@pytest.mark.parametrize(
    'wrap',
    [
        'in_order',  # ... image N-1, info N-1, image 0, info 0
        'old_info_after_new_image',  # ... image N-1, image 0, info N-1, info 0 (issue 54)
        'old_image_after_new_info',  # ... info N-1, info 0, image N-1, image 0
    ],
)
def test_loop_of_two_sizes_never_pairs_across_the_jump(n_frames, wrap):
    """A looped bag whose frames alternate between two camera sizes; around each wrap the topics
    arrive out of order (they travel apart). No image is ever paired with a CameraInfo of the
    other timeline: every pair's CameraInfo has the image's size, matched by its own stamp (before:
    the first image of a pass took the last pass's CameraInfo that arrived after it, 312×234 for a
    320×240 image, and its cloud was dropped). Each topic keeps its own order (one publisher)."""
    sizes = [(320, 240), (312, 234)]
    stamps = [int((100 + k / 15) * 10**9) for k in range(n_frames)]
    last = n_frames - 1

    def img(k, p):
        return ('image', sized(stamps[k], f'm{p}.{k}', sizes[k % 2]))

    def inf(k, p):
        return ('info', sized(stamps[k], f'i{p}.{k}', sizes[k % 2]))

    events = []
    for p in range(3):  # three passes, two wraps
        for k in range(n_frames):
            if p > 0 and k == 0:
                continue  # placed by the wrap below
            if p < 2 and k == last:
                events += {
                    'in_order': [img(last, p), inf(last, p), img(0, p + 1), inf(0, p + 1)],
                    'old_info_after_new_image': [
                        img(last, p),
                        img(0, p + 1),
                        inf(last, p),
                        inf(0, p + 1),
                    ],
                    'old_image_after_new_info': [
                        inf(last, p),
                        inf(0, p + 1),
                        img(last, p),
                        img(0, p + 1),
                    ],
                }[wrap]
            else:
                events += [img(k, p), inf(k, p)]
    s = StampSync(slop=0.01, queue_size=3)
    pairs = []
    for kind, m in events:
        pairs += s.add_image(m, info_expected=True) if kind == 'image' else s.add_info(m)
    assert sorted(p.image.tag for p in pairs) == sorted(m.tag for k, m in events if k == 'image')
    for p in pairs:
        what = (p.image.tag, p.info and p.info.tag, p.how, p.reason)
        assert p.info is not None, what
        same_pass = p.image.tag[1:].split('.')[0] == p.info.tag[1:].split('.')[0]
        # a CameraInfo of the image's own pass (timeline); a looped bag's same stamp is the same
        # frame, so one of an earlier pass of the image's very stamp is right too
        assert same_pass or header_stamp_ns(p.info) == header_stamp_ns(p.image), what
        if p.image.tag.endswith('.0'):  # the first image of each pass: its own CameraInfo
            assert p.how == MATCHED and p.dt_ns == 0 and p.info.size == p.image.size, what
    assert s.jumps == 2


def _stream_with_reset(reset_at, burst, info_first, info_expected):
    """30 frames at 15 Hz, image and CameraInfo of the same stamp; a hostile image stamped 0 (a
    reset stamp) arrives before frame ``reset_at``; the ``burst`` frames after it come as images
    only, their CameraInfos all after them (more images than queue_size before the next
    CameraInfo). Returns the events (kind, message) in arrival order."""
    t = [int((100 + k / 15) * 10**9) for k in range(30)]
    events = []
    late_infos = []
    for k in range(30):
        if k == reset_at:
            events.append(('image', msg(0, 'reset')))
        if reset_at <= k < reset_at + burst:
            events.append(('image', msg(t[k], f'm{k}')))
            late_infos.append(('info', msg(t[k], f'i{k}')))
            continue
        events += late_infos
        late_infos = []
        frame = [('info', msg(t[k], f'i{k}')), ('image', msg(t[k], f'm{k}'))]
        events += frame if info_first else frame[::-1]
    return events


@pytest.mark.parametrize('info_expected', [False, True], ids=['no_publisher', 'publisher'])
@pytest.mark.parametrize('info_first', [True, False], ids=['info_first', 'image_first'])
@pytest.mark.parametrize('burst', [0, 6], ids=['single', 'burst_of_6'])
def test_a_stamp_reset_image_never_leaves_frames_without_camera_info(
    burst, info_first, info_expected
):
    """Issue 55: one hostile image stamped 0 inside a stream was taken as the start of a new
    timeline, which dropped every CameraInfo stamped after it: the valid frames after it went out
    without a CameraInfo ('none': no cloud), at once without a camera_info publisher, or once more
    than queue_size images came before the next CameraInfo (those lost their match too). Now the
    jump waits for the next message: the stream goes on, so the reset image is an outlier, released
    with the newest CameraInfo ('far'); no frame goes out without a CameraInfo, every frame whose
    CameraInfo came before the next image is matched with its own, and no jump is counted."""
    s = StampSync(slop=0.01, queue_size=5)
    pairs = []
    for kind, m in _stream_with_reset(10, burst, info_first, info_expected):
        if kind == 'image':
            expected = info_expected and s.latest_info is None  # as the node decides it
            pairs += s.add_image(m, info_expected=expected)
        else:
            pairs += s.add_info(m)
    assert len(pairs) == 31 and s.waiting == 0
    first = 1 if not info_first and not info_expected else 0  # before any CameraInfo: none
    assert all(p.how != NONE and p.info is not None for p in pairs[first:]), pairs
    (reset,) = [p for p in pairs if p.image.tag == 'reset']
    assert (reset.how, reset.reason, reset.info.tag) == (LATEST, FAR, 'i9')
    for p in pairs[first:]:
        k = p.image.tag[1:]
        if p.image.tag != 'reset' and not 10 <= int(k) < 10 + burst:
            assert (p.how, p.info.tag) == (MATCHED, f'i{k}'), p
        elif p.image.tag != 'reset':  # of the burst: released by the next image, with a
            assert p.how == LATEST and int(p.info.tag[1:]) < int(k), p  # CameraInfo before it
    assert s.jumps == 0 and s.outliers_back == 1 and s.counts[NONE] == first


@pytest.mark.parametrize('info_first', [True, False], ids=['info_first', 'image_first'])
def test_a_stamp_reset_that_the_stream_continues_is_a_new_timeline(info_first):
    """The counterpart: stamps that go back and stay back (a looped bag) are a new timeline, as
    issue 54 wants: confirmed by the next message, the image after the jump is matched with its
    own CameraInfo, never with one from before the jump, and the jump is counted once."""
    s = StampSync(slop=0.01, queue_size=5)
    frames = _pass_of_a_bag(10) + _pass_of_a_bag(10, t0=50.0)
    released_at, pairs = _stream(s, frames, info_first=info_first)
    second = [p for p in pairs if int(p.image.tag[1:]) >= 10]
    assert len(second) == 10 and all(
        p.how == MATCHED and p.info.tag[1:] == p.image.tag[1:] for p in second
    )
    assert released_at == {f'm{k}': k for k in range(20)}
    assert s.jumps == 1 and s.outliers_back == 0
