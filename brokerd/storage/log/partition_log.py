"""PartitionLog: one partition's append-only log, as a list of segments.

What it does: opens and recovers a partition directory, assigns contiguous offsets to
appended batches, rolls segments by size and age, flushes (fdatasync) and tracks the
recovery point, publishes a high watermark to readers, serves raw reads (Kafka fetch) and
decoded reads (native fetch) in O(log n), answers offset-for-timestamp lookups,
deletes whole old segments for retention; moving the log start offset for DeleteRecords
is :class:`~brokerd.storage.log.start.LogStartMixin`'s.

What it does not do: topic bookkeeping, checkpoint files or the clean-shutdown marker
(``logdir/log_directory.py``), group commit or scheduling (the broker core decides when to flush and
publish), and nothing with Twisted.

Recovery on open (``log/loader.py``), the per-segment read paths (``segment/batch_reads.py``) and
the
choice of segments retention deletes (``log/retention.py``) live in their own modules; this
class holds the segments, the offsets and the locks. No batch is served unchecked: a read
checks the CRC of the batches it returns, except bytes checked before (appended here after
their check, or checked by an earlier read; remembered in ``verified``), which a Kafka
fetch gets by reference for ``os.sendfile`` (``read_stored``, ``log/stored_reads.py``,
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

import bisect
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

import attrs

from brokerd.errors import OffsetOutOfRange, RecordTooLarge, StorageError, UnknownTopicOrPartition
from brokerd.storage.config.log_config import (
    INT32_MAX,
    OFFSET_ENTRY_BYTES,
    TIME_ENTRY_BYTES,
    LogConfig,
)
from brokerd.storage.log.loader import RecoveryStats, open_segments
from brokerd.storage.log.maintenance import LogMaintenanceMixin
from brokerd.storage.log.prepared_append import PreparedBatches, stored_form
from brokerd.storage.log.producer_state import (
    ActiveProducer,
    ProducerAppendInfo,
    ProducerStateManager,
    SnapshotEntry,
)
from brokerd.storage.log.start import LogStartMixin
from brokerd.storage.log.stored_reads import StoredReadMixin
from brokerd.storage.log.txns import TxnLogMixin
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import BatchHeader, stamp_base_offset
from brokerd.storage.segment.batch_reads import (
    batches_end,
    cut_at_offset,
    find_timestamp,
    headers_from,
    read_raw,
    records_from,
)
from brokerd.storage.segment.segment import BatchInfo, Segment
from brokerd.storage.segment.stored import VerifiedRanges
from brokerd.storage.types import AbortedTxn, AppendInfo, ReadResult, RecordsResult
from brokerd.storage.write_errors import WriteErrorLog

__all__ = ["PartitionLog", "RecoveryStats"]

log = logging.getLogger("brokerd.storage")



class PartitionLog(LogStartMixin, LogMaintenanceMixin, TxnLogMixin, StoredReadMixin):
    """One partition's log. Open with :meth:`open`; see the module docstring for threads."""

    def __init__(
        self, path: str, config: LogConfig, clock: Callable[[], float], segments: list[Segment]
    ) -> None:
        self.path = path
        self.config = config
        self._clock = clock
        self._write_lock = threading.Lock()
        self._seg_lock = threading.Lock()
        # Held while segments are deleted or swapped for cleaned copies (retention, the
        # cleaner, close): never by appends or reads.
        self._swap_lock = threading.Lock()
        self._segments: tuple[Segment, ...] = ()
        self._bases: tuple[int, ...] = ()
        self._init_positions()
        self._set_segments(segments)
        active = segments[-1]
        self.log_start_offset: int = segments[0].base_offset
        #: The next offset to assign.
        self.log_end_offset: int = active.next_offset
        #: Everything below this offset is on stable storage.
        self.recovery_point: int = active.next_offset
        # Published together: (high watermark, active segment's base, its size, LSO).
        end = active.next_offset
        self._visible: tuple[int, int, int, int] = (end, active.base_offset, active.size, end)
        self._dirty: dict[int, Segment] = {}
        self._failure: str | None = None
        self._closed = False
        self.recovery = RecoveryStats(clean=True)
        self._write_errors = WriteErrorLog(path, clock)
        #: Byte ranges whose batches passed their check: what a fetch may send unread.
        self.verified = VerifiedRanges()
        #: Producers' epochs and sequences and the ongoing transactions (write lock).
        self.producers = ProducerStateManager()
        self._init_txns(segments)
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
            plog._recover_txns()
        except BaseException:
            plog.close()
            raise
        return plog

    # --- writer methods ---------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._closed:
            raise UnknownTopicOrPartition(f"partition log {self.path} is closed")
        if self._failure is not None:
            raise StorageError(f"partition {self.path} refuses appends: {self._failure}")

    def _fail(self, reason: str) -> StorageError:
        self._failure = reason
        log.error("partition %s failed: %s", self.path, reason)
        return StorageError(f"partition {self.path} failed: {reason}")

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def _set_segments(self, segments: Sequence[Segment]) -> None:
        # Readers load _segview once; the pair must stay consistent.
        self._segview = (tuple(segments), tuple(s.base_offset for s in segments))
        self._segments = self._segview[0]
        self._forget_positions(self._segments)

    def _maybe_roll(self, incoming: int, last_offset: int) -> Segment:
        active = self._segments[-1]
        if active.size == 0:
            return active
        cfg = self.config
        roll = (
            active.size + incoming > cfg.segment_bytes
            or last_offset - active.base_offset > INT32_MAX
            # segment.index.bytes: Kafka rolls rather than grow a full index.
            or len(active.index) >= cfg.segment_index_bytes // OFFSET_ENTRY_BYTES
            or len(active.timeindex) >= cfg.segment_index_bytes // TIME_ENTRY_BYTES
            or (
                cfg.segment_ms is not None
                and active.first_append_ms is not None
                and self._clock() * 1000.0 - active.first_append_ms
                >= cfg.segment_ms - self._jitter_of(active, cfg.segment_ms)
            )
        )
        if not roll:
            return active
        try:
            active.seal()
        except StorageError as exc:
            raise self._fail(f"cannot seal segment {active.log_path}: {exc}") from exc
        new = Segment.create(self.path, self.log_end_offset, cfg.index_interval_bytes)
        with self._seg_lock:
            self._set_segments((*self._segments, new))
        return new

    def _jitter_of(self, active: Segment, segment_ms: int) -> int:
        """How much earlier than ``segment_ms`` the active segment rolls: drawn once per
        segment in ``[0, min(segment.jitter.ms, segment.ms))``, as Kafka draws it."""
        if self._jitter[0] != active.base_offset:
            bound = min(self.config.segment_jitter_ms, segment_ms)
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
        base = self.log_end_offset
        segment = self._maybe_roll(len(data), base + count - 1)
        if transactional:
            self._ensure_txn_file(segment)
        start = segment.size
        try:
            segment.append(data, batches)
        except StorageError as exc:
            # The segment cut itself back: later appends are tried again (a full disk
            # may get space back), but the error is logged at a bounded rate.
            self._write_errors.report(exc)
            raise
        if segment.first_append_ms is None:
            segment.first_append_ms = self._clock() * 1000.0
        # Every writer checked or built these batches (client batches pass
        # parse_batches' CRC check before they are queued; markers and native batches
        # are encoded here): a fetch may send them without reading them again.
        self.verified.mark(segment, start, start + len(data))
        self._remember_appended(segment, start, batches)
        self._dirty[segment.base_offset] = segment
        self.log_end_offset = base + count
        return AppendInfo(base, base + count - 1, self.log_start_offset)

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
        with self._write_lock:
            self._check_writable()
            return self._append_locked(data, headers)

    def append_prepared(self, prepared: PreparedBatches, *, now_ms: int) -> AppendInfo:
        """Append a produce prepared by ``prepared_append.prepare_batches``: Kafka's
        ``appendAsLeader`` in one call under the write lock. An idempotent producer's
        batches are checked against the producer state first (a retry of a stored batch
        answers that batch's offsets and appends nothing; a fenced epoch or a sequence
        gap raises), then stored in the topic's form (``prepared_append.stored_form``),
        and recorded in the producer state once appended. ``now_ms`` is the append time
        of a LogAppendTime topic, reported in the answer."""
        with self._write_lock:
            self._check_writable()
            admitted: ProducerAppendInfo | None = None
            if prepared.producer_id >= 0:
                checked = self.producers.prepare_update(prepared.headers)
                if isinstance(checked, AppendInfo):
                    return attrs.evolve(checked, duplicate=True)
                admitted = checked
            data, headers, append_time = stored_form(self.config, prepared, now_ms)
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
        buf = bytearray(data)
        offset = self.log_end_offset
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
        count = offset - self.log_end_offset
        info = self._write(buf, batches, count, transactional=bool(begun))
        self._begin_txns(begun)
        return info

    def producer_snapshot(
        self,
    ) -> tuple[int, dict[int, SnapshotEntry], tuple[int, dict[int, int]]]:
        """``(log end offset, producer table, (log end offset, ongoing transactions))``
        at one moment, what ``producer_state.write_snapshot`` stores (blocks on the write
        lock: call it in the write pool)."""
        with self._write_lock:
            end = self.log_end_offset
            return end, self.producers.snapshot(), (end, self.producers.ongoing.ongoing)

    def describe_producers(self) -> list[tuple[ActiveProducer, int]]:
        """Each producer with the first offset of its open transaction here (-1 when
        none), DescribeProducers' answer (blocks on the write lock)."""
        with self._write_lock:
            ongoing = self.producers.ongoing.ongoing
            return [(p, ongoing.get(p.producer_id, -1)) for p in self.producers.active()]

    def append_values(self, values: Sequence[bytes | None], *, timestamp_ms: int) -> AppendInfo:
        """Append one batch holding ``values`` (the native produce path), uncompressed
        unless the topic's ``compression.type`` names a codec."""
        with self._write_lock:
            self._check_writable()
            base = self.log_end_offset
            codec, level = self.config.compression or (Compression.NONE, None)
            data = encode_batch(
                values, timestamp_ms=timestamp_ms, base_offset=base, compression=codec,
                compression_level=level,
            )
            count = len(values)
            return self._write(data, [(base, base + count - 1, timestamp_ms, len(data))], count)

    def flush(self) -> None:
        """fdatasync every segment written since the last flush; advance recovery_point.

        A failed sync marks the partition failed for good (after a failed fsync the kernel
        may have dropped the dirty pages, and a retry could falsely succeed).
        """
        with self._write_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._check_writable()
        target = self.log_end_offset
        for base, segment in sorted(self._dirty.items()):
            if not segment.pin():
                # Deleted by retention since: nothing left to make durable.
                del self._dirty[base]
                continue
            try:
                segment.sync()
            except OSError as exc:
                raise self._fail(f"fdatasync of {segment.log_path} failed: {exc}") from exc
            finally:
                segment.unpin()
            del self._dirty[base]
        self.recovery_point = target

    def publish(self) -> int:
        """Make everything appended so far visible to readers; returns the high watermark."""
        with self._write_lock:
            active = self._segments[-1]
            end = self.log_end_offset
            self._visible = (
                end, active.base_offset, active.size, self.producers.ongoing.stable_end(end)
            )
            return end

    @property
    def high_watermark(self) -> int:
        return self._visible[0]

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments."""
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The current segments, oldest first (the last one is active)."""
        return self._segview[0]

    @property
    def segment_bases(self) -> tuple[int, ...]:
        return self._segview[1]

    # --- reader methods -------------------------------------------------------------------

    def _out_of_range(self, offset: int, high_watermark: int) -> Exception:
        if self._closed:
            return UnknownTopicOrPartition(f"partition log {self.path} is closed")
        return OffsetOutOfRange(offset, self.log_start_offset, high_watermark)

    def _locate(self, offset: int) -> tuple[int, int, int, int, tuple[Segment, ...], int, int]:
        """Validate ``offset`` against the published state; find its segment index.
        Returns ``(hw, active base, active size, log start, segments, index, LSO)``."""
        visible = self._visible
        segments, bases = self._segview
        start = self.log_start_offset
        hw = visible[0]
        if self._closed or offset < start or offset > hw:
            raise self._out_of_range(offset, hw)
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            raise self._out_of_range(offset, hw)
        return hw, visible[1], visible[2], start, segments, i, max(visible[3], start)

    def read(self, offset: int, max_bytes: int, *, read_committed: bool = False) -> ReadResult:
        """Raw log bytes for a Kafka fetch, from the start of the batch holding ``offset``.

        At least one whole batch when one exists past ``offset`` (even if larger than
        ``max_bytes``), else cut at ``max_bytes`` (the last batch may be partial); never
        past the high watermark; may stop at a segment end. ``offset`` equal to the high
        watermark gives empty data; outside [log start, high watermark] raises
        :class:`OffsetOutOfRange`. Damage raises :class:`StorageError`.

        ``read_committed``: never a batch at or past the LSO (an offset in [LSO, high
        watermark] gives empty data), with the aborted transactions overlapping the data.
        """
        hw, vbase, vpos, start, segments, i, lso = self._locate(offset)
        end = lso if read_committed else hw
        data = b""
        if offset < end:
            data = self._read_raw(offset, max_bytes, (hw, vbase, vpos), segments, i)
        if not read_committed:
            return ReadResult(data, hw, start, lso)
        if lso < hw:
            data = cut_at_offset(data, lso)
        aborted: tuple[AbortedTxn, ...] = ()
        if data and self._any_aborted:
            aborted = self.aborted_txns(offset, batches_end(data, lso))
        return ReadResult(data, hw, start, lso, aborted)

    def _read_raw(
        self,
        offset: int,
        max_bytes: int,
        visible: tuple[int, int, int],
        segments: tuple[Segment, ...],
        i: int,
    ) -> bytes:
        hw, vbase, vpos = visible
        while i < len(segments):
            segment = segments[i]
            if segment.base_offset > vbase:
                break
            limit = vpos if segment.base_offset == vbase else segment.size
            if not segment.pin():
                raise self._out_of_range(offset, hw)
            try:
                found = segment.scan.find_batch(offset, limit)
                if found is not None:
                    return read_raw(segment, found[0], found[1], limit, max_bytes)
            finally:
                segment.unpin()
            i += 1
        return b""

    def batch_headers(self, from_offset: int) -> list[BatchHeader]:
        """Headers of every visible batch from the one holding ``from_offset`` on (header
        reads only, no payload). The core rebuilds idempotent producers' state from the
        log's tail with it. Offsets below the log start begin at the log start.
        """
        hw, vbase, vpos, _start, segments, i, _lso = self._locate(
            min(max(from_offset, self.log_start_offset), self.high_watermark)
        )
        offset = max(from_offset, self.log_start_offset)
        return headers_from(segments, i, vbase, vpos, hw, offset, self._out_of_range)

    def read_records(self, offset: int, max_value_bytes: int) -> RecordsResult:
        """Decoded committed records from exactly ``offset`` (native fetch).

        Values total at most ``max_value_bytes``, but at least one record is returned if
        any exists past ``offset``; continues across segments; stops at the LSO (the high
        watermark without open transactions). Control records and aborted transactions'
        records are skipped (their offsets are gaps). Null values stay None.
        """
        hw, vbase, vpos, start, segments, i, lso = self._locate(offset)
        if offset >= lso:
            return RecordsResult((), hw, start)
        out = records_from(
            segments,
            i,
            vbase,
            vpos,
            hw,
            offset,
            max_value_bytes,
            self._out_of_range,
            self.committed_filter(offset, lso),
        )
        return RecordsResult(tuple(out), hw, start)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """The first offset whose record timestamp is >= ``timestamp``, with that
        timestamp; None if no visible record is that new (ListOffsets by time)."""
        hw, vbase, vpos, _lso = self._visible
        segments = self._segview[0]
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
                return (max(found[0], self.log_start_offset), found[1])
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """The ``(offset, timestamp)`` of the visible record with the largest timestamp
        (the first such record when several share it), or None when no visible record
        has a timestamp (ListOffsets' MAX_TIMESTAMP). As Kafka's, the answer is not
        raised to the log start offset: it names that record, readable or not."""
        hw, vbase, vpos, _lso = self._visible
        newest = None
        for segment in self._segview[0]:
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

    def reconfigure(self, config: LogConfig) -> None:
        """Apply a new config from now on (a topic's configs were altered). Under the
        write lock, so an append in progress decides its roll with one config; later
        rolls, retention passes and appends see the new one. The index interval of
        existing segments is not changed."""
        with self._write_lock:
            self.config = config

    # --- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush (unless failed), persist the indexes, and close every file.

        Further calls raise :class:`UnknownTopicOrPartition`; reads in flight finish.
        """
        with self._write_lock:
            if self._closed:
                return
            error: StorageError | None = None
            if self._failure is None:
                try:
                    self._flush_locked()
                    self._segments[-1].persist_indexes(sync=True)
                except StorageError as exc:
                    error = exc
            with self._swap_lock:
                self._closed = True
                with self._seg_lock:
                    for segment in self._segments:
                        segment.close()
        if error is not None:
            raise error
