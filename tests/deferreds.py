"""The results of Deferreds a synchronous test has already fired (a fake clock, a
synchronous pool): the one helper the pytest-style tests use where a
``SynchronousTestCase`` has ``successResultOf``. A coroutine is run through
``defer.ensureDeferred``, so ``async def`` code is driven the same way."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from twisted.internet import defer
from twisted.python.failure import Failure

T = TypeVar("T")


def watch(d: defer.Deferred[T] | Coroutine[Any, Any, T]) -> list[T | Failure]:
    """A list that receives the Deferred's result (or its Failure) when it fires: empty
    while the test has not yet fired it."""
    out: list[T | Failure] = []
    defer.ensureDeferred(d).addBoth(out.append)
    return out


def outcome_of(d: defer.Deferred[T] | Coroutine[Any, Any, T]) -> T | Failure:
    """The result, or the Failure, of a Deferred that has fired."""
    out = watch(d)
    assert out, "the Deferred has not fired"
    return out[0]


def result_of(d: defer.Deferred[T] | Coroutine[Any, Any, T]) -> T:
    """The result of a Deferred that has fired; its failure is raised."""
    outcome = outcome_of(d)
    if isinstance(outcome, Failure):
        outcome.raiseException()
    return outcome
