"""Helpers of the log-compaction tests: real partition directories with keyed records."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches
from brokerd.storage.types import Record

from tests.read_specs import COMMITTED_RECORDS

#: Record timestamps of the helpers' writes (ms).
T0 = 1_700_000_000_000


def compact_config(**kw: object) -> LogConfig:
    base: dict[str, object] = {
        "cleanup_policy": {"compact"},
        "segment_bytes": 4096,
        "index_interval_bytes": 256,
        "min_cleanable_dirty_ratio": 0.01,
        "delete_retention_ms": 1000,
    }
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def open_log(path: Path, config: LogConfig | None = None, point: int | None = None) -> PartitionLog:
    return PartitionLog.open(str(path), config or compact_config(), recovery_point=point)


def put(
    log: PartitionLog,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    ts: int = T0,
    codec: Compression = Compression.NONE,
    producer: tuple[int, int, int] | None = None,
) -> int:
    """Append one batch of (key, value) pairs, flush and publish; its base offset."""
    pid, epoch, seq = producer or (-1, -1, -1)
    data = encode_batch(
        [v for _, v in pairs],
        keys=[k for k, _ in pairs],
        timestamp_ms=ts,
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    info = log.append(data, parse_batches(data, max_batch_bytes=1 << 30))
    log.flush()
    log.publish()
    return info.base_offset


def read_all(log: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        records = log.read(offset, 1 << 20, COMMITTED_RECORDS).decoded
        if not records:
            break
        out.extend(records)
        offset = records[-1].offset + 1
    return out


def latest(records: list[Record]) -> dict[bytes, bytes | None]:
    state: dict[bytes, bytes | None] = {}
    for r in records:
        assert r.key is not None
        state[r.key] = r.value
    return state


def live(state: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    return {k: v for k, v in state.items() if v is not None}


def write_overwrites(
    log: PartitionLog, keys: int, rounds: int, *, per_batch: int = 10, ts: int = T0
) -> dict[bytes, tuple[int, bytes | None]]:
    """``rounds`` values for each of ``keys`` keys; returns key -> (last offset, value)."""
    expected: dict[bytes, tuple[int, bytes | None]] = {}
    pairs: list[tuple[bytes | None, bytes | None]] = []
    for r in range(rounds):
        for k in range(keys):
            pairs.append((b"k%03d" % k, b"v%03d-%04d" % (k, r)))
            if len(pairs) == per_batch:
                base = put(log, pairs, ts=ts)
                for i, (key, value) in enumerate(pairs):
                    assert key is not None
                    expected[key] = (base + i, value)
                pairs = []
    if pairs:
        base = put(log, pairs, ts=ts)
        for i, (key, value) in enumerate(pairs):
            assert key is not None
            expected[key] = (base + i, value)
    return expected


def roll(log: PartitionLog, ts: int = T0) -> None:
    """Fill the active segment with one other key's records until it rolls."""
    start = len(log.segments)
    while len(log.segments) == start:
        put(log, [(b"filler", b"x" * 200)], ts=ts)
