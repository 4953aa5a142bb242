# -*- test-case-name: tests.test_after_answer -*-
"""Work that waits for the answer being written: wake-ups run once an answer has been
handed to the kernel, in the same call.

An append run in the reactor thread fires its Deferred inside the request that made it,
before the handler has even awaited it; a long poll woken there and then would be read,
encoded and sent before that request's own answer (docs/performance.md, "librdkafka's
latency"). Deferring the wake-up to the reactor's next turn (``callLater(0)``) puts the
Produce answer first but leaves the woken Fetch behind every other event of the turn.
Kafka completes delayed fetches once the produce answer is handed to its network thread;
:class:`AfterAnswer` is that point here: :meth:`~AfterAnswer.hold` keeps a wake-up, and
:meth:`~AfterAnswer.answer_written` (called by a connection right after an answer's bytes
are handed to the socket or the transport, :mod:`brokerd.net.prompt_write`) runs every
wake-up held, so the parked Fetch is answered in the same call, just after the Produce
answer.

The holder keeps its own fallback (a ``callLater(0)`` on its clock) for a call in which
no answer is written (an append whose answer waits for another partition, a connection
whose output is queued behind a spliced frame): whichever comes first runs the wake-up,
and :meth:`~AfterAnswer.forget` takes it out of here. Wake-ups are keyed by their holder
(one per partition writer at a time) and run in the order they were first held; a
wake-up held while they run (an answer written by a woken Fetch holds none: it appends
nothing) runs in the same loop. A wake-up that raises is logged; the others still run.

One :class:`AfterAnswer` belongs to each broker (``Broker.after_answer``, part of the
core's face): its partition writers hold their wake-ups there and its listeners'
connections tell it of each answer written, so two brokers in one process each run their
own. It imports nothing of brokerd, so the core and the connection layer may both use it.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.logger import Logger

__all__ = ["AfterAnswer"]

_log = Logger()


class AfterAnswer:
    """The wake-ups of one broker waiting for the next answer written (reactor thread)."""

    __slots__ = ("_due", "_running")

    def __init__(self) -> None:
        #: Wake-ups waiting for the next answer, by holder, in the order first held.
        self._due: dict[object, Callable[[], object]] = {}
        self._running = False

    def hold(self, holder: object, call: Callable[[], object]) -> None:
        """Run ``call`` once the next answer has been written (see the module
        docstring); one wake-up per ``holder``: a second one replaces the first."""
        self._due[holder] = call

    def forget(self, holder: object) -> None:
        """``holder``'s wake-up ran by its own fallback: nothing to run here."""
        self._due.pop(holder, None)

    @property
    def pending(self) -> int:
        """How many wake-ups wait."""
        return len(self._due)

    def answer_written(self) -> None:
        """An answer has been handed to the kernel or the transport: run every wake-up
        held. A nested call (a woken Fetch's own answer) leaves the work to this loop."""
        if self._running or not self._due:
            return
        self._running = True
        due = self._due
        try:
            while due:
                holder = next(iter(due))
                call = due.pop(holder)
                try:
                    call()
                except Exception:
                    _log.failure("a wake-up after an answer failed")
        finally:
            self._running = False
