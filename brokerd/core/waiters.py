# -*- test-case-name: tests.core.test_waiters -*-
"""Long polls: parked fetches, woken when appends may have brought what they wait for.

:class:`WaiterRegistry` holds the parked waiters per partition and counts appends toward
them: the park step of :func:`~brokerd.core.roles.long_poll.long_poll` (whose rules are in
its module). It reads no log and knows no protocol; the reads are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import attrs
from twisted.internet import defer

from brokerd.clock import Clock, DelayedCall
from brokerd.core.appends import Append, wake_bytes
from brokerd.core.roles.long_poll import MAX_WAIT_MS, AppendWatcher, Shortfall
from brokerd.errors import TooManyWaiters
from brokerd.storage.types import AppendInfo

R = TypeVar("R")

#: Total parked long-poll fetches across all connections; beyond it a fetch is refused
#: with TooManyWaiters rather than queued, so memory stays bounded.
MAX_WAITERS = 10_000

PartitionKey = tuple[str, int]

__all__ = ["MAX_WAITERS", "AppendWatcher", "Shortfall", "WaiterRegistry"]


@attrs.define(eq=False)
class _Waiter:
    """A parked long poll: fires when ``needed`` more bytes arrive on its partitions.

    ``values``: count value bytes (what a native reader counts) instead of stored batch
    bytes (Kafka's ``MinBytes``). ``seen``: per partition, the high watermark the
    caller's read saw; appends below it are already in what the caller counted.
    """

    partitions: frozenset[PartitionKey]
    needed: int
    deferred: defer.Deferred[None]
    values: bool
    seen: Mapping[PartitionKey, int] | None
    timer: DelayedCall | None = None


class WaiterRegistry:
    """Parked long polls by partition, with a global limit (reactor thread).

    :param high_watermark: the current high watermark of a partition, or None if the
        core does not have it open. A read opens what it reads, so a partition a
        park's read saw and that is not open was deleted since: the park answers at
        once (as the deletion answered those already parked, :meth:`wake`).
    """

    def __init__(
        self,
        clock: Clock,
        high_watermark: Callable[[PartitionKey], int | None],
        *,
        max_waiters: int = MAX_WAITERS,
    ) -> None:
        self._clock = clock
        self._high_watermark = high_watermark
        self.max_waiters = max_waiters
        self._waiters: dict[PartitionKey, set[_Waiter]] = {}
        self._watchers: dict[PartitionKey, set[AppendWatcher]] = {}
        self._count = 0
        #: Set at shutdown: parks answer at once and polls stop reading.
        self.closed = False

    @property
    def count(self) -> int:
        return self._count

    def park(
        self,
        keys: Iterable[PartitionKey],
        needed: int,
        max_wait_ms: int,
        *,
        values: bool = False,
        seen: Mapping[PartitionKey, int] | None = None,
    ) -> defer.Deferred[None]:
        """Fire once ``needed`` bytes are appended to any of ``keys`` or ``max_wait_ms``
        passes; at once if an append moved a ``seen`` high watermark. Cancelling it
        removes the waiter and its timer. Fails with TooManyWaiters beyond the limit."""
        partitions = frozenset(keys)
        if needed <= 0 or max_wait_ms <= 0 or not partitions or self.closed:
            return defer.succeed(None)
        if seen is not None:
            for key, high in seen.items():
                if self._high_watermark(key) != high:
                    # An append became readable after the caller's read and before now;
                    # its notification may already have gone by (lost wake-up), so let
                    # the caller read again instead of waiting for bytes already there.
                    # Likewise a partition the read saw that is no longer open: its
                    # topic was deleted meanwhile, and the read again says so.
                    return defer.succeed(None)
        if self._count >= self.max_waiters:
            return defer.fail(TooManyWaiters(f"{self._count} fetches already wait"))
        waiter = _Waiter(
            partitions,
            needed,
            defer.Deferred(lambda _: self._drop(waiter)),
            values=values,
            seen=seen,
        )
        waiter.timer = self._clock.callLater(
            min(max_wait_ms, MAX_WAIT_MS) / 1000.0, self._fire, waiter
        )
        for key in partitions:
            self._waiters.setdefault(key, set()).add(waiter)
        self._count += 1
        return waiter.deferred

    def park_for(self, short: Shortfall, max_wait_ms: int, *, values: bool) -> defer.Deferred[bool]:
        """The park step of :func:`~brokerd.core.roles.long_poll.long_poll`: read again
        unless shutdown answered."""
        d = self.park(short.seen, short.needed, max_wait_ms, values=values, seen=short.seen)
        return d.addCallback(lambda _: not self.closed)

    def watch(self, key: PartitionKey, watcher: AppendWatcher) -> None:
        """Tell ``watcher`` of every append to ``key`` from now until :meth:`unwatch`."""
        self._watchers.setdefault(key, set()).add(watcher)

    def unwatch(self, key: PartitionKey, watcher: AppendWatcher) -> None:
        bucket = self._watchers.get(key)
        if bucket is not None:
            bucket.discard(watcher)
            if not bucket:
                del self._watchers[key]

    def notify(self, key: PartitionKey, appended: Sequence[tuple[Append, AppendInfo]]) -> None:
        """Count appends that landed on ``key`` toward its waiters; wake those satisfied.
        Its watchers are told the stored bytes."""
        watchers = self._watchers.get(key)
        if watchers:
            size = sum(
                wake_bytes(append, values=False)
                for append, info in appended
                if not info.duplicate
            )
            for watcher in list(watchers):
                watcher.changed(key, size)
        waiters = self._waiters.get(key)
        if not waiters:
            return  # the usual case: sizes are only worked out for someone waiting
        # Each append's size in each measure, worked out once however many wait.
        sizes: dict[bool, list[int]] = {}
        for waiter in list(waiters):
            measured = sizes.get(waiter.values)
            if measured is None:
                measured = sizes[waiter.values] = [
                    wake_bytes(append, values=waiter.values) for append, _ in appended
                ]
            low = waiter.seen.get(key) if waiter.seen is not None else None
            waiter.needed -= sum(
                size
                for size, (_, info) in zip(measured, appended, strict=True)
                if not info.duplicate and (low is None or info.base_offset >= low)
            )
            if waiter.needed <= 0:
                self._fire(waiter)

    def wake(self, key: PartitionKey) -> None:
        """Answer every waiter on ``key`` now (its topic is being deleted)."""
        for watcher in list(self._watchers.get(key, ())):
            watcher.changed(key, None)
        for waiter in list(self._waiters.get(key, ())):
            self._fire(waiter)

    def close(self) -> None:
        """Shutdown: answer every parked poll; later parks answer at once."""
        self.closed = True
        for key, watchers in list(self._watchers.items()):
            for watcher in list(watchers):
                watcher.changed(key, None)
        for waiters in list(self._waiters.values()):
            for waiter in list(waiters):
                self._fire(waiter)

    def _drop(self, waiter: _Waiter) -> None:
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        waiter.timer = None
        removed = False
        for key in waiter.partitions:
            bucket = self._waiters.get(key)
            if bucket is not None and waiter in bucket:
                bucket.discard(waiter)
                removed = True
                if not bucket:
                    del self._waiters[key]
        if removed:
            self._count -= 1

    def _fire(self, waiter: _Waiter) -> None:
        self._drop(waiter)
        if not waiter.deferred.called:
            waiter.deferred.callback(None)
