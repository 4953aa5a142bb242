"""Reads answered from memory: ``PartitionLog.read`` with ``memory_only`` gives exactly the
answers of the same read from the files (by reference, and of decoded records) when the
log remembers where the batches lie, None when it does not (then the core reads in its
pool), and the core uses them without a pool hop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from brokerd.core import Broker
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.stored_reads import KNOWN_DECODE_BYTES
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches
from brokerd.storage.segment.batch_positions import TAIL_BATCHES
from brokerd.storage.segment.batch_reads import LEARN_AHEAD_BATCHES
from brokerd.storage.types import LogRead

from tests.core.test_waiters import _HarnessCase, polled
from tests.deferreds import result_of
from tests.read_specs import (
    BYTES,
    COMMITTED_RECORDS,
    COMMITTED_REFERENCE,
    REFERENCE,
    data_of,
    span_of,
)
from tests.storage.log.test_stored_reads_by_reference import BIG, content, fill, open_log, pins


def same(got: LogRead | None, want: LogRead) -> bytes:
    """Check ``got`` answers like ``want`` (both released); returns the bytes."""
    assert got is not None
    assert (got.high_watermark, got.log_start_offset, got.last_stable_offset) == (
        want.high_watermark, want.log_start_offset, want.last_stable_offset
    )
    data = content(got)
    assert data == content(want)
    return data


def test_appended_batches_are_answered_from_memory_exactly_as_read_stored(
    tmp_path: Path,
) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=8192, index_interval_bytes=256)
    try:
        fill(plog, 200)
        assert len(plog.segments) > 3
        active = plog.segments[-1]
        hw = plog.high_watermark
        answered = 0
        for offset in range(plog.log_start_offset, hw + 1):
            for max_bytes in (1, 300, 5000, BIG):
                got = plog.read(offset, max_bytes, REFERENCE, memory_only=True)
                if got is None:
                    # Only the active segment's appended run is remembered.
                    assert offset < active.base_offset
                    continue
                answered += 1
                same(got, plog.read(offset, max_bytes, REFERENCE))
        assert answered >= 4 * (hw - active.base_offset)
        assert pins(plog) == [0] * len(plog.segments)
    finally:
        plog.close()


def test_a_sequential_reader_learns_ahead_and_then_reads_from_memory(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=1 << 20)
    fill(plog, 3 * LEARN_AHEAD_BATCHES)
    plog.close()
    plog = open_log(path, segment_bytes=1 << 20)  # a restart: nothing remembered
    try:
        hw = plog.high_watermark
        assert plog.read(0, BIG, REFERENCE, memory_only=True) is None
        # Unchecked bytes are never answered from memory: the first read checks them.
        first = span_of(plog.read(0, BIG, REFERENCE))
        assert first is not None and plog.verified.covers(plog.segments[0], 0, first.length)
        first.release()
        offset, from_memory, from_pool = 0, 0, 0
        while offset < hw:
            got = plog.read(offset, 700, REFERENCE, memory_only=True)
            if got is None:
                from_pool += 1
                got = plog.read(offset, 700, REFERENCE)
            else:
                from_memory += 1
            want = plog.read(offset, 700, BYTES)
            assert content(got) == want.records
            # The next offset after the last whole batch, as a client computes it.
            offset = _next_offset(want.records, offset)
        assert from_memory > 3 * from_pool > 0
        assert pins(plog) == [0] * len(plog.segments)
    finally:
        plog.close()


def _next_offset(data: bytes, offset: int) -> int:
    from brokerd.storage.record.header import BATCH_HEADER_SIZE, read_header

    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(data):
        header = read_header(data, pos)
        if pos + header.size > len(data):
            break
        offset = header.last_offset + 1
        pos += header.size
    return offset


def test_unchecked_or_unknown_bytes_and_transactions_go_to_the_pool(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    try:
        fill(plog, 5)
        hw = plog.high_watermark
        # Nothing to read: answered at once, empty, also without a known position.
        at_end = plog.read(hw, BIG, REFERENCE, memory_only=True)
        assert at_end is not None and span_of(at_end) is None and data_of(at_end) == b""
        segment = plog.segments[-1]
        plog.verified._ranges.clear()  # as if the checked ranges were forgotten
        assert plog.read(0, BIG, REFERENCE, memory_only=True) is None
        checked = span_of(plog.read(0, BIG, REFERENCE))  # checked again, then by reference
        assert checked is not None
        checked.release()
        same(plog.read(0, BIG, REFERENCE, memory_only=True), plog.read(0, BIG, REFERENCE))
        assert plog.verified.covers(segment, 0, segment.size)
        data = encode_batch([b"txn"], timestamp_ms=5, producer_id=9, producer_epoch=0,
                            base_sequence=0, transactional=True)
        plog.append(data, parse_batches(data, max_batch_bytes=BIG))
        plog.flush()
        plog.publish()
        # read_committed with an open transaction cuts by headers: the pool's job.
        assert plog.read(0, BIG, COMMITTED_REFERENCE, memory_only=True) is None
        same(plog.read(0, BIG, REFERENCE, memory_only=True), plog.read(0, BIG, REFERENCE))
        lso = plog.last_stable_offset
        at_lso = plog.read(lso, BIG, COMMITTED_RECORDS, memory_only=True)
        assert at_lso is not None and at_lso.decoded == ()  # at the LSO: empty
        plog.append_marker(9, 0, commit=False, coordinator_epoch=0, timestamp_ms=6)
        plog.flush()
        plog.publish()
        # An aborted transaction: skipping it may read the transaction index.
        assert plog.read(0, BIG, COMMITTED_RECORDS, memory_only=True) is None
        assert plog.read(0, BIG, COMMITTED_REFERENCE, memory_only=True) is None
        assert pins(plog) == [0] * len(plog.segments)
    finally:
        plog.close()


def test_just_appended_records_decode_from_memory_as_read_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1 << 22)
    try:
        for i in range(TAIL_BATCHES + 40):
            plog.append_values([b"v%d-%d" % (i, j) for j in range(3)], timestamp_ms=i)
        plog.flush()
        plog.publish()
        hw = plog.high_watermark
        answered = 0
        for offset in range(0, hw + 1):
            for budget in (1, 40, BIG):
                got = plog.read(offset, budget, COMMITTED_RECORDS, memory_only=True)
                if got is None:
                    continue
                answered += 1
                assert got == plog.read(offset, budget, COMMITTED_RECORDS)
        # The tail run is bounded: the oldest batches are not remembered any more.
        assert plog.read(0, BIG, COMMITTED_RECORDS, memory_only=True) is None
        # At least the newer half of the tail run (3 records a batch, 3 budgets each).
        assert answered >= 3 * 3 * (TAIL_BATCHES // 2)
        # Far from the published end (a backlog), decoding is the pool's job.
        big = b"x" * 1000
        for _ in range(KNOWN_DECODE_BYTES // 1000 + 10):
            plog.append_values([big], timestamp_ms=1)
        plog.flush()
        plog.publish()
        assert plog.read(hw, BIG, COMMITTED_RECORDS, memory_only=True) is None
        last = plog.high_watermark - 1
        from_memory = plog.read(last, BIG, COMMITTED_RECORDS, memory_only=True)
        assert from_memory == plog.read(last, BIG, COMMITTED_RECORDS)
        assert pins(plog) == [0] * len(plog.segments)
    finally:
        plog.close()


def test_a_rolled_or_replaced_segment_is_not_answered_from_its_old_run(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=2048, retention_bytes=4096)
    try:
        fill(plog, 60)
        assert len(plog.segments) > 1
        # Retention removed segments; whatever is answered still matches read_stored.
        plog.enforce_retention()
        for offset in range(plog.log_start_offset, plog.high_watermark):
            got = plog.read(offset, BIG, REFERENCE, memory_only=True)
            if got is not None:
                same(got, plog.read(offset, BIG, REFERENCE))
        assert all(
            known.segment is None or known.segment in plog.segments
            for known in (plog._state.tail, plog._state.ahead)
        )
    finally:
        plog.close()


class CountingRunner:
    """Runs jobs at once, counting them: the read pool of a test broker."""

    def __init__(self) -> None:
        self.jobs: list[str] = []

    def __call__(self, f: Callable[..., Any], *args: Any, **kw: Any) -> defer.Deferred[Any]:
        self.jobs.append(getattr(f, "__name__", repr(f)))
        return defer.maybeDeferred(f, *args, **kw)




@pytest.fixture
def broker(tmp_path: Path) -> Any:
    reads = CountingRunner()
    logdir = LogDirectory.open(str(tmp_path), LogConfig(segment_bytes=1 << 20))
    b = Broker(
        logdir, reactor=Clock(), run_read=reads,  # type: ignore[arg-type]
        run_write=lambda f, *a, **kw: defer.maybeDeferred(f, *a, **kw),
        retention_check_seconds=0, checkpoint_seconds=0,
    )
    b.startService()
    yield b, reads, logdir
    b.stopService()


def test_the_core_answers_just_appended_data_without_the_pool(broker: Any) -> None:
    b, reads, logdir = broker
    result_of(b.produce_values("t", 0, [b"a", b"b"]))
    result_of(b.produce_values("t", 0, [b"c"]))
    records = result_of(defer.maybeDeferred(b.reads.read, "t", 0, 1, BIG, COMMITTED_RECORDS))
    assert [r.value for r in records.decoded] == [b"b", b"c"]
    stored = result_of(defer.maybeDeferred(b.reads.read, "t", 0, 2, BIG, REFERENCE))
    assert span_of(stored) is not None
    want = logdir.get("t", 0).read(2, BIG, BYTES).records
    assert content(stored) == want
    assert reads.jobs == []
    # Not known in memory (the remembered runs forgotten): the pool reads it.
    plog: PartitionLog = logdir.get("t", 0)
    plog._state.tail.forget()
    stored = result_of(defer.maybeDeferred(b.reads.read, "t", 0, 0, BIG, REFERENCE))
    assert content(stored) == plog.read(0, BIG, BYTES).records
    records = result_of(defer.maybeDeferred(b.reads.read, "t", 0, 0, BIG, COMMITTED_RECORDS))
    assert [r.value for r in records.decoded] == [b"a", b"b", b"c"]
    assert reads.jobs == ["read", "read"]
    # The Kafka read learned the positions ahead: the next one is from memory again.
    stored = result_of(defer.maybeDeferred(b.reads.read, "t", 0, 2, BIG, REFERENCE))
    assert content(stored) == want and len(reads.jobs) == 2


def test_the_core_still_raises_out_of_range_from_memory_paths(broker: Any) -> None:
    from brokerd.errors import OffsetOutOfRange

    b, _reads, _logdir = broker
    result_of(b.produce_values("t", 0, [b"a"]))
    with pytest.raises(OffsetOutOfRange):
        result_of(defer.maybeDeferred(b.reads.read, "t", 0, 5, BIG, REFERENCE))
    with pytest.raises(OffsetOutOfRange):
        result_of(defer.maybeDeferred(b.reads.read, "t", 0, 5, BIG, COMMITTED_RECORDS))




class WokenLongPollTests(_HarnessCase):
    """A parked native long poll woken by an append reads the new records from memory:
    no read reaches the pool (which holds every job here, so one would show)."""

    def test_a_woken_native_poll_is_answered_without_the_pool(self) -> None:
        h = self.h
        c = h.native()
        h.reads.hold = True
        c.poll("t", 0, 0, wait_ms=60_000)
        assert c.responses() == [] and h.broker.waiters.count == 1
        h.produce("t", 0, b"abcd")
        assert [polled(r) for r in c.responses()] == [[(0, b"abcd")]]
        c.poll("t", 0, 1, wait_ms=60_000)
        h.produce("t", 0, b"efgh", b"ijkl")
        assert [polled(r) for r in c.responses()] == [[(1, b"efgh"), (2, b"ijkl")]]
        assert h.reads.held == [] and h.broker.waiters.count == 0

    def test_a_poll_behind_the_remembered_tail_still_reads_in_the_pool(self) -> None:
        h = self.h
        h.produce("t", 0, b"old")
        h.logdir.get("t", 0)._state.tail.forget()
        h.produce("t", 0, b"new")
        c = h.native()
        h.reads.hold = True
        c.poll("t", 0, 0, wait_ms=60_000)
        assert len(h.reads.held) == 1 and c.responses() == []
        h.reads.deliver()
        assert [polled(r) for r in c.responses()] == [[(0, b"old"), (1, b"new")]]
