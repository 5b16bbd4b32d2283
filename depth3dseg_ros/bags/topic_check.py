"""Requested topics the bags do not have: refuse up front instead of writing a poorer dataset
(issue 15).

``depth3dseg-extract --preset realsense`` on a bag whose depth lives on another topic used to write
an RGB-only dataset with one warning. Now every bag's topics are checked before anything is
written: a role that was asked for (a topic configured for ``depth``, ``labels`` or
``camera_info``) but has no topic of a usable type in the bag is an error (:class:`MissingTopics`,
exit 2 in the CLI) that names, per bag, the topics of the right type the bag does have — unless the
role is listed in ``allow_missing`` (``--allow-missing depth,labels``: an RGB-only or unlabelled
dataset on purpose). ``camera_info`` can not be allowed missing: without K no frame can be written.

Topics come from metadata.yaml for a rosbag2 directory that has one (no storage file is opened, so
a file-mode compressed bag is not decompressed twice), else from the opened bag
(bags.reader.BagReader).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

import yaml

from depth3dseg_ros.bags.frames import ALLOWED_TYPES
from depth3dseg_ros.bags.reader import BagFormat, BagReader

#: Roles that may be allowed missing (``--allow-missing``); rgb and camera_info are always
#: required.
ALLOWABLE = ('depth', 'labels')


class MissingTopics(ValueError):
    """A requested role has no usable topic in a bag (one line naming bag, role, topic and the
    topics of the right type the bag has; the CLI exits 2)."""


def split_roles(value: Iterable[str] | str) -> List[str]:
    """The role names of ``'depth, labels'`` or ``['depth']``, stripped, empty ones dropped, in
    the order given (repeats kept)."""
    items = value.split(',') if isinstance(value, str) else list(value)
    return [r for r in (str(i).strip() for i in items) if r]


def parse_allow_missing(value: Optional[Iterable[str] | str]) -> List[str]:
    """``'depth,labels'`` or ``['depth']`` -> sorted role list.

    Raises:
        ValueError: a role other than depth/labels (named, with the allowed ones).
    """
    if value is None:
        return []
    roles = sorted(set(split_roles(value)))
    bad = [r for r in roles if r not in ALLOWABLE]
    if bad:
        raise ValueError(
            f'allow_missing={bad} is not a subset of {list(ALLOWABLE)} (rgb and camera_info are '
            'always required)'
        )
    return roles


def bag_topic_types(path: Path, fmt: BagFormat, typestore: str) -> Dict[str, str]:
    """{topic: message type} of one bag (metadata.yaml when the directory has a usable one)."""
    meta = path / 'metadata.yaml'
    if fmt.kind == 'rosbag2' and not fmt.recovery and meta.is_file():
        info = (yaml.safe_load(meta.read_text(encoding='utf-8')) or {}).get(
            'rosbag2_bagfile_information', {}
        )
        topics = {
            t['topic_metadata']['name']: t['topic_metadata']['type']
            for t in info.get('topics_with_message_count') or []
        }
        if topics:
            return topics
    with BagReader(path, typestore, warn=False) as reader:
        return {t: e.msgtype for t, e in reader.topics().items()}


def missing_roles(topics: Mapping[str, Optional[str]], bag_topics: Mapping[str, str]) -> List[str]:
    """Roles with a configured topic that the bag lacks or has with an unusable type."""
    return [
        role
        for role, topic in topics.items()
        if topic and bag_topics.get(topic) not in ALLOWED_TYPES[role]
    ]


def candidates(
    role: str, topics: Mapping[str, Optional[str]], bag_topics: Mapping[str, str]
) -> List[str]:
    """Topics of the bag whose type fits ``role`` and that no other role uses, as ``'name
    (type)'``."""
    taken = {t for r, t in topics.items() if t and r != role}
    return [
        f'{name} ({typ})'
        for name, typ in sorted(bag_topics.items())
        if typ in ALLOWED_TYPES[role] and name not in taken
    ]


def check_topics(
    paths: Sequence[Path],
    formats: Sequence[BagFormat],
    topics: Mapping[str, Optional[str]],
    allow_missing: Sequence[str],
    typestore: str,
) -> None:
    """Refuse, before anything is written, bags that lack a requested role (see the module
    docstring).

    Raises:
        MissingTopics: one line, e.g. ``bag 'x': no depth topic
            '/camera/aligned_depth_to_color/image_raw' (sensor_msgs/msg/Image or
            sensor_msgs/msg/CompressedImage topics in this bag:
            ['/camera/depth/image_raw (sensor_msgs/msg/Image)']); pass --depth-topic TOPIC, or
            --allow-missing depth to write its frames without depth``.
            Also when a bag has no image topic ``topics['rgb']`` (the message lists its image
            topics and says ``pass --rgb-topic TOPIC``).
    """
    problems = []
    wanted = {r: t for r, t in topics.items() if r != 'rgb'}
    for path, fmt in zip(paths, formats):
        have = bag_topic_types(path, fmt, typestore)
        if have.get(topics.get('rgb') or '') not in ALLOWED_TYPES['rgb']:
            images = sorted(t for t, typ in have.items() if 'Image' in typ)
            raise MissingTopics(
                f'bag {str(path)!r}: rgb_topic={topics.get("rgb")!r} is not an image topic of '
                f'this bag; image topics: {images}; pass --rgb-topic TOPIC'
            )
        for role in missing_roles(wanted, have):
            if role in allow_missing:
                continue
            types = ' or '.join(ALLOWED_TYPES[role])
            flag = f'--{role.replace("_", "-")}-topic'
            fix = f'pass {flag} TOPIC' + (
                f', or --allow-missing {role} to write its frames without {role}'
                if role in ALLOWABLE
                else ' (frames need K)'
            )
            found = f'found as {have[topics[role]]}, ' if topics[role] in have else ''
            problems.append(
                f'bag {str(path)!r}: no {role} topic {topics[role]!r} ({found}{types} topics in '
                f'this bag: {candidates(role, topics, have)}); {fix}'
            )
    if problems:
        raise MissingTopics('; '.join(problems))
