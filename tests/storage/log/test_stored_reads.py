"""The one read call of a partition log (``brokerd/storage/log/stored_reads.py``), on a
hand-built shared state: every form of answer (bytes, by reference, decoded records), the
isolation levels, and the answers from memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import OffsetOutOfRange
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.producer_state import ProducerStateManager
from brokerd.storage.log.stored_reads import StoredReads
from brokerd.storage.log.txns import PartitionTxns
from brokerd.storage.record.decode import decode_records
from brokerd.storage.types import Delivery, Isolation, ReadSpec

from tests.read_specs import (
    BYTES,
    COMMITTED,
    COMMITTED_RECORDS,
    COMMITTED_REFERENCE,
    REFERENCE,
    data_of,
    span_of,
)
from tests.storage.log.log_parts import append, close, new_state, publish, write
from tests.storage.log.test_txns import publish_txns, txn_batch

BIG = 1 << 20


def parts(path: Path) -> tuple[LogState, PartitionTxns, StoredReads]:
    state = new_state(path)
    txns = PartitionTxns(state, lambda *a, **kw: write(state, *a, **kw), ProducerStateManager())
    return state, txns, StoredReads(state, txns)


def appended(state: LogState, reads: StoredReads, values: list[bytes]) -> tuple[int, int]:
    """Append a batch and remember where it lies, as the log's write does."""
    base = state.log_end_offset
    position, size = append(state, values)
    reads.remember_appended(state.segments[-1], position, [(base, base, 0, size)])
    return position, size


def test_bytes_by_value_from_the_batch_holding_the_offset(tmp_path: Path) -> None:
    state, _txns, reads = parts(tmp_path / "t-0")
    try:
        append(state, [b"a", b"b"])
        append(state, [b"c"])
        publish(state)
        whole = reads.read(0, BIG, BYTES)
        segment = state.segments[-1]
        assert whole is not None and whole.high_watermark == 3
        assert data_of(whole) == segment.pread(0, segment.size)
        # From inside the first batch: that whole batch, at least, whatever the budget.
        inside = reads.read(1, 1, BYTES)
        assert inside is not None
        assert [r.offset for r in decode_records(data_of(inside), max_uncompressed=BIG)] == [0, 1]
        at_end = reads.read(3, BIG, BYTES)
        assert at_end is not None and at_end.records == b""
        # From memory, a read by value answers only when there is nothing to read.
        assert reads.read(0, BIG, BYTES, memory_only=True) is None
        assert reads.read(3, BIG, BYTES, memory_only=True) == at_end
        with pytest.raises(OffsetOutOfRange):
            reads.read(4, BIG, BYTES)
    finally:
        close(state)


def test_by_reference_checked_bytes_and_from_memory(tmp_path: Path) -> None:
    state, _txns, reads = parts(tmp_path / "t-0")
    try:
        position, size = appended(state, reads, [b"x" * 100])
        publish(state)
        segment = state.segments[-1]
        from_files = reads.read(0, BIG, REFERENCE)
        assert from_files is not None
        span = span_of(from_files)
        assert span is not None and (span.position, span.length) == (position, size)
        span.release()
        from_memory = reads.read(0, BIG, REFERENCE, memory_only=True)
        span = span_of(from_memory)
        assert span is not None and (span.position, span.length) == (position, size)
        assert span.read() == segment.pread(position, size)
        span.release()
        # Positions forgotten (the appended run, and the one the read learned ahead):
        # memory does not know; the files still answer.
        state.tail.forget()
        state.ahead.forget()
        assert reads.read(0, BIG, REFERENCE, memory_only=True) is None
        again = reads.read(0, BIG, REFERENCE)
        span = span_of(again)
        assert span is not None
        span.release()
    finally:
        close(state)


def test_committed_reads_of_open_transactions(tmp_path: Path) -> None:
    state, txns, reads = parts(tmp_path / "t-0")
    try:
        append(state, [b"plain"])  # 0
        txn_batch(state, txns, 5, [b"open"])  # 1
        publish_txns(state, txns)
        committed = reads.read(0, BIG, COMMITTED)
        assert committed is not None and committed.last_stable_offset == 1
        assert [r.offset for r in decode_records(data_of(committed), max_uncompressed=BIG)] == [0]
        # Cut by headers at the LSO: answered by value, never from memory.
        by_reference = reads.read(0, BIG, COMMITTED_REFERENCE)
        assert by_reference is not None and span_of(by_reference) is None
        assert data_of(by_reference) == data_of(committed)
        assert reads.read(0, BIG, COMMITTED_REFERENCE, memory_only=True) is None
        # In [LSO, high watermark]: nothing committed to read yet.
        empty = reads.read(1, BIG, COMMITTED)
        assert empty is not None and empty.records == b"" and empty.aborted == ()
        txns.append_marker(5, 0, commit=False, coordinator_epoch=0, timestamp_ms=1)  # 2
        publish_txns(state, txns)
        aborted = reads.read(0, BIG, COMMITTED)
        assert aborted is not None and [a.producer_id for a in aborted.aborted] == [5]
    finally:
        close(state)


def test_decoded_records_skip_aborted_and_answer_from_memory(tmp_path: Path) -> None:
    state, txns, reads = parts(tmp_path / "t-0")
    try:
        appended(state, reads, [b"a"])  # 0
        appended(state, reads, [b"b"])  # 1
        publish(state)
        from_files = reads.read(1, BIG, COMMITTED_RECORDS)
        assert from_files is not None and [r.value for r in from_files.decoded] == [b"b"]
        assert from_files.records == b""
        assert reads.read(1, BIG, COMMITTED_RECORDS, memory_only=True) == from_files
        txn_batch(state, txns, 5, [b"gone"])  # 2
        txns.append_marker(5, 0, commit=False, coordinator_epoch=0, timestamp_ms=1)  # 3
        append(state, [b"c"])  # 4
        publish_txns(state, txns)
        values = reads.read(0, BIG, COMMITTED_RECORDS)
        assert values is not None and [r.value for r in values.decoded] == [b"a", b"b", b"c"]
        # An aborted transaction needs the index: not from memory.
        assert reads.read(0, BIG, COMMITTED_RECORDS, memory_only=True) is None
    finally:
        close(state)


def test_a_read_of_decoded_records_is_committed_only() -> None:
    with pytest.raises(ValueError, match="committed records only"):
        ReadSpec(Isolation.READ_UNCOMMITTED, Delivery.RECORDS)
    assert COMMITTED_RECORDS.committed and not REFERENCE.committed
