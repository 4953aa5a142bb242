"""PartitionWriter starts the next group's write job before it answers the last one
(the latency rule in brokerd/core/writer.py), and still answers strictly in order,
whatever the runner: a held one (jobs finished by the test) or a synchronous one (a
job finishing inside another's answer). Real partition logs in a temporary directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.appends import Append, ValuesAppend
from brokerd.core.writer import PartitionWriter
from brokerd.storage.log import LogConfig, PartitionLog
from brokerd.storage.types import AppendInfo


class HeldRunner:
    """Holds each job until the test finishes it; or, once ``synchronous``, runs jobs
    as they come."""

    def __init__(self) -> None:
        self.held: list[tuple[defer.Deferred[Any], Callable[[], Any]]] = []
        self.synchronous = False

    def __call__(self, f: Callable[..., Any], /, *args: Any, **kw: Any) -> defer.Deferred[Any]:
        if self.synchronous:
            return defer.succeed(f(*args, **kw))
        d: defer.Deferred[Any] = defer.Deferred()
        self.held.append((d, lambda: f(*args, **kw)))
        return d

    def finish_next(self) -> None:
        d, call = self.held.pop(0)
        d.callback(call())


class EarlyNextJobTests(SynchronousTestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-writer-")
        self.addCleanup(tmp.cleanup)
        self.log = PartitionLog.open(
            os.path.join(tmp.name, "t-0"), LogConfig(), recovery_point=None
        )
        self.addCleanup(self.log.close)
        self.runner = HeldRunner()
        self.appended: list[list[int]] = []
        self.idle = 0

        def on_appended(appended: Sequence[tuple[Append, AppendInfo]]) -> None:
            self.appended.append([info.base_offset for _, info in appended])

        def on_idle() -> None:
            self.idle += 1

        self.writer = PartitionWriter(
            self.log,
            run_write=self.runner,
            sync_every_append=True,
            wall_clock=lambda: 1_700_000_000.0,
            on_appended=on_appended,
            on_idle=on_idle,
        )

    def submit(self, value: bytes, order: list[str]) -> defer.Deferred[AppendInfo]:
        d = self.writer.submit(ValuesAppend((value,)))
        d.addCallback(lambda info: order.append(f"{value.decode()}@{info.base_offset}") or info)
        return d

    def test_next_job_starts_before_the_last_is_answered(self) -> None:
        order: list[str] = []
        jobs_when_a_answered: list[int] = []
        a = self.submit(b"a", order)
        a.addCallback(lambda r: jobs_when_a_answered.append(len(self.runner.held)) or r)
        self.assertEqual(len(self.runner.held), 1)
        first = self.submit(b"b", order)
        self.submit(b"c", order)
        d = self.writer.submit(ValuesAppend((b"d",)))
        # "a" is answered only after the job holding "b", "c" and "d" was handed out.
        self.runner.finish_next()
        self.assertEqual(order, ["a@0"])
        self.assertEqual(jobs_when_a_answered, [1])
        self.assertEqual(len(self.runner.held), 1, "the next group's job runs already")
        self.assertNoResult(first)
        self.assertEqual(self.log.high_watermark, 1)
        self.runner.finish_next()
        self.assertEqual(order, ["a@0", "b@1", "c@2"])
        self.assertEqual(self.successResultOf(d).base_offset, 3)
        self.assertEqual(self.appended, [[0], [1, 2, 3]])
        self.assertTrue(self.writer.idle)
        self.assertEqual(self.writer.acked_end, 4)
        self.assertEqual(self.log.recovery_point, 4)

    def test_a_job_finishing_inside_an_answer_is_answered_after_it(self) -> None:
        order: list[str] = []
        self.submit(b"a", order)
        self.submit(b"b", order)
        self.runner.synchronous = True
        # Finishing "a"'s job starts "b"'s, which the synchronous runner finishes at
        # once, before "a" is answered: "b" must still be answered second.
        self.runner.finish_next()
        self.assertEqual(order, ["a@0", "b@1"])
        self.assertEqual(self.appended, [[0], [1]])
        self.assertTrue(self.writer.idle)
        self.assertGreaterEqual(self.idle, 1)

    def test_appends_submitted_by_an_answer_form_the_next_job(self) -> None:
        order: list[str] = []
        d = self.submit(b"a", order)
        d.addCallback(lambda _: self.submit(b"again", order))
        self.runner.finish_next()
        self.assertEqual(order, ["a@0"])
        self.assertEqual(len(self.runner.held), 1)
        self.runner.finish_next()
        self.assertEqual(order, ["a@0", "again@1"])
        self.assertTrue(self.writer.idle)
