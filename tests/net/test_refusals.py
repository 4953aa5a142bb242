"""Refusals logged at a bounded rate (:class:`~brokerd.net.refusals.RefusalLog`)."""

from __future__ import annotations

from typing import Any

from twisted.logger import globalLogPublisher

from brokerd.net.refusals import LOG_EVERY, RefusalLog


def _logged(log: RefusalLog, times: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    try:
        for _ in range(times):
            log.refused("refused {peer}", peer="1.2.3.4")
    finally:
        globalLogPublisher.removeObserver(events.append)
    return [e for e in events if e.get("log_namespace", "").endswith("RefusalLog")]


def test_the_first_and_every_nth_refusal_are_logged_with_the_count() -> None:
    log = RefusalLog()
    events = _logged(log, 2 * LOG_EVERY + 1)
    assert log.count == 2 * LOG_EVERY + 1
    assert [e["refused"] for e in events] == [1, LOG_EVERY + 1, 2 * LOG_EVERY + 1]
    assert all(e["peer"] == "1.2.3.4" for e in events)
    assert events[0]["log_format"] == "refused {peer} ({refused} refused so far)"


def test_two_logs_count_apart() -> None:
    first, second = RefusalLog(), RefusalLog()
    _logged(first, 3)
    assert [e["refused"] for e in _logged(second, 1)] == [1]
    assert (first.count, second.count) == (3, 1)
