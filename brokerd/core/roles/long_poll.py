# -*- test-case-name: tests.core.roles.test_long_poll, tests.core.test_waiters -*-
"""The long-poll primitive: read, park while short, read again, within one deadline.

:func:`long_poll` is the one loop both protocols run (the native LongPollFetch through
``Broker.wait_records``, Kafka's Fetch with ``MinBytes`` in its handlers): read; if the
read is short, park until an append may have brought enough or the deadline passes; read
again; repeat within the one deadline. It keeps these rules:

- A park is given the high watermarks its read saw (``Shortfall.seen``). If one has moved
  by the time it parks, an append landed between the read and now whose notification
  may have gone by, so the park fires at once and the loop reads again. So does a park
  on a partition deleted since the read (the deletion answers those already parked).
- An append below a seen high watermark was already in what the read counted, so its
  late notification does not count again.
- A park refused by the waiter limit (:class:`~brokerd.errors.TooManyWaiters`) fails the
  poll on its first park; on a later one the poll answers with what it has (it waited).
- A park answered by shutdown ends the poll with its last read: the log may be closing.
- Cancelling the poll cancels its park, which removes the waiter and its timer.

The parking itself is the caller's (the core's
:class:`~brokerd.core.waiters.WaiterRegistry`, the share service's own waits). It sits
with the roles, below the core's parts, because the face exports it and the share
service runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

import attrs
from twisted.internet import defer

from brokerd.clock import Seconds
from brokerd.errors import TooManyWaiters

R = TypeVar("R")

#: Longest wait a client may ask for; Kafka clients send 500 ms, brokerctl a few seconds.
MAX_WAIT_MS = 300_000

PartitionKey = tuple[str, int]


@attrs.frozen
class Shortfall:
    """What a long poll's last read lacks: ``want`` bytes, of which it has ``have``, on
    the partitions of ``seen`` (each with the high watermark the read saw)."""

    have: int
    want: int
    seen: Mapping[PartitionKey, int]

    @property
    def needed(self) -> int:
        return self.want - self.have


class AppendWatcher(Protocol):
    """A standing interest in partitions' appends (a Kafka fetch session's): told of every
    append as it lands, whether or not a fetch of its is parked. Implemented by the Kafka
    listener's :class:`~brokerd.kafka.server.handlers.fetch_watch.AppendsWatch`; a Protocol
    because the core never imports the listeners."""

    def changed(self, key: PartitionKey, stored_bytes: int | None) -> None:
        """``stored_bytes`` landed on ``key``; None: answer now (the partition's topic
        is being deleted, or the broker is stopping)."""
        ...


#: ``park(shortfall, ms_left)``: fires True when worth reading again, False when the poll
#: should answer with what it has (shutdown); fails with TooManyWaiters when refused.
Park = Callable[[Shortfall, int], Awaitable[bool]]


def long_poll(
    read: Callable[[], Awaitable[R]],
    short_of: Callable[[R], Shortfall | None],
    park: Park,
    *,
    clock: Seconds,
    max_wait_ms: int,
) -> defer.Deferred[R]:
    """Read until ``short_of(result)`` is None (enough, or nothing to wait for) or
    ``max_wait_ms`` (at most :data:`MAX_WAIT_MS`) has passed, parking in between. See
    the module docstring for the rules it keeps."""
    deadline = clock.seconds() + min(max_wait_ms, MAX_WAIT_MS) / 1000.0

    async def run() -> R:
        first = True
        while True:
            result = await read()
            short = short_of(result)
            # Rounded down: a timer that fired at the deadline leaves nothing to wait.
            left_ms = int((deadline - clock.seconds()) * 1000)
            if short is None or short.needed <= 0 or left_ms <= 0:
                return result
            try:
                again = await park(short, left_ms)
            except TooManyWaiters:
                if first:
                    raise
                return result  # it did wait; answer with what there is
            if not again:
                return result
            first = False

    return defer.Deferred.fromCoroutine(run())
