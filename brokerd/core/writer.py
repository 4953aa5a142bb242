# -*- test-case-name: tests.core.test_broker -*-
"""Group commit for one partition: a queue of appends and at most one write job.

A :class:`PartitionWriter` takes appends in the reactor thread. While no job runs, the
next one starts at once in the write pool (:func:`write_job`): append each request, sync
once when the fsync mode, a flush request or a transaction marker wants it, publish, and
enforce retention when asked. Appends that arrive while a job runs wait in the queue and
form the next job, so a busy partition costs one sync per group, not per request.

A job that syncs nothing, enforces no retention and writes at most ``inline_bytes``
runs in the reactor thread instead (``--fsync never`` and ``interval``, and topics whose
``flush.messages`` is not yet due): such a job is a copy into the page cache, a few
microseconds, while the two hand-offs to the pool and back cost a fraction of a
millisecond each at the median and milliseconds when the cores are busy (each also
makes the reactor and the write thread take turns at the GIL). Kafka's request
handlers append the same way, in the thread that decoded the request. Appends queued
while an inline job's answers are being given (a pipelined produce started by its
predecessor's answer) form the next job once it is done, so the jobs of one partition
still run one at a time and in order.

An inline job tells its owner of the appends once the answer being written has been
handed to the socket (the broker's :class:`~brokerd.after_answer.AfterAnswer`), not at
once: the append's Deferred fires inside the request that made it, and a long poll woken
at once would be read, encoded and sent before that request's own answer (a consumer's
Fetch answer carrying a record left before the Produce answer that wrote it, delaying
every delivery report by the Fetch's work). Kafka, too, completes delayed fetches
after the produce answer is handed to its network thread. When no answer is written in
that call (an answer that waits for another partition's job), a ``callLater(0)`` gives
the wake-ups in the reactor's next turn. The wake-ups held meanwhile go out together,
before those of any later job.

The job answers with a :class:`JobResult`: each append's offsets or failure, in order,
and separately a retention failure (retention is retried at the next pass; the appends
stand). The writer fires each append's Deferred in order, then tells its owner which
appends landed (to wake long polls). It knows nothing of producers, topics or waiters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import attrs
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.after_answer import AfterAnswer
from brokerd.clock import Clock, DelayedCall
from brokerd.core.appends import Append, BatchesAppend, MarkerAppend, ValuesAppend
from brokerd.core.interfaces import Runner
from brokerd.core.policy import FlushRule
from brokerd.core.write_stats import WriteStats
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.types import AppendInfo

#: Largest unsynced write job the broker runs in the reactor thread rather than the
#: write pool (see the module docstring): a small produce's batches, not a bulk one's,
#: whose append the pool overlaps with the reactor's work on the next request.
INLINE_APPEND_BYTES = 16 * 1024


@attrs.frozen
class JobResult:
    """What one write job did: per append, in order, its offsets or the failure that
    refused it; and a retention failure, which fails no append."""

    outcomes: tuple[AppendInfo | Failure, ...]
    retention_failure: Failure | None = None
    #: How long the job's fsync took (None: no successful sync).
    sync_seconds: float | None = None


def _current_failure() -> Failure:
    """The exception being handled, as a Failure (Failure() is untyped in Twisted)."""
    return Failure()


def write_job(
    log: PartitionLog,
    appends: Sequence[Append],
    *,
    sync: bool,
    retention: bool,
    wall_clock: Callable[[], float],
) -> JobResult:
    """Runs in the write pool: append each request, sync once, publish, then retention.

    A failed sync fails every append of the job and publishes nothing: those bytes were
    never promised durable, so no reader may see them.
    """
    outcomes: list[AppendInfo | Failure] = []
    for append in appends:
        try:
            if isinstance(append, ValuesAppend):
                info = log.append_values(append.values, timestamp_ms=int(wall_clock() * 1000))
            elif isinstance(append, MarkerAppend):
                info = log.append_marker(
                    append.producer_id,
                    append.producer_epoch,
                    commit=append.commit,
                    coordinator_epoch=append.coordinator_epoch,
                    timestamp_ms=int(wall_clock() * 1000),
                )
            else:
                info = log.append_prepared(append.prepared, now_ms=int(wall_clock() * 1000))
            outcomes.append(info)
        except Exception:
            outcomes.append(_current_failure())
    sync_seconds = None
    if sync:
        began = time.monotonic()
        try:
            log.flush()
            sync_seconds = time.monotonic() - began
        except Exception:
            failure = _current_failure()
            return JobResult(tuple(failure if isinstance(r, AppendInfo) else r for r in outcomes))
    log.publish()
    retention_failure = None
    if retention:
        try:
            log.enforce_retention(wall_clock())
        except Exception:
            retention_failure = _current_failure()
    return JobResult(tuple(outcomes), retention_failure, sync_seconds)


@attrs.define(eq=False)
class _Queued:
    append: Append
    deferred: defer.Deferred[AppendInfo]
    queued_at: float = 0.0


class PartitionWriter:
    """One partition's append queue and write jobs (reactor thread).

    :param on_appended: called after each job with the appends that landed, in order.
    :param on_idle: called whenever the writer finds nothing left to do.
    :param after_answer: where an inline job's wake-ups wait for the answer being
        written (the broker's).
    """

    _log = Logger()

    def __init__(
        self,
        log: PartitionLog,
        *,
        run_write: Runner,
        flush_rule: Callable[[], FlushRule],
        wall_clock: Callable[[], float],
        clock: Clock | None = None,
        on_appended: Callable[[Sequence[tuple[Append, AppendInfo]]], None],
        on_idle: Callable[[], None],
        stats: WriteStats | None = None,
        inline_bytes: int = 0,
        after_answer: AfterAnswer | None = None,
    ) -> None:
        self.log = log
        self._after_answer = after_answer if after_answer is not None else AfterAnswer()
        #: Largest unsynced job run in the reactor thread (0: every job in the pool).
        self._inline_bytes = inline_bytes
        self._kicking = False  # inside _kick: a nested call leaves the work to its loop
        self._stats = stats if stats is not None else WriteStats("")
        self._run_write = run_write
        self._flush_rule = flush_rule
        self._clock = clock
        #: Records appended since the last sync (``flush.messages``).
        self._unsynced_records = 0
        #: The ``flush.ms`` timer, armed by the first append not yet synced.
        self._flush_timer: DelayedCall | None = None
        self._wall_clock = wall_clock
        self._on_appended = on_appended
        self._on_idle = on_idle
        self._pending: list[_Queued] = []
        #: Appends of inline jobs whose wake-up waits for the next reactor turn: at
        #: most those of the requests read in one turn (each within its connection's
        #: request budget), emptied at the start of the next.
        self._unannounced: list[tuple[Append, AppendInfo]] = []
        self._announce_call: DelayedCall | None = None
        self._busy = False
        self._flush_requested = False
        self._retention_requested = False
        #: Appended since the last sync (interval mode syncs only dirty partitions).
        self.dirty = False
        #: End of the appends whose results the reactor has seen: a producer-state
        #: snapshot taken now covers exactly the log below it.
        self.acked_end = log.log_end_offset

    @property
    def idle(self) -> bool:
        """No job running and none queued."""
        return not (self._busy or self._pending)

    def submit(self, append: Append) -> defer.Deferred[AppendInfo]:
        """Queue ``append``; fires with its offsets after the job that wrote it."""
        queued = _Queued(append, defer.Deferred(), self._stats.now())
        self._pending.append(queued)
        self._kick()
        return queued.deferred

    def flush_if_dirty(self) -> None:
        if self.dirty:
            self._flush_requested = True
            self.dirty = False
            self._kick()

    def request_retention(self) -> None:
        self._retention_requested = True
        self._kick()

    def _kick(self) -> None:
        """Start the next write job unless one is running (group commit); jobs run
        inline are done before this returns, and so are those queued meanwhile."""
        if self._busy or self._kicking:
            return
        self._kicking = True
        try:
            while self._start_job():
                pass
        finally:
            self._kicking = False

    def _start_job(self) -> bool:
        """Start one job; True when it ran inline and is done (look for the next)."""
        if not (self._pending or self._flush_requested or self._retention_requested):
            self._on_idle()
            return False
        queued, self._pending = self._pending, []
        rule = self._flush_rule()
        appends = [q.append for q in queued]
        records = 0
        marker = False
        for append in appends:
            records += _record_count(append)
            marker = marker or isinstance(append, MarkerAppend)
        # A transaction marker is synced whatever the fsync mode: the coordinator logs
        # the transaction complete (fsynced) once its markers are written, and a marker
        # lost after that would leave the transaction open on this partition for ever.
        sync = (
            self._flush_requested
            or (rule.every_append and bool(queued))
            or (rule.messages is not None and self._unsynced_records + records >= rule.messages)
            or marker
        )
        retention = self._retention_requested
        self._flush_requested = self._retention_requested = False
        self._busy = True
        if not sync and not retention and self._inline(appends):
            try:
                outcome: JobResult | Failure = write_job(
                    self.log, appends, sync=False, retention=False,
                    wall_clock=self._wall_clock,
                )
            except Exception:
                outcome = _current_failure()
            self._job_done(outcome, queued, False, inline=rule)
            return True
        d = self._run_write(
            write_job,
            self.log,
            appends,
            sync=sync,
            retention=retention,
            wall_clock=self._wall_clock,
        )
        d.addBoth(self._job_done, queued, sync)
        return False

    def _inline(self, appends: Sequence[Append]) -> bool:
        budget = self._inline_bytes
        if budget <= 0:
            return False
        for append in appends:
            budget -= append.stored_bytes()
            if budget < 0:
                return False
        return True

    def _job_done(
        self, outcome: JobResult | Failure, queued: list[_Queued], synced: bool,
        *, inline: FlushRule | None = None,
    ) -> None:
        """``inline``: the job ran in the reactor thread, under this flush rule (the
        rule cannot have changed meanwhile)."""
        self._busy = False
        sync_seconds = None
        if isinstance(outcome, Failure):
            outcomes: Sequence[AppendInfo | Failure] = [outcome] * len(queued)
        else:
            sync_seconds = outcome.sync_seconds
            outcomes = outcome.outcomes
            if outcome.retention_failure is not None:
                self._log.failure("retention failed", outcome.retention_failure)
        if synced and sync_seconds is not None:
            self._synced()
        if synced:
            self.dirty = False
        appended: list[tuple[Append, AppendInfo]] = []
        for item, result in zip(queued, outcomes, strict=True):
            if isinstance(result, AppendInfo):
                appended.append((item.append, result))
                self.acked_end = max(self.acked_end, result.last_offset + 1)
                item.deferred.callback(result)
            else:
                item.deferred.errback(result)
        self._stats.job_done(
            [(q.append, r, q.queued_at) for q, r in zip(queued, outcomes, strict=True)
             if isinstance(r, AppendInfo)],
            synced=synced and sync_seconds is not None, sync_seconds=sync_seconds,
        )
        if appended:
            if not synced:
                self.dirty = True
                for a, _info in appended:
                    self._unsynced_records += _record_count(a)
                self._arm_flush_timer(inline)
            if inline is not None and self._clock is not None:
                self._announce_later(appended)
            else:
                self._announce_now()  # earlier inline appends first, in order
                self._on_appended(appended)
        self._kick()

    def _announce_later(self, appended: list[tuple[Append, AppendInfo]]) -> None:
        assert self._clock is not None
        self._unannounced.extend(appended)
        if self._announce_call is None:
            # Once the answer of the request being served is written (the same call),
            # or at the latest in the reactor's next turn.
            self._after_answer.hold(self, self._announce_now)
            self._announce_call = self._clock.callLater(0, self._announce_now)

    def _announce_now(self) -> None:
        """Tell the owner of the inline appends not yet announced."""
        call, self._announce_call = self._announce_call, None
        if call is not None:
            self._after_answer.forget(self)
            if call.active():
                call.cancel()
        if self._unannounced:
            appended, self._unannounced = self._unannounced, []
            self._on_appended(appended)

    def _synced(self) -> None:
        self._unsynced_records = 0
        if self._flush_timer is not None:
            if self._flush_timer.active():
                self._flush_timer.cancel()
            self._flush_timer = None

    def _arm_flush_timer(self, rule: FlushRule | None = None) -> None:
        if self._clock is None or self._flush_timer is not None:
            return
        timer_ms = (rule if rule is not None else self._flush_rule()).timer_ms
        if timer_ms is None:
            return
        self._flush_timer = self._clock.callLater(timer_ms / 1000.0, self._flush_due)

    def _flush_due(self) -> None:
        self._flush_timer = None
        self.flush_if_dirty()

    def stop_timer(self) -> None:
        """Cancel a pending ``flush.ms`` timer (the broker is stopping; the log
        directory syncs everything on close); wake-ups not yet given are given now."""
        self._synced()
        self._announce_now()


def _record_count(append: Append) -> int:
    if isinstance(append, BatchesAppend):
        return sum(h.records_count for h in append.prepared.headers)
    if isinstance(append, ValuesAppend):
        return len(append.values)
    return 1
