# -*- test-case-name: tests.core.test_broker -*-
"""The broker core's one "stopping" check.

:class:`StopLatch` is set once, when the broker's service stops; from then on every
operation that would start new work (an append, a marker, a topic change) refuses with
:class:`~brokerd.errors.ShuttingDown`, while the work already queued finishes.
:func:`refused_when_stopping` is that refusal, written once: it decorates the methods of
any part holding the broker's latch as ``stop_latch`` (the broker itself, its
:class:`~brokerd.core.txn_markers.TxnMarkers` and its
:class:`~brokerd.core.topics.TopicRegistry`).

What it does not do: drain the queued work or stop anything (``broker.py`` does).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from twisted.internet import defer

from brokerd.errors import ShuttingDown

__all__ = ["StopLatch", "refused_when_stopping"]

P = ParamSpec("P")
T = TypeVar("T")


class StopLatch:
    """False until the broker begins to stop, then True for good."""

    __slots__ = ("stopping",)

    def __init__(self) -> None:
        self.stopping = False

    def stop(self) -> None:
        self.stopping = True


class Latched(Protocol):
    """A part whose new work the broker's latch refuses."""

    @property
    def stop_latch(self) -> StopLatch: ...


L = TypeVar("L", bound=Latched)


def refused_when_stopping(
    method: Callable[Concatenate[L, P], defer.Deferred[T]],
) -> Callable[Concatenate[L, P], defer.Deferred[T]]:
    """``method``, but failing with ``ShuttingDown`` (no work started) once the latch
    is set."""

    @functools.wraps(method)
    def guarded(self: L, /, *args: P.args, **kwargs: P.kwargs) -> defer.Deferred[T]:
        if self.stop_latch.stopping:
            return defer.fail(ShuttingDown("broker is shutting down"))
        return method(self, *args, **kwargs)

    return guarded
