"""Partition logs under a small descriptor budget (brokerd/storage/segment/fd_cache.py): real
files, more partitions and segments than the budget, and the promises that must hold when
a segment's file was closed and is opened again: appends, flushes, reads, pins, retention,
restarts, the transaction index."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.segment.fd_cache import FdCache, set_default_cache
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.txn_index import AbortedEntry, TxnIndex

from tests.read_specs import BYTES, COMMITTED_RECORDS, REFERENCE, span_of

BUDGET = 4
BIG = 1 << 20


@pytest.fixture
def cache() -> Iterator[FdCache]:
    small = FdCache(BUDGET)
    set_default_cache(small)
    try:
        yield small
    finally:
        set_default_cache(None)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _open(
    path: Path, recovery_point: int | None = None, *, segment_bytes: int = 1 << 20
) -> PartitionLog:
    config = LogConfig(segment_bytes=segment_bytes)
    return PartitionLog.open(str(path), config, recovery_point=recovery_point)


def _values(p: int, n: int) -> list[bytes]:
    return [f"p{p}-v{i}".encode() for i in range(n)]


def _append(plog: PartitionLog, values: list[bytes], per_batch: int = 5) -> None:
    for i in range(0, len(values), per_batch):
        plog.append_values(values[i : i + per_batch], timestamp_ms=1_000)
    plog.flush()
    plog.publish()


def _read_all(plog: PartitionLog) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = 0
    while offset < plog.high_watermark:
        got = plog.read(offset, BIG, COMMITTED_RECORDS).decoded
        assert got, f"nothing read at {offset}"
        out.extend(r.value for r in got)
        offset = got[-1].offset + 1
    return out


def test_more_partitions_than_the_budget_hold_only_the_budget(
    tmp_path: Path, cache: FdCache
) -> None:
    before = _open_fds()
    logs = [_open(tmp_path / f"t-{p}", segment_bytes=300) for p in range(24)]
    for round_ in range(3):
        for p, plog in enumerate(logs):
            _append(plog, _values(p, 20)[round_ * 5 : round_ * 5 + 5])
    assert cache.open_count <= BUDGET
    assert _open_fds() - before <= BUDGET
    for p, plog in enumerate(logs):
        assert len(plog.segments) > 1  # rolled: sealed segments too
        assert _read_all(plog) == _values(p, 15)
    assert cache.open_count <= BUDGET
    for plog in logs:
        plog.close()
    assert cache.open_count == 0
    assert _open_fds() == before


def test_the_hot_partition_is_not_reopened_per_append(tmp_path: Path, cache: FdCache) -> None:
    hot = _open(tmp_path / "hot-0")
    others = [_open(tmp_path / f"cold-{p}") for p in range(8)]
    _append(hot, [b"first"])
    opens = cache.opens
    cold_opens = 0
    for i in range(200):
        _append(hot, [f"hot {i}".encode()])
        if i % 10 == 0:
            # Fewer other files between two hot appends than the budget holds.
            cold = others[(i // 10) % len(others)]
            was_open = cold.segments[-1].file_open
            _append(cold, [b"cold"])
            cold_opens += not was_open
        assert hot.segments[-1].file_open
    assert cache.opens - opens == cold_opens
    assert len(_read_all(hot)) == 201
    for plog in (hot, *others):
        plog.close()


def test_a_pinned_span_keeps_its_file_through_eviction_and_retention(
    tmp_path: Path, cache: FdCache
) -> None:
    plog = _open(tmp_path / "t-0", segment_bytes=300)
    _append(plog, _values(0, 40))
    _append(plog, _values(0, 40))
    first = plog.segments[0]
    expected = plog.read(0, BIG, BYTES).records
    read = plog.read(0, BIG, REFERENCE)
    span = span_of(read)
    assert span is not None and first.file_open
    # Many other files used meanwhile: the pinned one is not given back.
    logs = [_open(tmp_path / f"o-{p}") for p in range(3 * BUDGET)]
    for p, other in enumerate(logs):
        _append(other, _values(p, 3))
    assert first.file_open
    first.delete()  # what retention does to an old segment
    assert not os.path.exists(first.log_path)
    fd = span.fileno()
    assert fd == first.pinned_fd()
    assert os.pread(fd, span.length, span.position) == expected[: span.length]
    span.release()
    assert not first.file_open
    assert not first.pin()
    for other in (plog, *logs):
        other.close()


def test_a_closed_idle_segment_unlinked_or_replaced_is_not_served(
    tmp_path: Path, cache: FdCache
) -> None:
    plog = _open(tmp_path / "t-0", segment_bytes=300)
    _append(plog, _values(0, 80))
    old, second = plog.segments[0], plog.segments[1]
    logs = [_open(tmp_path / f"o-{p}") for p in range(2 * BUDGET)]
    for other in logs:
        _append(other, [b"x"])
    assert not old.file_open and not second.file_open
    # Retention unlinked the file of an idle segment a reader still has in its snapshot:
    # the reader's pin fails (as for a closed segment) instead of an error or other bytes.
    os.unlink(old.log_path)
    assert not old.pin()
    # A cleaned copy renamed over an idle segment's name is another file.
    other_path = tmp_path / "replacement"
    other_path.write_bytes(b"\0" * 100)
    os.replace(other_path, second.log_path)
    assert not second.pin()
    for other in (plog, *logs):
        other.close()


def test_flush_after_the_file_was_closed_syncs_and_recovery_keeps_it(
    tmp_path: Path, cache: FdCache
) -> None:
    plog = _open(tmp_path / "t-0")
    plog.append_values(_values(0, 10), timestamp_ms=1_000)
    active = plog.segments[-1]
    logs = [_open(tmp_path / f"o-{p}") for p in range(2 * BUDGET)]
    for other in logs:
        _append(other, [b"x"])
    assert not active.file_open
    plog.flush()  # reopens to fdatasync
    assert plog.recovery_point == 10
    plog.publish()
    plog.close()
    again = _open(tmp_path / "t-0", recovery_point=0)  # unclean: everything re-validated
    assert again.recovery is not None and again.recovery.bytes_truncated == 0
    assert _read_all(again) == _values(0, 10)
    for other in (again, *logs):
        other.close()


def test_restart_with_more_segments_than_the_budget(tmp_path: Path, cache: FdCache) -> None:
    paths = [tmp_path / f"t-{p}" for p in range(6)]
    logs = [_open(path, segment_bytes=300) for path in paths]
    for p, plog in enumerate(logs):
        _append(plog, _values(p, 60))
        assert len(plog.segments) >= 3
        plog.close()
    for recovery_point in (None, 0):
        before = _open_fds()
        logs = [_open(path, recovery_point, segment_bytes=300) for path in paths]
        assert _open_fds() - before <= BUDGET
        for p, plog in enumerate(logs):
            assert _read_all(plog) == _values(p, 60)
        for plog in logs:
            plog.close()
        assert _open_fds() == before


def test_a_segment_open_reads_its_size_and_gives_the_descriptor_to_the_cache(
    tmp_path: Path, cache: FdCache
) -> None:
    plog = _open(tmp_path / "t-0")
    _append(plog, _values(0, 5))
    size = plog.segments[0].size
    plog.close()
    segment = Segment.open(str(tmp_path / "t-0"), 0, 4096, cache)
    assert segment.size == size and segment.file_open
    assert segment.pin()
    assert segment.pinned_fd() >= 0
    segment.unpin()
    segment.close()
    assert not segment.file_open


def test_the_transaction_index_reopens_under_the_budget(tmp_path: Path, cache: FdCache) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TxnIndex(path, cache)
    index.append(AbortedEntry(1, 0, 4, 5))
    logs = [_open(tmp_path / f"o-{p}") for p in range(2 * BUDGET)]
    for other in logs:
        _append(other, [b"x"])
    index.append(AbortedEntry(2, 5, 9, 10))  # the file was closed meanwhile: reopened
    index.sync()
    index.close()
    again = TxnIndex(path, cache)
    assert again.load(0, 100) == 0
    assert again.entries == [AbortedEntry(1, 0, 4, 5), AbortedEntry(2, 5, 9, 10)]
    again.close()
    for other in logs:
        other.close()
    assert cache.open_count == 0
