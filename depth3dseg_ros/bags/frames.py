"""Per-bag frame assembly for ``depth3dseg-extract``: stamps, pairing plan, decoding, per-topic
counts.

One bag is read twice (bags.reader.BagReader). Pass 1 reads only the header stamps of the rgb,
depth and labels messages (from the serialized bytes, no image deserialization; on SQLite3 storage
only their first bytes are read, bags.sqlite_heads) and decodes the small CameraInfo messages to K
(once per distinct content). The pairing (bags.pairing) then decides which messages form which
frame. Pass 2 decodes only the messages of planned frames (on SQLite3 storage it reads only those,
at the locations pass 1 recorded) and hands each frame over as soon as its parts are all decoded,
so memory holds a handful of images, not the bag.

Every message of every topic ends in exactly one state: used, or skipped with a reason
(``read = used + skipped`` per selected topic; topics not selected or of unknown type are 0 read,
all skipped, C28).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from depth3dseg_ros.bags.decode import COMPRESSED, decode_depth, decode_labels, decode_rgb
from depth3dseg_ros.bags.pairing import match_nearest
from depth3dseg_ros.bags.reader import BagReader
from depth3dseg_ros.bags.sqlite_heads import message_heads, read_message
from depth3dseg_ros.ros.camera_info import intrinsics_from_camera_info
from depth3dseg_ros.ros.compressed import DEFAULT_MAX_PIXELS, ImageTooLargeError

ROLES = ('rgb', 'depth', 'labels', 'camera_info')
IMAGE = 'sensor_msgs/msg/Image'
CAMERA_INFO = 'sensor_msgs/msg/CameraInfo'
ALLOWED_TYPES = {
    'rgb': (IMAGE, COMPRESSED),
    'depth': (IMAGE, COMPRESSED),
    'labels': (IMAGE, COMPRESSED),
    'camera_info': (CAMERA_INFO,),
}

NO_PARTNER = 'no partner within tolerance'
UNDECODABLE = 'undecodable'
SIZE_MISMATCH = 'size mismatch'
UNKNOWN_TYPE = 'unknown type'
NOT_SELECTED = 'topic not selected'
NOT_EXTRACTED = 'frame not extracted'
SUBSAMPLED = 'subsampled (--every)'
MAX_FRAMES = 'max-frames reached'
ALREADY = 'already in dataset'
NO_INFO = 'no camera_info within tolerance'
#: an image whose header declares more than max_image_pixels (refused before decoding, issue 55)
OVER_LIMIT = 'over max_image_pixels (refused before decoding)'


@dataclass
class TopicStats:
    """Counts of one topic: messages read, used, and skipped per reason."""

    topic: str
    msgtype: str
    role: Optional[str]
    count: int = 0
    read: int = 0
    used: int = 0
    skipped: Counter = field(default_factory=Counter)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-able dict: topic, type, role, read, used, skipped (total), reasons {reason: n}."""
        return {
            'topic': self.topic,
            'type': self.msgtype,
            'role': self.role,
            'read': self.read,
            'used': self.used,
            'skipped': sum(self.skipped.values()),
            'reasons': dict(sorted(self.skipped.items())),
        }


@dataclass
class FrameData:
    """A decoded frame: rgb H×W×3 uint8, K 3×3, depth_mm H×W uint16 | None, labels H×W uint8|uint16
    | None."""

    index: int
    stamp_ns: int
    rgb: np.ndarray
    K: np.ndarray
    depth_mm: Optional[np.ndarray] = None
    labels: Optional[np.ndarray] = None


def _no_tick() -> None:
    """No progress bar."""


class BagFrames:
    """Plan and produce the frames of one open bag.

    Args:
        reader: an open BagReader.
        topics: role -> topic (None or '' disables the role).
        tolerance_ns: pairing tolerance on header stamps.
        depth_scale: metres per unit of integer depth images (None = millimetres).
        use_rectified: take K from P (rectified images), see ros.camera_info.
        max_pixels: images declaring more pixels are refused before decoding (ros.compressed),
            counted as :data:`OVER_LIMIT`; the first refusal of each topic is kept in
            ``refused`` (topic -> the error text naming the size and the limit).
    """

    def __init__(
        self,
        reader: BagReader,
        topics: Dict[str, Optional[str]],
        tolerance_ns: int,
        depth_scale: Optional[float] = None,
        use_rectified: bool = False,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        self.reader = reader
        self.max_pixels = int(max_pixels)
        self.refused: Dict[str, str] = {}
        self.tolerance_ns = int(tolerance_ns)
        self.depth_scale = depth_scale
        self.use_rectified = use_rectified
        bag_topics = reader.topics()
        self.stats: Dict[str, TopicStats] = {}
        self.role_topic: Dict[str, str] = {}
        wanted = {t: r for r, t in topics.items() if t}
        reader.unknown_topics()  # one warning per unknown topic/type (C28)
        for name, entry in bag_topics.items():
            role = wanted.get(name)
            st = TopicStats(name, entry.msgtype, role, entry.count)
            self.stats[name] = st
            if not entry.known:
                st.skipped[UNKNOWN_TYPE] += entry.count
            elif role is None:
                st.skipped[NOT_SELECTED] += entry.count
            elif entry.msgtype not in ALLOWED_TYPES[role]:
                st.skipped[f'unsupported type for {role}'] += entry.count
            else:
                self.role_topic[role] = name
        self.stamps: Dict[str, List[Optional[int]]] = {r: [] for r in self.role_topic}
        self.bag_times: Dict[str, List[int]] = {r: [] for r in self.role_topic}
        #: SQLite3 storage: (topic, type, bag time, location) of pass 1's image messages (pass 2
        #: reads only the needed ones, bags.sqlite_heads); None: pass 2 reads through rosbags
        self.located: Optional[List[Tuple[str, str, int, Any]]] = None
        self.infos: List[Any] = []
        self.status: Dict[str, List[Optional[str]]] = {}
        #: called once per message read (both passes): the progress bar's update (bags.progress)
        self.tick: Callable[[], Any] = _no_tick

    # -- pass 1 -------------------------------------------------------------------------------
    def scan(self) -> None:
        """Pass 1: header stamps of every selected message; CameraInfo decoded to Intrinsics."""
        roles = {t: r for r, t in self.role_topic.items()}
        # A driver publishes the same CameraInfo again and again: only its stamp changes. Decoded
        # once per distinct content (the bytes without the stamp), ~0.2 ms saved per message.
        info_cache: Dict[bytes, Any] = {}
        info_topic = self.role_topic.get('camera_info')
        heads = message_heads(self.reader, roles, [info_topic] if info_topic else [])
        located: Optional[List[Tuple[str, str, int, Any]]] = None if heads is None else []
        for topic, msgtype, t_ns, raw, *where in heads or self.reader.messages(roles):
            role = roles[topic]
            self.tick()
            if located is not None and role != 'camera_info':
                if where:
                    located.append((topic, msgtype, t_ns, where[0]))
                else:
                    located = None
            self.stats[topic].read += 1
            self.bag_times[role].append(t_ns)
            try:
                if role == 'camera_info':
                    key = (
                        bytes(raw[12:])
                        if self.reader.is_ros1
                        else bytes(raw[:4]) + bytes(raw[12:])
                    )
                    info = info_cache.get(key)
                    if info is None:
                        msg = self.reader.deserialize(raw, msgtype)
                        info = intrinsics_from_camera_info(msg, self.use_rectified)
                        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                        info_cache[key] = info
                    else:  # same bytes as a decoded one but the stamp (header first: C28 types)
                        stamp = self.reader.stamp_ns(raw, msgtype)
                    self.infos.append(info)
                else:
                    stamp = self.reader.stamp_ns(raw, msgtype)
            except ValueError:
                stamp = None
                if role == 'camera_info':
                    self.infos.append(None)
            self.stamps[role].append(stamp)
        self.located = located
        self.status = {
            r: [UNDECODABLE if s is None else NO_PARTNER for s in v]
            for r, v in self.stamps.items()
        }

    # -- plan ---------------------------------------------------------------------------------
    def plan(
        self,
        frame_id: Callable[[int], str],
        every: int,
        budget: Optional[int],
        exists: Callable[[str], bool],
    ) -> Tuple[Dict[int, Dict[str, Optional[int]]], int]:
        """Pair and choose frames. Returns ({rgb index: {role: message index | None}}, frames
        counted).

        ``budget``: frames still allowed by --max-frames (None = no limit); frames already in the
        dataset count against it (so a re-run selects the same frames) but are not returned.
        """
        rgb = self.stamps.get('rgb', [])
        anchors = [s if s is not None else -(10**30) for s in rgb]

        def pair(role: str, unique: bool) -> List[Optional[int]]:
            if role not in self.stamps:
                return [None] * len(rgb)
            cands = [s if s is not None else 10**30 for s in self.stamps[role]]
            return match_nearest(anchors, cands, self.tolerance_ns, unique=unique)

        pairs = {r: pair(r, r != 'camera_info') for r in ('depth', 'labels', 'camera_info')}
        for role in ('depth', 'labels'):  # paired to any rgb: pending final decision
            for j in pairs[role]:
                if j is not None:
                    self.status[role][j] = NOT_EXTRACTED
        status_rgb = self.status.get('rgb', [])
        planned: Dict[int, Dict[str, Optional[int]]] = {}
        counted = 0
        for i, stamp in enumerate(rgb):
            if stamp is None:
                continue
            if i % every:
                status_rgb[i] = SUBSAMPLED
                continue
            info_j = pairs['camera_info'][i]
            if info_j is None or self.infos[info_j] is None:
                status_rgb[i] = NO_INFO
                continue
            if budget is not None and counted >= budget:
                status_rgb[i] = MAX_FRAMES
                continue
            counted += 1
            if exists(frame_id(i)):
                status_rgb[i] = ALREADY
                for role in ('depth', 'labels', 'camera_info'):
                    j = pairs[role][i]
                    if j is not None and self.status[role][j] is not None:
                        self.status[role][j] = ALREADY
                continue
            planned[i] = {r: pairs[r][i] for r in ('depth', 'labels', 'camera_info')}
        return planned, counted

    # -- pass 2 -------------------------------------------------------------------------------
    def frames(self, planned: Dict[int, Dict[str, Optional[int]]]) -> Iterator[FrameData]:
        """Pass 2: decode the planned messages and yield each frame once its parts are decoded."""
        need: Dict[Tuple[str, int], int] = {}
        for i, parts in planned.items():
            need[('rgb', i)] = i
            for role in ('depth', 'labels'):
                if parts[role] is not None:
                    need[(role, parts[role])] = i
        missing = {
            i: 1 + sum(parts[r] is not None for r in ('depth', 'labels'))
            for i, parts in planned.items()
        }
        got: Dict[int, Dict[str, Any]] = {i: {} for i in planned}
        roles = {t: r for r, t in self.role_topic.items() if r != 'camera_info'}
        seq = Counter()
        source = (
            self.reader.messages(roles)
            if self.located is None
            else self._located_messages(roles, need)
        )
        for topic, msgtype, t_ns, raw in source:
            role = roles[topic]
            self.tick()
            j = seq[role]
            seq[role] += 1
            i = need.get((role, j))
            self._check_same_message(role, j, t_ns, raw if i is not None else None, msgtype)
            if i is None:
                continue
            got[i][role] = self._decode(role, j, raw, msgtype)
            missing[i] -= 1
            if missing[i] == 0:
                frame = self._assemble(i, planned[i], got.pop(i))
                if frame is not None:
                    yield frame

    def _located_messages(
        self, roles: Dict[str, str], need: Dict[Tuple[str, int], int]
    ) -> Iterator[Tuple[str, str, int, Any]]:
        """Pass 2 on SQLite3 storage: pass 1's messages in pass 1's (rosbags') order; only the
        needed ones are read, whole (bags.sqlite_heads.read_message), the others come as None."""
        seq: Counter = Counter()
        for topic, msgtype, t_ns, loc in self.located or ():
            role = roles[topic]
            j = seq[role]
            seq[role] += 1
            yield topic, msgtype, t_ns, (read_message(loc) if (role, j) in need else None)

    def _check_same_message(
        self, role: str, j: int, t_ns: int, raw: Optional[bytes], msgtype: str
    ) -> None:
        """Pass 2 pairs messages with pass 1 by their index in the topic: the j-th message must
        have the bag time (and, when ``raw`` is given, the header stamp) pass 1 saw.

        Raises:
            RuntimeError: the two passes saw different messages (bags.sqlite_heads reads pass 1
                in rosbags' order; this would be a bug, never a bad bag).
        """
        times = self.bag_times[role]
        same = j < len(times) and times[j] == t_ns
        if same and raw is not None and self.stamps[role][j] is not None:
            try:
                same = self.reader.stamp_ns(raw, msgtype) == self.stamps[role][j]
            except ValueError:
                same = False
        if not same:
            raise RuntimeError(
                f'bag {str(self.reader.path)!r}: {role} message {j} differs between the two '
                f'passes (bag time {t_ns}, pass 1: {times[j] if j < len(times) else None})'
            )

    def _decode(self, role: str, j: int, raw: bytes, msgtype: str) -> Optional[np.ndarray]:
        try:
            msg = self.reader.deserialize(raw, msgtype)
            if role == 'rgb':
                return decode_rgb(msg, msgtype, self.max_pixels)
            if role == 'depth':
                return decode_depth(msg, msgtype, self.depth_scale, self.max_pixels)
            return decode_labels(msg, msgtype, self.max_pixels)
        except ImageTooLargeError as err:
            self.status[role][j] = OVER_LIMIT
            self.refused.setdefault(self.role_topic[role], f'{role} message {j}: {err}')
            return None
        except ValueError:
            self.status[role][j] = UNDECODABLE
            return None

    def _assemble(
        self, i: int, parts: Dict[str, Optional[int]], got: Dict[str, Any]
    ) -> Optional[FrameData]:
        rgb = got.get('rgb')
        if rgb is None:
            return None  # rgb undecodable: partners stay 'frame not extracted'
        h, w = rgb.shape[:2]
        info = self.infos[parts['camera_info']]
        if (info.width, info.height) != (w, h):
            self.status['rgb'][i] = SIZE_MISMATCH
            return None
        frame = FrameData(i, int(self.stamps['rgb'][i]), rgb, info.K)
        self.status['rgb'][i] = None
        self.status['camera_info'][parts['camera_info']] = None  # may serve several frames
        for role in ('depth', 'labels'):
            j, arr = parts[role], got.get(role)
            if j is None or arr is None:
                continue
            if arr.shape[:2] != (h, w):
                self.status[role][j] = SIZE_MISMATCH
                continue
            self.status[role][j] = None
            setattr(frame, 'depth_mm' if role == 'depth' else 'labels', arr)
        return frame

    def finish(self) -> Dict[str, TopicStats]:
        """Fold the final message states into the per-topic counts and return them."""
        for role, states in self.status.items():
            st = self.stats[self.role_topic[role]]
            for s in states:
                if s is None:
                    st.used += 1
                else:
                    st.skipped[s] += 1
        return self.stats
