# -*- test-case-name: tests.core.share.test_partition -*-
"""One share-partition: a share group's view of one topic partition (KIP-932).

:class:`SharePartition` holds the share-partition start offset (SPSO: every record below
it is done), the end of the in-flight window (the next offset never yet acquired) and the
window's records as :class:`InFlightRange` runs: a run of offsets in one
:class:`RecordState` with one delivery count, and while ACQUIRED one member holding it
and one lock deadline. Records acquired together stay one run until something happens
to part of it (a member acknowledges some of its offsets, a type per offset): only then
is the run split, and neighbours that come to agree again are merged. An offset of the
window that no run covers holds no record (a batch gap) and counts as done. The work of
every operation grows with the runs it touches, not with the records they hold.

Records are acquired in offset order: first released or timed-out ones in the window,
then new ones from the log (:meth:`acquire` is given the log's batches from
:meth:`fetch_offset` on, as :class:`LogSpan` ranges saying which offsets are data and
which are to skip: control records and aborted transactions). With ``whole_batches``
(Kafka's default acquire mode) a batch once begun is acquired whole, so ``max_records``
may be passed by the rest of one batch; without it (the record-limit mode, and the
native queue) no more than ``max_records`` are taken. Each acquisition raises the
delivery count; a record released or timed out at the group's delivery-count limit is
archived instead of becoming available again. The SPSO advances over the prefix of
acknowledged and archived records.

With ``dead_letters`` on (the group names a KIP-1191 dead-letter topic), a record a member
rejects or that runs out of deliveries goes to ARCHIVING, not ARCHIVED, and is noted as a
:class:`DeadLetter` (offsets, delivery count, reason) for the caller to write to that
topic; :meth:`SharePartition.dead_lettered` then archives it. ARCHIVING is persisted, so
a restart notes it again (:meth:`SharePartition.restore`). Records skipped (gaps, control
records, aborted transactions) are archived directly.

Every method that changes state returns the offset spans it changed, for the
share-state journal (:mod:`brokerd.storage.stores.share_state`), which stores runs too.
Pure and synchronous: the caller passes the time (milliseconds) and does the I/O.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise

import attrs

from brokerd.core.share.states import (
    ACK_EVENTS,
    AckType,
    Event,
    RecordState,
    next_state,
)

__all__ = [
    "AckBatch",
    "AcquiredRange",
    "DeadLetter",
    "DeadLetterReason",
    "InFlightRange",
    "LogSpan",
    "PartitionSummary",
    "SharePartition",
    "Span",
    "StateRun",
]

#: Offsets ``first..last`` that an operation changed.
Span = tuple[int, int]

_AVAILABLE = RecordState.AVAILABLE
_ACQUIRED = RecordState.ACQUIRED
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ARCHIVING = RecordState.ARCHIVING
_ARCHIVED = RecordState.ARCHIVED
#: Archiving events that are not a failed delivery (no record, or nothing to deliver).
_NOT_DEAD = (Event.GAP, Event.SKIP)


class DeadLetterReason(enum.Enum):
    """Why a record went to the dead-letter topic (Kafka's ``__dlq.errors.message``)."""

    REJECTED = "Offset rejected by client."
    DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


@attrs.frozen
class DeadLetter:
    """Records ``first..last`` archived for ``reason`` after ``delivery_count``
    deliveries."""

    first: int
    last: int
    delivery_count: int
    reason: DeadLetterReason


@attrs.define(slots=True)
class InFlightRange:
    """Offsets ``first..last`` of the window, in one state and delivery count (and while
    ACQUIRED, held by one member until one deadline)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: float = 0.0

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def same_as(self, other: InFlightRange) -> bool:
        """Whether ``other`` could be one run with this one (when adjacent)."""
        return (
            self.state is other.state and self.delivery_count == other.delivery_count
            and self.member == other.member and self.deadline_ms == other.deadline_ms
        )


def _last(r: InFlightRange) -> int:
    return r.last


@attrs.frozen
class LogSpan:
    """Offsets ``first..last`` of the log (one stored batch), all data (``skip``
    False) or all to skip."""

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

    def runs(self) -> Iterator[tuple[int, int, AckType]]:
        """The batch as (first, last, type) runs of one type each."""
        if len(self.types) == 1:
            yield self.first, self.last, self.types[0]
            return
        begin = self.first
        kind = self.types[0]
        for at, t in enumerate(self.types[1:], self.first + 1):
            if t is not kind:
                yield begin, at - 1, kind
                begin, kind = at, t
        yield begin, self.last, kind


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
        #: The window's runs in offset order, none overlapping.
        self.ranges: list[InFlightRange] = []
        #: Records archived since the engine opened (a figure for operators).
        self.archived_total = 0
        #: Dead-letter records written since the engine opened (operators' figure).
        self.dead_lettered_total = 0
        #: Whether archiving by reject or delivery limit notes a :class:`DeadLetter`.
        self.dead_letters = False
        #: Dead letters noted and not yet taken (:meth:`take_dead_letters`).
        self._dead: list[DeadLetter] = []
        #: Deliveries after a record's first since the engine opened (operators' figure).
        self.redelivered_total = 0
        #: How many records are ACQUIRED, kept as they change (the lock cap reads it on
        #: every acquisition).
        self._acquired = 0

    # -- reading -------------------------------------------------------------------------

    def fetch_offset(self) -> int:
        """Where acquisition reads the log from: the lowest available record of the
        window, else the window's end."""
        for r in self.ranges:
            if r.state is _AVAILABLE:
                return r.first
        return self.end

    def has_available(self) -> bool:
        return any(r.state is _AVAILABLE for r in self.ranges)

    def acquired_count(self) -> int:
        return self._acquired

    def has_room(self) -> bool:
        """Whether an acquisition could take a record now: fewer records are ACQUIRED
        than ``max_record_locks`` (at the cap :meth:`acquire` takes nothing)."""
        return self._acquired < self.max_record_locks

    def entry(self, offset: int) -> InFlightRange | None:
        """The run holding ``offset``, None when the window has no record there."""
        i = bisect_left(self.ranges, offset, key=_last)
        if i < len(self.ranges) and self.ranges[i].first <= offset:
            return self.ranges[i]
        return None

    def done_count(self) -> int:
        """Records of the window acknowledged or archived (above a pending one)."""
        return sum(r.size for r in self.ranges if r.state in _DONE)

    def summary(self, log_end: int | None = None) -> PartitionSummary:
        counts = dict.fromkeys(RecordState, 0)
        redelivered = 0
        for r in self.ranges:
            counts[r.state] += r.size
            if r.delivery_count > 1 and r.state in (_AVAILABLE, _ACQUIRED):
                redelivered += r.size
        return PartitionSummary(
            start_offset=self.start,
            end_offset=max(self.end, log_end or 0),
            in_flight=counts[_AVAILABLE] + counts[_ACQUIRED],
            acquired=counts[_ACQUIRED],
            available=counts[_AVAILABLE],
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
        *,
        whole_batches: bool = False,
    ) -> tuple[list[AcquiredRange], list[Span]]:
        """Acquire up to ``max_records`` records for ``member`` out of ``spans`` (the log
        from :meth:`fetch_offset` on, in offset order; with ``whole_batches`` a span
        begun is taken whole). Offsets to skip are archived. Returns the acquired
        ranges and the changed spans."""
        changed: list[Span] = []
        taken: list[AcquiredRange] = []
        room = min(max_records, self.max_record_locks - self._acquired)
        deadline = now_ms + self.lock_duration_ms
        for span in spans:
            if room <= 0:
                break
            first, last = max(span.first, self.start), span.last
            if first > last:
                continue
            budget = last - first + 1 if whole_batches else room
            before = budget
            if first < self.end:
                upto = min(last, self.end - 1)
                budget = self._acquire_window(
                    member, first, upto, span.skip, budget, deadline, changed, taken
                )
                first = upto + 1
            if first <= last and budget > 0:
                budget = self._acquire_new(
                    member, first, last, span.skip, budget, deadline, changed, taken
                )
            room -= before - budget
        self._merge()
        self._advance()
        out: list[AcquiredRange] = []
        for r in taken:
            if out and out[-1].last + 1 == r.first and out[-1].delivery_count == r.delivery_count:
                out[-1] = AcquiredRange(out[-1].first, r.last, r.delivery_count)
            else:
                out.append(r)
        return out, changed

    def _acquire_window(
        self, member: str, first: int, last: int, skip: bool, budget: int,
        deadline: float, changed: list[Span], taken: list[AcquiredRange],
    ) -> int:
        """Acquire (or with ``skip`` archive) the available runs of ``first..last``,
        offsets the window already has; the budget left."""
        ranges = self.ranges
        i = self._split(first)
        while i < len(ranges) and budget > 0:
            r = ranges[i]
            if r.first > last:
                break
            if r.state is not _AVAILABLE:
                i += 1
                continue
            if r.last > last:
                self._split_range(i, last + 1)
            if skip:
                self._move(r, Event.SKIP)
                changed.append((r.first, r.last))
                i += 1
                continue
            if r.size > budget:
                self._split_range(i, r.first + budget)
            self._take(r, member, deadline)
            changed.append((r.first, r.last))
            taken.append(AcquiredRange(r.first, r.last, r.delivery_count))
            budget -= r.size
            i += 1
        return budget

    def _acquire_new(
        self, member: str, first: int, last: int, skip: bool, budget: int,
        deadline: float, changed: list[Span], taken: list[AcquiredRange],
    ) -> int:
        """Records ``first..last`` past the window's end: acquired (or archived); the
        budget left."""
        if first > self.end and not self.ranges:
            # Nothing in flight and a gap before the span: jump over it.
            self.start = max(self.start, first)
        if skip:
            r = InFlightRange(first, last, _AVAILABLE)
            self._move(r, Event.SKIP)
            self.ranges.append(r)
            self.end = last + 1
            changed.append((first, last))
            return budget
        last = min(last, first + budget - 1)
        r = InFlightRange(first, last, _AVAILABLE)
        self._take(r, member, deadline)
        self.ranges.append(r)
        self.end = last + 1
        changed.append((first, last))
        taken.append(AcquiredRange(first, last, r.delivery_count))
        return budget - r.size

    def _take(self, r: InFlightRange, member: str, deadline: float) -> None:
        # Only AVAILABLE runs get here, and the table takes them to ACQUIRED.
        r.state = _ACQUIRED
        r.delivery_count += 1
        if r.delivery_count > 1:
            self.redelivered_total += r.size
        r.member = member
        r.deadline_ms = deadline
        self._acquired += r.size

    # -- acknowledging, releasing, expiring ----------------------------------------------

    def acknowledge(
        self, member: str, batches: Iterable[AckBatch], now_ms: float = 0.0
    ) -> list[Span]:
        """Apply ``member``'s acknowledgements, all or none (a RENEW restarts the lock's
        deadline from ``now_ms``).

        :raises InvalidAcknowledgement: an offset is not acquired by ``member`` (or not
            in flight), or a type is unknown; nothing changed.
        """
        plan: list[tuple[int, int, Event]] = []
        for batch in batches:
            if batch.last < batch.first or (
                len(batch.types) not in (1, batch.last - batch.first + 1)
            ):
                raise InvalidAcknowledgement("acknowledgement batch of the wrong shape")
            for first, last, kind in batch.runs():
                self._check_held(member, first, last, kind)
                plan.append((first, last, ACK_EVENTS[kind]))
        ordered = sorted(plan, key=lambda step: step[0])
        if any(a[1] >= b[0] for a, b in pairwise(ordered)):
            raise InvalidAcknowledgement("acknowledgement batches overlap")
        changed: list[Span] = []
        ranges = self.ranges
        for first, last, event in plan:
            i = self._split(first)
            self._split(last + 1)
            while i < len(ranges) and ranges[i].first <= last:
                r = ranges[i]
                self._move(r, event)
                if event is Event.RENEW:
                    r.member = member
                    r.deadline_ms = now_ms + self.lock_duration_ms
                changed.append((r.first, r.last))
                i += 1
        self._merge()
        self._advance()
        return changed

    def _check_held(self, member: str, first: int, last: int, kind: AckType) -> None:
        """Refuse ``first..last`` unless ``member`` holds every record of it (offsets
        with no record pass as GAP below the window's end)."""
        ranges = self.ranges
        i = bisect_left(ranges, first, key=_last)
        at = first
        while at <= last:
            r = ranges[i] if i < len(ranges) else None
            if r is None or r.first > at:
                # No record from ``at`` to the next run (or past ``last``).
                upto = last if r is None else min(last, r.first - 1)
                if kind is not AckType.GAP or upto >= self.end:
                    raise InvalidAcknowledgement(f"offset {at} is not in flight")
                at = upto + 1
                continue
            if r.state is not _ACQUIRED or r.member != member:
                raise InvalidAcknowledgement(f"offset {at} is not acquired by this member")
            at = r.last + 1
            i += 1

    def release_member(self, member: str) -> list[Span]:
        """Release every record ``member`` holds (it left or was fenced)."""
        changed: list[Span] = []
        for r in self.ranges:
            if r.state is _ACQUIRED and r.member == member:
                self._move(r, Event.MEMBER_GONE)
                changed.append((r.first, r.last))
        self._merge()
        self._advance()
        return changed

    def expire_locks(self, now_ms: float) -> list[Span]:
        """Time out every lock whose deadline has passed."""
        changed: list[Span] = []
        for r in self.ranges:
            if r.state is _ACQUIRED and r.deadline_ms <= now_ms:
                self._move(r, Event.LOCK_TIMEOUT)
                changed.append((r.first, r.last))
        self._merge()
        self._advance()
        return changed

    def _reason(self, r: InFlightRange, event: Event | None) -> DeadLetterReason:
        if event is Event.REJECT:
            return DeadLetterReason.REJECTED
        if event is None and r.delivery_count < self.limit:
            # Restored ARCHIVING below the limit: only a reject archives that early.
            return DeadLetterReason.REJECTED
        return DeadLetterReason.DELIVERY_COUNT_EXCEEDED

    def dead_lettered(self, first: int, last: int, *, written: bool = True) -> list[Span]:
        """Archive the ARCHIVING records of ``first..last`` (their dead-letter record is
        ``written``, or failed for good); other records there are left as they are."""
        changed: list[Span] = []
        ranges = self.ranges
        i = self._split(first)
        self._split(last + 1)
        while i < len(ranges) and ranges[i].first <= last:
            r = ranges[i]
            if r.state is _ARCHIVING:
                self._move(r, Event.DEAD_LETTERED)
                self.dead_lettered_total += r.size if written else 0
                changed.append((r.first, r.last))
            i += 1
        self._merge()
        self._advance()
        return changed

    def take_dead_letters(self) -> list[DeadLetter]:
        """The dead letters noted since the last call, in the order they were noted."""
        dead, self._dead = self._dead, []
        return dead

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline_ms for r in self.ranges if r.state is _ACQUIRED]
        return min(deadlines) if deadlines else None

    def move_start(self, offset: int) -> list[Span]:
        """Move the SPSO to ``offset`` (an offset reset, or the log start passing it):
        records below it go, and an end below it follows it."""
        i = self._split(offset)
        for r in self.ranges[:i]:
            if r.state is _ACQUIRED:
                self._acquired -= r.size
        del self.ranges[:i]
        self.start = offset
        self.end = max(self.end, offset)
        if not self.ranges:
            self.end = offset
        return []

    # -- the runs ------------------------------------------------------------------------

    def _move(self, r: InFlightRange, event: Event) -> None:
        state = next_state(r.state, event, delivery_count=r.delivery_count, limit=self.limit)
        size = r.size
        if state is _ARCHIVED and r.state is not _ARCHIVING:
            self.archived_total += size
            if self.dead_letters and r.state is _ACQUIRED and event not in _NOT_DEAD:
                state = _ARCHIVING
                self._dead.append(
                    DeadLetter(r.first, r.last, r.delivery_count, self._reason(r, event))
                )
        self._acquired += size * ((state is _ACQUIRED) - (r.state is _ACQUIRED))
        r.state = state
        if state is not _ACQUIRED:
            r.member = None
            r.deadline_ms = 0.0

    def _split(self, offset: int) -> int:
        """Make ``offset`` the first of a run if a run holds it; the index of the first
        run at or after ``offset``."""
        ranges = self.ranges
        i = bisect_left(ranges, offset, key=_last)
        if i < len(ranges) and ranges[i].first < offset:
            self._split_range(i, offset)
            return i + 1
        return i

    def _split_range(self, i: int, offset: int) -> None:
        """Split run ``i`` (which holds ``offset`` and starts below it) before ``offset``."""
        r = self.ranges[i]
        tail = InFlightRange(offset, r.last, r.state, r.delivery_count, r.member, r.deadline_ms)
        r.last = offset - 1
        self.ranges.insert(i + 1, tail)

    def _merge(self) -> None:
        """Join adjacent runs that agree in everything."""
        ranges = self.ranges
        if len(ranges) < 2:
            return
        out = [ranges[0]]
        for r in ranges[1:]:
            prev = out[-1]
            if prev.last + 1 == r.first and prev.same_as(r):
                prev.last = r.last
            else:
                out.append(r)
        if len(out) != len(ranges):
            self.ranges = out

    def _advance(self) -> None:
        ranges = self.ranges
        done = 0
        while done < len(ranges) and ranges[done].state in _DONE:
            done += 1
        if done:
            self.start = ranges[done - 1].last + 1
            del ranges[:done]
        if ranges:
            self.start = max(self.start, ranges[0].first)
        else:
            self.start = max(self.start, self.end)

    # -- persistence ---------------------------------------------------------------------

    def runs(self, changed: Iterable[Span] | None = None) -> list[StateRun]:
        """The window (all, or the parts of the ``changed`` spans still in it) as runs
        of equal state and count; an ACQUIRED record is stored as ACQUIRED (a restart
        makes it available again, its count kept)."""
        ranges = self.ranges
        pieces: list[list[int]] = []
        states: list[RecordState] = []

        def add(first: int, last: int, r: InFlightRange) -> None:
            if (
                pieces and pieces[-1][1] + 1 == first and states[-1] is r.state
                and pieces[-1][2] == r.delivery_count
            ):
                pieces[-1][1] = last
            else:
                pieces.append([first, last, r.delivery_count])
                states.append(r.state)

        if changed is None:
            for r in ranges:
                add(r.first, r.last, r)
        else:
            for first, last in _union(changed):
                i = bisect_left(ranges, first, key=_last)
                while i < len(ranges) and ranges[i].first <= last:
                    r = ranges[i]
                    add(max(first, r.first), min(last, r.last), r)
                    i += 1
        return [
            StateRun(first, last, state, count)
            for (first, last, count), state in zip(pieces, states, strict=True)
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
        or the journal was reopened): the records persisted as ACQUIRED that ``held``
        still has ACQUIRED at the same delivery count keep their member and lock, and
        the operators' totals carry over.
        """
        self.start = start
        self.end = max(start, end)
        if held is not None:
            self.archived_total = held.archived_total
            self.dead_lettered_total = held.dead_lettered_total
            self.redelivered_total = held.redelivered_total
        out: list[InFlightRange] = []
        for run in sorted(runs, key=lambda r: r.first):
            first = max(run.first, start)
            if first > run.last:
                continue
            if run.state is not _ACQUIRED:
                out.append(InFlightRange(first, run.last, run.state, run.delivery_count))
                continue
            out += self._reacquired(first, run.last, run.delivery_count, held)
        self.ranges = out
        self._merge()
        self._acquired = sum(r.size for r in self.ranges if r.state is _ACQUIRED)
        # ARCHIVING records whose dead-letter record may not have been written: write
        # it (again: at least once), as Kafka resumes them.
        self._dead = [
            DeadLetter(r.first, r.last, r.delivery_count, self._reason(r, None))
            for r in self.ranges
            if r.state is _ARCHIVING
        ]
        self._advance()

    def _reacquired(
        self, first: int, last: int, count: int, held: SharePartition | None
    ) -> list[InFlightRange]:
        """Runs for persisted ACQUIRED records ``first..last``: kept where ``held`` holds
        them at the same count, released (or archived at the limit) elsewhere."""
        gone = next_state(_ACQUIRED, Event.MEMBER_GONE, delivery_count=count, limit=self.limit)
        out: list[InFlightRange] = []
        at = first
        if held is not None:
            ranges = held.ranges
            i = bisect_left(ranges, first, key=_last)
            while i < len(ranges) and ranges[i].first <= last:
                h = ranges[i]
                if h.state is _ACQUIRED and h.delivery_count == count:
                    lo, hi = max(first, h.first), min(last, h.last)
                    if lo > at:
                        out.append(InFlightRange(at, lo - 1, gone, count))
                    out.append(InFlightRange(lo, hi, _ACQUIRED, count, h.member, h.deadline_ms))
                    at = hi + 1
                i += 1
        if at <= last:
            out.append(InFlightRange(at, last, gone, count))
        return out


def _union(spans: Iterable[Span]) -> list[Span]:
    """``spans`` sorted, overlapping and adjacent ones joined."""
    out: list[list[int]] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return [(first, last) for first, last in out]


def iter_offsets(ranges: Iterable[AcquiredRange]) -> Iterator[int]:
    for r in ranges:
        yield from range(r.first, r.last + 1)


__all__ += ["InvalidAcknowledgement", "iter_offsets"]
