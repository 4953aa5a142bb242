"""The reopen schedule of offline partitions and journal stores: first after
OFFLINE_RETRY_FIRST_SECONDS, doubling on each failure up to OFFLINE_RETRY_MAX_SECONDS."""

from __future__ import annotations

from brokerd.storage.offline_backoff import (
    OFFLINE_RETRY_FIRST_SECONDS,
    OFFLINE_RETRY_MAX_SECONDS,
    RetrySchedule,
)


def test_the_first_attempt_is_due_after_the_first_delay() -> None:
    schedule = RetrySchedule.first(100.0)
    first = OFFLINE_RETRY_FIRST_SECONDS
    assert schedule == RetrySchedule(100.0 + first, first)
    assert not schedule.due(100.0 + OFFLINE_RETRY_FIRST_SECONDS - 0.001)
    assert schedule.due(100.0 + OFFLINE_RETRY_FIRST_SECONDS)


def test_each_failure_doubles_the_delay_from_the_failed_attempt_up_to_the_cap() -> None:
    schedule = RetrySchedule.first(0.0)
    delays = []
    now = schedule.at
    for _ in range(12):
        schedule = schedule.after_failure(now)
        assert schedule.at == now + schedule.delay
        delays.append(schedule.delay)
        now = schedule.at
    assert delays[:3] == [OFFLINE_RETRY_FIRST_SECONDS * 2, OFFLINE_RETRY_FIRST_SECONDS * 4,
                          OFFLINE_RETRY_FIRST_SECONDS * 8]
    assert max(delays) == OFFLINE_RETRY_MAX_SECONDS
    assert delays[-1] == OFFLINE_RETRY_MAX_SECONDS
    assert delays == sorted(delays)
