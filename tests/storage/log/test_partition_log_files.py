"""PartitionLog: append, roll, lookup, reads, visibility, retention, disk errors."""

from __future__ import annotations

import errno
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from brokerd.errors import OffsetOutOfRange, StorageError, UnknownTopicOrPartition
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch, rebuild_batch
from brokerd.storage.record.header import parse_batches, read_header, scan_batches
from brokerd.storage.segment.segment import Segment
from brokerd.storage.types import Record

from tests.read_specs import BYTES, COMMITTED_RECORDS

BIG = 1 << 20


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def open_log(path: Path, clock: Any = time.time, **config: Any) -> PartitionLog:
    return PartitionLog.open(str(path), LogConfig(**config), recovery_point=None, clock=clock)


def fill(
    plog: PartitionLog, batches: int, *, seed: int = 1, ts: int = 1000
) -> dict[int, bytes | None]:
    """Append ``batches`` batches of 1-5 values; returns offset -> value."""
    rng = random.Random(seed)
    expected: dict[int, bytes | None] = {}
    for i in range(batches):
        values = [
            None if rng.random() < 0.05 else b"v%d-%d-" % (i, j) + b"x" * rng.randrange(40)
            for j in range(rng.randint(1, 5))
        ]
        info = plog.append_values(values, timestamp_ms=ts + i)
        for j, value in enumerate(values):
            expected[info.base_offset + j] = value
    plog.publish()
    return expected


def test_roll_and_lookup_every_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=700, index_interval_bytes=100)
    expected = fill(plog, 300)
    assert plog.log_end_offset == plog.high_watermark == len(expected)
    names = sorted(os.listdir(tmp_path / "t-0"))
    logs = [n for n in names if n.endswith(".log")]
    assert len(logs) > 20
    assert all(len(n) == 24 and n[:20].isdigit() for n in logs)
    assert [int(n[:20]) for n in logs] == list(plog.segment_bases)
    for offset, value in expected.items():
        result = plog.read(offset, 1, COMMITTED_RECORDS)
        assert result.decoded[0].offset == offset
        assert result.decoded[0].value == value
        raw = plog.read(offset, 1, BYTES).records
        headers = scan_batches(raw).batches
        assert headers, offset
        first = headers[0][1]
        assert first.base_offset <= offset <= first.last_offset
        # Raw bytes are exactly what read_records decodes.
        decoded = decode_records(raw, max_uncompressed=BIG)
        assert any(r.offset == offset and r.value == value for r in decoded)
    plog.close()


def test_read_returns_whole_batch_then_cuts(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    sizes = []
    for i in range(5):
        info = plog.append_values([b"%d" % i * 300], timestamp_ms=1)
        assert info.base_offset == i
        sizes.append(len(encode_batch([b"%d" % i * 300], timestamp_ms=1)))
    plog.publish()
    # max_bytes smaller than one batch: still one whole batch.
    data = plog.read(0, 10, BYTES).records
    assert len(data) == sizes[0]
    # A limit in the middle of the third batch: two whole batches and a partial one.
    data = plog.read(0, sizes[0] + sizes[1] + 100, BYTES).records
    assert len(data) == sizes[0] + sizes[1] + 100
    scan = scan_batches(data)
    assert len(scan.batches) == 2 and scan.reason is None and scan.pending is not None
    # Everything.
    assert len(plog.read(0, 10**9, BYTES).records) == sum(sizes)
    assert plog.read(5, 100, BYTES).records == b""


def test_visibility_and_out_of_range(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    assert plog.read(0, 100, BYTES).records == b""
    assert plog.read(0, 100, COMMITTED_RECORDS).decoded == ()
    plog.append_values([b"a", b"b"], timestamp_ms=1)
    # Appended but not published: invisible.
    assert plog.high_watermark == 0
    assert plog.read(0, 100, BYTES).records == b""
    with pytest.raises(OffsetOutOfRange):
        plog.read(1, 100, BYTES)
    assert plog.publish() == 2
    assert [r.value for r in plog.read(0, 100, COMMITTED_RECORDS).decoded] == [b"a", b"b"]
    assert plog.read(2, 100, BYTES).records == b""
    for bad in (-1, 3, 10**12):
        with pytest.raises(OffsetOutOfRange) as info:
            plog.read(bad, 100, BYTES)
        assert info.value.high_watermark == 2
        with pytest.raises(OffsetOutOfRange):
            plog.read(bad, 100, COMMITTED_RECORDS)
    # Appended after publishing: the old high watermark still bounds readers.
    plog.append_values([b"c"], timestamp_ms=1)
    assert [r.value for r in plog.read(0, 100, COMMITTED_RECORDS).decoded] == [b"a", b"b"]
    result = plog.read(0, 10**6, BYTES)
    assert result.high_watermark == 2
    assert len(scan_batches(result.records).batches) == 1


def test_unpublished_new_segment_invisible(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=100)
    plog.append_values([b"x" * 50], timestamp_ms=1)
    plog.publish()
    plog.append_values([b"y" * 50], timestamp_ms=1)  # rolls to a new segment
    assert len(plog.segment_bases) == 2
    assert [r.value for r in plog.read(0, 10**6, COMMITTED_RECORDS).decoded] == [b"x" * 50]
    assert plog.offset_for_timestamp(0) == (0, 1)
    plog.publish()
    assert [r.offset for r in plog.read(0, 10**6, COMMITTED_RECORDS).decoded] == [0, 1]


def test_read_records_budget_and_across_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=300)
    for i in range(20):
        plog.append_values([b"%02d" % i + b"." * 98], timestamp_ms=i)
    plog.publish()
    assert len(plog.segment_bases) > 5
    result = plog.read(0, 1000, COMMITTED_RECORDS)
    assert [r.offset for r in result.decoded] == list(range(10))
    # Always at least one record, even over budget.
    assert len(plog.read(7, 0, COMMITTED_RECORDS).decoded) == 1
    # Starts exactly at the offset inside a batch, continues across segments.
    decoded = plog.read(13, 10**6, COMMITTED_RECORDS).decoded
    assert [r.offset for r in decoded] == list(range(13, 20))
    assert result.high_watermark == 20 and result.log_start_offset == 0


def test_read_records_skips_earlier_records_in_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.append_values([b"a", b"b", b"c", b"d"], timestamp_ms=1)
    plog.append_values([b"e"], timestamp_ms=2)
    plog.publish()
    assert [r.value for r in plog.read(2, 10**6, COMMITTED_RECORDS).decoded] == [b"c", b"d", b"e"]
    assert [r.value for r in plog.read(2, 1, COMMITTED_RECORDS).decoded] == [b"c"]


def test_append_client_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.append_values([b"native"], timestamp_ms=1)
    payload = b"".join(
        encode_batch(
            [b"%s-%d" % (c.name.encode(), i) for i in range(3)],
            timestamp_ms=5,
            compression=c,
            base_offset=777,
        )
        for c in Compression
    )
    headers = parse_batches(payload, max_batch_bytes=BIG)
    info = plog.append(payload, headers)
    assert (info.base_offset, info.last_offset) == (1, 15)
    plog.publish()
    values = [r.value for r in plog.read(0, 10**6, COMMITTED_RECORDS).decoded]
    assert values[0] == b"native" and values[-1] == b"ZSTD-2" and len(values) == 16
    raw = plog.read(1, 10**6, BYTES).records
    stored = scan_batches(raw, expected_offset=1)
    assert stored.reason is None and len(stored.batches) == 5
    assert all(h.partition_leader_epoch == 0 for _, h in stored.batches)
    # Stored byte for byte apart from base offset and leader epoch.
    assert raw[61:][:20] == payload[61:81]
    with pytest.raises(ValueError):
        plog.append(payload, headers[:-1])


def test_offset_for_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=60)
    rng = random.Random(5)
    stamps: list[int] = []
    for i in range(120):
        # Mostly increasing, with some out-of-order client clocks.
        ts = i * 10 + (rng.randrange(-50, 50) if rng.random() < 0.2 else 0)
        plog.append_values([b"x", b"y"], timestamp_ms=ts)
        stamps += [ts, ts]
    plog.publish()
    assert len(plog.segment_bases) > 5
    for target in range(-100, 1300, 7):
        want = next(((o, t) for o, t in enumerate(stamps) if t >= target), None)
        assert plog.offset_for_timestamp(target) == want, target


def test_segment_ms_roll_uses_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock=clock, segment_ms=60_000)
    plog.append_values([b"a"], timestamp_ms=1)
    clock.now += 59
    plog.append_values([b"b"], timestamp_ms=1)
    assert len(plog.segment_bases) == 1
    clock.now += 2
    plog.append_values([b"c"], timestamp_ms=1)
    assert list(plog.segment_bases) == [0, 2]
    # An empty active segment never rolls by age.
    clock.now += 10_000
    plog.append_values([b"d"], timestamp_ms=1)
    assert list(plog.segment_bases) == [0, 2, 3]


def test_retention_by_size(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=500, retention_bytes=1500)
    expected = fill(plog, 100)
    before = len(plog.segment_bases)
    deleted = plog.enforce_retention()
    assert deleted > 0 and len(plog.segment_bases) == before - deleted
    assert plog.size_bytes >= 1500
    start = plog.log_start_offset
    assert start == plog.segment_bases[0] > 0
    with pytest.raises(OffsetOutOfRange):
        plog.read(start - 1, 100, BYTES)
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 100, COMMITTED_RECORDS)
    for offset in range(start, plog.high_watermark):
        assert plog.read(offset, 1, COMMITTED_RECORDS).decoded[0].value == expected[offset]
    files = os.listdir(tmp_path / "t-0")
    assert sorted(int(n[:20]) for n in files if n.endswith(".log")) == list(plog.segment_bases)
    assert len(files) == 3 * len(plog.segment_bases)
    assert plog.enforce_retention() == 0


def test_retention_by_time_deletes_old_segments_then_the_active_one(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    plog = open_log(tmp_path / "t-0", clock=clock, segment_bytes=300, retention_ms=10_000)
    for i in range(30):
        plog.append_values([b"z" * 60], timestamp_ms=1_000_000 + i * 100)
    plog.publish()
    segments = len(plog.segment_bases)
    # Newest record of the first segments: about 1,000,000 + a few hundred ms.
    assert plog.enforce_retention(now=1_000_000 / 1000 + 5) == 0
    deleted = plog.enforce_retention(now=(1_000_000 + 1500 + 10_000) / 1000)
    assert 0 < deleted < segments
    assert plog.log_start_offset == plog.segment_bases[0]
    # Far future: every record is expired, the active segment's too: it is rolled and
    # deleted, and the log is empty from its end offset on.
    plog.enforce_retention(now=10**9)
    assert plog.segment_bases == (30,)
    assert plog.log_start_offset == plog.log_end_offset == plog.high_watermark == 30
    assert plog.read(30, 10**6, COMMITTED_RECORDS).decoded == ()
    plog.append_values([b"after"], timestamp_ms=2)
    plog.publish()
    assert plog.read(plog.high_watermark - 1, 10, COMMITTED_RECORDS).decoded[0].value == b"after"
    plog.close()


def _log_files(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


def test_retention_deletes_a_quiet_topics_records(tmp_path: Path) -> None:
    """retention.ms=3000 and 5 records, then nothing: the records go once all are 3 s
    old, though they are in the active segment (Kafka rolls, then deletes it); the log
    end offset stays, the start moves to it, and a restart sees the same."""
    clock = FakeClock(1000.0)
    path = tmp_path / "t-0"
    plog = open_log(path, clock=clock, retention_ms=3000)
    for i in range(5):
        plog.append_values([b"r%d" % i], timestamp_ms=1_000_000 + i)
    plog.flush()
    plog.publish()
    clock.now = 1003.0  # the newest record is 2.996 s old
    assert plog.enforce_retention() == 0
    assert plog.read(0, 10**6, COMMITTED_RECORDS).decoded
    clock.now = 1003.1
    assert plog.enforce_retention() == 1
    assert plog.segment_bases == (5,)
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (5, 5, 5)
    with pytest.raises(OffsetOutOfRange):
        plog.read(4, 100, COMMITTED_RECORDS)
    assert plog.read(5, 100, COMMITTED_RECORDS).decoded == ()
    assert _log_files(path) == ["00000000000000000005.log"]
    plog.close()
    plog = PartitionLog.open(str(path), LogConfig(retention_ms=3000), recovery_point=0)
    try:
        assert (plog.log_start_offset, plog.log_end_offset) == (5, 5)
        assert plog.append_values([b"next"], timestamp_ms=1_000_000).base_offset == 5
    finally:
        plog.close()


class _Crash(Exception):
    """The process dying at this point (nothing after it runs)."""


def test_a_crash_between_the_roll_and_the_delete_keeps_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention rolls the expired active segment, then the process dies before the old
    segment is deleted: the reopened log has every record, its end offset, and an empty
    active segment; the next pass deletes the old one. A crash in the middle of the
    deletion (the log file unlinked, its indexes not yet) reopens as the deletion done."""
    clock = FakeClock(1000.0)
    path = tmp_path / "t-0"
    plog = open_log(path, clock=clock, retention_ms=3000)
    for i in range(5):
        plog.append_values([b"r%d" % i], timestamp_ms=1_000_000 + i)
    plog.flush()
    plog.publish()
    clock.now = 1010.0

    def crash(self: Segment) -> None:
        raise _Crash

    with monkeypatch.context() as patch:
        patch.setattr(Segment, "delete", crash)
        with pytest.raises(_Crash):
            plog.enforce_retention()
    # The dead process's log is left as it was (its files are not closed cleanly).
    assert _log_files(path) == ["00000000000000000000.log", "00000000000000000005.log"]
    plog = PartitionLog.open(str(path), LogConfig(retention_ms=3000), recovery_point=0,
                             clock=clock)
    try:
        assert plog.segment_bases == (0, 5)
        assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (0, 5, 5)
        values = [r.value for r in plog.read(0, 10**6, COMMITTED_RECORDS).decoded]
        assert values == [b"r%d" % i for i in range(5)]
        assert plog.enforce_retention() == 1
        assert plog.segment_bases == (5,)
        assert (plog.log_start_offset, plog.log_end_offset) == (5, 5)
    finally:
        plog.close()
    # Half a deletion: the old log file gone, its indexes left behind.
    plog = open_log(path, clock=clock, retention_ms=3000)
    plog.append_values([b"late"], timestamp_ms=1_000_000)
    plog.flush()
    plog.publish()
    plog.enforce_retention()  # rolls to 6 and deletes segment 5
    plog.close()
    Segment.create(str(path), 5, 4096).close()  # its index files back, as if not yet unlinked
    os.unlink(path / "00000000000000000005.log")
    plog = PartitionLog.open(str(path), LogConfig(retention_ms=3000), recovery_point=0)
    try:
        assert plog.segment_bases == (6,)
        assert (plog.log_start_offset, plog.log_end_offset) == (6, 6)
        assert sorted(os.listdir(path)) == [
            "00000000000000000006" + suffix for suffix in (".index", ".log", ".timeindex")
        ]
    finally:
        plog.close()


def test_retention_races_reads(tmp_path: Path) -> None:
    """Reads racing with deletion either succeed or raise OffsetOutOfRange."""
    plog = open_log(tmp_path / "t-0", segment_bytes=400, retention_bytes=800)
    fill(plog, 20)
    # A count of appends, not a deadline: a paused process still races, and still
    # deletes segments.
    written = threading.Event()
    errors: list[BaseException] = []
    counts = {"ok": 0, "oor": 0}

    def writer() -> None:
        for i in range(100):
            plog.append_values([b"w%d" % i + b"." * 50], timestamp_ms=i)
            plog.publish()
            plog.enforce_retention()
        written.set()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        done = 0
        while not written.is_set() or done < 20:
            done += 1
            start, end = plog.log_start_offset, plog.high_watermark
            offset = rng.randint(max(0, start - 3), end)
            try:
                if rng.random() < 0.5:
                    plog.read(offset, 300, BYTES)
                else:
                    plog.read(offset, 300, COMMITTED_RECORDS)
                counts["ok"] += 1
            except OffsetOutOfRange:
                counts["oor"] += 1
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(s,)) for s in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert counts["ok"] > 0
    assert plog.log_start_offset > 0


def test_write_error_truncates_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.append_values([b"good"], timestamp_ms=1)
    log_file = tmp_path / "t-0" / f"{0:020d}.log"
    size = log_file.stat().st_size
    real = os.pwrite

    def half_then_enospc(fd: int, data: Any, pos: int) -> int:
        if len(data) > 8:
            real(fd, bytes(data)[:8], pos)
            return 8
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_enospc)
    with pytest.raises(StorageError, match="No space"):
        plog.append_values([b"lost"], timestamp_ms=1)
    monkeypatch.setattr(os, "pwrite", real)
    assert log_file.stat().st_size == size
    assert plog.log_end_offset == 1
    # Space is back: offsets continue densely.
    assert plog.append_values([b"next"], timestamp_ms=1).base_offset == 1
    plog.flush()
    plog.publish()
    assert [r.value for r in plog.read(0, 100, COMMITTED_RECORDS).decoded] == [b"good", b"next"]


def test_fsync_error_fails_partition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.append_values([b"a"], timestamp_ms=1)
    plog.flush()
    assert plog.recovery_point == 1
    plog.append_values([b"b"], timestamp_ms=1)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", eio)
    with pytest.raises(StorageError):
        plog.flush()
    monkeypatch.undo()
    assert plog.failed
    assert plog.recovery_point == 1
    # Never retry-and-trust: the partition refuses appends and flushes from now on.
    with pytest.raises(StorageError):
        plog.flush()
    with pytest.raises(StorageError):
        plog.append_values([b"c"], timestamp_ms=1)
    plog.publish()
    assert [r.value for r in plog.read(0, 100, COMMITTED_RECORDS).decoded] == [b"a", b"b"]
    plog.close()


def test_closed_log_refuses(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.append_values([b"a"], timestamp_ms=1)
    plog.publish()
    plog.close()
    plog.close()
    with pytest.raises(UnknownTopicOrPartition):
        plog.read(0, 10, BYTES)
    with pytest.raises(UnknownTopicOrPartition):
        plog.append_values([b"b"], timestamp_ms=1)


def test_lookup_is_logarithmic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read anywhere in a big segment costs a bisect and a couple of preads."""
    plog = open_log(tmp_path / "t-0")
    payload = b"".join(encode_batch([b"r%d" % i], timestamp_ms=i) for i in range(20_000))
    plog.append(payload, parse_batches(payload, max_batch_bytes=len(payload)))
    plog.publish()
    calls: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, pos: int) -> bytes:
        calls.append(n)
        return real(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting)
    for offset in (0, 1, 9_999, 19_998, 19_999):
        calls.clear()
        result = plog.read(offset, 1, COMMITTED_RECORDS)
        assert result.decoded[0].value == b"r%d" % offset
        assert len(calls) <= 3, (offset, calls)
        calls.clear()
        plog.read(offset, 100, BYTES)
        assert len(calls) <= 3, (offset, calls)
        assert sum(calls) < 40_000


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=0)
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=2**31)
    with pytest.raises(ValueError):
        LogConfig(retention_ms=-5)
    with pytest.raises(ValueError):
        LogConfig(index_interval_bytes=-1)  # 0 is Kafka's "an entry for every batch"
    with pytest.raises(ValueError):
        LogConfig(segment_index_bytes=3)


def test_append_values_validation(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    with pytest.raises(ValueError):
        plog.append_values([], timestamp_ms=1)
    with pytest.raises(ValueError):
        plog.append(b"", [])
    assert plog.log_end_offset == 0


@pytest.mark.slow
def test_fetch_time_independent_of_offset_million_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=64 * 1024 * 1024)
    values = [b"x" * 100] * 1000
    for _ in range(1000):
        plog.append_values(values, timestamp_ms=1)
    plog.publish()

    def cost(offset: int) -> float:
        started = time.perf_counter()
        for _ in range(20):
            plog.read(offset, 64 * 1024, COMMITTED_RECORDS)
            plog.read(offset, 64 * 1024, BYTES)
        return time.perf_counter() - started

    first, last = cost(0), cost(999_000)
    assert last < first * 3 and first < last * 3


def test_batch_larger_than_read_chunk(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.append_values([b"small"], timestamp_ms=1)
    big = [bytes([i % 256]) * 1000 for i in range(400)]  # one batch of about 400 KB
    plog.append_values(big, timestamp_ms=2)
    plog.append_values([b"tail"], timestamp_ms=3)
    plog.publish()
    values = [r.value for r in plog.read(0, 10**7, COMMITTED_RECORDS).decoded]
    assert values == [b"small", *big, b"tail"]
    assert [r.value for r in plog.read(300, 10, COMMITTED_RECORDS).decoded] == [big[299]]
    assert len(plog.read(1, 10, BYTES).records) > 400_000


def _batch_with_stamps(stamps: list[int]) -> bytes:
    """One uncompressed batch whose records carry ``stamps`` (a client's own clock)."""
    plain = encode_batch([b"v"] * len(stamps), timestamp_ms=min(stamps))
    header = read_header(plain)
    header = attrs.evolve(header, max_timestamp=max(stamps),
                          last_offset_delta=len(stamps) - 1)
    records = [Record(i, ts, None, b"v") for i, ts in enumerate(stamps)]
    return rebuild_batch(header, records)


def test_max_timestamp_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=60)
    assert plog.max_timestamp_offset() is None  # no record at all
    for i in range(40):
        plog.append_values([b"x" * 20], timestamp_ms=1000 + i)
    # The largest timestamp is in the middle of a batch, twice: the first record has it.
    data = _batch_with_stamps([1500, 9000, 1200, 9000])
    plog.append(data, parse_batches(data, max_batch_bytes=BIG))
    middle = plog.log_end_offset - 3
    for i in range(40):
        plog.append_values([b"y" * 20], timestamp_ms=2000 + i)
    plog.publish()
    assert len(plog.segment_bases) > 3
    assert plog.max_timestamp_offset() == (middle, 9000)
    # A later batch with the same largest timestamp does not move the answer.
    plog.append_values([b"z"], timestamp_ms=9000)
    plog.publish()
    assert plog.max_timestamp_offset() == (middle, 9000)
    plog.append_values([b"z"], timestamp_ms=9001)
    plog.publish()
    assert plog.max_timestamp_offset() == (plog.log_end_offset - 1, 9001)
    plog.close()
