"""PartitionLog: one partition's append-only log, as a list of segments.

What it does: opens and recovers a partition directory, assigns contiguous offsets to
appended batches, rolls segments by size and age, flushes (fdatasync) and tracks the
recovery point, publishes a high watermark to readers, serves raw reads (Kafka fetch) and
decoded reads (native fetch) in O(log n), answers offset-for-timestamp lookups.

It is a facade, as Kafka's ``UnifiedLog`` is: it holds the state its parts share
(:class:`~brokerd.storage.log.log_state.LogState`: the segment list, the offsets, the locks,
the published high watermark, the checked byte ranges) and the parts themselves, each in
its own module: the log start offset for DeleteRecords (``log/start.py``), retention and
cleaned-segment swaps (``log/maintenance.py``), transactions (``log/txns.py``) and the reads
(``log/stored_reads.py``). Callers call the facade; the appends, flush, publish and close
are its own.

What it does not do: topic bookkeeping, checkpoint files or the clean-shutdown marker
(``logdir/log_directory.py``), group commit or scheduling (the broker core decides when to flush and
publish), and nothing with Twisted.

Recovery on open (``log/loader.py``), the per-segment read paths (``segment/batch_reads.py``)
and the choice of segments retention deletes (``log/retention.py``) live in their own
modules. No batch is served unchecked: a read checks the CRC of the batches it returns,
except bytes checked before (appended here after their check, or checked by an earlier
read; remembered in ``verified``), which a Kafka fetch gets by reference for
``os.sendfile`` (:meth:`PartitionLog.read` with ``Delivery.REFERENCE``,
docs/performance.md).

Log compaction (``cleaner/compactor.py`` decides what to keep) swaps a sealed segment for its
cleaned copy with :meth:`replace_segment`; offsets are kept, so a compacted log has gaps.

Threads: the writer methods (``append*``, ``flush``, ``publish``, ``close``) take a
per-partition lock, so there is one writer at a time. Readers take no log lock: they read
an immutable snapshot of the segment list and the published ``(high watermark, segment,
byte)`` triple, and pin the segment they read so that retention cannot close its fd under
them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Literal, overload

import attrs

from brokerd.errors import RecordTooLarge, StorageError
from brokerd.storage.config.log_config import (
    INT32_MAX,
    OFFSET_ENTRY_BYTES,
    TIME_ENTRY_BYTES,
    LogConfig,
)
from brokerd.storage.log.loader import RecoveryStats, open_segments
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.maintenance import LogMaintenance
from brokerd.storage.log.prepared_append import PreparedBatches, stored_form
from brokerd.storage.log.producer_state import (
    ActiveProducer,
    ProducerAppendInfo,
    ProducerStateManager,
    SnapshotEntry,
)
from brokerd.storage.log.start import LogStart
from brokerd.storage.log.stored_reads import StoredReads
from brokerd.storage.log.txns import CommittedFilter, PartitionTxns
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import BatchHeader, stamp_base_offset
from brokerd.storage.segment.batch_reads import find_timestamp, headers_from
from brokerd.storage.segment.segment import BatchInfo, Segment
from brokerd.storage.segment.stored import VerifiedRanges
from brokerd.storage.types import AbortedTxn, AppendInfo, LogRead, ReadSpec
from brokerd.storage.write_errors import WriteErrorLog

__all__ = ["PartitionLog", "RecoveryStats"]


class PartitionLog:
    """One partition's log. Open with :meth:`open`; see the module docstring for threads."""

    def __init__(
        self, path: str, config: LogConfig, clock: Callable[[], float], segments: list[Segment]
    ) -> None:
        self.path = path
        self._state = state = LogState(path, config, clock, segments)
        self._start = LogStart(state)
        self._maintenance = LogMaintenance(state, self._roll)
        #: Producers' epochs and sequences and the ongoing transactions (write lock).
        self.producers = ProducerStateManager()
        self._txns = PartitionTxns(state, self._write, self.producers)
        self._reads = StoredReads(state, self._txns)
        self.recovery = RecoveryStats(clean=True)
        self._write_errors = WriteErrorLog(path, clock)
        #: Draws a segment's roll jitter below its argument (replaceable in tests).
        self.roll_jitter: Callable[[int], int] = random.randrange
        self._jitter: tuple[int, int] = (-1, 0)

    # --- opening and recovery ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str,
        config: LogConfig,
        *,
        recovery_point: int | None,
        clock: Callable[[], float] = time.time,
    ) -> PartitionLog:
        """Open (creating if needed) the partition directory ``path`` and recover it.

        ``recovery_point`` None means the previous shutdown was clean. ``clock`` returns
        seconds (like :func:`time.time`) and drives ``segment_ms`` rolling.
        """
        segments, stats = open_segments(path, config.index_interval_bytes, recovery_point)
        plog = cls(path, config, clock, segments)
        plog.recovery = stats
        try:
            plog._txns.recover()
        except BaseException:
            plog.close()
            raise
        return plog

    # --- the shared state, as callers see it ----------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._state.config

    @property
    def log_start_offset(self) -> int:
        return self._state.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._state.log_end_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is on stable storage."""
        return self._state.recovery_point

    @property
    def verified(self) -> VerifiedRanges:
        """Byte ranges whose batches passed their check: what a fetch may send unread."""
        return self._state.verified

    @property
    def failed(self) -> bool:
        return self._state.failure is not None

    @property
    def high_watermark(self) -> int:
        return self._state.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self._state.last_stable_offset

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments."""
        return sum(s.size for s in self._state.segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The current segments, oldest first (the last one is active)."""
        return self._state.segview[0]

    @property
    def segment_bases(self) -> tuple[int, ...]:
        return self._state.segview[1]

    # --- writer methods ---------------------------------------------------------------------

    def _maybe_roll(self, incoming: int, last_offset: int) -> Segment:
        state = self._state
        active = state.segments[-1]
        if active.size == 0:
            return active
        cfg = state.config
        roll = (
            active.size + incoming > cfg.segment_bytes
            or last_offset - active.base_offset > INT32_MAX
            # segment.index.bytes: Kafka rolls rather than grow a full index.
            or len(active.index) >= cfg.segment_index_bytes // OFFSET_ENTRY_BYTES
            or len(active.timeindex) >= cfg.segment_index_bytes // TIME_ENTRY_BYTES
            or (
                cfg.segment_ms is not None
                and active.first_append_ms is not None
                and state.clock() * 1000.0 - active.first_append_ms
                >= cfg.segment_ms - self._jitter_of(active, cfg.segment_ms)
            )
        )
        if not roll:
            return active
        return self._roll()

    def _roll(self) -> Segment:
        """Seal the active segment and start a new empty one at the log end offset
        (under the write lock): an append's roll, or retention's before it deletes an
        expired active segment."""
        state = self._state
        active = state.segments[-1]
        try:
            active.seal()
        except StorageError as exc:
            raise state.fail(f"cannot seal segment {active.log_path}: {exc}") from exc
        new = Segment.create(self.path, state.log_end_offset, state.config.index_interval_bytes)
        with state.seg_lock:
            state.set_segments((*state.segments, new))
        return new

    def _jitter_of(self, active: Segment, segment_ms: int) -> int:
        """How much earlier than ``segment_ms`` the active segment rolls: drawn once per
        segment in ``[0, min(segment.jitter.ms, segment.ms))``, as Kafka draws it."""
        if self._jitter[0] != active.base_offset:
            bound = min(self._state.config.segment_jitter_ms, segment_ms)
            self._jitter = (active.base_offset, self.roll_jitter(bound) if bound > 0 else 0)
        return self._jitter[1]

    def _write(
        self,
        data: bytes | bytearray,
        batches: list[BatchInfo],
        count: int,
        *,
        transactional: bool = False,
    ) -> AppendInfo:
        state = self._state
        base = state.log_end_offset
        segment = self._maybe_roll(len(data), base + count - 1)
        if transactional:
            self._txns.ensure_txn_file(segment)
        start = segment.size
        try:
            segment.append(data, batches)
        except StorageError as exc:
            # The segment cut itself back: later appends are tried again (a full disk
            # may get space back), but the error is logged at a bounded rate.
            self._write_errors.report(exc)
            raise
        if segment.first_append_ms is None:
            segment.first_append_ms = state.clock() * 1000.0
        # Every writer checked or built these batches (client batches pass
        # parse_batches' CRC check before they are queued; markers and native batches
        # are encoded here): a fetch may send them without reading them again.
        state.verified.mark(segment, start, start + len(data))
        self._reads.remember_appended(segment, start, batches)
        state.appended(segment, count)
        return AppendInfo(base, base + count - 1, state.log_start_offset)

    def append(
        self, data: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> AppendInfo:
        """Append validated client batches (``headers`` from ``parse_batches(data)``) as
        they are: no producer-state check and no topic form (the produce path is
        :meth:`append_prepared`; this one serves tests and tools that write batches).

        Base offsets are stamped contiguously from ``log_end_offset`` (leader epoch 0);
        the batches are otherwise stored byte for byte. The kernel has the bytes on return;
        they are durable after :meth:`flush` and visible after :meth:`publish`.
        """
        if not headers:
            raise ValueError("append needs at least one batch")
        if len(data) > INT32_MAX:
            raise RecordTooLarge(f"append of {len(data)} bytes")
        if sum(h.size for h in headers) != len(data):
            raise ValueError("headers do not describe data")
        state = self._state
        with state.write_lock:
            state.check_writable()
            return self._append_locked(data, headers)

    def append_prepared(self, prepared: PreparedBatches, *, now_ms: int) -> AppendInfo:
        """Append a produce prepared by ``prepared_append.prepare_batches``: Kafka's
        ``appendAsLeader`` in one call under the write lock. An idempotent producer's
        batches are checked against the producer state first (a retry of a stored batch
        answers that batch's offsets and appends nothing; a fenced epoch or a sequence
        gap raises), then stored in the topic's form (``prepared_append.stored_form``),
        and recorded in the producer state once appended. ``now_ms`` is the append time
        of a LogAppendTime topic, reported in the answer."""
        state = self._state
        with state.write_lock:
            state.check_writable()
            admitted: ProducerAppendInfo | None = None
            if prepared.producer_id >= 0:
                checked = self.producers.prepare_update(prepared.headers)
                if isinstance(checked, AppendInfo):
                    return attrs.evolve(checked, duplicate=True)
                admitted = checked
            data, headers, append_time = stored_form(state.config, prepared, now_ms)
            if len(data) > INT32_MAX:
                raise RecordTooLarge(f"append of {len(data)} bytes")
            info = self._append_locked(data, headers)
            if append_time is not None:
                info = attrs.evolve(info, log_append_time=append_time)
            if admitted is not None:
                self.producers.update(admitted, info)
            return info

    def _append_locked(
        self, data: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> AppendInfo:
        state = self._state
        buf = bytearray(data)
        offset = state.log_end_offset
        pos = 0
        batches: list[BatchInfo] = []
        begun: list[tuple[int, int]] = []
        for header in headers:
            stamp_base_offset(buf, pos, offset)
            batches.append(
                (offset, offset + header.last_offset_delta, header.max_timestamp, header.size)
            )
            if header.is_transactional:
                begun.append((header.producer_id, offset))
            offset += header.records_count
            pos += header.size
        count = offset - state.log_end_offset
        info = self._write(buf, batches, count, transactional=bool(begun))
        self._txns.begin_txns(begun)
        return info

    def producer_snapshot(
        self,
    ) -> tuple[int, dict[int, SnapshotEntry], tuple[int, dict[int, int]]]:
        """``(log end offset, producer table, (log end offset, ongoing transactions))``
        at one moment, what ``producer_state.write_snapshot`` stores (blocks on the write
        lock: call it in the write pool)."""
        state = self._state
        with state.write_lock:
            end = state.log_end_offset
            return end, self.producers.snapshot(), (end, self.producers.ongoing.ongoing)

    def describe_producers(self) -> list[tuple[ActiveProducer, int]]:
        """Each producer with the first offset of its open transaction here (-1 when
        none), DescribeProducers' answer (blocks on the write lock)."""
        with self._state.write_lock:
            ongoing = self.producers.ongoing.ongoing
            return [(p, ongoing.get(p.producer_id, -1)) for p in self.producers.active()]

    def append_values(self, values: Sequence[bytes | None], *, timestamp_ms: int) -> AppendInfo:
        """Append one batch holding ``values`` (the native produce path), uncompressed
        unless the topic's ``compression.type`` names a codec."""
        state = self._state
        with state.write_lock:
            state.check_writable()
            base = state.log_end_offset
            codec, level = state.config.compression or (Compression.NONE, None)
            data = encode_batch(
                values, timestamp_ms=timestamp_ms, base_offset=base, compression=codec,
                compression_level=level,
            )
            count = len(values)
            return self._write(data, [(base, base + count - 1, timestamp_ms, len(data))], count)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        timestamp_ms: int,
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker (:meth:`PartitionTxns.append_marker`)."""
        return self._txns.append_marker(
            producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
            timestamp_ms=timestamp_ms,
        )

    def txn_snapshot(self) -> tuple[int, dict[int, int]]:
        """``(log end offset, ongoing transactions)`` at one moment (write pool)."""
        return self._txns.txn_snapshot()

    def flush(self) -> None:
        """fdatasync every segment written since the last flush; advance recovery_point.

        A failed sync marks the partition failed for good (after a failed fsync the kernel
        may have dropped the dirty pages, and a retry could falsely succeed).
        """
        with self._state.write_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        state = self._state
        state.check_writable()
        target = state.log_end_offset
        dirty = state.dirty
        for base, segment in sorted(dirty.items()):
            if not segment.pin():
                # Deleted by retention since: nothing left to make durable.
                del dirty[base]
                continue
            try:
                segment.sync()
            except OSError as exc:
                raise state.fail(f"fdatasync of {segment.log_path} failed: {exc}") from exc
            finally:
                segment.unpin()
            del dirty[base]
        state.flushed(target)

    def publish(self) -> int:
        """Make everything appended so far visible to readers; returns the high watermark."""
        state = self._state
        with state.write_lock:
            return state.publish(self._txns.stable_end)

    def reconfigure(self, config: LogConfig) -> None:
        """Apply a new config from now on (a topic's configs were altered). Under the
        write lock, so an append in progress decides its roll with one config; later
        rolls, retention passes and appends see the new one. The index interval of
        existing segments is not changed."""
        with self._state.write_lock:
            self._state.reconfigure(config)

    # --- the log start, retention and the cleaner (the parts' jobs) ------------------------

    def delete_records_before(
        self, offset: int, *, persist: Callable[[], None] | None = None
    ) -> int:
        """DeleteRecords: :meth:`LogStart.delete_records_before`."""
        return self._start.delete_records_before(offset, persist=persist)

    def restore_log_start(self, offset: int) -> None:
        """At open, before any reader or writer: :meth:`LogStart.restore`."""
        self._start.restore(offset)

    def enforce_retention(self, now: float | None = None) -> int:
        """:meth:`LogMaintenance.enforce_retention`: the number of segments deleted."""
        return self._maintenance.enforce_retention(now)

    @property
    def cleanable_end(self) -> int:
        """Offsets below this the cleaner may rewrite (:attr:`LogMaintenance.cleanable_end`)."""
        return self._maintenance.cleanable_end

    def replace_segment(
        self, old: Segment, cleaned: str | None, hook: Callable[[str], None] | None = None
    ) -> bool:
        """:meth:`LogMaintenance.replace_segment`."""
        return self._maintenance.replace_segment(old, cleaned, hook)

    # --- reader methods -------------------------------------------------------------------

    @overload
    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: Literal[False] = ...
    ) -> LogRead: ...

    @overload
    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: bool
    ) -> LogRead | None: ...

    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: bool = False
    ) -> LogRead | None:
        """The log from ``offset`` as ``spec`` says (:meth:`StoredReads.read`); None only
        for ``memory_only`` when memory does not hold the answer."""
        return self._reads.read(offset, max_bytes, spec, memory_only=memory_only)

    def aborted_txns(self, fetch_offset: int, upper: int) -> tuple[AbortedTxn, ...]:
        """Aborted transactions whose ABORT marker is at or after ``fetch_offset`` and
        whose first offset is below ``upper``."""
        return self._txns.aborted_txns(fetch_offset, upper)

    def committed_filter(self, offset: int, lso: int) -> CommittedFilter | None:
        """What a committed-only read from ``offset`` skips (:meth:`PartitionTxns.
        committed_filter`)."""
        return self._txns.committed_filter(offset, lso)

    def batch_headers(self, from_offset: int) -> list[BatchHeader]:
        """Headers of every visible batch from the one holding ``from_offset`` on (header
        reads only, no payload). The core rebuilds idempotent producers' state from the
        log's tail with it. Offsets below the log start begin at the log start.
        """
        state = self._state
        at = state.locate(min(max(from_offset, state.log_start_offset), self.high_watermark))
        return headers_from(at, state.out_of_range)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """The first offset whose record timestamp is >= ``timestamp``, with that
        timestamp; None if no visible record is that new (ListOffsets by time)."""
        state = self._state
        hw, vbase, vpos, _lso = state.visible
        segments = state.segview[0]
        for segment in segments:
            if segment.base_offset > vbase:
                break
            if segment.max_timestamp < timestamp:
                continue
            limit = vpos if segment.base_offset == vbase else segment.size
            if not segment.pin():
                continue
            try:
                found = find_timestamp(segment, timestamp, limit, hw)
            finally:
                segment.unpin()
            if found is not None:
                # Below a start moved by DeleteRecords: the first offset still readable.
                return (max(found[0], state.log_start_offset), found[1])
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """The ``(offset, timestamp)`` of the visible record with the largest timestamp
        (the first such record when several share it), or None when no visible record
        has a timestamp (ListOffsets' MAX_TIMESTAMP). As Kafka's, the answer is not
        raised to the log start offset: it names that record, readable or not."""
        state = self._state
        hw, vbase, vpos, _lso = state.visible
        newest = None
        for segment in state.segview[0]:
            if segment.base_offset > vbase:
                break
            # The first segment holding the largest timestamp holds the first record.
            if newest is None or segment.max_timestamp > newest.max_timestamp:
                newest = segment
        if newest is None or newest.max_timestamp < 0 or not newest.pin():
            return None
        limit = vpos if newest.base_offset == vbase else newest.size
        try:
            # The first record at or after the segment's largest timestamp is at it. A
            # largest timestamp above what is visible finds nothing (None), as Kafka's
            # answer for a record past the high watermark is none.
            return find_timestamp(newest, newest.max_timestamp, limit, hw)
        finally:
            newest.unpin()

    # --- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush (unless failed), persist the indexes, and close every file.

        Further calls raise :class:`UnknownTopicOrPartition`; reads in flight finish.
        """
        state = self._state
        with state.write_lock:
            if state.closed:
                return
            error: StorageError | None = None
            if state.failure is None:
                try:
                    self._flush_locked()
                    state.segments[-1].persist_indexes(sync=True)
                except StorageError as exc:
                    error = exc
            with state.swap_lock:
                state.close()
                with state.seg_lock:
                    for segment in state.segments:
                        segment.close()
        if error is not None:
            raise error
