"""brokerd.core.share.engine: share-partitions placed by the group's reset strategy,
their records for the journal, the group's settings applied to its partitions, and
deletions and reloads."""

from __future__ import annotations

import pytest

from brokerd.core.share.config import DEFAULTS
from brokerd.core.share.engine import ShareEngine
from brokerd.core.share.partition import AckBatch, AcquiredRange, LogSpan
from brokerd.core.share.states import AckType, RecordState
from brokerd.storage.stores.share_state import (
    GroupConfigs,
    GroupDeleted,
    PartitionDeleted,
    PartitionState,
    StoredPartition,
)


def test_the_lock_cap_is_the_groups_and_counts_acquired_records_only() -> None:
    engine = ShareEngine({**DEFAULTS, "share.partition.max.record.locks": "100"})
    engine.ensure("g", "t", 0, log_start=0, log_end=0)
    got, _ = engine.acquire("g", "t", 0, "m", [LogSpan(0, 499)], 500, 0)
    assert got == [AcquiredRange(0, 99, 1)]
    assert engine.acquire("g", "t", 0, "n", [LogSpan(100, 499)], 500, 0)[0] == []
    # Accepting frees the locks; a larger cap set on the group applies at once.
    engine.acknowledge("g", "t", 0, "m", [AckBatch(0, 49, (AckType.ACCEPT,))])
    got, _ = engine.acquire("g", "t", 0, "n", [LogSpan(100, 499)], 500, 0)
    assert got == [AcquiredRange(100, 149, 1)]
    engine.set_overrides("g", {"share.partition.max.record.locks": "300"})
    got, _ = engine.acquire("g", "t", 0, "n", [LogSpan(150, 499)], 500, 0)
    assert got == [AcquiredRange(150, 349, 1)]


def test_a_log_shorter_than_the_start_begins_again() -> None:
    engine = ShareEngine()
    engine.ensure("g", "t", 0, log_start=0, log_end=50)
    part, records = engine.ensure("g", "t", 0, log_start=0, log_end=3)
    assert part.start == 3 and part is engine.partition("g", "t", 0)
    assert len(records) == 1
    assert engine.ensure("g", "t", 0, log_start=0, log_end=3)[1] == []


def test_a_new_share_partition_starts_where_the_reset_strategy_says() -> None:
    engine = ShareEngine()
    assert engine.needs_reset("g", "t", 0, log_end=10)
    part, records = engine.ensure("g", "t", 0, log_start=2, log_end=10)
    assert part.start == 10  # latest
    assert records == [PartitionState("g", "t", 0, 10, 10)]
    assert not engine.needs_reset("g", "t", 0, log_end=10)
    engine.set_overrides("e", {"share.auto.offset.reset": "earliest"})
    assert engine.ensure("e", "t", 0, log_start=2, log_end=10)[0].start == 2
    engine.set_overrides("d", {"share.auto.offset.reset": "by_duration:PT1H"})
    assert engine.ensure("d", "t", 0, log_start=2, log_end=10, found=5)[0].start == 5
    assert engine.ensure("d", "t", 1, log_start=2, log_end=10, found=None)[0].start == 10
    assert engine.ensure("d", "t", 2, log_start=2, log_end=10, found=0)[0].start == 2


def test_a_start_below_the_log_start_moves_up() -> None:
    engine = ShareEngine()
    engine.set_overrides("g", {"share.auto.offset.reset": "earliest"})
    engine.ensure("g", "t", 0, log_start=0, log_end=10)
    part, records = engine.ensure("g", "t", 0, log_start=4, log_end=10)
    assert part.start == 4
    assert [(r.start, r.replace) for r in records if isinstance(r, PartitionState)] == [
        (4, False)]
    with pytest.raises(KeyError, match="not initialised"):
        engine.acquire("g", "t", 9, "m", [LogSpan(0, 1)], 10, 0)


def test_overrides_are_recorded_and_apply_to_existing_partitions() -> None:
    engine = ShareEngine()
    part, _ = engine.ensure("g", "t", 0, log_start=0, log_end=0)
    records = engine.set_overrides("g", {"share.delivery.count.limit": "2",
                                         "share.record.lock.duration.ms": "5000"})
    assert records == [GroupConfigs("g", (("share.delivery.count.limit", "2"),
                                          ("share.record.lock.duration.ms", "5000")))]
    assert (part.limit, part.lock_duration_ms) == (2, 5000)
    assert engine.config("g").delivery_count_limit == 2
    assert engine.configured() == ["g"]
    engine.set_overrides("g", {})
    assert engine.configured() == [] and engine.overrides("g") == {}
    assert part.limit == int(DEFAULTS["share.delivery.count.limit"])


def test_a_leaving_member_releases_and_locks_expire() -> None:
    engine = ShareEngine()
    engine.ensure("g", "t", 0, log_start=0, log_end=0)
    engine.acquire("g", "t", 0, "m", [LogSpan(0, 4)], 10, 0)
    assert engine.next_deadline() == 30_000
    records = engine.release_member("g", "m")
    assert len(records) == 1 and engine.next_deadline() is None
    engine.acquire("g", "t", 0, "n", [LogSpan(0, 4)], 10, 0)
    assert engine.expire_locks(29_999) == []
    assert len(engine.expire_locks(30_000)) == 1
    assert engine.describe("g")[("t", 0)].in_flight == 5


def test_deletions_and_their_records() -> None:
    engine = ShareEngine()
    for group in ("g", "h"):
        engine.ensure(group, "t", 0, log_start=0, log_end=0)
        engine.ensure(group, "u", 0, log_start=0, log_end=0)
    assert engine.forget_topic("t") == [PartitionDeleted("g", "t", 0),
                                        PartitionDeleted("h", "t", 0)]
    assert engine.delete_partition("g", "t", 0) == []
    assert engine.delete_group("h") == [GroupDeleted("h")]
    assert engine.delete_group("h") == []
    assert engine.groups() == ["g"] and not engine.has_group("h")
    assert engine.set_start("g", "u", 0, 7) == [PartitionState("g", "u", 0, 7, 7, replace=True)]


def test_reload_keeps_what_the_journal_holds_and_undoes_the_rest() -> None:
    engine = ShareEngine()
    _, first = engine.ensure("g", "t", 0, log_start=0, log_end=0)
    got, acquired = engine.acquire("g", "t", 0, "m", [LogSpan(0, 3)], 10, 0)
    assert got == [AcquiredRange(0, 3, 1)]
    stored = StoredPartition(0, 0)
    for record in first + acquired:
        assert isinstance(record, PartitionState)
        stored = StoredPartition(record.start, record.end, [
            (r.first, r.last, r.state, r.delivery_count) for r in record.runs] or stored.spans)
    engine.reload({("g", "t", 0): stored}, {})  # the journal holds the acquisition
    part = engine.partition("g", "t", 0)
    assert part is not None
    assert [(r.state, r.member) for r in part.ranges] == [(RecordState.ACQUIRED, "m")]
    # An acknowledgement that never reached the journal is undone; the acquisition
    # memory no longer holds comes back available, its delivery counted.
    engine.acknowledge("g", "t", 0, "m", [AckBatch(0, 3, (AckType.ACCEPT,))])
    engine.reload({("g", "t", 0): stored}, {})
    part = engine.partition("g", "t", 0)
    assert part is not None and part.start == 0
    assert [(r.state, r.member, r.delivery_count) for r in part.ranges] == [
        (RecordState.AVAILABLE, None, 1)]
