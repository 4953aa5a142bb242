"""The answers the transaction coordinator gives from memory (:mod:`brokerd.kafka.txn.views`),
over a table of hand-made values (its log in tmp_path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet import defer

from brokerd.errors import InvalidProducerEpoch, InvalidTxnState
from brokerd.kafka.errors import ErrorCode as C
from brokerd.kafka.txn import views
from brokerd.kafka.txn.state import TxnMetadata
from brokerd.kafka.txn.table import TxnTable
from brokerd.kafka.txn.types import TxnDescription, TxnListing, TxnOffset
from brokerd.storage.stores.txn_log import TxnLog

P0, P1 = ("t", 0), ("t", 1)


@pytest.fixture
def table(tmp_path: Path) -> Iterator[TxnTable]:
    log = TxnLog.open(str(tmp_path))
    table = TxnTable(log=log, run_blocking=defer.maybeDeferred)
    ongoing = TxnMetadata("on", 1, 4, 60_000).add_partitions([P0], 1000)
    with_offsets = ongoing.add_group("g", 1000).with_offsets("g", {P1: TxnOffset(5)}, 1000)
    prepared = TxnMetadata("prep", 2, 0, 60_000).add_partitions([P1], 2000).prepare(True, 2001)
    table.replay([with_offsets, prepared, TxnMetadata("empty", 3, 0, 30_000)])
    yield table
    log.close()


def test_verify_produce(table: TxnTable) -> None:
    views.verify_produce(table, "t", 0, 1, 4)  # in the ongoing transaction: passes
    with pytest.raises(InvalidProducerEpoch):
        views.verify_produce(table, "t", 0, 1, 3)
    with pytest.raises(InvalidTxnState, match="no ongoing transaction"):
        views.verify_produce(table, "t", 0, 1, 5)
    with pytest.raises(InvalidTxnState, match="no ongoing transaction"):
        views.verify_produce(table, "t", 1, 2, 0)  # prepared, not ongoing
    with pytest.raises(InvalidTxnState, match="t-1 was not added"):
        views.verify_produce(table, "t", 1, 1, 4)
    with pytest.raises(InvalidTxnState, match="has no transaction"):
        views.verify_produce(table, "t", 0, 99, 0)


def test_describe_transactions(table: TxnTable) -> None:
    on, empty, unknown, blank = views.describe_transactions(
        table, ["on", "empty", "nope", ""], C.NONE)
    assert on == TxnDescription("on", C.NONE, "Ongoing", 1, 4, 60_000, 1000, (P0,))
    assert (empty.state, empty.start_time_ms, empty.partitions) == ("Empty", -1, ())
    assert unknown == TxnDescription("nope", C.TRANSACTIONAL_ID_NOT_FOUND)
    assert blank == TxnDescription("", C.INVALID_REQUEST)
    stopped = views.describe_transactions(table, ["on"], C.COORDINATOR_NOT_AVAILABLE)
    assert stopped == [TxnDescription("on", C.COORDINATOR_NOT_AVAILABLE)]


def test_list_transactions_filters(table: TxnTable) -> None:
    def ids(*states: str, pids: tuple[int, ...] = (), duration: int = -1) -> list[str]:
        listed = views.list_transactions(
            table, states, pids, now_ms=10_000, duration_filter_ms=duration)
        return [t.transactional_id for t in listed]

    assert ids() == ["empty", "on", "prep"]
    assert ids("Ongoing", "PrepareCommit") == ["on", "prep"]
    assert ids("NoSuchState") == []
    assert ids(pids=(2, 3)) == ["empty", "prep"]
    assert ids(duration=8_500) == ["on"]  # running 9000 ms; prep 8000 ms; empty none
    assert ids(duration=9_000) == []
    assert views.list_transactions(table, ["Empty"], [], now_ms=0) == [
        TxnListing("empty", 3, "Empty")]


def test_verify_partitions(table: TxnTable) -> None:
    assert views.verify_partitions(table, "on", 1, 4, [P0, P1], False) == {
        P0: C.NONE, P1: C.INVALID_TXN_STATE}
    assert views.verify_partitions(table, "on", 1, 3, [P0], False) == {P0: C.PRODUCER_FENCED}
    assert views.verify_partitions(table, "on", 1, 4, [P0], True) == {
        P0: C.CONCURRENT_TRANSACTIONS}
    assert views.verify_partitions(table, "nope", 1, 4, [P0], False) == {
        P0: C.INVALID_PRODUCER_ID_MAPPING}
    assert views.verify_partitions(table, "", 1, 4, [P0], False) == {P0: C.INVALID_REQUEST}
    assert views.verify_partitions(table, "empty", 3, 0, [P0], False) == {
        P0: C.INVALID_TXN_STATE}


def test_pending_offsets(table: TxnTable) -> None:
    assert views.pending_offsets(table, "g") == frozenset({P1})
    assert views.pending_offsets(table, "other") == frozenset()
