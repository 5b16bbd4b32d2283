"""Message definitions rosbags cannot read, in MCAP files (C28).

rosbag2 writes a schema with encoding ``unknown`` and no text for a type whose package was not
installed at record time; rosbags' MCAP reader (``storage_mcap.get_msgdef``) then fails with
``KeyError: 'unknown'`` while opening the bag, for every topic. :func:`tolerant_get_msgdef` reads
such a schema as "no definition" instead, so that type is unknown (its topic skipped with a
warning, unless the typestore knows it) and the other topics read as usual. :func:`install` puts
it in place of rosbags' function (bags.reader calls it on import; bags.mcap_salvage uses it
directly). The SQLite side is bags.sqlite_salvage.without_definitions.
"""

from __future__ import annotations

from typing import Any

from rosbags.interfaces import MessageDefinition, MessageDefinitionFormat
from rosbags.rosbag2 import storage_mcap

#: schema encodings with a definition rosbags can parse
_FORMATS = {
    'ros2msg': MessageDefinitionFormat.MSG,
    'ros2idl': MessageDefinitionFormat.IDL,
    'omgidl': MessageDefinitionFormat.IDL,
}


def tolerant_get_msgdef(schema: Any) -> MessageDefinition:
    """``storage_mcap.get_msgdef`` that gives "no definition" (format NONE) for a schema of an
    encoding it cannot parse (``unknown``, ``''``, anything else) instead of raising KeyError."""
    if schema is None or schema.encoding not in _FORMATS:
        return MessageDefinition(MessageDefinitionFormat.NONE, '')
    return MessageDefinition(_FORMATS[schema.encoding], schema.data)


def install() -> None:
    """Use :func:`tolerant_get_msgdef` in rosbags' MCAP reader (idempotent)."""
    storage_mcap.get_msgdef = tolerant_get_msgdef
