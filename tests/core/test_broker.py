"""The broker core with a fake log and hand-driven pools: group commit, fsync modes,
idempotent producers, long-poll waiters and the shutdown order of its service tree, all
on a fake clock."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable
from typing import Any

from twisted.application import service
from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core import Broker, FsyncPolicy
from brokerd.core.appends import ValuesAppend
from brokerd.core.writer import INLINE_APPEND_BYTES, write_job
from brokerd.errors import (
    OffsetOutOfRange,
    OutOfOrderSequence,
    ShuttingDown,
    TooManyWaiters,
    UnknownTopicOrPartition,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.prepared_append import PreparedBatches
from brokerd.storage.log.producer_state import (
    ActiveProducer,
    ProducerStateManager,
    SnapshotEntry,
)
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import AppendInfo, LogRead, ReadSpec, Record, TopicInfo

from tests.read_specs import COMMITTED_RECORDS


class FakeLog:
    """Records what the core asks of a partition log."""

    def __init__(self) -> None:
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.flushes = 0
        self.values: list[bytes] = []
        self.calls: list[str] = []
        self.path = "/nonexistent/brokerd-fake-log"
        self.config = LogConfig()
        self.producers = ProducerStateManager()

    def append_values(self, values: list[bytes], *, timestamp_ms: int) -> AppendInfo:
        self.calls.append("append")
        base = self.log_end_offset
        self.values.extend(values)
        self.log_end_offset += len(values)
        return AppendInfo(base, self.log_end_offset - 1, 0)

    def append_prepared(self, prepared: PreparedBatches, *, now_ms: int) -> AppendInfo:
        # The producer-state steps of PartitionLog.append_prepared, over no files.
        self.calls.append("append")
        admitted = None
        if prepared.producer_id >= 0:
            checked = self.producers.prepare_update(prepared.headers)
            if isinstance(checked, AppendInfo):
                return checked
            admitted = checked
        count = sum(h.records_count for h in prepared.headers)
        base = self.log_end_offset
        self.log_end_offset += count
        info = AppendInfo(base, self.log_end_offset - 1, 0)
        if admitted is not None:
            self.producers.update(admitted, info)
        return info

    def flush(self) -> None:
        self.calls.append("flush")
        self.flushes += 1

    def publish(self) -> None:
        self.calls.append("publish")
        self.high_watermark = self.log_end_offset

    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: bool = False
    ) -> LogRead | None:
        if memory_only:
            return None  # this fake holds nothing in memory: every read goes to the pool
        records = tuple(
            Record(i, 0, None, v)
            for i, v in enumerate(self.values)
            if offset <= i < self.high_watermark
        )
        hw = self.high_watermark
        return LogRead(b"", hw, self.log_start_offset, hw, decoded=records)

    def enforce_retention(self, now: float) -> int:
        self.calls.append("retention")
        return 0

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark  # no transactions in this fake

    def producer_snapshot(
        self,
    ) -> tuple[int, dict[int, SnapshotEntry], tuple[int, dict[int, int]]]:
        return self.log_end_offset, self.producers.snapshot(), (self.log_end_offset, {})

    def describe_producers(self) -> list[tuple[ActiveProducer, int]]:
        return [(p, -1) for p in self.producers.active()]


class FakeLogDir:
    auto_create = True
    #: Nothing left unsynced; ``path`` starts empty (no empty-producers file).
    was_clean = False

    def unsynced_partitions(self) -> int:
        return 0

    def __init__(self) -> None:
        # A real directory: a stop writes its empty-producers file there.
        self.path = tempfile.mkdtemp(prefix="brokerd-fake-logdir-")
        weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        self.parts: dict[tuple[str, int], FakeLog] = {}
        self.closed = False

    def topics(self) -> dict[str, TopicInfo]:
        return {t: TopicInfo(t, 1) for t, _ in self.parts}

    def get(self, topic: str, partition: int, *, create: bool = False) -> FakeLog:
        if (topic, partition) not in self.parts:
            if not create or partition != 0:
                raise UnknownTopicOrPartition(topic)
            self.parts[(topic, partition)] = FakeLog()
        return self.parts[(topic, partition)]

    def checkpoint(self) -> None:
        pass

    def logs(self) -> dict[tuple[str, int], FakeLog]:
        return {}  # nothing to restore: every test starts from empty partitions

    def close(self) -> None:
        self.closed = True


class HeldRunner:
    """A pool whose jobs run only when the test says so."""

    def __init__(self) -> None:
        self.jobs: list[
            tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], defer.Deferred[Any]]
        ] = []

    def __call__(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self.jobs.append((f, args, kwargs, d))
        return d

    def run_one(self) -> None:
        f, args, kwargs, d = self.jobs.pop(0)
        try:
            result = f(*args, **kwargs)
        except Exception:
            d.errback()
        else:
            d.callback(result)


def make(
    fsync: str = "always", *, writes: Any = defer.maybeDeferred
) -> tuple[Broker, FakeLogDir, Clock]:
    clock = Clock()
    logdir = FakeLogDir()
    logdir.get("t", 0, create=True)
    broker = Broker(
        logdir,
        reactor=clock,
        fsync=FsyncPolicy.parse(fsync),
        run_read=defer.maybeDeferred,
        run_write=writes,
        retention_check_seconds=0,
        checkpoint_seconds=0,
    )
    broker.startService()
    return broker, logdir, clock


class FsyncPolicyTests(SynchronousTestCase):
    def test_parse(self) -> None:
        self.assertEqual(FsyncPolicy.parse("always"), FsyncPolicy("always"))
        self.assertEqual(FsyncPolicy.parse("never"), FsyncPolicy("never"))
        self.assertEqual(FsyncPolicy.parse("interval:250"), FsyncPolicy("interval", 250))
        self.assertEqual(str(FsyncPolicy.parse("interval:250")), "interval:250")
        for bad in ("sometimes", "interval:", "interval:0", "interval:-5", "interval:x"):
            self.assertRaises(ValueError, FsyncPolicy.parse, bad)


class GroupCommitTests(SynchronousTestCase):
    def test_appends_during_a_sync_share_the_next_one(self) -> None:
        runner = HeldRunner()
        broker, logdir, _ = make(writes=runner)
        log = logdir.parts[("t", 0)]
        first = broker.produce_values("t", 0, [b"a"])
        self.assertEqual(len(runner.jobs), 1)
        later = [broker.produce_values("t", 0, [b"b"]), broker.produce_values("t", 0, [b"c", b"d"])]
        # One job per partition at a time: the later appends wait in the reactor.
        self.assertEqual(len(runner.jobs), 1)
        self.assertNoResult(first)
        runner.run_one()
        self.assertEqual(self.successResultOf(first).base_offset, 0)
        self.assertEqual(len(runner.jobs), 1)
        runner.run_one()
        self.assertEqual([self.successResultOf(d).base_offset for d in later], [1, 2])
        self.assertEqual(log.flushes, 2)
        self.assertEqual(
            log.calls, ["append", "flush", "publish", "append", "append", "flush", "publish"]
        )

    def test_not_visible_before_the_sync(self) -> None:
        runner = HeldRunner()
        broker, _logdir, _ = make(writes=runner)
        broker.produce_values("t", 0, [b"a"])
        self.assertEqual(self.successResultOf(broker.reads.list_offsets("t", 0)), (0, 0))
        runner.run_one()
        self.assertEqual(self.successResultOf(broker.reads.list_offsets("t", 0)), (0, 1))

    def test_never_mode_does_not_sync(self) -> None:
        broker, logdir, _ = make("never")
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        self.assertEqual(logdir.parts[("t", 0)].flushes, 0)

    def test_interval_mode_syncs_dirty_partitions_on_the_timer(self) -> None:
        broker, logdir, clock = make("interval:100")
        log = logdir.parts[("t", 0)]
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        self.assertEqual(log.flushes, 0)
        clock.advance(0.1)
        self.assertEqual(log.flushes, 1)
        clock.advance(0.1)
        self.assertEqual(log.flushes, 1, "a clean partition is not synced again")

    def test_auto_create_and_unknown_partition(self) -> None:
        broker, logdir, _ = make()
        self.successResultOf(broker.produce_values("new", 0, [b"x"]))
        self.assertIn(("new", 0), logdir.parts)
        self.failureResultOf(broker.produce_values("new", 3, [b"x"]), UnknownTopicOrPartition)

    def test_appends_to_a_topic_being_created_keep_their_order(self) -> None:
        runner = HeldRunner()
        broker, logdir, _ = make(writes=runner)
        first = broker.produce_values("fresh", 0, [b"a"])
        second = broker.produce_values("fresh", 0, [b"b"])
        self.assertEqual(len(runner.jobs), 1, "one creation, the second request waits on it")
        while runner.jobs:
            runner.run_one()
        self.assertEqual(self.successResultOf(first).base_offset, 0)
        self.assertEqual(self.successResultOf(second).base_offset, 1)
        self.assertEqual(logdir.parts[("fresh", 0)].values, [b"a", b"b"])

    def test_once_stopping_every_new_write_is_refused_before_any_work(self) -> None:
        runner = HeldRunner()
        broker, _, _ = make(writes=runner)
        broker.stopService()
        jobs = len(runner.jobs)
        for refused in (
            broker.produce_values("t", 0, [b"a"]),
            broker.produce_batches("t", 0, b""),
            broker.create_topic("n", 1),
            broker.alter_topic_configs("t", lambda current: {}),
            broker.create_partitions("t", 2),
            broker.delete_records("t", 0, 0),
            broker.transactions.write_txn_markers([("t", 0)], 1, 0, commit=True),
            broker.topic_registry.delete_topic("t"),
        ):
            self.failureResultOf(refused, ShuttingDown)
        self.assertEqual(len(runner.jobs), jobs)

    def test_shutdown_finishes_queued_appends_then_closes(self) -> None:
        runner = HeldRunner()
        broker, logdir, _ = make(writes=runner)
        d = broker.produce_values("t", 0, [b"a"])
        stopped = broker.stopService()
        self.failureResultOf(broker.produce_values("t", 0, [b"b"]), ShuttingDown)
        self.assertNoResult(stopped)
        runner.run_one()
        self.successResultOf(d)
        runner.run_one()  # producer-state snapshots
        self.assertNoResult(stopped)
        runner.run_one()  # logdir.close
        self.successResultOf(stopped)
        self.assertTrue(logdir.closed)


class InlineAppendTests(SynchronousTestCase):
    """Small unsynced jobs run in the reactor thread: no pool hand-off, answered before
    ``produce`` returns, still one job at a time and in order."""

    def test_unsynced_small_append_needs_no_pool(self) -> None:
        runner = HeldRunner()
        broker, logdir, _ = make("never", writes=runner)
        d = broker.produce_values("t", 0, [b"a"])
        self.assertEqual(runner.jobs, [])
        self.assertEqual(self.successResultOf(d).base_offset, 0)
        self.assertEqual(logdir.parts[("t", 0)].calls, ["append", "publish"])
        self.assertEqual(self.successResultOf(broker.reads.list_offsets("t", 0)), (0, 1))

    def test_a_parked_fetch_is_woken_in_the_next_turn_after_the_produce(self) -> None:
        runner = HeldRunner()
        broker, _logdir, clock = make("never", writes=runner)
        parked = broker.wait_for_data([("t", 0, 0)], min_bytes=1, max_wait_ms=500)
        order: list[str] = []
        parked.addCallback(lambda _: order.append("fetch woken"))
        produced = broker.produce_values("t", 0, [b"a"])
        produced.addCallback(lambda _: order.append("produce answered"))
        # The produce is answered inside the call; the fetch waits for the next turn,
        # so that the Produce answer leaves first.
        self.assertEqual(order, ["produce answered"])
        self.assertNoResult(parked)
        clock.advance(0)
        # Woken by the append, not by its timer (the clock moved by nothing).
        self.successResultOf(parked)
        self.assertEqual(order, ["produce answered", "fetch woken"])
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_a_parked_fetch_is_woken_once_the_answer_is_written(self) -> None:
        runner = HeldRunner()
        broker, _logdir, clock = make("never", writes=runner)
        parked = broker.wait_for_data([("t", 0, 0)], min_bytes=1, max_wait_ms=500)
        order: list[str] = []
        parked.addCallback(lambda _: order.append("fetch woken"))
        produced = broker.produce_values("t", 0, [b"a"])
        produced.addCallback(lambda _: order.append("produce answered"))
        self.assertEqual(broker.after_answer.pending, 1)
        self.assertNoResult(parked)
        # The connection hands the Produce answer to the socket: the fetch is woken in
        # the same call, and the next turn's fallback is cancelled.
        broker.after_answer.answer_written()
        self.successResultOf(parked)
        self.assertEqual(order, ["produce answered", "fetch woken"])
        self.assertEqual(broker.after_answer.pending, 0)
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_the_fallback_forgets_the_wake_up(self) -> None:
        runner = HeldRunner()
        broker, _logdir, clock = make("never", writes=runner)
        broker.produce_values("t", 0, [b"a"])
        self.assertEqual(broker.after_answer.pending, 1)
        clock.advance(0)
        self.assertEqual(broker.after_answer.pending, 0, "nothing left to run after an answer")

    def test_two_brokers_each_run_their_own_wake_ups(self) -> None:
        one, _, _ = make("never", writes=HeldRunner())
        two, _, _ = make("never", writes=HeldRunner())
        parked = two.wait_for_data([("t", 0, 0)], min_bytes=1, max_wait_ms=500)
        two.produce_values("t", 0, [b"a"])
        self.assertEqual((one.after_answer.pending, two.after_answer.pending), (0, 1))
        one.after_answer.answer_written()  # an answer of the other broker's connection
        self.assertNoResult(parked)
        two.after_answer.answer_written()
        self.successResultOf(parked)

    def test_wake_ups_of_one_turn_go_out_together_and_before_a_pool_job(self) -> None:
        runner = HeldRunner()
        broker, _logdir, clock = make("never", writes=runner)
        told: list[int | None] = []

        class Watcher:
            def changed(self, key: tuple[str, int], stored_bytes: int | None) -> None:
                told.append(stored_bytes)

        broker.waiters.watch(("t", 0), Watcher())
        broker.produce_values("t", 0, [b"a"])
        broker.produce_values("t", 0, [b"b"])
        self.assertEqual(len(clock.getDelayedCalls()), 1, "one wake-up call per turn")
        big = broker.produce_values("t", 0, [b"x" * (INLINE_APPEND_BYTES + 1)])
        runner.run_one()
        self.successResultOf(big)
        # The pool job's wake-up came after the inline ones, which it gave first.
        self.assertEqual(len(told), 2)
        assert told[0] is not None and told[1] is not None
        self.assertLess(told[0], told[1], "the two small appends, then the large one")
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_synced_and_large_jobs_still_go_to_the_pool(self) -> None:
        runner = HeldRunner()
        broker, _logdir, _ = make("always", writes=runner)
        d = broker.produce_values("t", 0, [b"a"])
        self.assertEqual(len(runner.jobs), 1, "--fsync always: the sync runs in the pool")
        runner.run_one()
        self.successResultOf(d)

        broker, _logdir, _ = make("never", writes=runner)
        big = broker.produce_values("t", 0, [b"x" * (INLINE_APPEND_BYTES + 1)])
        self.assertEqual(len(runner.jobs), 1, "too large to write in the reactor")
        self.assertNoResult(big)
        runner.run_one()
        self.successResultOf(big)

    def test_appends_queued_while_answering_form_the_next_job_in_order(self) -> None:
        runner = HeldRunner()
        broker, logdir, _ = make("never", writes=runner)
        results: list[int] = []
        later: list[defer.Deferred[AppendInfo]] = []

        def answered(info: AppendInfo) -> None:
            results.append(info.base_offset)
            if len(later) < 3:
                # As a pipelined produce started by its predecessor's answer does.
                d = broker.produce_values("t", 0, [b"next"])
                later.append(d)
                d.addCallback(answered)

        broker.produce_values("t", 0, [b"first"]).addCallback(answered)
        self.assertEqual(results, [0, 1, 2, 3])
        self.assertEqual(logdir.parts[("t", 0)].values, [b"first", b"next", b"next", b"next"])
        calls = logdir.parts[("t", 0)].calls
        self.assertEqual(calls, ["append", "publish"] * 4, "one job at a time")

    def test_off_when_the_broker_says_so(self) -> None:
        runner = HeldRunner()
        clock = Clock()
        logdir = FakeLogDir()
        logdir.get("t", 0, create=True)
        broker = Broker(
            logdir, reactor=clock, fsync=FsyncPolicy.parse("never"), run_read=defer.maybeDeferred,
            run_write=runner, retention_check_seconds=0, checkpoint_seconds=0,
            inline_append_bytes=0,
        )
        broker.startService()
        broker.produce_values("t", 0, [b"a"])
        self.assertEqual(len(runner.jobs), 1)


def batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    return encode_batch(
        [b"v%d" % i for i in range(n)],
        timestamp_ms=1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


class IdempotenceTests(SynchronousTestCase):
    def test_retried_batch_is_stored_once(self) -> None:
        broker, logdir, _ = make()
        first = self.successResultOf(broker.produce_batches("t", 0, batch(7, 0, 0)))
        again = self.successResultOf(broker.produce_batches("t", 0, batch(7, 0, 0)))
        self.assertEqual(first, again)
        self.assertEqual(logdir.parts[("t", 0)].log_end_offset, 2)
        nxt = self.successResultOf(broker.produce_batches("t", 0, batch(7, 0, 2)))
        self.assertEqual(nxt.base_offset, 2)

    def test_retry_of_a_batch_still_in_flight_waits_for_it(self) -> None:
        # The retry queues behind its original; the log answers it with the original's
        # offsets in the next job, appending nothing.
        runner = HeldRunner()
        broker, logdir, _ = make(writes=runner)
        first = broker.produce_batches("t", 0, batch(7, 0, 0))
        retry = broker.produce_batches("t", 0, batch(7, 0, 0))
        self.assertNoResult(retry)
        runner.run_one()
        written = self.successResultOf(first)
        self.assertNoResult(retry)
        runner.run_one()
        self.assertEqual(self.successResultOf(retry), written)
        self.assertEqual(runner.jobs, [])
        self.assertEqual(logdir.parts[("t", 0)].log_end_offset, 2)

    def test_gap_is_refused(self) -> None:
        broker, _, _ = make()
        self.successResultOf(broker.produce_batches("t", 0, batch(7, 0, 0)))
        self.failureResultOf(broker.produce_batches("t", 0, batch(7, 0, 5)), OutOfOrderSequence)

    def test_new_epoch_restarts_at_zero(self) -> None:
        broker, _, _ = make()
        self.successResultOf(broker.produce_batches("t", 0, batch(7, 0, 0)))
        self.failureResultOf(broker.produce_batches("t", 0, batch(7, 1, 4)), OutOfOrderSequence)
        self.successResultOf(broker.produce_batches("t", 0, batch(7, 1, 0)))


class LongPollTests(SynchronousTestCase):
    def test_timeout_answers_empty(self) -> None:
        broker, _, clock = make()
        d = broker.wait_records("t", 0, 0, max_value_bytes=100, min_bytes=1, max_wait_ms=500)
        self.assertNoResult(d)
        clock.advance(0.5)
        self.assertEqual(self.successResultOf(d).decoded, ())
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_append_before_timeout_answers_at_once(self) -> None:
        broker, _, clock = make()
        d = broker.wait_records("t", 0, 0, max_value_bytes=100, min_bytes=1, max_wait_ms=5000)
        self.successResultOf(broker.produce_values("t", 0, [b"hello"]))
        self.assertEqual([r.value for r in self.successResultOf(d).decoded], [b"hello"])
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_min_bytes_needs_the_second_append(self) -> None:
        broker, _, _clock = make()
        d = broker.wait_records("t", 0, 0, max_value_bytes=100, min_bytes=8, max_wait_ms=5000)
        broker.produce_values("t", 0, [b"abcd"])
        self.assertNoResult(d)
        broker.produce_values("t", 0, [b"efgh"])
        self.assertEqual(len(self.successResultOf(d).decoded), 2)

    def test_cancel_leaves_nothing_behind(self) -> None:
        broker, _, clock = make()
        d = broker.wait_records("t", 0, 0, max_value_bytes=100, min_bytes=1, max_wait_ms=5000)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(clock.getDelayedCalls(), [])
        self.assertEqual(broker.waiters.count, 0)

    def test_global_limit_is_an_error_not_a_hang(self) -> None:
        broker, _, _ = make()
        broker.waiters.max_waiters = 2
        waits = [
            broker.wait_for_data([("t", 0, 0)], min_bytes=1, max_wait_ms=1000) for _ in range(2)
        ]
        self.failureResultOf(
            broker.wait_for_data([("t", 0, 0)], min_bytes=1, max_wait_ms=1000), TooManyWaiters
        )
        for d in waits:
            d.cancel()
            self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(broker.waiters.count, 0)

    def test_any_partition_of_several_wakes_the_fetch(self) -> None:
        broker, logdir, _ = make()
        logdir.get("u", 0, create=True)
        d = broker.wait_for_data([("t", 0, 0), ("u", 0, 0)], min_bytes=1, max_wait_ms=5000)
        broker.produce_values("u", 0, [b"x"])
        self.successResultOf(d)

    def test_fetch_out_of_range(self) -> None:
        broker, _, _ = make()
        self.failureResultOf(
            defer.maybeDeferred(broker.reads.read, "t", 0, 5, 100, COMMITTED_RECORDS),
            OffsetOutOfRange,
        )


class _StopRecorder(service.Service):
    """A child the application adds to the broker (as tap adds the group state)."""

    def __init__(self, record: Callable[[], None], *, fail: bool = False) -> None:
        self.record = record
        self.fail = fail
        self.stopping: defer.Deferred[None] = defer.Deferred()

    def stopService(self) -> defer.Deferred[None]:
        service.Service.stopService(self)
        self.record()
        if self.fail:
            raise RuntimeError("child failed to stop")
        return self.stopping


class ServiceTreeTests(SynchronousTestCase):
    def test_added_children_stop_after_queued_appends_and_before_the_logs_close(self) -> None:
        runner = HeldRunner()
        broker, logdir, _ = make(writes=runner)
        seen: list[tuple[int, bool]] = []
        child = _StopRecorder(lambda: seen.append((len(runner.jobs), logdir.closed)))
        child.setServiceParent(broker)
        appended = broker.produce_values("t", 0, [b"a"])
        stopped = broker.stopService()
        self.assertEqual(seen, [])  # the queued append first
        runner.run_one()
        self.successResultOf(appended)
        self.assertEqual(seen, [(0, False)])  # then the child, alone, logs still open
        self.assertEqual(runner.jobs, [])  # nothing else starts until it has stopped
        child.stopping.callback(None)
        runner.run_one()  # producer-state snapshots
        runner.run_one()  # logdir.close
        self.successResultOf(stopped)
        self.assertTrue(logdir.closed)
        self.assertFalse(broker.pools.running)

    def test_a_child_that_fails_to_stop_does_not_keep_the_logs_open(self) -> None:
        broker, logdir, _ = make()
        _StopRecorder(lambda: None, fail=True).setServiceParent(broker)
        self.successResultOf(broker.stopService())
        self.assertTrue(logdir.closed)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class WriteJobTests(SynchronousTestCase):
    def test_retention_failure_is_reported_apart_and_fails_no_append(self) -> None:
        log = FakeLog()

        def broken(now: float) -> int:
            raise OSError("disk gone")

        log.enforce_retention = broken  # type: ignore[method-assign]
        result = write_job(
            log,  # type: ignore[arg-type]
            [ValuesAppend((b"a",)), ValuesAppend((b"b", b"c"))],
            sync=True,
            retention=True,
            wall_clock=lambda: 1.0,
        )
        self.assertEqual(result.outcomes, (AppendInfo(0, 0, 0), AppendInfo(1, 2, 0)))
        assert result.retention_failure is not None
        self.assertTrue(result.retention_failure.check(OSError))
        self.assertEqual(log.high_watermark, 3)

    def test_sync_failure_fails_every_append_and_publishes_nothing(self) -> None:
        log = FakeLog()

        def broken() -> None:
            raise OSError("fsync failed")

        log.flush = broken  # type: ignore[method-assign]
        result = write_job(
            log,  # type: ignore[arg-type]
            [ValuesAppend((b"a",)), ValuesAppend((b"b",))],
            sync=True,
            retention=True,
            wall_clock=lambda: 1.0,
        )
        self.assertEqual(len(result.outcomes), 2)
        for outcome in result.outcomes:
            assert isinstance(outcome, Failure)
            self.assertTrue(outcome.check(OSError))
        self.assertIsNone(result.retention_failure)
        self.assertEqual(log.high_watermark, 0)
