# -*- test-case-name: tests.core.share.test_partition -*-
"""One share-partition: a share group's view of one topic partition (KIP-932).

:class:`SharePartition` holds the share-partition start offset (SPSO: every record below
it is done), the end of the in-flight window (the next offset never yet acquired) and,
for each offset in between, an :class:`InFlight` entry: its :class:`RecordState`, its
delivery count, and while ACQUIRED the member holding it and the lock's deadline. An
offset of the window with no entry holds no record (a batch gap) and counts as done.

Records are acquired in offset order: first released or timed-out ones in the window,
then new ones from the log (:meth:`acquire` is given the log's batches from
:meth:`fetch_offset` on, as :class:`LogSpan` ranges saying which offsets are data and
which are to skip: control records and aborted transactions). Each acquisition raises the
delivery count; a record released or timed out at the group's delivery-count limit is
archived instead of becoming available again. The SPSO advances over the prefix of
acknowledged and archived records.

Every method that changes state returns the offsets it changed, for the share-state
journal (:mod:`brokerd.storage.stores.share_state`). Pure and synchronous: the caller
passes the time (milliseconds) and does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import attrs

from brokerd.core.share.states import (
    ACK_EVENTS,
    AckType,
    Event,
    InvalidTransition,
    RecordState,
    next_state,
)

__all__ = [
    "AckBatch",
    "AcquiredRange",
    "InFlight",
    "LogSpan",
    "PartitionSummary",
    "SharePartition",
    "StateRun",
]

@attrs.define
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: float = 0.0


@attrs.frozen
class LogSpan:
    """Offsets ``first..last`` of the log, all data (``skip`` False) or all to skip."""

    first: int
    last: int
    skip: bool = False


@attrs.frozen
class AcquiredRange:
    """Records ``first..last`` acquired together, each delivered ``delivery_count`` times."""

    first: int
    last: int
    delivery_count: int


@attrs.frozen
class AckBatch:
    """One acknowledgement batch: ``types`` has one type for the whole range, or one per
    offset of ``first..last``."""

    first: int
    last: int
    types: tuple[AckType, ...]

    def type_at(self, offset: int) -> AckType:
        return self.types[0] if len(self.types) == 1 else self.types[offset - self.first]


@attrs.frozen
class StateRun:
    """Offsets ``first..last`` in one persisted state and delivery count."""

    first: int
    last: int
    state: RecordState
    delivery_count: int


@attrs.frozen
class PartitionSummary:
    """What an operator sees of a share-partition (describe, metrics)."""

    start_offset: int
    end_offset: int
    in_flight: int
    acquired: int
    available: int
    acknowledged: int
    archived: int
    redelivered: int


class InvalidAcknowledgement(ValueError):
    """An acknowledgement the records' states or holders refuse (INVALID_RECORD_STATE)."""


class SharePartition:
    """See the module docstring. ``start`` is the initial SPSO."""

    def __init__(
        self, start: int, *, delivery_count_limit: int, lock_duration_ms: int,
        max_record_locks: int,
    ) -> None:
        self.start = start
        #: One past the highest offset ever acquired or skipped (Kafka's SPEO + 1).
        self.end = start
        self.limit = delivery_count_limit
        self.lock_duration_ms = lock_duration_ms
        #: Most records acquired at once (Kafka's ``share.partition.max.record.locks``):
        #: acquisition stops there until some are acknowledged, released or time out.
        self.max_record_locks = max_record_locks
        #: Offset -> entry; inserted in offset order, so the first key is the lowest.
        self.records: dict[int, InFlight] = {}
        #: Records archived since the engine opened (a figure for operators).
        self.archived_total = 0
        #: Deliveries after a record's first since the engine opened (operators' figure).
        self.redelivered_total = 0
        #: How many entries are ACQUIRED, kept as they change: counting the window on
        #: every acquisition was a tenth of a share fetch's time.
        self._acquired = 0

    # -- reading -------------------------------------------------------------------------

    def fetch_offset(self) -> int:
        """Where acquisition reads the log from: the lowest available record of the
        window, else the window's end."""
        for offset, entry in self.records.items():
            if entry.state is RecordState.AVAILABLE:
                return offset
        return self.end

    def has_available(self) -> bool:
        return any(e.state is RecordState.AVAILABLE for e in self.records.values())

    def acquired_count(self) -> int:
        return self._acquired

    def summary(self, log_end: int | None = None) -> PartitionSummary:
        counts = dict.fromkeys(RecordState, 0)
        redelivered = 0
        for entry in self.records.values():
            counts[entry.state] += 1
            if entry.delivery_count > 1 and entry.state in (
                RecordState.AVAILABLE, RecordState.ACQUIRED
            ):
                redelivered += 1
        return PartitionSummary(
            start_offset=self.start,
            end_offset=max(self.end, log_end or 0),
            in_flight=counts[RecordState.AVAILABLE] + counts[RecordState.ACQUIRED],
            acquired=counts[RecordState.ACQUIRED],
            available=counts[RecordState.AVAILABLE],
            acknowledged=counts[RecordState.ACKNOWLEDGED],
            archived=self.archived_total,
            redelivered=redelivered,
        )

    # -- acquiring -----------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        spans: Sequence[LogSpan],
        max_records: int,
        now_ms: float,
    ) -> tuple[list[AcquiredRange], set[int]]:
        """Acquire up to ``max_records`` records for ``member`` out of ``spans`` (the log
        from :meth:`fetch_offset` on, in offset order). Offsets to skip that are new are
        archived. Returns the acquired ranges and every changed offset."""
        changed: set[int] = set()
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        room = min(max_records, self.max_record_locks - self.acquired_count())
        deadline = now_ms + self.lock_duration_ms
        for span in spans:
            if room <= 0:
                break
            for offset in range(max(span.first, self.start), span.last + 1):
                if room <= 0:
                    break
                if offset >= self.end:
                    if offset > self.end and not self.records:
                        # Nothing in flight and a gap before the span: jump over it.
                        self.start = max(self.start, offset)
                    self.end = offset + 1
                    entry = InFlight(RecordState.AVAILABLE)
                    self.records[offset] = entry
                    if span.skip:
                        self._move(offset, entry, Event.SKIP, changed)
                        continue
                else:
                    found = self.records.get(offset)
                    if found is None or found.state is not RecordState.AVAILABLE:
                        continue
                    entry = found
                    if span.skip:
                        self._move(offset, entry, Event.SKIP, changed)
                        continue
                # Only AVAILABLE records get here, and the table takes them to ACQUIRED.
                entry.state = RecordState.ACQUIRED
                self._acquired += 1
                entry.delivery_count += 1
                if entry.delivery_count > 1:
                    self.redelivered_total += 1
                entry.member = member
                entry.deadline_ms = deadline
                changed.add(offset)
                taken.append((offset, entry.delivery_count))
                room -= 1
        self._advance(changed)
        return _ranges(taken), changed

    # -- acknowledging, releasing, expiring ----------------------------------------------

    def acknowledge(
        self, member: str, batches: Iterable[AckBatch], now_ms: float = 0.0
    ) -> set[int]:
        """Apply ``member``'s acknowledgements, all or none (a RENEW restarts the lock's
        deadline from ``now_ms``).

        :raises InvalidAcknowledgement: an offset is not acquired by ``member`` (or not
            in flight), or a type is unknown; nothing changed.
        """
        plan: list[tuple[int, Event]] = []
        records = self.records
        acquired = RecordState.ACQUIRED
        for batch in batches:
            if batch.last < batch.first or (
                len(batch.types) not in (1, batch.last - batch.first + 1)
            ):
                raise InvalidAcknowledgement("acknowledgement batch of the wrong shape")
            # One type for the batch (the usual case): looked up once, not per offset.
            single = batch.types[0] if len(batch.types) == 1 else None
            for offset in range(batch.first, batch.last + 1):
                kind = single if single is not None else batch.types[offset - batch.first]
                entry = records.get(offset)
                if entry is None:
                    if offset < self.end and kind is AckType.GAP:
                        continue  # a gap the window already counts as done
                    raise InvalidAcknowledgement(f"offset {offset} is not in flight")
                if entry.state is not acquired or entry.member != member:
                    raise InvalidAcknowledgement(
                        f"offset {offset} is not acquired by this member"
                    )
                plan.append((offset, ACK_EVENTS[kind]))
        changed: set[int] = set()
        for offset, event in plan:
            entry = self.records[offset]
            self._move(offset, entry, event, changed)
            if event is Event.RENEW:
                entry.member = member
                entry.deadline_ms = now_ms + self.lock_duration_ms
        self._advance(changed)
        return changed

    def release_member(self, member: str) -> set[int]:
        """Release every record ``member`` holds (it left or was fenced)."""
        changed: set[int] = set()
        for offset, entry in list(self.records.items()):
            if entry.state is RecordState.ACQUIRED and entry.member == member:
                self._move(offset, entry, Event.MEMBER_GONE, changed)
        self._advance(changed)
        return changed

    def expire_locks(self, now_ms: float) -> set[int]:
        """Time out every lock whose deadline has passed."""
        changed: set[int] = set()
        for offset, entry in list(self.records.items()):
            if entry.state is RecordState.ACQUIRED and entry.deadline_ms <= now_ms:
                self._move(offset, entry, Event.LOCK_TIMEOUT, changed)
        self._advance(changed)
        return changed

    def next_deadline(self) -> float | None:
        deadlines = [
            e.deadline_ms for e in self.records.values() if e.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    def move_start(self, offset: int) -> set[int]:
        """Move the SPSO to ``offset`` (an offset reset, or the log start passing it):
        entries below it go, and an end below it follows it."""
        changed: set[int] = set()
        for key in [k for k in self.records if k < offset]:
            if self.records.pop(key).state is RecordState.ACQUIRED:
                self._acquired -= 1
        self.start = offset
        self.end = max(self.end, offset)
        if not self.records:
            self.end = offset
        return changed

    def _move(self, offset: int, entry: InFlight, event: Event, changed: set[int]) -> None:
        state = next_state(
            entry.state, event, delivery_count=entry.delivery_count, limit=self.limit
        )
        if state is RecordState.ARCHIVED:
            self.archived_total += 1
        self._acquired += (state is RecordState.ACQUIRED) - (entry.state is RecordState.ACQUIRED)
        entry.state = state
        if state is not RecordState.ACQUIRED:
            entry.member = None
            entry.deadline_ms = 0.0
        changed.add(offset)

    def _advance(self, changed: set[int]) -> None:
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        records = self.records
        # One pass from the front: a dict that lost entries at its front makes every
        # fresh iteration walk past their empty slots first, so asking for its first
        # key once per removed entry would cost the window's size each time.
        finished: list[int] = []
        pending: int | None = None
        for offset, entry in records.items():
            if entry.state not in done:
                pending = offset
                break
            finished.append(offset)
        for offset in finished:
            del records[offset]
        if finished:
            self.start = finished[-1] + 1
        if pending is not None:
            self.start = max(self.start, pending)
            return
        self.start = max(self.start, self.end)

    # -- persistence ---------------------------------------------------------------------

    def runs(self, offsets: Iterable[int] | None = None) -> list[StateRun]:
        """The entries (all, or those of ``offsets`` still in the window) as runs of equal
        state and count; an ACQUIRED record is stored as ACQUIRED (a restart makes it
        available again, its count kept)."""
        chosen = self.records if offsets is None else (o for o in offsets if o in self.records)
        records = self.records
        # Plain lists while merging: a run object per offset would cost more than the
        # whole acquisition of the offset.
        spans: list[list[int]] = []
        states: list[RecordState] = []
        for offset in sorted(chosen):
            entry = records[offset]
            if (
                spans and spans[-1][1] + 1 == offset and states[-1] is entry.state
                and spans[-1][2] == entry.delivery_count
            ):
                spans[-1][1] = offset
            else:
                spans.append([offset, offset, entry.delivery_count])
                states.append(entry.state)
        return [
            StateRun(first, last, state, count)
            for (first, last, count), state in zip(spans, states, strict=True)
        ]

    def restore(
        self,
        start: int,
        end: int,
        runs: Iterable[StateRun],
        *,
        held: SharePartition | None = None,
    ) -> None:
        """Load persisted state: records that were ACQUIRED become AVAILABLE (their locks
        died with the broker), or ARCHIVED if their count reached the limit.

        ``held`` is the state this load replaces on a live broker (a journal write failed,
        or the journal was reopened): a record persisted as ACQUIRED that ``held`` still
        has ACQUIRED at the same delivery count keeps its member and lock, and the
        operators' totals carry over.
        """
        self.start = start
        self.end = max(start, end)
        entries: dict[int, InFlight] = {}
        if held is not None:
            self.archived_total = held.archived_total
            self.redelivered_total = held.redelivered_total
        for run in runs:
            for offset in range(max(run.first, start), run.last + 1):
                state = run.state
                kept = held.records.get(offset) if held is not None else None
                if (
                    state is RecordState.ACQUIRED and kept is not None
                    and kept.state is RecordState.ACQUIRED
                    and kept.delivery_count == run.delivery_count
                ):
                    entries[offset] = InFlight(
                        state, run.delivery_count, kept.member, kept.deadline_ms
                    )
                    continue
                if state is RecordState.ACQUIRED:
                    state = next_state(
                        state, Event.MEMBER_GONE, delivery_count=run.delivery_count,
                        limit=self.limit,
                    )
                entries[offset] = InFlight(state, run.delivery_count)
        self.records = dict(sorted(entries.items()))
        self._acquired = sum(1 for e in entries.values() if e.state is RecordState.ACQUIRED)
        self._advance(set())


def _ranges(taken: list[tuple[int, int]]) -> list[AcquiredRange]:
    spans: list[list[int]] = []
    for offset, count in taken:
        if spans and spans[-1][1] + 1 == offset and spans[-1][2] == count:
            spans[-1][1] = offset
        else:
            spans.append([offset, offset, count])
    return [AcquiredRange(first, last, count) for first, last, count in spans]


def iter_offsets(ranges: Iterable[AcquiredRange]) -> Iterator[int]:
    for r in ranges:
        yield from range(r.first, r.last + 1)


__all__ += ["InvalidAcknowledgement", "InvalidTransition", "iter_offsets"]
