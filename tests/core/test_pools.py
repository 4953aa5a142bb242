"""JobThreads and WorkerPools: real threads; results handed back through a recorded
``callFromThread`` that the test runs as the reactor would."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.pools import JobThreads, PoolStopped, WorkerPools

WAIT = 10.0


class ThreadCalls:
    """A ThreadReactor whose ``callFromThread`` queues the call for the test thread."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[Callable[..., object], tuple[object, ...]]] = queue.Queue()

    def callFromThread(
        self, callable: Callable[..., object], *args: object, **kw: object
    ) -> None:
        assert not kw
        self.calls.put((callable, args))

    def run_one(self) -> None:
        f, args = self.calls.get(timeout=WAIT)
        f(*args)


class JobThreadsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = ThreadCalls()
        self.pool = JobThreads(self.reactor, "test-pool", 2)
        self.addCleanup(self.pool.stop)

    def test_result_fires_in_the_reactor_thread(self) -> None:
        self.pool.start()
        ran_in: list[str] = []

        def job(a: int, *, b: int) -> int:
            ran_in.append(threading.current_thread().name)
            return a + b

        d = self.pool(job, 2, b=3)
        self.assertNoResult(d)  # nothing fires until the reactor runs the hand-back
        self.reactor.run_one()
        self.assertEqual(self.successResultOf(d), 5)
        self.assertTrue(ran_in[0].startswith("test-pool-"), ran_in)

    def test_exception_becomes_the_failure(self) -> None:
        self.pool.start()

        def job() -> None:
            raise KeyError("missing")

        d = self.pool(job)
        self.reactor.run_one()
        failure = self.failureResultOf(d, KeyError)
        self.assertIsInstance(failure, Failure)
        self.assertIn("missing", str(failure.value))

    def test_jobs_before_start_run_once_started(self) -> None:
        d = self.pool(lambda: "late")
        self.assertTrue(self.reactor.calls.empty())
        self.pool.start()
        self.reactor.run_one()
        self.assertEqual(self.successResultOf(d), "late")

    def test_stop_finishes_queued_jobs_then_refuses(self) -> None:
        gate = threading.Event()
        started = threading.Event()

        def blocked() -> str:
            started.set()
            gate.wait(WAIT)
            return "first"

        self.pool.start()
        first = self.pool(blocked)
        queued = [self.pool(lambda i=i: i) for i in range(5)]
        self.assertTrue(started.wait(WAIT))
        stopper = threading.Thread(target=self.pool.stop)
        stopper.start()
        gate.set()
        stopper.join(WAIT)
        self.assertFalse(stopper.is_alive())
        for _ in range(6):
            self.reactor.run_one()
        self.assertEqual(self.successResultOf(first), "first")
        self.assertEqual(sorted(self.successResultOf(d) for d in queued), [0, 1, 2, 3, 4])
        self.failureResultOf(self.pool(lambda: None), PoolStopped)
        self.assertEqual(
            [t.name for t in threading.enumerate() if t.name.startswith("test-pool-")], []
        )

    def test_jobs_run_concurrently_on_each_thread(self) -> None:
        barrier = threading.Barrier(2, timeout=WAIT)
        self.pool.start()
        ds = [self.pool(barrier.wait) for _ in range(2)]  # deadlocks on one thread
        for _ in ds:
            self.reactor.run_one()
        self.assertEqual(sorted(self.successResultOf(d) for d in ds), [0, 1])


class WorkerPoolsTests(SynchronousTestCase):
    def test_injected_runners_replace_the_threads(self) -> None:
        calls: list[str] = []

        def run(f: Callable[..., object], /, *a: object, **kw: object) -> defer.Deferred[object]:
            calls.append(getattr(f, "__name__", "?"))
            return defer.succeed(f(*a, **kw))

        pools = WorkerPools(ThreadCalls(), run_read=run, run_write=run)
        pools.startService()
        self.assertEqual(self.successResultOf(pools.run_read(len, "abc")), 3)
        self.assertEqual(self.successResultOf(pools.run_write(len, "ab")), 2)
        pools.stopService()
        self.assertEqual(calls, ["len", "len"])

    def test_service_starts_and_stops_both_pools(self) -> None:
        reactor = ThreadCalls()
        pools = WorkerPools(reactor, read_threads=1, write_threads=1)
        pools.startService()
        names = {t.name for t in threading.enumerate()}
        self.assertIn("brokerd-read-0", names)
        self.assertIn("brokerd-write-0", names)
        d = pools.run_write(threading.current_thread)
        reactor.run_one()
        self.assertEqual(self.successResultOf(d).name, "brokerd-write-0")
        pools.stopService()
        names = {t.name for t in threading.enumerate()}
        self.assertNotIn("brokerd-read-0", names)
        self.assertNotIn("brokerd-write-0", names)
        self.failureResultOf(pools.run_read(len, ""), PoolStopped)

