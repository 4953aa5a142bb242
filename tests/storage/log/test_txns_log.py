"""Transactions in a partition log: the LSO, read_committed and committed-only reads,
recovery after a crash, producer state and markers, and the cleaner with aborted
transactions. Real files throughout. (The markers, the tracker and the .txnindex file on
their own: tests/storage/record/test_control.py, tests/storage/log/test_ongoing_txns.py,
tests/storage/segment/test_txn_index.py.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from brokerd.storage.cleaner.compactor import clean_log
from brokerd.storage.cleaner.keymap import OffsetMap
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import (
    SNAPSHOT_NAME,
    ProducerStateManager,
    read_snapshot,
    read_txn_snapshot,
    write_snapshot,
)
from brokerd.storage.record.control import encode_marker
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches, read_header
from brokerd.storage.segment.txn_index import TXN_ENTRY_SIZE, AbortedEntry
from brokerd.storage.types import AbortedTxn, Record

from tests.compaction_helpers import T0, compact_config
from tests.read_specs import BYTES, COMMITTED, COMMITTED_RECORDS

BIG = 1 << 20


def open_log(path: Path, point: int | None = None, **config: Any) -> PartitionLog:
    return PartitionLog.open(str(path), LogConfig(**config), recovery_point=point)


def txn_batch(
    plog: PartitionLog,
    pid: int,
    values: list[bytes],
    *,
    epoch: int = 0,
    seq: int = 0,
    keys: list[bytes | None] | None = None,
    publish: bool = True,
) -> int:
    """Append one transactional batch of ``pid``; its base offset."""
    data = encode_batch(
        values,
        keys=keys,
        timestamp_ms=T0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    info = plog.append(data, parse_batches(data, max_batch_bytes=BIG))
    if publish:
        plog.publish()
    return info.base_offset


def plain(plog: PartitionLog, values: list[bytes], keys: list[bytes | None] | None = None) -> int:
    data = encode_batch(values, keys=keys, timestamp_ms=T0)
    info = plog.append(data, parse_batches(data, max_batch_bytes=BIG))
    plog.publish()
    return info.base_offset


def marker(plog: PartitionLog, pid: int, *, commit: bool, epoch: int = 0) -> int:
    info = plog.append_marker(pid, epoch, commit=commit, coordinator_epoch=3, timestamp_ms=T0)
    plog.publish()
    return info.base_offset


def committed_values(plog: PartitionLog, offset: int | None = None) -> list[bytes | None]:
    out: list[Record] = []
    at = plog.log_start_offset if offset is None else offset
    while at < plog.last_stable_offset:
        records = plog.read(at, BIG, COMMITTED_RECORDS).decoded
        if not records:
            break
        out.extend(records)
        at = records[-1].offset + 1
    return [r.value for r in out]


def batch_offsets(data: bytes) -> list[int]:
    out = []
    pos = 0
    while len(data) - pos >= 61:
        header = read_header(data, pos)
        out.append(header.base_offset)
        pos += header.size
    return out


# --- the log: LSO, markers, reads ------------------------------------------------------


def test_lso_held_by_ongoing_transaction_and_released_by_markers(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plain(plog, [b"a", b"b"])
    assert plog.last_stable_offset == plog.high_watermark == 2
    first = txn_batch(plog, 1, [b"t1", b"t2"])
    plain(plog, [b"c"])  # non-transactional data never holds the LSO
    assert (plog.high_watermark, plog.last_stable_offset) == (5, first)
    txn_batch(plog, 2, [b"u1"], publish=False)
    assert plog.last_stable_offset == 2  # unpublished: nothing changes for readers
    plog.publish()
    m = marker(plog, 1, commit=True)
    assert plog.last_stable_offset == 5  # producer 2 still open at 5
    marker(plog, 2, commit=False)
    assert plog.last_stable_offset == plog.high_watermark == m + 2
    assert plog.segments[-1].txnindex.entries == [AbortedEntry(2, 5, m + 1, m + 2)]


def test_marker_written_but_unpublished_keeps_the_old_lso(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    txn_batch(plog, 1, [b"t"])
    plog.append_marker(1, 0, commit=True, coordinator_epoch=0, timestamp_ms=T0)
    # Readers see the published pair only: data at 0 still unstable.
    assert (plog.high_watermark, plog.last_stable_offset) == (1, 0)
    assert plog.read(0, BIG, COMMITTED).records == b""
    plog.publish()
    assert plog.last_stable_offset == 2


def test_read_committed_cuts_at_lso_and_lists_aborted(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plain(plog, [b"a"])  # 0
    txn_batch(plog, 1, [b"x1", b"x2"])  # 1-2 aborted
    m1 = marker(plog, 1, commit=False)  # 3
    txn_batch(plog, 2, [b"y"])  # 4 committed
    marker(plog, 2, commit=True)  # 5
    open_first = txn_batch(plog, 3, [b"z"])  # 6 open
    plain(plog, [b"after"])  # 7
    hw = plog.high_watermark
    uncommitted = plog.read(0, BIG, BYTES)
    assert batch_offsets(uncommitted.records) == [0, 1, 3, 4, 5, 6, 7]
    assert uncommitted.last_stable_offset == open_first and uncommitted.aborted == ()
    committed = plog.read(0, BIG, COMMITTED)
    assert batch_offsets(committed.records) == [0, 1, 3, 4, 5]
    assert committed.last_stable_offset == open_first and committed.high_watermark == hw
    assert committed.aborted == (AbortedTxn(1, 1),)
    # From past the abort marker: not listed any more.
    assert plog.read(4, BIG, COMMITTED).aborted == ()
    assert plog.read(3, BIG, COMMITTED).aborted == (AbortedTxn(1, 1),)
    # [LSO, HW] is valid and empty; the uncommitted read of it is not.
    for offset in (open_first, hw):
        empty = plog.read(offset, BIG, COMMITTED)
        assert empty.records == b"" and empty.aborted == ()
    assert plog.read(open_first, BIG, BYTES).records != b""
    assert m1 == 3


def test_aborted_list_only_for_data_returned(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=200)
    plain(plog, [b"p" * 150])  # 0: one batch per segment from here
    txn_batch(plog, 1, [b"x" * 150])  # 1
    marker(plog, 1, commit=False)  # 2
    txn_batch(plog, 2, [b"y" * 150])  # 3
    marker(plog, 2, commit=False)  # 4
    assert len(plog.segments) > 2
    first = plog.read(0, 1, COMMITTED)  # one batch: offset 0 only
    assert batch_offsets(first.records) == [0] and first.aborted == ()
    second = plog.read(1, 1, COMMITTED)
    assert batch_offsets(second.records) == [1] and second.aborted == (AbortedTxn(1, 1),)
    everything = [plog.read(o, BIG, COMMITTED).aborted for o in (3, 4)]
    assert everything == [(AbortedTxn(2, 3),), (AbortedTxn(2, 3),)]


def test_native_reads_are_committed_only(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plain(plog, [b"a"])
    txn_batch(plog, 1, [b"aborted1", b"aborted2"])
    txn_batch(plog, 2, [b"committed"])
    txn_batch(plog, 1, [b"aborted3"], seq=2)
    marker(plog, 1, commit=False)
    marker(plog, 2, commit=True)
    plain(plog, [b"b"])
    txn_batch(plog, 3, [b"open"])
    plain(plog, [b"beyond-lso"])
    assert committed_values(plog) == [b"a", b"committed", b"b"]
    records = plog.read(0, BIG, COMMITTED_RECORDS).decoded
    assert [r.offset for r in records] == [0, 3, 7]
    # At the LSO and in [LSO, HW]: nothing, no error.
    assert plog.read(plog.last_stable_offset, BIG, COMMITTED_RECORDS).decoded == ()
    assert plog.read(plog.high_watermark - 1, BIG, COMMITTED_RECORDS).decoded == ()
    marker(plog, 3, commit=True)
    assert committed_values(plog, 8) == [b"open", b"beyond-lso"]


def test_marker_without_ongoing_transaction_is_appended_and_records_nothing(
    tmp_path: Path,
) -> None:
    plog = open_log(tmp_path / "t-0")
    m = marker(plog, 9, commit=False, epoch=4)
    assert plog.high_watermark == m + 1 == plog.last_stable_offset
    assert plog.segments[-1].txnindex.entries == []
    assert plog.segments[-1].txnindex.exists


def test_retention_deletes_txnindex_and_lso_clamps_to_log_start(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=200, retention_bytes=1)
    txn_batch(plog, 1, [b"x" * 150])
    marker(plog, 1, commit=False)
    old = plog.segments[0]
    txn_batch(plog, 2, [b"y" * 150])  # open, in a later segment
    plain(plog, [b"z" * 150])
    plog.flush()
    assert os.path.exists(old.txnindex.path)
    assert plog.enforce_retention() >= 1
    assert not os.path.exists(old.txnindex.path)
    assert plog.last_stable_offset >= plog.log_start_offset
    plog.delete_records_before(plog.high_watermark)
    assert plog.last_stable_offset == plog.log_start_offset == plog.high_watermark


# --- recovery -----------------------------------------------------------------------------


def _crash(plog: PartitionLog) -> None:
    """Stop using the log without closing it cleanly (files stay as they are)."""
    plog.flush()
    for segment in plog.segments:
        segment.close()


def test_reopen_without_snapshot_rebuilds_ongoing_transactions(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=300)
    first = txn_batch(plog, 1, [b"x" * 100])
    for i in range(6):
        plain(plog, [b"filler-%d" % i + b"." * 100])
    txn_batch(plog, 2, [b"y"])
    marker(plog, 2, commit=False)
    assert len(plog.segments) > 2
    _crash(plog)
    assert not os.path.exists(path / SNAPSHOT_NAME)
    again = open_log(path, point=0, segment_bytes=300)
    # Producer 1's transaction began segments ago: still open, still holding the LSO.
    assert again.last_stable_offset == first
    assert again.read(0, BIG, COMMITTED).records == b""
    marker(again, 1, commit=True)
    assert again.last_stable_offset == again.high_watermark
    again.close()


def test_snapshot_older_than_the_data_is_completed_by_replay(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path)
    txn_batch(plog, 1, [b"early"])
    end, ongoing = plog.txn_snapshot()
    write_snapshot(str(path), end, {}, (end, ongoing))
    txn_batch(plog, 2, [b"later"])
    marker(plog, 1, commit=False)
    _crash(plog)
    again = open_log(path, point=0)
    assert again.last_stable_offset == 1  # producer 2's transaction, begun after the snapshot
    assert again.segments[-1].txnindex.entries == [AbortedEntry(1, 0, 2, 1)]
    again.close()


def test_lost_txnindex_tail_is_rebuilt_by_replay(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path)
    txn_batch(plog, 1, [b"a"])
    marker(plog, 1, commit=False)
    txn_batch(plog, 2, [b"b"])
    marker(plog, 2, commit=False)
    index_path = plog.segments[-1].txnindex.path
    _crash(plog)
    with open(index_path, "r+b") as f:
        f.truncate(TXN_ENTRY_SIZE + 5)  # the second entry torn
    again = open_log(path, point=0)
    assert [e.producer_id for e in again.segments[-1].txnindex.entries] == [1, 2]
    assert again.read(0, BIG, COMMITTED).aborted == (AbortedTxn(1, 0), AbortedTxn(2, 2))
    again.close()


def test_truncated_log_drops_entries_past_its_end(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path)
    txn_batch(plog, 1, [b"a"])
    marker(plog, 1, commit=False)
    txn_batch(plog, 2, [b"b"])
    m2 = marker(plog, 2, commit=False)
    log_path = plog.segments[-1].log_path
    size_before_m2 = plog.segments[-1].size - len(
        encode_marker(2, 0, commit=False, coordinator_epoch=3, timestamp_ms=T0)
    )
    _crash(plog)
    with open(log_path, "r+b") as f:
        f.truncate(size_before_m2 + 10)  # the second marker torn by the crash
    again = open_log(path, point=0)
    assert again.high_watermark == m2
    assert [e.producer_id for e in again.segments[-1].txnindex.entries] == [1]
    assert again.last_stable_offset == 2  # producer 2's transaction is open again
    again.close()


def test_stale_snapshot_past_the_log_end_falls_back_to_full_replay(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path)
    txn_batch(plog, 1, [b"a"])
    plain(plog, [b"b"])
    _crash(plog)
    # A snapshot claiming a longer log with no transactions (its data was lost).
    write_snapshot(str(path), 50, {}, (50, {}))
    again = open_log(path, point=0)
    assert again.last_stable_offset == 0
    again.close()


def test_clean_close_snapshot_restores_without_replay(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path)
    txn_batch(plog, 1, [b"a"])
    txn_batch(plog, 2, [b"b"])
    marker(plog, 2, commit=True)
    end, ongoing = plog.txn_snapshot()
    assert (end, ongoing) == (3, {1: 0})
    plog.close()
    write_snapshot(str(path), end, {}, (end, ongoing))
    again = open_log(path)
    assert again.last_stable_offset == 0
    again.close()


def test_snapshot_format_1_still_read(tmp_path: Path) -> None:
    (tmp_path / SNAPSHOT_NAME).write_text(
        '{"format":1,"end_offset":4,"producers":{"7":{"epoch":2,"batches":[[0,1,2,3]]}}}'
    )
    assert read_snapshot(str(tmp_path)) == (4, {7: {"epoch": 2, "batches": [(0, 1, 2, 3)]}})
    assert read_txn_snapshot(str(tmp_path)) is None
    write_snapshot(str(tmp_path), 9, {}, (11, {5: 3}))
    assert read_txn_snapshot(str(tmp_path)) == (11, {5: 3})
    assert read_snapshot(str(tmp_path)) == (9, {})
    (tmp_path / SNAPSHOT_NAME).write_text(
        '{"format":2,"end_offset":1,"producers":{},"txn_end":"x"}'
    )
    assert read_txn_snapshot(str(tmp_path)) is None


# --- producer state and markers --------------------------------------------------------------


def test_marker_fences_older_epochs_and_replay_skips_markers(tmp_path: Path) -> None:
    table = ProducerStateManager()
    plog = open_log(tmp_path / "t-0")
    data = encode_batch(
        [b"v"],
        timestamp_ms=T0,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
        transactional=True,
    )
    headers = parse_batches(data, max_batch_bytes=BIG)
    table.remember(headers, plog.append(data, headers))
    marker(plog, 5, commit=False, epoch=2)
    table.fence(5, 2)
    from brokerd.errors import InvalidProducerEpoch

    with pytest.raises(InvalidProducerEpoch):
        table.check(headers)
    # Replayed from the log: the marker fences, it is not remembered as a batch.
    replayed = ProducerStateManager()
    replayed.replay(plog.batch_headers(0), log_start_offset=0)
    with pytest.raises(InvalidProducerEpoch):
        replayed.check(headers)
    fresh = encode_batch(
        [b"w"],
        timestamp_ms=T0,
        producer_id=5,
        producer_epoch=2,
        base_sequence=0,
        transactional=True,
    )
    assert replayed.check(parse_batches(fresh, max_batch_bytes=BIG)) is None


def test_marker_only_producer_accepts_any_sequence() -> None:
    table = ProducerStateManager()
    table.fence(8, 3)
    data = encode_batch([b"v"], timestamp_ms=0, producer_id=8, producer_epoch=3, base_sequence=41)
    assert table.check(parse_batches(data, max_batch_bytes=BIG)) is None


# --- the cleaner --------------------------------------------------------------------------


def test_cleaner_drops_aborted_records_keeps_markers_and_stops_at_lso(tmp_path: Path) -> None:
    config = compact_config()
    plog = PartitionLog.open(str(tmp_path / "c-0"), config, recovery_point=None)
    plain(plog, [b"v1"], keys=[b"k"])  # 0
    txn_batch(plog, 1, [b"aborted"], keys=[b"k"])  # 1: must never shadow v1
    m1 = marker(plog, 1, commit=False)  # 2
    txn_batch(plog, 2, [b"committed"], keys=[b"j"])  # 3
    marker(plog, 2, commit=True)  # 4
    # Producer 1's later batch, so that the aborted one is not its last (the cleaner
    # keeps a record of each producer's last batch for its sequence).
    txn_batch(plog, 1, [b"again"], keys=[b"i"], seq=1)  # 5
    marker(plog, 1, commit=True)  # 6
    for i in range(60):
        plain(plog, [b"f" * 40], keys=[b"filler-%d" % i])
    open_first = txn_batch(plog, 3, [b"open"], keys=[b"j"])  # past the LSO
    for i in range(60):
        plain(plog, [b"g" * 40], keys=[b"filler-%d" % i])
    plog.flush()
    assert plog.cleanable_end == open_first
    result = clean_log(plog, None, now_ms=T0, key_map=OffsetMap(1 << 16))
    assert result is not None and result.end <= open_first
    offsets: list[int] = []
    at = 0
    while at < plog.high_watermark:
        got = batch_offsets(plog.read(at, BIG, BYTES).records)
        offsets += got
        at = read_header(plog.read(got[-1], 61, BYTES).records).last_offset + 1
    assert 1 not in offsets  # the aborted batch is gone
    assert m1 in offsets and 4 in offsets  # markers kept
    assert 0 in offsets and 3 in offsets and open_first in offsets
    assert any(o > open_first for o in offsets)
    # The txnindex entry survived the swap.
    seg = plog.segments[0]
    assert seg.txnindex.entries == [AbortedEntry(1, 1, 2, 3)]
    assert committed_values(plog)[:3] == [b"v1", b"committed", b"again"]
    plog.close()
    again = PartitionLog.open(str(tmp_path / "c-0"), config, recovery_point=None)
    assert again.segments[0].txnindex.entries == [AbortedEntry(1, 1, 2, 3)]
    assert again.last_stable_offset == open_first
    again.close()


def test_marker_only_producer_still_accepts_any_sequence_after_a_snapshot(
    tmp_path: Path,
) -> None:
    # Known from a marker only (its batches are in a segment the start-up replay did not
    # read): a snapshot then a restart must not turn it into a producer that must start
    # at sequence 0, or its next batch would be refused as out of order.
    table = ProducerStateManager()
    table.fence(8, 3)
    write_snapshot(str(tmp_path), 10, table.snapshot())
    snap = read_snapshot(str(tmp_path))
    assert snap is not None
    restored = ProducerStateManager()
    restored.restore(snap[1], log_start_offset=0, log_end_offset=10)
    data = encode_batch([b"v"], timestamp_ms=0, producer_id=8, producer_epoch=3, base_sequence=41)
    assert restored.check(parse_batches(data, max_batch_bytes=BIG)) is None
    old = encode_batch([b"v"], timestamp_ms=0, producer_id=8, producer_epoch=2, base_sequence=0)
    from brokerd.errors import InvalidProducerEpoch

    with pytest.raises(InvalidProducerEpoch):
        restored.check(parse_batches(old, max_batch_bytes=BIG))
