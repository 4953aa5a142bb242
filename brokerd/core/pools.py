"""The core's two worker pools (reads; appends and syncs) as a Twisted service.

:class:`WorkerPools` starts its thread pools when the service starts and stops them when
it stops; placed first in the core's service tree, it stops last, after everything that
still needs a pool (the last appends, the group coordinator's journal writes, the final
sync and checkpoint). Tests replace either pool by a runner (``run_read``/``run_write``)
that runs jobs however they like; then no thread pool exists for it.

The read pool runs ``PartitionLog.read*`` and lookups; the write pool runs write jobs
(one per partition at a time), topic changes, snapshots and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

from twisted.application import service
from twisted.internet import defer
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from brokerd.core.interfaces import Runner, ThreadReactor

P = ParamSpec("P")
T = TypeVar("T")


class _PoolRunner:
    """A :class:`~brokerd.core.interfaces.Runner` over one thread pool."""

    def __init__(self, reactor: ThreadReactor, pool: ThreadPool) -> None:
        # A Protocol, not the zope interface Twisted declares: the same method.
        self._reactor = cast(IReactorFromThreads, reactor)
        self._pool = pool

    def __call__(
        self, f: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> defer.Deferred[T]:
        return deferToThreadPool(self._reactor, self._pool, f, *args, **kwargs)


class WorkerPools(service.Service):
    """The read and write pools; ``run_read``/``run_write`` run a blocking call there."""

    name = "worker-pools"

    def __init__(
        self,
        reactor: ThreadReactor,
        *,
        read_threads: int = 4,
        write_threads: int = 2,
        run_read: Runner | None = None,
        run_write: Runner | None = None,
    ) -> None:
        self._pools: list[ThreadPool] = []
        self.run_read: Runner = run_read or self._runner(reactor, "brokerd-read", read_threads)
        self.run_write: Runner = run_write or self._runner(
            reactor, "brokerd-write", write_threads
        )

    def _runner(self, reactor: ThreadReactor, name: str, threads: int) -> Runner:
        pool = ThreadPool(0, max(1, threads), name=name)
        self._pools.append(pool)
        return _PoolRunner(reactor, pool)

    def startService(self) -> None:
        service.Service.startService(self)
        for pool in self._pools:
            pool.start()

    def stopService(self) -> None:
        service.Service.stopService(self)
        for pool in self._pools:
            pool.stop()
