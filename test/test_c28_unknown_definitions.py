"""C28: a bag that stores a type's definition with encoding ``unknown`` and no text (what rosbag2
writes for a type whose package was not installed at record time). rosbags fails on the whole bag
while opening it (``KeyError: 'unknown'``); here that type is unknown, its topic skipped with one
warning and counted, every other topic read (bags.msgdef_compat, bags.sqlite_salvage)."""

from __future__ import annotations

import logging
import sqlite3
from collections import namedtuple

import pytest
from rosbags.interfaces import MessageDefinitionFormat

from bagutil import DETECTIONS_TYPE, ExtraTopic, make_frames, write_bag
from depth3dseg_ros.bags.extract import ExtractConfig, extract
from depth3dseg_ros.bags.msgdef_compat import tolerant_get_msgdef
from depth3dseg_ros.bags.sqlite_salvage import unreadable_definitions
from depth3dseg_ros.dataset_format import read_index


def _unknown_definition_bag(tmp_path, real_dir, storage):
    bag = write_bag(
        tmp_path / storage, make_frames(real_dir, 4), storage=storage, extra=[ExtraTopic()]
    )
    if storage == 'sqlite3':
        db = next(bag.glob('*.db3'))
        con = sqlite3.connect(db)
        con.execute(
            "UPDATE message_definitions SET encoding='unknown', encoded_message_definition='' "
            'WHERE topic_type=?',
            (DETECTIONS_TYPE,),
        )
        con.commit()
        con.close()
        assert unreadable_definitions(db) == [(DETECTIONS_TYPE, 'unknown')]
    else:  # each Schema record's encoding 'ros2msg' -> 'unknown' (same length: nothing moves)
        mcap = next(bag.glob('*.mcap'))
        raw, name, n = bytearray(mcap.read_bytes()), DETECTIONS_TYPE.encode(), 0
        at = raw.find(name)
        while at >= 0:  # the record in the data section and its copy in the summary
            enc = at + len(name) + 4  # name, then the encoding's uint32 length, then the encoding
            if raw[enc : enc + 7] == b'ros2msg':
                raw[enc : enc + 7], n = b'unknown', n + 1
            at = raw.find(name, at + 1)
        assert n >= 1
        mcap.write_bytes(bytes(raw))
    return bag


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_c28_definition_of_encoding_unknown_skips_that_topic_only(
    tmp_path, real_dir, caplog, storage
):
    bag = _unknown_definition_bag(tmp_path, real_dir, storage)
    with caplog.at_level(logging.WARNING):
        report = extract([bag], tmp_path / 'ds', ExtractConfig(workers=1))
    assert len(read_index(tmp_path / 'ds')) == 4
    (det,) = [t for t in report[bag.name]['topics'] if t['topic'] == '/det']
    assert (det['read'], det['skipped'], det['reasons']) == (0, 4, {'unknown type': 4})
    skipped = [r.getMessage() for r in caplog.records if 'skipping topic /det' in r.getMessage()]
    assert len(skipped) == 1 and DETECTIONS_TYPE in skipped[0]
    before = next(bag.glob('*.db3')).read_bytes() if storage == 'sqlite3' else None
    if before is not None:  # the bag itself is never written
        extract([bag], tmp_path / 'ds2', ExtractConfig(workers=1))
        assert next(bag.glob('*.db3')).read_bytes() == before


def test_tolerant_get_msgdef_reads_unknown_and_empty_encodings_as_no_definition():
    Schema = namedtuple('Schema', 'id name encoding data')
    for enc in ('unknown', '', 'jsonschema'):
        assert tolerant_get_msgdef(Schema(1, 'a/msg/B', enc, '')).format == (
            MessageDefinitionFormat.NONE
        )
    got = tolerant_get_msgdef(Schema(1, 'a/msg/B', 'ros2msg', 'int32 x'))
    assert got.format == MessageDefinitionFormat.MSG and got.data == 'int32 x'
    assert tolerant_get_msgdef(None).format == MessageDefinitionFormat.NONE
