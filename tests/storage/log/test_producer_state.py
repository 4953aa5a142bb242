"""The idempotent producers' state table, its snapshots, and the batch-header replay the
core restores it with."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import InvalidProducerEpoch, OutOfOrderSequence
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import (
    PRODUCER_BATCH_MEMORY,
    SNAPSHOT_NAME,
    ProducerAppendInfo,
    ProducerStateManager,
    load_table,
    read_snapshot,
    write_snapshot,
)
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import BatchHeader, parse_batches
from brokerd.storage.types import AppendInfo


def test_snapshot_round_trip_and_garbage(tmp_path: Path) -> None:
    write_snapshot(str(tmp_path), 42, {7: {"epoch": 1, "batches": [[0, 2, 40, 42]]}})
    assert read_snapshot(str(tmp_path)) == (42, {7: {"epoch": 1, "batches": [(0, 2, 40, 42)]}})
    assert not (tmp_path / (SNAPSHOT_NAME + ".tmp")).exists()
    for junk in (b"", b"{", b'{"format": 1}', b'{"format": 9, "end_offset": 1}', b"\xff" * 10):
        (tmp_path / SNAPSHOT_NAME).write_bytes(junk)
        assert read_snapshot(str(tmp_path)) is None
    (tmp_path / SNAPSHOT_NAME).unlink()
    assert read_snapshot(str(tmp_path)) is None


def test_batch_headers_from_an_offset_across_segments(tmp_path: Path) -> None:
    log = PartitionLog.open(
        str(tmp_path / "t-0"), LogConfig(segment_bytes=2048), recovery_point=None
    )
    for i in range(50):
        data = encode_batch(
            [b"x" * 30] * 3, timestamp_ms=1, producer_id=7, producer_epoch=0, base_sequence=3 * i
        )
        log.append(data, parse_batches(data, max_batch_bytes=1 << 20))
    log.publish()
    assert len(log.segment_bases) > 3
    headers = log.batch_headers(100)
    assert [h.base_offset for h in headers] == list(range(99, 150, 3))
    assert [h.base_sequence for h in headers] == list(range(99, 150, 3))
    assert len(log.batch_headers(0)) == 50
    assert log.batch_headers(150) == []
    log.close()


# -- the pure table ------------------------------------------------------------------


def headers(pid: int, epoch: int, seq: int, n: int = 2, base: int = 0) -> list[BatchHeader]:
    data = encode_batch(
        [b"v"] * n,
        timestamp_ms=1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        base_offset=base,
    )
    return parse_batches(data, max_batch_bytes=1 << 20)


def test_table_accepts_unknown_producers_from_any_sequence() -> None:
    table = ProducerStateManager()
    assert not table
    assert table.check(headers(7, 0, 42)) is None
    table.remember(headers(7, 0, 42), AppendInfo(0, 1, 0))
    assert table


def test_table_finds_the_twin_of_a_retry_and_refuses_gaps() -> None:
    table = ProducerStateManager()
    first = table.remember(headers(7, 0, 0), AppendInfo(0, 1, 0))
    assert (first.first_seq, first.last_seq, first.result) == (0, 1, AppendInfo(0, 1, 0))
    assert table.check(headers(7, 0, 0)) is first
    assert table.check(headers(7, 0, 2)) is None  # the next one
    with pytest.raises(OutOfOrderSequence):
        table.check(headers(7, 0, 5))


def test_table_epochs() -> None:
    table = ProducerStateManager()
    table.remember(headers(7, 1, 0), AppendInfo(0, 1, 0))
    with pytest.raises(InvalidProducerEpoch):
        table.check(headers(7, 0, 2))
    with pytest.raises(OutOfOrderSequence):
        table.check(headers(7, 2, 4))  # a new epoch starts at 0
    assert table.check(headers(7, 2, 0)) is None
    table.remember(headers(7, 2, 0), AppendInfo(2, 3, 0))
    assert table.snapshot() == {7: {"epoch": 2, "batches": [[0, 1, 2, 3]], "ts": 1}}


def test_prepare_update_then_update_as_the_log_appends() -> None:
    # The log's steps: prepare_update before the append, update once it is written. An
    # append that failed is never updated, so its retry is appended.
    table = ProducerStateManager()
    admitted = table.prepare_update(headers(7, 0, 0))
    assert isinstance(admitted, ProducerAppendInfo)
    table.update(admitted, AppendInfo(0, 1, 0))
    assert table.prepare_update(headers(7, 0, 0)) == AppendInfo(0, 1, 0)  # a retry
    failed = table.prepare_update(headers(7, 0, 2))
    assert isinstance(failed, ProducerAppendInfo)
    assert table.prepare_update(headers(7, 0, 2)) == failed  # not updated: append it again
    with pytest.raises(OutOfOrderSequence):
        table.prepare_update(headers(7, 0, 4))


def test_table_remembers_the_last_few_batches_only() -> None:
    table = ProducerStateManager(batch_memory=PRODUCER_BATCH_MEMORY)
    for i in range(PRODUCER_BATCH_MEMORY + 1):
        table.remember(headers(7, 0, 2 * i), AppendInfo(2 * i, 2 * i + 1, 0))
    with pytest.raises(OutOfOrderSequence):
        table.check(headers(7, 0, 0))  # the oldest was pushed out
    assert table.check(headers(7, 0, 2)) is not None


def test_table_replay_skips_plain_batches_and_known_ones() -> None:
    table = ProducerStateManager()
    plain = parse_batches(encode_batch([b"x"], timestamp_ms=1), max_batch_bytes=1 << 20)
    replayed = headers(7, 0, 0, base=10) + plain + headers(7, 0, 0, base=10)
    table.replay(replayed, log_start_offset=3)
    assert table.snapshot() == {7: {"epoch": 0, "batches": [[0, 1, 10, 11]], "ts": 1}}
    twin = table.check(headers(7, 0, 0))
    assert twin is not None and twin.result == AppendInfo(10, 11, 3)


def test_table_snapshot_round_trip_through_the_file(tmp_path: Path) -> None:
    table = ProducerStateManager()
    table.replay(headers(7, 0, 0, base=0) + headers(8, 3, 5, base=2), log_start_offset=0)
    table.replay(headers(7, 0, 2, base=4), log_start_offset=0)
    write_snapshot(str(tmp_path), 6, table.snapshot())
    snapshot = read_snapshot(str(tmp_path))
    assert snapshot is not None
    end, producers = snapshot
    assert end == 6
    restored = ProducerStateManager()
    restored.restore(producers, log_start_offset=0, log_end_offset=6)
    assert restored.snapshot() == table.snapshot()
    # A log cut below what the snapshot saw (a crash) drops the batches beyond its end.
    cut = ProducerStateManager()
    cut.restore(producers, log_start_offset=0, log_end_offset=4)
    assert cut.snapshot()[7]["batches"] == [[0, 1, 0, 1]]


def test_load_table_replays_the_log_after_the_snapshot(tmp_path: Path) -> None:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), recovery_point=None)
    for seq in (0, 2, 4):
        data = encode_batch(
            [b"a", b"b"], timestamp_ms=1, producer_id=7, producer_epoch=0, base_sequence=seq
        )
        log.append(data, parse_batches(data, max_batch_bytes=1 << 20))
    log.publish()
    write_snapshot(log.path, 2, {7: {"epoch": 0, "batches": [[0, 1, 0, 1]]}})
    table = ProducerStateManager()
    load_table(log, table)
    assert table.snapshot() == {
        7: {"epoch": 0, "batches": [[0, 1, 0, 1], [2, 3, 2, 3], [4, 5, 4, 5]], "ts": 1}
    }
    log.close()


def test_a_transaction_marker_closes_its_batches_so_reused_sequences_are_refused(
    tmp_path: Path,
) -> None:
    # A transaction's batch (sequences 0-1) is stored, then the transaction ends (a
    # marker). The same sequences with the same epoch are then a new batch, never a
    # retry: answering it as a duplicate would drop it silently from the next
    # transaction, which could then commit without it.
    table = ProducerStateManager()
    table.remember(headers(7, 4, 0), AppendInfo(10, 11, 0))
    table.fence(7, 4)
    with pytest.raises(OutOfOrderSequence, match="ended"):
        table.check(headers(7, 4, 0))
    assert table.check(headers(7, 4, 2)) is None  # the producer's next sequence
    table.remember(headers(7, 4, 2), AppendInfo(13, 14, 0))
    assert table.check(headers(7, 4, 2)) is not None  # an open batch's retry: its twin

    # The flag survives a snapshot and a restart.
    write_snapshot(str(tmp_path), 15, table.snapshot())
    snapshot = read_snapshot(str(tmp_path))
    assert snapshot is not None
    restored = ProducerStateManager()
    restored.restore(snapshot[1], log_start_offset=0, log_end_offset=15)
    with pytest.raises(OutOfOrderSequence, match="ended"):
        restored.check(headers(7, 4, 0))
    assert restored.check(headers(7, 4, 2)) is not None


def test_active_producers_and_their_snapshot(tmp_path: Path) -> None:
    from brokerd.storage.log.producer_state import ActiveProducer

    table = ProducerStateManager()
    table.replay(headers(7, 0, 0, base=0) + headers(8, 3, 5, n=3, base=2), log_start_offset=0)
    table.fence(8, 4)  # a marker with a newer epoch: the batches go, the timestamp stays
    table.fence(9, 0)  # a producer known only from a marker
    want = [
        ActiveProducer(7, 0, 1, 1, marked=False),
        ActiveProducer(8, 4, -1, 1, marked=True),
        ActiveProducer(9, 0, -1, -1, marked=True),
    ]
    assert table.active() == want
    write_snapshot(str(tmp_path), 5, table.snapshot())
    snapshot = read_snapshot(str(tmp_path))
    assert snapshot is not None
    restored = ProducerStateManager()
    restored.restore(snapshot[1], log_start_offset=0, log_end_offset=5)
    assert restored.active() == want


def test_a_bad_informational_field_is_dropped_not_fatal(tmp_path: Path) -> None:
    (tmp_path / SNAPSHOT_NAME).write_text(
        '{"format": 2, "end_offset": 3, "txn_end": 3, "ongoing": {}, "producers": '
        '{"7": {"epoch": 1, "batches": [[0, 2, 0, 2]], "ts": "soon", "marked": 1}}}'
    )
    assert read_snapshot(str(tmp_path)) == (3, {7: {"epoch": 1, "batches": [(0, 2, 0, 2)]}})
