"""Which consumers just read a backlog to its end: :class:`CatchUp`.

A Kafka fetch with nothing to return parks until ``MinBytes`` arrive or ``MaxWaitMs``
passes (librdkafka asks for 500 ms). For a consumer that was reading a backlog and has
just reached the end of the log, that wait is pure delay: the first fetch at the end
tells it "you are caught up" (librdkafka then reports the partition's end, which is
when ``kcat -e`` exits) only after the full wait. So brokerd answers that one fetch at
once, empty; the consumer's next fetch parks as usual.

The rule, per connection and partition: an answer cut by the fetch's byte limit
(records at least the partition's limit) marks the partition *behind*; an empty
answer clears the mark. A fetch whose read finds no records at all, on a connection
with any of its partitions marked, is answered at once instead of parking. A consumer
that keeps up with its producers never gets an answer cut by its byte limit, so it
parks exactly as before; a consumer reading a backlog pays at most one extra empty
round trip when it reaches the end. ``docs/performance.md`` has the measurements.

What it does not do: read, park or answer (``brokerd.kafka.server.handlers.fetch``). Reactor
thread only.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

__all__ = ["MAX_BEHIND_PER_CONNECTION", "CatchUp", "PartitionKey"]

#: (topic, partition)
PartitionKey = tuple[str, int]
#: Partitions remembered as behind per connection at most; past it the mark is not
#: recorded (the fetch then parks as Kafka's does: only the early answer is lost).
MAX_BEHIND_PER_CONNECTION = 10_000


class CatchUp:
    """The partitions each connection is reading a backlog of (see the module docstring).

    Keyed weakly by the handler's connection object: a connection that goes away takes
    its marks with it.
    """

    def __init__(self) -> None:
        self._behind: weakref.WeakKeyDictionary[object, set[PartitionKey]] = (
            weakref.WeakKeyDictionary()
        )

    def behind(self, conn: object, wanted: Iterable[PartitionKey]) -> bool:
        """Whether any of ``wanted`` is marked behind on ``conn``: a fetch of theirs that
        finds no records is answered at once."""
        marked = self._behind.get(conn)
        if not marked:
            return False
        return any(key in marked for key in wanted)

    def answered(self, conn: object, key: PartitionKey, size: int, limit: int) -> None:
        """``conn`` was answered ``size`` record bytes of ``key`` under a byte ``limit``
        (the partition's, or the whole response's if smaller)."""
        marked = self._behind.get(conn)
        if size <= 0:
            if marked:
                marked.discard(key)
            return
        if size < limit:
            return  # the consumer read up to the end (or a segment end): keep the mark
        if marked is None:
            marked = self._behind.setdefault(conn, set())
        if len(marked) < MAX_BEHIND_PER_CONNECTION:
            marked.add(key)
