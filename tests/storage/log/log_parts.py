"""A partition log's shared state built by hand, for the tests of each of its parts on
their own (without ``PartitionLog``): a :class:`LogState` over real segment files, batches
written into its active segment, and the published state moved as the log would."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.log_state import LogState
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.segment.segment import BatchInfo, Segment
from brokerd.storage.types import AppendInfo


def new_state(path: Path, config: LogConfig | None = None) -> LogState:
    """A state over one empty segment at offset 0 in ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    config = config or LogConfig()
    segment = Segment.create(str(path), 0, config.index_interval_bytes)
    return LogState(str(path), config, lambda: 0.0, [segment])


def write(
    state: LogState,
    data: bytes | bytearray,
    batches: list[BatchInfo],
    count: int,
    *,
    transactional: bool = False,
) -> AppendInfo:
    """Write encoded batches into the active segment, as the log's write does (no roll),
    marking them checked."""
    segment = state.segments[-1]
    if transactional and not segment.txnindex.exists:
        segment.txnindex.create()
    base = state.log_end_offset
    start = segment.size
    segment.append(data, batches)
    state.verified.mark(segment, start, start + len(data))
    state.appended(segment, count)
    return AppendInfo(base, base + count - 1, state.log_start_offset)


def append(state: LogState, values: list[bytes], timestamp_ms: int = 0) -> tuple[int, int]:
    """Append one batch of ``values``; returns its ``(byte position, size)``."""
    base = state.log_end_offset
    data = encode_batch(values, timestamp_ms=timestamp_ms, base_offset=base)
    position = state.segments[-1].size
    write(state, data, [(base, base + len(values) - 1, timestamp_ms, len(data))], len(values))
    return position, len(data)


def roll(state: LogState) -> Segment:
    """Seal the active segment and start a new one at the log end."""
    state.segments[-1].seal()
    new = Segment.create(state.path, state.log_end_offset, state.config.index_interval_bytes)
    state.set_segments((*state.segments, new))
    return new


def publish(state: LogState, lso: int | None = None) -> None:
    """Publish everything written (with ``lso``, else the end, as the stable offset)."""
    state.publish(lambda end: end if lso is None else lso)


def close(state: LogState) -> None:
    state.close()
    for segment in state.segments:
        segment.close()
