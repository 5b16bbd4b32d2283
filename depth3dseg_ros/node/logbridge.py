"""Python ``logging`` records of the package (the core's, e.g. ``no K given: the 3D branch cannot
run``, and Python warnings) routed to the node's ROS logger, so every line a node prints goes
through its logger: the node's name, ``--log-level`` and ``/rosout`` apply (issue 54). Without a
handler, Python's last-resort handler printed them raw on stderr.
"""

from __future__ import annotations

import logging
from typing import Any

#: the package's loggers (every module's ``logging.getLogger(__name__)``)
PACKAGE = 'depth3dseg_ros'
#: where ``logging.captureWarnings`` sends Python warnings
WARNINGS = 'py.warnings'


class RosLogHandler(logging.Handler):
    """A ``logging.Handler`` that writes each record's message to an rclpy logger at the
    matching severity (DEBUG, INFO, WARNING -> WARN, ERROR, CRITICAL -> FATAL); the message only:
    the ROS logger adds severity, time and node name. Never raises (``handleError``)."""

    def __init__(self, ros_logger: Any) -> None:
        super().__init__(logging.DEBUG)
        self.ros_logger = ros_logger

    def emit(self, record: logging.LogRecord) -> None:
        """Forward one record (its formatted message, exception text included)."""
        try:
            text = self.format(record)
            if record.name == WARNINGS:  # 'file:line: Category: text\n  source line'
                text = ' '.join(text.split())
            level = record.levelno
            if level >= logging.CRITICAL:
                self.ros_logger.fatal(text)
            elif level >= logging.ERROR:
                self.ros_logger.error(text)
            elif level >= logging.WARNING:
                self.ros_logger.warning(text)
            elif level >= logging.INFO:
                self.ros_logger.info(text)
            else:
                self.ros_logger.debug(text)
        except Exception:  # noqa: BLE001 - logging must never end the node
            self.handleError(record)


def route_python_logging(ros_logger: Any, warnings: bool = False) -> RosLogHandler:
    """Send the records of the package's loggers (and with ``warnings``, Python warnings,
    captured as records: for a node process, ``node/main.py``) to ``ros_logger`` (an rclpy
    logger), replacing an earlier node's handler. A logger with a handler no longer falls back to
    Python's last-resort stderr output; records still propagate (to a test's log capture). The
    loggers keep their level (WARNING unless set). Returns the handler.
    """
    handler = RosLogHandler(ros_logger)
    names = (PACKAGE, WARNINGS) if warnings else (PACKAGE,)
    if warnings:
        logging.captureWarnings(True)
    for name in names:
        log = logging.getLogger(name)
        for old in [h for h in log.handlers if isinstance(h, RosLogHandler)]:
            log.removeHandler(old)
        log.addHandler(handler)
    return handler
