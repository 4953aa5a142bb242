"""PartitionWriter's chaining: a write job that finds appends queued while it ran
writes them as its next group in the same thread, answering each group in order
through ``hand_back``; at most MAX_CHAINED_GROUPS groups per job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.appends import MarkerAppend, ValuesAppend
from brokerd.core.writer import MAX_CHAINED_GROUPS, PartitionWriter
from brokerd.storage.types import AppendInfo

from tests.test_broker import FakeLog, HeldRunner


class _MarkerLog(FakeLog):
    def append_marker(self, *_a: Any, **_kw: Any) -> AppendInfo:
        self.calls.append("marker")
        base = self.log_end_offset
        self.log_end_offset += 1
        return AppendInfo(base, base, 0)


class _Rig:
    """A writer whose jobs run when the test says (as a write thread would) and whose
    hand-backs are queued until the test runs them (as the reactor would)."""

    def __init__(self, *, sync_every_append: bool = True, log: FakeLog | None = None) -> None:
        self.log = log or FakeLog()
        self.runner = HeldRunner()
        self.handed_back: list[tuple[Callable[..., object], tuple[Any, ...]]] = []
        self.landed: list[list[int]] = []
        self.writer = PartitionWriter(
            self.log,  # type: ignore[arg-type]
            run_write=self.runner,
            sync_every_append=sync_every_append,
            wall_clock=lambda: 0.0,
            on_appended=lambda got: self.landed.append([info.base_offset for _a, info in got]),
            on_idle=lambda: None,
            hand_back=lambda f, *args: self.handed_back.append((f, args)),
        )

    def submit(self, *values: bytes) -> defer.Deferred[AppendInfo]:
        return self.writer.submit(ValuesAppend(values))

    def run_reactor(self) -> None:
        while self.handed_back:
            f, args = self.handed_back.pop(0)
            f(*args)


class ChainingTests(SynchronousTestCase):
    def test_appends_queued_during_a_job_are_its_next_group(self) -> None:
        rig = _Rig()
        first = rig.submit(b"a")
        self.assertEqual(len(rig.runner.jobs), 1)
        later = [rig.submit(b"b"), rig.submit(b"c", b"d")]
        self.assertEqual(len(rig.runner.jobs), 1, "one job at a time per partition")
        f, args, kwargs, d = rig.runner.jobs.pop(0)
        result = f(*args, **kwargs)  # the write thread: both groups, two syncs
        self.assertEqual(
            rig.log.calls, ["append", "flush", "publish", "append", "append", "flush", "publish"]
        )
        # Nothing is answered until the reactor runs: first the hand-back (group 1)...
        self.assertNoResult(first)
        rig.run_reactor()
        self.assertEqual(self.successResultOf(first).base_offset, 0)
        for pending in later:
            self.assertNoResult(pending)
        # ... then the job's own result (group 2), and no further job is needed.
        d.callback(result)
        self.assertEqual([self.successResultOf(x).base_offset for x in later], [1, 2])
        self.assertEqual(rig.landed, [[0], [1, 2]])
        self.assertEqual(rig.runner.jobs, [])
        self.assertTrue(rig.writer.idle)
        self.assertEqual(rig.writer.acked_end, 4)

    def test_a_job_writes_at_most_the_cap_then_the_reactor_starts_the_next(self) -> None:
        rig = _Rig(sync_every_append=False)
        answers = [rig.submit(b"0")]
        appended = 0
        original = rig.log.append_values

        def arriving(values: list[bytes], *, timestamp_ms: int) -> AppendInfo:
            # Every append lets one more request arrive while the job runs.
            nonlocal appended
            appended += 1
            answers.append(rig.submit(b"%d" % appended))
            return original(values, timestamp_ms=timestamp_ms)

        rig.log.append_values = arriving  # type: ignore[method-assign]
        f, args, kwargs, d = rig.runner.jobs.pop(0)
        result = f(*args, **kwargs)
        rig.log.append_values = original  # type: ignore[method-assign]
        self.assertEqual(appended, MAX_CHAINED_GROUPS)
        self.assertEqual(rig.log.calls.count("flush"), 0, "--fsync never: no sync")
        # The reactor runs the hand-backs, then the job's result (callFromThread's
        # order); the last arrival waits for a job the reactor starts after the chain.
        rig.run_reactor()
        self.assertEqual(len(rig.runner.jobs), 0)
        d.callback(result)
        self.assertEqual(len(rig.runner.jobs), 1)
        rig.runner.run_one()
        offsets = [self.successResultOf(a).base_offset for a in answers]
        self.assertEqual(offsets, list(range(MAX_CHAINED_GROUPS + 1)))

    def test_a_group_that_fails_fails_only_its_appends(self) -> None:
        rig = _Rig()
        first = rig.submit(b"a")
        second = rig.submit(b"b")  # queued behind the running job
        f, args, kwargs, d = rig.runner.jobs.pop(0)
        flushes = 0

        def flush() -> None:
            nonlocal flushes
            flushes += 1
            if flushes == 2:
                raise OSError("disk gone")

        rig.log.flush = flush  # type: ignore[method-assign]
        result = f(*args, **kwargs)
        rig.run_reactor()
        d.callback(result)
        self.assertEqual(self.successResultOf(first).base_offset, 0)
        self.failureResultOf(second, OSError)

    def test_a_marker_in_a_chained_group_is_synced_in_never_mode(self) -> None:
        rig = _Rig(sync_every_append=False, log=_MarkerLog())
        rig.submit(b"a")
        marker = rig.writer.submit(MarkerAppend(7, 0, commit=True))
        f, args, kwargs, d = rig.runner.jobs.pop(0)
        result = f(*args, **kwargs)
        rig.run_reactor()
        d.callback(result)
        self.assertEqual(rig.log.calls, ["append", "publish", "marker", "flush", "publish"])
        self.assertEqual(self.successResultOf(marker).base_offset, 1)

    def test_no_hand_back_no_chaining(self) -> None:
        rig = _Rig()
        rig.writer._hand_back = None
        rig.submit(b"a")
        second = rig.submit(b"b")
        rig.runner.run_one()
        self.assertNoResult(second)
        self.assertEqual(len(rig.runner.jobs), 1, "the reactor starts the second job")
        rig.runner.run_one()
        self.assertEqual(self.successResultOf(second).base_offset, 1)
