"""A request's timeout over a core operation that is not cancelled when it passes.

CreatePartitions, DeleteRecords and an acks=all Produce answer REQUEST_TIMED_OUT once
their timeout passes, yet the core still completes what was asked (a partition added,
records deleted, an append made durable): cancelling halfway would leave less than
either answer says. :func:`within` races the operation against the clock and drops
whichever outcome comes second.
"""

from __future__ import annotations

from typing import TypeVar

from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.clock import Clock

__all__ = ["DeadlinePassed", "within"]

T = TypeVar("T")


class DeadlinePassed(Exception):
    """The request's timeout passed before the operation completed."""


def within(
    d: defer.Deferred[T], seconds: float, clock: Clock, message: str
) -> defer.Deferred[T]:
    """``d``'s result, or a :class:`DeadlinePassed` failure (saying ``message``) after
    ``seconds``. ``d`` itself is not cancelled; its late outcome is dropped."""
    out: defer.Deferred[T] = defer.Deferred()

    def expire() -> None:
        if not out.called:
            out.errback(DeadlinePassed(message))

    call = clock.callLater(seconds, expire)

    def done(result: T | Failure) -> None:
        if call.active():
            call.cancel()
        if out.called:
            return  # timed out already: the late outcome is dropped on purpose
        if isinstance(result, Failure):
            out.errback(result)
        else:
            out.callback(result)

    d.addBoth(done)
    return out
