"""A twistd ``--logger`` for journald: one line per event, syslog priority prefix, no
timestamp (journald adds its own).

Use: ``twistd --logger=brokerd.journal.observer ...``.
"""

from __future__ import annotations

import sys
from typing import Any

from twisted.logger import FileLogObserver, LogLevel, formatEvent

_PRIORITY = {
    LogLevel.debug: 7,
    LogLevel.info: 6,
    LogLevel.warn: 4,
    LogLevel.error: 3,
    LogLevel.critical: 2,
}


def _line(event: dict[str, Any]) -> str:
    text = formatEvent(event)
    if "log_failure" in event:
        text += "\n" + event["log_failure"].getTraceback()
    priority = _PRIORITY.get(event.get("log_level"), 6)
    namespace = event.get("log_namespace", "-")
    return "".join(f"<{priority}>{namespace}: {line}\n" for line in text.splitlines() or [""])


def observer() -> FileLogObserver:
    """The zero-argument factory ``--logger`` wants."""
    return FileLogObserver(sys.stdout, _line)
