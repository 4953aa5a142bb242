"""A fetch session's standing watch on its partitions' appends: :class:`AppendsWatch`.

A full fetch parks on each of its partitions for one poll (``wait_for_data``), which for
a consumer of thousands of partitions means thousands of registrations, and as many
removals, on every poll. A session's partitions change rarely, so its watch is
registered once per partition (when the partition joins the session) and stays: every
append to a watched partition marks it *dirty* and, when a fetch of the session is
parked, counts toward that fetch's ``MinBytes``. An incremental fetch then reads the
dirty partitions (and the few the handler keeps pending), and parks on the watch with
no per-partition work.

No wake-up is lost between a read and the park: a partition appended to after the read
took the dirty set is dirty when the fetch parks, and the park answers at once.

What it does not do: read, or decide what an answer holds
(:mod:`brokerd.kafka.server.handlers.fetch`). Reactor thread only.
"""

from __future__ import annotations

from twisted.internet import defer

from brokerd.clock import Clock, DelayedCall
from brokerd.core.api import CoreAppendWatches
from brokerd.kafka.server.fetch_sessions import CachedPartition, SessionKey

__all__ = ["AppendsWatch"]

PartitionKey = tuple[str, int]


class AppendsWatch:
    """The watch of one session (see the module docstring).

    :param watches: where the watch is registered (the core's ``waiters``).
    :param clock: the park's deadline.
    """

    def __init__(self, watches: CoreAppendWatches, clock: Clock) -> None:
        self._watches = watches
        self._clock = clock
        #: Watched partitions: ``(topic, partition)`` to the session's key.
        self._keys: dict[PartitionKey, SessionKey] = {}
        self._dirty: set[SessionKey] = set()
        self._deferred: defer.Deferred[bool] | None = None
        self._timer: DelayedCall | None = None
        self._needed = 0

    def __len__(self) -> int:
        return len(self._keys)

    # -- the session's side (brokerd.kafka.server.fetch_sessions.SessionWatch) ---------

    def add(self, key: SessionKey, partition: CachedPartition) -> None:
        if not partition.topic:
            return  # a topic ID no topic has: nothing to watch
        watched = (partition.topic, partition.partition)
        if watched not in self._keys:
            self._keys[watched] = key
            self._watches.watch(watched, self)

    def remove(self, partition: CachedPartition) -> None:
        watched = (partition.topic, partition.partition)
        key = self._keys.pop(watched, None)
        if key is not None:
            self._watches.unwatch(watched, self)
            self._dirty.discard(key)

    def close(self) -> None:
        """The session ends: no more watching; a parked fetch is answered."""
        for watched in self._keys:
            self._watches.unwatch(watched, self)
        self._keys.clear()
        self._dirty.clear()
        self._fire(False)

    # -- the core's side (core.roles.long_poll.AppendWatcher) --------------------------

    def changed(self, key: PartitionKey, stored_bytes: int | None) -> None:
        session_key = self._keys.get(key)
        if session_key is None:
            return
        self._dirty.add(session_key)
        if self._deferred is None:
            return
        if stored_bytes is None:
            self._fire(False)  # a deletion or shutdown: answer with what there is
            return
        self._needed -= stored_bytes
        if self._needed <= 0:
            self._fire(True)

    # -- the Fetch handler's side ------------------------------------------------------

    def take_dirty(self) -> set[SessionKey]:
        """The partitions appended to since the last call (the next read reads them)."""
        dirty, self._dirty = self._dirty, set()
        return dirty

    def park(self, needed: int, max_wait_ms: int) -> defer.Deferred[bool]:
        """Fire once ``needed`` more stored bytes land on the session's partitions or
        ``max_wait_ms`` passes: True to read again, False to answer with what there is.
        At once (True) when a partition is dirty already. Cancelling it removes the
        timer. A fetch of the session parked before (a client that pipelines) is
        answered now."""
        if self._dirty or needed <= 0 or max_wait_ms <= 0:
            return defer.succeed(True)
        self._fire(True)
        self._needed = needed
        d: defer.Deferred[bool] = defer.Deferred(lambda _: self._drop())
        self._deferred = d
        self._timer = self._clock.callLater(max_wait_ms / 1000.0, self._fire, True)
        return d

    def _drop(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._deferred = None

    def _fire(self, again: bool) -> None:
        d = self._deferred
        self._drop()
        if d is not None and not d.called:
            d.callback(again)
