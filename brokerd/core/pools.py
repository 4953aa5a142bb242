"""The core's two worker pools (reads; appends and syncs) as a Twisted service.

:class:`WorkerPools` starts its threads when the service starts and stops them when it
stops; placed first in the core's service tree, it stops last, after everything that
still needs a pool (the last appends, the group coordinator's journal writes, the final
sync and checkpoint). Tests replace either pool by a runner (``run_read``/``run_write``)
that runs jobs however they like; then no thread exists for it.

The read pool runs ``PartitionLog.read*`` and lookups; the write pool runs write jobs
(one per partition at a time), topic changes, snapshots and checkpoints.

Each pool is a :class:`JobThreads`: a fixed set of threads taking jobs from one
``queue.SimpleQueue`` and handing each result back with ``callFromThread``. Every produce
under ``--fsync always`` crosses into the write pool and back, so the hand-off is on the
latency path: the C-level queue and one call per job cost about half of what Twisted's
``ThreadPool`` (``deferToThreadPool``: a Python ``queue.Queue``, a worker team, a
context copy per job) does (docs/performance.md, "End-to-end latency"). What it does
not do: grow or shrink (the threads are few and idle threads cost nothing but a stack),
or run jobs submitted after it stopped (they fail with :class:`PoolStopped`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from twisted.application import service
from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.core.interfaces import Runner, ThreadReactor

P = ParamSpec("P")
T = TypeVar("T")

#: A queued job: the Deferred to fire, and the call to make.
_Job = tuple[defer.Deferred[object], Callable[[], object]]


class PoolStopped(Exception):
    """A job was submitted to a pool that has stopped."""


def _failure() -> Failure:
    """The exception being handled, as a Failure (Failure() is untyped in Twisted)."""
    return Failure()


class JobThreads:
    """``threads`` worker threads running blocking calls; a
    :class:`~brokerd.core.interfaces.Runner` (call it: ``run(f, *args) -> Deferred``).

    Jobs submitted before :meth:`start` wait for it. Results and failures fire their
    Deferred in the reactor thread, in the order the jobs finish.
    """

    def __init__(self, reactor: ThreadReactor, name: str, threads: int) -> None:
        self._reactor = reactor
        self._name = name
        self._size = max(1, threads)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._stopped = False

    def __call__(
        self, f: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> defer.Deferred[T]:
        if self._stopped:
            return defer.fail(PoolStopped(f"{self._name} pool has stopped"))
        d: defer.Deferred[T] = defer.Deferred()
        self._jobs.put((d, lambda: f(*args, **kwargs)))  # type: ignore[arg-type]
        return d

    def start(self) -> None:
        for i in range(self._size):
            thread = threading.Thread(target=self._work, name=f"{self._name}-{i}")
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Finish the jobs already queued, then end the threads (blocks until they end)."""
        self._stopped = True
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _work(self) -> None:
        get = self._jobs.get
        call_back = self._reactor.callFromThread
        while True:
            job = get()
            if job is None:
                return
            d, call = job
            try:
                result = call()
            except BaseException:
                call_back(d.errback, _failure())
            else:
                call_back(d.callback, result)
            del job, d, call  # drop references before blocking on the next job


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
        self._pools: list[JobThreads] = []
        self.run_read: Runner = run_read or self._runner(reactor, "brokerd-read", read_threads)
        self.run_write: Runner = run_write or self._runner(
            reactor, "brokerd-write", write_threads
        )

    def _runner(self, reactor: ThreadReactor, name: str, threads: int) -> Runner:
        pool = JobThreads(reactor, name, threads)
        self._pools.append(pool)
        return pool

    def startService(self) -> None:
        service.Service.startService(self)
        for pool in self._pools:
            pool.start()

    def stopService(self) -> None:
        service.Service.stopService(self)
        for pool in self._pools:
            pool.stop()
