"""brokerd.app.stdlib_logging: the storage layer's stdlib logging into Twisted's log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.logger import LogLevel, globalLogPublisher

from brokerd.app.stdlib_logging import TwistedLogHandler, route_storage_logging


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(seen.append)
    logger = logging.getLogger("brokerd")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        yield seen
    finally:
        globalLogPublisher.removeObserver(seen.append)
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def test_route_installs_one_handler_and_sends_info_up(events: list[dict[str, Any]]) -> None:
    route_storage_logging()
    route_storage_logging()
    logger = logging.getLogger("brokerd")
    assert sum(isinstance(h, TwistedLogHandler) for h in logger.handlers) == 1
    assert logger.propagate is False
    logging.getLogger("brokerd.storage.x").debug("hidden")
    logging.getLogger("brokerd.storage.x").warning("disk %s failed", "d1")
    mine = [e for e in events if e.get("log_namespace") == "brokerd.storage.x"]
    assert [(e["log_level"], e["message"]) for e in mine] == [(LogLevel.warn, "disk d1 failed")]


def test_handler_maps_levels_and_unknown_to_info(events: list[dict[str, Any]]) -> None:
    handler = TwistedLogHandler()
    for level in (logging.ERROR, logging.CRITICAL, 25):
        handler.emit(logging.LogRecord("ns.t", level, __file__, 1, "m", None, None))
    mine = [e["log_level"] for e in events if e.get("log_namespace") == "ns.t"]
    assert mine == [LogLevel.error, LogLevel.critical, LogLevel.info]
