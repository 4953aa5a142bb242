"""Log compaction of one partition, on the model of Kafka's log cleaner (blocking).

A pass over a partition whose config has ``compact`` (docs/compaction.md has the rules):

1. The *cleanable* segments are the sealed ones wholly below the log's
   :attr:`~brokerd.storage.log.partition_log.PartitionLog.cleanable_end` (published and flushed),
   up to
   the first one holding a record newer than ``min_compaction_lag_ms``.
2. The *dirty* part starts at the cleaner checkpoint (``first_dirty``). An
   :class:`~brokerd.storage.cleaner.keymap.OffsetMap` of key -> latest offset is built over it,
   within a memory budget; if the map fills, the pass cleans only up to the record that
   did not fit (that offset is the new checkpoint), as Kafka does.
3. Every cleanable segment holding offsets below that end is rewritten keeping a record
   only if it is the latest of its key; records without a key are dropped (a compacted
   topic cannot hold them: Kafka's cleaner drops them too); a tombstone (null value)
   that was already in the cleaned part before this pass and whose timestamp is older
   than ``delete_retention_ms`` goes too. Control batches (transaction markers) are kept
   as they are (Kafka drops them after ``delete.retention.ms``; brokerd keeps them).
   Records of aborted transactions (the segments' ``.txnindex`` entries name them) are
   dropped and never enter the key map, so they can never shadow a committed value.
   The cleanable part ends at the last stable offset: an open transaction's records may
   still be aborted.
   Offsets are kept: a batch keeps its base offset and ``last_offset_delta`` (so its
   offset range is unchanged) with only its surviving records, its CRC recomputed, and
   compressed with its original codec. A batch with no survivor is left out, except an
   idempotent producer's last batch in the log, which keeps its last record (Kafka keeps
   the batch's header): the producer's sequence must survive for the replay of producer
   state after a restart. A segment with no batch left is deleted, except the first
   (kept empty: the log start does not move).
4. Crash safety: each rewritten segment is written to ``<base>.log.cleaned``, fsynced,
   then swapped in by :meth:`PartitionLog.replace_segment` (rename to ``.swap``, the
   commit point, then over the ``.log``; a crash is finished or rolled back at the next
   open by ``log/loader.py``). Only data below the recovery point is cleaned, and a record
   is removed only for a later record of its key that is also durable, so a crash at any
   moment loses nothing acknowledged.

The pass is throttled (:class:`Throttle`, bytes read and written per second), can be
stopped between batches (``should_stop``; the ``.cleaned`` file is then removed), and
calls ``hook(step)`` after each step (the crash tests stop the process there).

Also here: the cleaner checkpoint file (Kafka's ``cleaner-offset-checkpoint`` format)
and :func:`cleanable_state`, what the scheduler needs to pick a partition.

What it does not do: threads, scheduling, or reading configs from anywhere but
``log.config`` (``brokerd/core/cleaner_service.py`` runs passes). No Twisted.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

import attrs

from brokerd.errors import CorruptBatch, StorageError
from brokerd.storage.checkpoints import encode_checkpoint, parse_checkpoint
from brokerd.storage.cleaner.keymap import OffsetMap, key_digest
from brokerd.storage.fileio import (
    FILE_MODE,
    atomic_write,
    datasync,
    read_file,
    removed_on_error,
    write_all,
)
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import rebuild_batch
from brokerd.storage.record.header import BATCH_HEADER_SIZE, BatchHeader, read_header, scan_batches
from brokerd.storage.segment.batch_reads import MAX_DECODED_BATCH_BYTES, MAX_STORED_BATCH_BYTES
from brokerd.storage.segment.segment import LOG_SUFFIX, Segment, segment_file_name
from brokerd.storage.types import Record

__all__ = [
    "CHECKPOINT_FILE",
    "CLEANED_SUFFIX",
    "CleanResult",
    "Cleanable",
    "Throttle",
    "clean_log",
    "cleanable_state",
    "read_checkpoint",
    "write_checkpoint",
]

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
#: Bytes read at a time when a pass walks a segment.
READ_CHUNK = 1024 * 1024

Hook = Callable[[str], None]
#: An offset past any log's end.
_NO_LIMIT = 2**63 - 1
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Stopped(Exception):
    """The pass was asked to stop; nothing was swapped after that point."""


# --- throttling ---------------------------------------------------------------------------


class Throttle:
    """Keeps a pass's I/O under ``bytes_per_second`` (None: unlimited) by sleeping.

    ``sleep`` is injected: the cleaner service passes its stop event's ``wait`` so that a
    shutdown interrupts the sleep.
    """

    def __init__(
        self,
        bytes_per_second: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.rate = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self._bytes = 0

    def account(self, nbytes: int) -> None:
        if self.rate is None:
            return
        self._bytes += nbytes
        elapsed = self._clock() - self._start
        ahead = self._bytes / self.rate - elapsed
        if ahead > 0:
            self._sleep(ahead)
        if elapsed > 1.0:
            # A fresh window, so that an idle stretch does not buy a later burst.
            self._start = self._clock()
            self._bytes = 0


# --- checkpoint ---------------------------------------------------------------------------


def read_checkpoint(directory: str) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> first dirty offset`` from the data directory's cleaner
    checkpoint; empty if it is missing or unreadable (every partition is then dirty from
    its start, which costs a pass and loses nothing)."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        raw = read_file(path)
        if raw is None:
            return {}
        return parse_checkpoint(raw)
    except Exception:
        return {}


def write_checkpoint(directory: str, points: dict[tuple[str, int], int]) -> None:
    """Atomically replace the cleaner checkpoint. Raises :class:`StorageError`."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        atomic_write(path, encode_checkpoint((t, p, o) for (t, p), o in points.items()))
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc


# --- what is cleanable --------------------------------------------------------------------


@attrs.frozen
class Cleanable:
    """A partition's cleanable part as the scheduler sees it."""

    segments: tuple[Segment, ...]
    first_dirty: int
    clean_bytes: int
    dirty_bytes: int
    #: Timestamp (ms) of the oldest dirty segment's first batch, -1 if unknown.
    oldest_dirty_ms: float

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def due(self, log: PartitionLog, now_ms: float) -> bool:
        """Kafka's rule: dirty ratio at least ``min_cleanable_dirty_ratio``, or a dirty
        record older than ``max_compaction_lag_ms``."""
        if not self.dirty_bytes:
            return False
        cfg = log.config
        if self.dirty_ratio >= cfg.min_cleanable_dirty_ratio:
            return True
        lag = cfg.max_compaction_lag_ms
        return lag is not None and 0 <= self.oldest_dirty_ms <= now_ms - lag


def first_dirty_for(log: PartitionLog, checkpoint: int | None) -> int:
    """The checkpointed first dirty offset, kept inside the log."""
    if checkpoint is None or not log.log_start_offset <= checkpoint <= log.log_end_offset:
        return log.log_start_offset
    return checkpoint


def _first_timestamp(segment: Segment) -> float:
    """The max timestamp of the segment's first batch (Kafka's measure of a dirty
    segment's age for ``max.compaction.lag.ms``), -1 if unknown."""
    if not segment.size or not segment.pin():
        return -1.0
    try:
        head = segment.pread(0, BATCH_HEADER_SIZE)
    except StorageError:
        return -1.0
    finally:
        segment.unpin()
    return float(read_header(head).max_timestamp) if len(head) == BATCH_HEADER_SIZE else -1.0


def cleanable_state(log: PartitionLog, checkpoint: int | None, now_ms: float) -> Cleanable:
    """The sealed, flushed segments a pass may rewrite, and how dirty they are."""
    end = log.cleanable_end
    lag = log.config.min_compaction_lag_ms
    chosen: list[Segment] = []
    for segment in log.segments[:-1]:
        if segment.next_offset > end or (lag and segment.max_timestamp > now_ms - lag):
            break
        chosen.append(segment)
    first_dirty = first_dirty_for(log, checkpoint)
    clean = dirty = 0
    oldest = -1.0
    for segment in chosen:
        if segment.next_offset <= first_dirty:
            clean += segment.size
        else:
            if not dirty:
                oldest = _first_timestamp(segment)
            dirty += segment.size
    return Cleanable(tuple(chosen), first_dirty, clean, dirty, oldest)


# --- a pass -------------------------------------------------------------------------------


@attrs.define
class CleanResult:
    """What a pass did; ``end`` is the new first dirty offset (the checkpoint)."""

    end: int
    records_read: int = 0
    records_kept: int = 0
    records_removed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    segments_rewritten: int = 0
    segments_deleted: int = 0


def _batches(segment: Segment, throttle: Throttle) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a sealed segment with its bytes, CRC checked. Damage raises
    :class:`StorageError` (the pass is abandoned; reads report the damage)."""
    pos = 0
    expected = segment.base_offset
    size = segment.size
    while pos < size:
        chunk = segment.pread(pos, min(READ_CHUNK, size - pos))
        throttle.account(len(chunk))
        result = scan_batches(chunk, expected_offset=expected)
        for bpos, header in result.batches:
            yield header, chunk[bpos : bpos + header.size]
        pos += result.end
        if result.next_offset is not None:
            expected = result.next_offset
        if result.reason is not None:
            raise StorageError(f"{segment.log_path}: {result.reason} at byte {pos}")
        pending = result.pending
        if pending is not None and not result.batches:
            if pending.size > MAX_STORED_BATCH_BYTES or pos + pending.size > size:
                raise StorageError(f"{segment.log_path}: bad batch at byte {pos}")
            data = segment.pread(pos, pending.size)
            throttle.account(len(data))
            whole = scan_batches(data, expected_offset=expected)
            if not whole.batches:
                raise StorageError(f"{segment.log_path}: {whole.reason} at byte {pos}")
            yield pending, data
            pos += pending.size
            expected = pending.last_offset + 1
        elif not result.batches and pending is None:
            raise StorageError(f"{segment.log_path}: incomplete batch at byte {pos}")


def _records(header: BatchHeader, data: bytes) -> list[Record]:
    try:
        return decode_records(data, max_uncompressed=MAX_DECODED_BATCH_BYTES)
    except CorruptBatch as exc:
        raise StorageError(f"batch at offset {header.base_offset}: {exc}") from exc


class _Pass:
    """One cleaning pass over one log (see the module docstring)."""

    def __init__(
        self,
        log: PartitionLog,
        state: Cleanable,
        *,
        now_ms: float,
        key_map: OffsetMap,
        throttle: Throttle,
        should_stop: Callable[[], bool],
        hook: Hook,
    ) -> None:
        self.log = log
        self.state = state
        self.now_ms = now_ms
        self.map = key_map
        self.throttle = throttle
        self.should_stop = should_stop
        self.hook = hook
        self.result = CleanResult(end=state.first_dirty)
        #: Producer id -> base offset of its last data batch in the log (filled before
        #: the segments are rewritten).
        self.last_batches: dict[int, int] = {}
        # Every aborted transaction the log knows (None: it never held transactions).
        self.aborted = log.committed_filter(log.log_start_offset, _NO_LIMIT)

    def _aborted(self, header: BatchHeader) -> bool:
        """A data batch of an aborted transaction (its records are dropped)."""
        return (
            self.aborted is not None
            and header.is_transactional
            and not header.is_control
            and self.aborted.skips(False, header.producer_id, header.base_offset)
        )

    def _check_stop(self) -> None:
        if self.should_stop():
            raise Stopped()

    def build_map(self) -> int:
        """Fill the map over the dirty part; the offset where it stopped."""
        first_dirty = self.state.first_dirty
        end = first_dirty
        for segment in self.state.segments:
            if segment.next_offset <= first_dirty:
                continue
            self._pin(segment)
            try:
                for header, data in self._read(segment):
                    self._check_stop()
                    if (
                        header.is_control
                        or header.last_offset < first_dirty
                        or self._aborted(header)
                    ):
                        end = max(end, header.last_offset + 1)
                        continue
                    for record in _records(header, data):
                        if record.offset < first_dirty or record.key is None:
                            continue
                        if not self.map.put(key_digest(record.key), record.offset):
                            return record.offset
                    end = header.last_offset + 1
            finally:
                segment.unpin()
            end = max(end, segment.next_offset)
        self.hook("map-built")
        return end

    @staticmethod
    def _pin(segment: Segment) -> None:
        if not segment.pin():
            raise Stopped()  # retention deleted it or the log closed: try again later

    def _read(self, segment: Segment) -> Iterator[tuple[BatchHeader, bytes]]:
        """The segment's batches; the caller holds a pin on it."""
        for header, data in _batches(segment, self.throttle):
            self.result.bytes_read += len(data)
            yield header, data

    def _keep(self, record: Record) -> bool:
        if record.key is None:
            return False
        if self.map.latest(key_digest(record.key)) > record.offset:
            return False
        if record.value is None and record.offset < self.state.first_dirty:
            # A tombstone already cleaned once: it goes once delete.retention.ms passed.
            horizon = self.now_ms - self.log.config.delete_retention_ms
            return record.timestamp >= horizon
        return True

    def clean_segment(self, segment: Segment, first: bool) -> None:
        """Rewrite one segment; swap it in if anything was removed."""
        path = os.path.join(segment.directory, segment_file_name(segment.base_offset, LOG_SUFFIX))
        cleaned = path + CLEANED_SUFFIX
        with contextlib.suppress(FileNotFoundError):
            os.unlink(cleaned)
        with removed_on_error(cleaned):
            written, removed = self._write_cleaned(segment, cleaned)
            self.hook("segment-written")
            self.result.records_removed += removed
            if not removed:
                os.unlink(cleaned)  # nothing to gain from a swap
                return
            self._check_stop()
            self.result.bytes_written += written
            # replace_segment refuses to delete a segment that is gone, or that became
            # the first (DeleteRecords or retention deleted those before it during the
            # pass): that one is kept, empty, below.
            if written == 0 and not first and self.log.replace_segment(segment, None):
                os.unlink(cleaned)
                self.result.segments_deleted += 1
                self.hook("segment-deleted")
                return
            if self.log.replace_segment(segment, cleaned, self.hook):
                self.result.segments_rewritten += 1
            else:
                os.unlink(cleaned)

    def _write_cleaned(self, segment: Segment, cleaned: str) -> tuple[int, int]:
        """Write the records ``segment`` keeps to ``cleaned`` and fdatasync it; returns
        (bytes written, records removed)."""
        written = removed = 0
        self._pin(segment)
        try:
            fd = os.open(cleaned, _CREATE, FILE_MODE)
            try:
                for header, data in self._read(segment):
                    self._check_stop()
                    out = data
                    if not header.is_control:
                        records = _records(header, data)
                        aborted = self._aborted(header)
                        kept = [] if aborted else [r for r in records if self._keep(r)]
                        if not kept and self.last_batches.get(header.producer_id) == (
                            header.base_offset
                        ):
                            # A producer's last batch keeps its last record, so that its
                            # sequence survives for the producer-state replay.
                            kept = records[-1:]
                        self.result.records_read += len(records)
                        self.result.records_kept += len(kept)
                        removed += len(records) - len(kept)
                        if not kept:
                            continue
                        if len(kept) < len(records):
                            out = rebuild_batch(header, kept)
                    write_all(fd, out)
                    written += len(out)
                    self.throttle.account(len(out))
                # The original's modification time, as Kafka does: it is the segment's
                # age for retention.ms when no record is left to give one (the first
                # segment is kept, empty), and must not restart at the swap.
                st = os.stat(segment.log_path)
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
                datasync(fd)
            finally:
                os.close(fd)
        finally:
            segment.unpin()
        return written, removed


def _last_batches(log: PartitionLog, start: int) -> dict[int, int]:
    """Each producer's last data batch from ``start`` on (header reads only)."""
    last: dict[int, int] = {}
    for header in log.batch_headers(start):
        if header.producer_id >= 0 and not header.is_control:
            last[header.producer_id] = header.base_offset
    return last


def clean_log(
    log: PartitionLog,
    checkpoint: int | None,
    *,
    now_ms: float,
    key_map: OffsetMap,
    throttle: Throttle | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    hook: Hook | None = None,
) -> CleanResult | None:
    """Run one pass over ``log`` from the checkpointed first dirty offset ``checkpoint``
    (None: from the log start). Returns what it did (``end`` is the new checkpoint), or
    None if there was nothing dirty to clean or the pass was stopped (nothing is lost
    either way: a stopped pass leaves swapped segments valid and the checkpoint where it
    was). Raises :class:`StorageError` on I/O errors or damage."""
    state = cleanable_state(log, checkpoint, now_ms)
    if not state.dirty_bytes:
        return None
    key_map.clear()
    step = _Pass(
        log,
        state,
        now_ms=now_ms,
        key_map=key_map,
        throttle=throttle or Throttle(None),
        should_stop=should_stop,
        hook=hook or (lambda _name: None),
    )
    try:
        end = step.build_map()
        step.last_batches = _last_batches(log, state.segments[0].base_offset)
        if end <= state.first_dirty:
            raise StorageError(
                f"{log.path}: the cleaner's key map ({key_map.capacity} keys) is too small "
                f"for one record"
            )
        for i, segment in enumerate(state.segments):
            if segment.base_offset >= end:
                break
            step.clean_segment(segment, first=i == 0 and segment is log.segments[0])
    except Stopped:
        return None
    except OSError as exc:
        if not os.path.isdir(log.path):
            return None  # its topic was deleted (files and all) during the pass
        raise StorageError(f"cleaning {log.path} failed: {exc}") from exc
    finally:
        key_map.clear()
    step.result.end = end
    step.hook("pass-done")
    return step.result
