"""The transaction coordinator's in-memory table (:class:`~brokerd.kafka.txn.table.TxnTable`)
over a real transaction log in tmp_path: lookups by id and producer id, replayed records,
the per-id operation count, the table loaded from the log, and what the log can encode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from twisted.internet import defer

from brokerd.kafka.txn.state import TxnMetadata, TxnState
from brokerd.kafka.txn.table import Forget, TxnTable, writable
from brokerd.storage.stores.txn_log import TxnLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[TxnLog]:
    opened = TxnLog.open(str(tmp_path))
    yield opened
    opened.close()


def table_of(log: TxnLog) -> TxnTable:
    return TxnTable(log=log, run_blocking=defer.maybeDeferred)


def meta(tid: str, pid: int, epoch: int = 0) -> TxnMetadata:
    return TxnMetadata(tid, pid, epoch, 60_000, last_update_ms=1)


def test_replayed_values_are_found_by_id_and_producer_id(log: TxnLog) -> None:
    table = table_of(log)
    table.replay([meta("b", 2), meta("a", 1)])
    assert len(table) == 2
    assert [m.transactional_id for m in table.values()] == ["a", "b"]
    assert table.get("a") == meta("a", 1)
    by_pid = table.by_producer_id(2)
    assert by_pid is not None and by_pid.transactional_id == "b"
    assert table.get("c") is None and table.by_producer_id(3) is None


def test_a_new_producer_id_replaces_the_old_one_and_forget_drops_both(log: TxnLog) -> None:
    table = table_of(log)
    table.replay([meta("a", 1), meta("a", 7, epoch=0)])  # rotated to producer id 7
    assert table.by_producer_id(1) is None
    assert table.by_producer_id(7) == meta("a", 7)
    table.replay([Forget("a"), Forget("never-seen")])
    assert table.get("a") is None and table.by_producer_id(7) is None
    assert len(table) == 0


def test_one_operation_per_id_is_counted(log: TxnLog) -> None:
    table = table_of(log)
    assert not table.busy("a")
    table.hold("a")
    table.hold("a")
    table.release("a")
    assert table.busy("a") and not table.busy("b")
    table.release("a")
    assert not table.busy("a")


def test_the_table_starts_from_what_the_log_holds(log: TxnLog) -> None:
    ongoing = meta("a", 1).add_partitions([("t", 0)], 5)
    log.write_records([ongoing.to_stored(), meta("b", 2).to_stored()])
    log.write_records(["b"])
    table = table_of(log)
    got = table.get("a")
    assert got is not None
    assert got.state is TxnState.ONGOING and got.partitions == frozenset({("t", 0)})
    assert table.get("b") is None
    assert table.by_producer_id(1) is got


def test_writable_refuses_what_the_log_cannot_encode() -> None:
    assert writable([meta("a", 1), Forget("b")])
    too_big = attrs.evolve(meta("a", 1), producer_epoch=2**15)
    assert not writable([meta("b", 2), too_big])
