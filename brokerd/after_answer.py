# -*- test-case-name: tests.core.test_broker -*-
"""Work that waits for the answer being written: wake-ups run once an answer has been
handed to the kernel, in the same call.

An append run in the reactor thread fires its Deferred inside the request that made it,
before the handler has even awaited it; a long poll woken there and then would be read,
encoded and sent before that request's own answer (docs/performance.md, "librdkafka's
latency"). Deferring the wake-up to the reactor's next turn (``callLater(0)``) puts the
Produce answer first but leaves the woken Fetch behind every other event of the turn.
Kafka completes delayed fetches once the produce answer is handed to its network thread;
this module is that point here: :func:`after_answer` holds a wake-up, and
:func:`answer_written` (called by :mod:`brokerd.net.prompt_write` right after an
answer's bytes are handed to the socket or the transport) runs every wake-up held, so
the parked Fetch is answered in the same call, just after the Produce answer.

The holder keeps its own fallback (a ``callLater(0)`` on its clock) for a call in which
no answer is written (an append whose answer waits for another partition, a connection
whose output is queued behind a spliced frame): whichever comes first runs the wake-up,
and :func:`forget` takes it out of here. Wake-ups are keyed by their holder (one per
partition writer at a time) and run in the order they were first held; a wake-up held
while they run (an answer written by a woken Fetch holds none: it appends nothing) runs
in the same loop. A wake-up that raises is logged; the others still run.

It is reactor-thread state shared by every broker of the process (a test may run
several on one reactor): running another broker's wake-up early is harmless, its
appends are done and visible. It imports nothing of brokerd, so the core and the
connection layer may both use it.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.logger import Logger

__all__ = ["after_answer", "answer_written", "forget", "pending"]

_log = Logger()

#: Wake-ups waiting for the next answer, by holder, in the order first held.
_due: dict[object, Callable[[], object]] = {}
_running = False


def after_answer(holder: object, call: Callable[[], object]) -> None:
    """Run ``call`` once the next answer has been written (see the module docstring);
    one wake-up per ``holder``: a second one replaces the first."""
    _due[holder] = call


def forget(holder: object) -> None:
    """``holder``'s wake-up ran by its own fallback: nothing to run here."""
    _due.pop(holder, None)


def pending() -> int:
    """How many wake-ups wait (for tests)."""
    return len(_due)


def answer_written() -> None:
    """An answer has been handed to the kernel or the transport: run every wake-up
    held. A nested call (a woken Fetch's own answer) leaves the work to this loop."""
    global _running
    if _running or not _due:
        return
    _running = True
    try:
        while _due:
            holder = next(iter(_due))
            call = _due.pop(holder)
            try:
                call()
            except Exception:
                _log.failure("a wake-up after an answer failed")
    finally:
        _running = False
