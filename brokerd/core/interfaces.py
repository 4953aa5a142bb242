"""Typed views of what the core uses from the reactor and its worker pools.

Twisted declares the reactor through zope interfaces, whose methods lack ``self`` and so
cannot be called through the interface type under mypy. These ``typing.Protocol``
classes state exactly what the core calls: a reactor satisfies :class:`CoreReactor` (the
time and timers it adds to are typed once, in :mod:`brokerd.clock`), a pool's runner
:class:`Runner`. The core takes storage as its concrete classes
(:class:`~brokerd.storage.logdir.log_directory.LogDirectory`,
:class:`~brokerd.storage.log.partition_log.PartitionLog`); tests hand it real ones.

Only declarations here, no behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, Protocol, TypeVar

from twisted.internet.defer import Deferred

from brokerd.clock import Clock

P = ParamSpec("P")
T = TypeVar("T")


class ThreadReactor(Protocol):
    """``IReactorFromThreads``: what a pool's worker uses to hand a result back."""

    def callFromThread(
        self, callable: Callable[..., object], *args: object, **kw: object
    ) -> None: ...


class Runner(Protocol):
    """Runs a blocking call off the reactor thread: ``run(f, *args) -> Deferred``."""

    def __call__(
        self, f: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Deferred[T]: ...


class CoreReactor(Clock, ThreadReactor, Protocol):
    """What the core needs of the reactor: time, timers and handing results back from
    its pools' threads."""
