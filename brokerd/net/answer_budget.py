# -*- test-case-name: tests.net.test_answer_budget, tests.net.test_chunked -*-
"""One budget, shared by every connection of a listener, for answer bytes held in memory.

What it does: :class:`AnswerBudget` counts the bytes of answers the broker holds in user
space: the in-memory parts of spliced Fetch answers (headers, records read into memory)
from the moment they are written until they are sent, and each chunk a
:class:`~brokerd.net.chunked.ChunkedSender` reads from a segment file for a TLS
connection until the transport's buffer has drained past it. File regions sent by
``os.sendfile`` are not memory and are not counted. Over the budget, a chunk sender waits
for room before reading its next chunk, and a Fetch waits for room before it reads
(:meth:`AnswerBudget.room`): the broker defers reads rather than allocating.

The budget is checked before taking: a taker is refused only while the budget is full,
so the bytes held exceed the limit by less than one taker's request (one chunk), and a
taker larger than the whole budget still goes out when it is its turn.

What it does not do: touch transports or sockets, or decide what to read. Reactor thread
only; no clock (waiters are woken by :meth:`AnswerBudget.give`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable

from twisted.internet import defer

__all__ = ["DEFAULT_MAX_INFLIGHT_ANSWER_BYTES", "AnswerBudget"]

#: Default ``--max-inflight-answer-bytes``: room for about 256 TLS answers sending at once
#: (one 256 KiB chunk each), or two answers at Kafka's default ``fetch.max.bytes`` read
#: into memory.
DEFAULT_MAX_INFLIGHT_ANSWER_BYTES = 64 * 1024 * 1024


class AnswerBudget:
    """Answer bytes held in memory, and who waits for room (see the module docstring).

    ``limit`` None means unbounded: everything is taken at once, nobody waits.
    """

    def __init__(self, limit: int | None = DEFAULT_MAX_INFLIGHT_ANSWER_BYTES) -> None:
        if limit is not None and limit <= 0:
            raise ValueError(f"the answer budget must be positive, not {limit}")
        self.limit = limit
        self.in_use = 0
        #: The most ever held at once (a figure for operators and tests).
        self.peak = 0
        self._waiting: deque[Callable[[], None]] = deque()

    @property
    def full(self) -> bool:
        """Whether nothing more may be taken now (a taker of any size would wait)."""
        return self.limit is not None and self.in_use >= self.limit

    def try_take(self, n: int) -> bool:
        """Take ``n`` bytes unless the budget is full (so the last taker may pass the
        limit by less than its own ``n``); False when full."""
        if self.full:
            return False
        self.charge(n)
        return True

    def charge(self, n: int) -> None:
        """Count ``n`` bytes already held (they exist whether or not they fit)."""
        self.in_use += n
        if self.in_use > self.peak:
            self.peak = self.in_use

    def give(self, n: int) -> None:
        """``n`` bytes taken or charged before are no longer held: wake waiters, oldest
        first, while there is room."""
        self.in_use = max(self.in_use - n, 0)
        while self._waiting and not self.full:
            self._waiting.popleft()()

    def when_room(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once when something is given back and the budget is not
        full (at once if it is not full now). Returns a function that forgets it."""
        if not self.full:
            callback()
            return _nothing
        self._waiting.append(callback)

        def forget() -> None:
            with contextlib.suppress(ValueError):  # already woken
                self._waiting.remove(callback)

        return forget

    def room(self) -> defer.Deferred[None]:
        """A Deferred firing when the budget is not full (at once if it is not now);
        cancelling it forgets the wait."""
        forget: Callable[[], None] = _nothing
        d: defer.Deferred[None] = defer.Deferred(lambda _d: forget())
        forget = self.when_room(lambda: d.callback(None))
        return d

    @property
    def waiting(self) -> int:
        return len(self._waiting)


def _nothing() -> None:
    pass
