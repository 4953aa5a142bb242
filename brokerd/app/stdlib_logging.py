"""The storage layer's stdlib ``logging`` routed into Twisted's log: storage must not
import Twisted, yet its recovery and disk errors belong in the broker's log or journal.

Installed once by the wiring before the data directory opens; this module does nothing
on import.
"""

from __future__ import annotations

import logging

from twisted.logger import Logger, LogLevel

_LEVELS = {
    logging.DEBUG: LogLevel.debug,
    logging.INFO: LogLevel.info,
    logging.WARNING: LogLevel.warn,
    logging.ERROR: LogLevel.error,
    logging.CRITICAL: LogLevel.critical,
}


class TwistedLogHandler(logging.Handler):
    """Routes the storage layer's stdlib logging (it must not import Twisted) into
    Twisted's log, so recovery and disk errors land in the broker's log or journal."""

    def emit(self, record: logging.LogRecord) -> None:
        level = _LEVELS.get(record.levelno, LogLevel.info)
        Logger(namespace=record.name).emit(level, "{message}", message=record.getMessage())


def route_storage_logging() -> None:
    """Send the ``brokerd`` loggers (INFO and up) to Twisted's log, once."""
    logger = logging.getLogger("brokerd")
    if not any(isinstance(h, TwistedLogHandler) for h in logger.handlers):
        logger.addHandler(TwistedLogHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False
