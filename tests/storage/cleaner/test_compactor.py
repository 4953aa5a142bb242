"""Log compaction over real partition directories (storage/cleaner/compactor.py, the swap, gaps)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from brokerd.errors import InvalidRecord
from brokerd.storage.cleaner.compactor import (
    CleanResult,
    Throttle,
    clean_log,
    cleanable_state,
    read_checkpoint,
    write_checkpoint,
)
from brokerd.storage.cleaner.keymap import ENTRY_BYTES, OffsetMap
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import ProducerStateManager
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import read_header

from tests.compaction_helpers import (
    T0,
    compact_config,
    latest,
    live,
    open_log,
    put,
    read_all,
    roll,
    write_overwrites,
)
from tests.read_specs import BYTES, COMMITTED_RECORDS

BIG_MAP = OffsetMap(1 << 20)


def clean(
    log: PartitionLog, checkpoint: int | None = None, now: float = T0, **kw: Any
) -> CleanResult:
    result = clean_log(log, checkpoint, now_ms=now, key_map=kw.pop("key_map", BIG_MAP), **kw)
    assert result is not None
    return result


def check_compacted(
    log: PartitionLog, end: int, expected: dict[bytes, tuple[int, bytes | None]]
) -> None:
    records = read_all(log)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets increase"
    below = [r for r in records if r.offset < end and r.key != b"filler"]
    keys = [r.key for r in below]
    assert len(keys) == len(set(keys)), "one record per key in the cleaned range"
    state = latest(records)
    for key, (offset, value) in expected.items():
        assert state[key] == value
        if offset < end:
            assert any(r.offset == offset for r in below)


def test_overwrites_keep_latest_per_key_with_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected = write_overwrites(log, keys=40, rounds=25)
    roll(log)
    end_before = log.log_end_offset
    size_before = log.size_bytes
    result = clean(log)
    assert result.end <= log.cleanable_end and result.records_removed > 0
    check_compacted(log, result.end, expected)
    assert log.log_end_offset == end_before and log.log_start_offset == 0
    assert log.size_bytes < size_before / 3
    # Kafka fetch: raw batches with gaps, every batch valid, offsets increasing.
    data = log.read(0, 1 << 20, BYTES).records
    pos, last = 0, -1
    while pos + 61 <= len(data):
        header = read_header(data, pos)
        assert header.base_offset > last and header.records_count <= header.last_offset_delta + 1
        last = header.last_offset
        pos += header.size
    # A fetch from an offset inside a gap gets the next surviving record.
    gap = next(o for o in range(result.end) if o not in {r.offset for r in read_all(log)})
    first = log.read(gap, 100, COMMITTED_RECORDS).decoded[0]
    assert first.offset > gap
    log.close()
    # The cleaned log reopens (clean and after a crash) with the same content.
    for point in (None, 0):
        again = open_log(tmp_path, point=point)
        check_compacted(again, result.end, expected)
        assert again.log_end_offset == end_before
        again.close()


def test_tombstones_kept_until_delete_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(delete_retention_ms=10_000))
    put(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], ts=T0)
    put(log, [(b"a", None), (b"b", b"2")], ts=T0 + 1)
    roll(log)
    first = clean(log, None, now=T0 + 5)
    state = latest(read_all(log))
    assert state[b"a"] is None and state[b"b"] == b"2", "tombstone kept by its first pass"
    assert [r.key for r in read_all(log)].count(b"a") == 1
    # A later pass before delete.retention.ms: still there.
    put(log, [(b"d", b"1")], ts=T0 + 2)
    roll(log)
    second = clean(log, first.end, now=T0 + 5_000)
    assert b"a" in latest(read_all(log))
    # After it: gone, the live keys stay.
    put(log, [(b"e", b"1")], ts=T0 + 3)
    roll(log)
    clean(log, second.end, now=T0 + 20_000)
    state = latest(read_all(log))
    assert b"a" not in state
    assert live(state) == {b"b": b"2", b"c": b"1", b"d": b"1", b"e": b"1", b"filler": b"x" * 200}
    log.close()


def test_min_compaction_lag(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(min_compaction_lag_ms=3_600_000))
    write_overwrites(log, keys=5, rounds=40)
    roll(log)
    assert clean_log(log, None, now_ms=T0 + 1000, key_map=BIG_MAP) is None
    assert clean(log, None, now=T0 + 3_600_001).records_removed > 0
    log.close()


def test_dirty_ratio_and_max_lag_scheduling(tmp_path: Path) -> None:
    config = compact_config(min_cleanable_dirty_ratio=0.5, max_compaction_lag_ms=60_000)
    log = open_log(tmp_path, config)
    write_overwrites(log, keys=2000, rounds=1)
    roll(log)
    state = cleanable_state(log, None, T0)
    assert state.dirty_ratio == 1.0 and state.due(log, T0)
    result = clean(log)
    # A little new dirty data: below the ratio, and not old enough.
    put(log, [(b"k001", b"new")], ts=T0 + 10)
    roll(log, ts=T0 + 10)
    state = cleanable_state(log, result.end, T0 + 20)
    assert 0 < state.dirty_ratio < 0.5 and not state.due(log, T0 + 20)
    # Older than max.compaction.lag.ms: due whatever the ratio.
    assert state.due(log, T0 + 10 + 60_000)
    log.close()


def test_compressed_batches_keep_their_codec(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected: dict[bytes, bytes | None] = {}
    codec_at: dict[int, Compression] = {}
    for r, codec in enumerate(
        [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD] * 5
    ):
        pairs: list[tuple[bytes | None, bytes | None]] = [
            (b"k%d" % k, b"value-%d-%d" % (k, r) * 5) for k in range(8) if (k + r) % 3
        ]
        codec_at[put(log, pairs, codec=codec)] = codec
        expected.update({k: v for k, v in pairs if k is not None})
    roll(log)
    result = clean(log)
    assert result.records_removed > 0
    records = read_all(log)
    assert {k: v for k, v in latest(records).items() if k != b"filler"} == expected
    data = log.read(0, 1 << 22, BYTES).records
    pos = 0
    rebuilt = 0
    while pos + 61 <= len(data):
        header = read_header(data, pos)
        if header.base_offset in codec_at:
            assert header.compression == codec_at[header.base_offset]
            rebuilt += header.records_count < header.last_offset_delta + 1
        pos += header.size
    assert rebuilt
    log.close()


def test_small_key_map_cleans_in_steps(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected = write_overwrites(log, keys=30, rounds=10)
    roll(log)
    small = OffsetMap(ENTRY_BYTES * 12)
    checkpoint: int | None = None
    ends = []
    while True:
        result = clean_log(log, checkpoint, now_ms=T0, key_map=small)
        if result is None:
            break
        assert result.end > (checkpoint or 0)
        checkpoint = result.end
        ends.append(result.end)
    assert len(ends) > 2
    check_compacted(log, 0, expected)
    assert {k: v for k, v in latest(read_all(log)).items() if k != b"filler"} == {
        k: v for k, (_, v) in expected.items()
    }
    log.close()


def test_interrupted_swap_is_completed_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected = write_overwrites(log, keys=20, rounds=20)
    roll(log)
    end = log.log_end_offset

    class Crash(Exception):
        pass

    def hook(step: str) -> None:
        if step == "swap-committed":
            raise Crash(step)

    with pytest.raises(Crash):
        clean_log(log, None, now_ms=T0, key_map=BIG_MAP, hook=hook)
    assert any(name.endswith(".log.swap") for name in os.listdir(tmp_path))
    log.close()
    again = open_log(tmp_path, point=0)
    assert not any(name.endswith((".swap", ".cleaned")) for name in os.listdir(tmp_path))
    assert again.log_end_offset == end
    assert {k: v for k, v in latest(read_all(again)).items() if k != b"filler"} == {
        k: v for k, (_, v) in expected.items()
    }
    again.close()


def test_stopped_pass_leaves_no_temp_files(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_overwrites(log, keys=20, rounds=20)
    roll(log)
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] > 30

    assert clean_log(log, None, now_ms=T0, key_map=BIG_MAP, should_stop=stop) is None
    assert not any(name.endswith((".swap", ".cleaned")) for name in os.listdir(tmp_path))
    log.close()


def test_producer_state_replays_cleaned_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    seq = 0
    for r in range(30):
        pairs: list[tuple[bytes | None, bytes | None]] = [(b"k%d" % k, b"%d" % r) for k in range(5)]
        put(log, pairs, producer=(7, 0, seq))
        seq += len(pairs)
    roll(log)
    clean(log)
    table = ProducerStateManager()
    table.replay(log.batch_headers(0), log_start_offset=0)
    snapshot = table.snapshot()
    assert snapshot[7]["batches"], "the surviving batches keep their sequence ranges"
    last = snapshot[7]["batches"][-1]
    assert last[1] - last[0] == last[3] - last[2]
    log.close()


def test_retention_after_cleaning_and_checkpoint_file(tmp_path: Path) -> None:
    config = compact_config(cleanup_policy={"compact", "delete"}, retention_bytes=1)
    log = open_log(tmp_path, config)
    write_overwrites(log, keys=20, rounds=20)
    roll(log)
    clean(log)
    assert log.enforce_retention(T0 / 1000.0) >= 1
    records = read_all(log)
    assert [r.offset for r in records] == sorted(r.offset for r in records)
    assert records[0].offset >= log.log_start_offset
    log.close()
    write_checkpoint(str(tmp_path), {("t", 0): 5, ("u", 3): 9})
    assert read_checkpoint(str(tmp_path)) == {("t", 0): 5, ("u", 3): 9}
    (tmp_path / "cleaner-offset-checkpoint").write_bytes(b"junk")
    assert read_checkpoint(str(tmp_path)) == {}


def test_throttle_sleeps_to_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttle = Throttle(1000.0, clock=lambda: now[0], sleep=sleep)
    throttle.account(500)
    throttle.account(1500)
    assert sum(slept) == pytest.approx(2.0)


def test_kafka_answer_to_a_keyless_record() -> None:
    from brokerd.kafka.errors import ErrorCode
    from brokerd.kafka.server.handlers.compaction import invalid_record_response

    why = "Compacted topic cannot accept message without key"
    exc = InvalidRecord(f"2 record(s) refused: {why}", ((3, why), (5, why)))
    old = invalid_record_response(0, 7, exc)
    assert old.error_code == ErrorCode.CORRUPT_MESSAGE and not old.record_errors
    new = invalid_record_response(0, 8, exc)
    assert new.error_code == ErrorCode.INVALID_RECORD == 87
    assert [(e.batch_index, e.batch_index_error_message) for e in new.record_errors] == [
        (3, why), (5, why)]
    assert new.error_message == str(exc)


def test_broker_refuses_keyless_produce_to_compacted_topic(tmp_path: Path) -> None:
    from twisted.internet import defer
    from twisted.internet.task import Clock

    from brokerd.core import Broker
    from brokerd.storage.logdir.log_directory import LogDirectory

    logdir = LogDirectory.open(str(tmp_path), compact_config())
    broker = Broker(
        logdir, reactor=Clock(), run_read=defer.maybeDeferred, run_write=defer.maybeDeferred,
        retention_check_seconds=0, checkpoint_seconds=0,
    )
    broker.startService()
    failures: list[Any] = []
    broker.produce_values("c", 0, [b"v"]).addErrback(failures.append)
    keyless = encode_batch([b"v"], timestamp_ms=1)
    broker.produce_batches("c", 0, keyless).addErrback(failures.append)
    assert [f.check(InvalidRecord) for f in failures] == [InvalidRecord, InvalidRecord]
    keyed = encode_batch([b"v"], keys=[b"k"], timestamp_ms=1)
    done: list[Any] = []
    broker.produce_batches("c", 0, keyed).addCallback(done.append)
    assert done and done[0].base_offset == 0
    broker.stopService()
