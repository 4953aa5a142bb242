"""SharePartition: acquisition, acknowledgement, locks, delivery counts, the SPSO."""

from __future__ import annotations

import pytest

from brokerd.core.share.config import (
    ShareConfig,
)
from brokerd.core.share.partition import (
    AckBatch,
    AcquiredRange,
    InFlightRange,
    InvalidAcknowledgement,
    LogSpan,
    SharePartition,
)
from brokerd.core.share.states import AckType, RecordState


def part(start: int = 0, limit: int = 5) -> SharePartition:
    return SharePartition(start, delivery_count_limit=limit, lock_duration_ms=30000,
                          max_record_locks=ShareConfig().max_record_locks)


def at(p: SharePartition, offset: int) -> InFlightRange:
    found = p.entry(offset)
    assert found is not None
    return found


def test_acquire_in_order_and_max_records() -> None:
    p = part()
    got, changed = p.acquire("m1", [LogSpan(0, 9)], 4, 0)
    assert got == [AcquiredRange(0, 3, 1)]
    assert changed == [(0, 3)]
    got2, _ = p.acquire("m2", [LogSpan(0, 9)], 100, 0)
    assert got2 == [AcquiredRange(4, 9, 1)]
    assert p.end == 10 and p.start == 0


def test_accept_advances_the_start() -> None:
    p = part()
    p.acquire("m", [LogSpan(0, 4)], 10, 0)
    p.acknowledge("m", [AckBatch(1, 4, (AckType.ACCEPT,))])
    assert p.start == 0
    p.acknowledge("m", [AckBatch(0, 0, (AckType.ACCEPT,))])
    assert p.start == 5 and not p.ranges


def test_release_comes_back_with_a_higher_count() -> None:
    p = part()
    p.acquire("m", [LogSpan(0, 1)], 10, 0)
    p.acknowledge("m", [AckBatch(0, 1, (AckType.RELEASE, AckType.ACCEPT))])
    assert p.fetch_offset() == 0
    got, _ = p.acquire("other", [LogSpan(0, 1)], 10, 0)
    assert got == [AcquiredRange(0, 0, 2)]


def test_reject_is_never_redelivered() -> None:
    p = part()
    p.acquire("m", [LogSpan(0, 0)], 10, 0)
    p.acknowledge("m", [AckBatch(0, 0, (AckType.REJECT,))])
    assert p.start == 1
    assert p.summary().archived == 1


def test_delivery_count_limit_archives() -> None:
    p = part(limit=2)
    for expected in (1, 2):
        got, _ = p.acquire("m", [LogSpan(0, 0)], 10, 0)
        assert got == [AcquiredRange(0, 0, expected)]
        p.acknowledge("m", [AckBatch(0, 0, (AckType.RELEASE,))])
    assert p.start == 1 and p.summary().archived == 1


def test_lock_timeout_releases_then_archives_at_the_limit() -> None:
    p = part(limit=2)
    p.acquire("m", [LogSpan(0, 0)], 10, 1000)
    assert p.expire_locks(30999) == []
    assert p.expire_locks(31000) == [(0, 0)]
    assert at(p, 0).state is RecordState.AVAILABLE
    p.acquire("m", [LogSpan(0, 0)], 10, 40000)
    p.expire_locks(70000)
    assert p.start == 1


def test_acknowledge_refuses_another_members_records_all_or_nothing() -> None:
    p = part()
    p.acquire("a", [LogSpan(0, 0)], 1, 0)
    p.acquire("b", [LogSpan(0, 1)], 1, 0)
    with pytest.raises(InvalidAcknowledgement):
        p.acknowledge("a", [AckBatch(0, 1, (AckType.ACCEPT,))])
    assert at(p, 0).state is RecordState.ACQUIRED
    with pytest.raises(InvalidAcknowledgement):
        p.acknowledge("a", [AckBatch(5, 6, (AckType.ACCEPT,))])
    with pytest.raises(InvalidAcknowledgement):
        p.acknowledge("a", [AckBatch(0, 1, (AckType.ACCEPT,) * 3)])


def test_skipped_offsets_are_archived_and_gaps_jumped() -> None:
    p = part(start=0)
    got, _ = p.acquire("m", [LogSpan(5, 6, skip=True), LogSpan(7, 8)], 10, 0)
    assert got == [AcquiredRange(7, 8, 1)]
    assert p.start == 7
    p.acknowledge("m", [AckBatch(7, 8, (AckType.ACCEPT,))])
    assert p.start == 9 == p.end


def test_member_gone_releases() -> None:
    p = part()
    p.acquire("m", [LogSpan(0, 2)], 10, 0)
    assert p.release_member("m") == [(0, 2)]
    assert p.summary().available == 3


def test_in_flight_cap() -> None:
    p = part()
    many = ShareConfig().max_record_locks + 10
    got, _ = p.acquire("m", [LogSpan(0, many)], many, 0)
    assert got == [AcquiredRange(0, ShareConfig().max_record_locks - 1, 1)]


def test_restore_makes_acquired_available_with_counts() -> None:
    p = part(limit=3)
    p.acquire("m", [LogSpan(0, 2)], 10, 0)
    p.acknowledge("m", [AckBatch(1, 1, (AckType.ACCEPT,))])
    runs = p.runs()
    q = part(limit=3)
    q.restore(p.start, p.end, runs)
    assert at(q, 0).state is RecordState.AVAILABLE and at(q, 0).delivery_count == 1
    assert at(q, 1).state is RecordState.ACKNOWLEDGED
    got, _ = q.acquire("n", [LogSpan(0, 2)], 10, 0)
    assert got == [AcquiredRange(0, 0, 2), AcquiredRange(2, 2, 2)]


def test_the_acquired_count_follows_every_change() -> None:
    p = part(limit=2)

    def counted() -> int:
        return sum(r.size for r in p.ranges if r.state is RecordState.ACQUIRED)

    steps = [
        lambda: p.acquire("m", [LogSpan(0, 9)], 6, 0.0),
        lambda: p.acquire("n", [LogSpan(0, 9)], 10, 0.0),
        lambda: p.acknowledge("m", [AckBatch(0, 1, (AckType.ACCEPT,))]),
        lambda: p.acknowledge("m", [AckBatch(2, 3, (AckType.RELEASE,))]),
        lambda: p.acknowledge("n", [AckBatch(6, 6, (AckType.RENEW,))], 5.0),
        lambda: p.acquire("o", [LogSpan(0, 9)], 1, 10.0),
        lambda: p.release_member("n"),
        lambda: p.expire_locks(10**9),
        lambda: p.acquire("m", [LogSpan(0, 12)], 20, 0.0),
        lambda: p.move_start(8),
    ]
    for step in steps:
        step()
        assert p.acquired_count() == counted()
    assert p.acquired_count() > 0
