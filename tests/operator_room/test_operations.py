"""OperatorOps on a real Broker over a real data directory and a real group coordinator with
its offsets store (synchronous runners, ``task.Clock``): every operation, Kafka's rules
(inactive groups only, clamping, by-time lookup, non-empty groups kept), and the
failures each operation reports."""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.broker import Broker
from brokerd.errors import (
    BrokerError,
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    UnknownTopicOrPartition,
)
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.group_admin import operator_error
from brokerd.operator.errors import GroupNotEmpty, GroupNotFound, GroupsUnavailable, InvalidGroupId
from brokerd.operator.inspect import Inspector
from brokerd.operator.operations import OperatorOps, ResetMode, ResetSpec, config_update
from brokerd.operator.views import OffsetResetView
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.stores.offsets import OffsetStore

SESSION_MS = 10_000


def assignment(topic: str, *partitions: int) -> bytes:
    """A consumer-protocol assignment of ``partitions`` of ``topic``."""
    raw = topic.encode()
    return (
        struct.pack(">hih", 0, 1, len(raw))
        + raw
        + struct.pack(">i", len(partitions))
        + b"".join(struct.pack(">i", p) for p in partitions)
        + struct.pack(">i", -1)
    )


class AdminCase(SynchronousTestCase):
    """A real broker core, group coordinator and offsets store, and OperatorOps over them."""

    with_groups = True

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-admin-ops-")
        self.addCleanup(tmp.cleanup)
        self.clock = task.Clock()
        self.logdir = LogDirectory.open(os.path.join(tmp.name, "data"), LogConfig())
        self.broker = Broker(
            self.logdir, reactor=self.clock,  # type: ignore[arg-type]
            run_read=defer.maybeDeferred, run_write=defer.maybeDeferred,
            retention_check_seconds=0, checkpoint_seconds=0,
        )
        self.broker.startService()
        self.addCleanup(self.broker.stopService)
        self.coordinator: GroupCoordinator | None = None
        self.store: OffsetStore | None = None
        if self.with_groups:
            self.store = OffsetStore.open(os.path.join(tmp.name, "offsets.log"))
            self.addCleanup(self.store.close)
            self.coordinator = GroupCoordinator(
                clock=self.clock, offsets=self.store, run_blocking=defer.maybeDeferred,
                initial_rebalance_delay_ms=0,
            )
            self.addCleanup(self.coordinator.stop)
        self.inspector = Inspector(
            self.broker,
            self.coordinator.admin if self.coordinator else None,
            self.store,
        )
        self.ops = OperatorOps(self.broker, self.inspector, self.coordinator, operator_error)

    # -- helpers ------------------------------------------------------------------------

    def create(self, name: str, partitions: int = 1) -> None:
        self.successResultOf(self.broker.create_topic(name, partitions))

    def produce(self, topic: str, partition: int, count: int, *, ts: int = 1000) -> None:
        for i in range(count):
            batch = encode_batch([b"v%d" % i], timestamp_ms=ts + i * 1000)
            self.successResultOf(self.broker.produce_batches(topic, partition, batch))

    def commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        assert self.coordinator is not None
        results = self.successResultOf(self.coordinator.commit_offsets(
            group, -1, "", [(topic, p, o, -1, "") for p, o in offsets.items()]))
        self.assertEqual(set(results.values()), {0})

    def join_member(self, group: str, topic: str) -> str:
        """A member joined and synced: the group is Stable with it."""
        assert self.coordinator is not None
        d = self.coordinator.join(
            group, "", client_id="cli", client_host="/127.0.0.1",
            session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
            protocol_type="consumer", protocols=[("range", b"meta")],
            group_instance_id=None, require_known_member_id=False,
        )
        self.clock.advance(0)
        joined = self.successResultOf(d)
        self.assertEqual(joined.error_code, 0)
        synced = self.successResultOf(self.coordinator.sync(
            group, joined.generation_id, joined.member_id,
            [(joined.member_id, assignment(topic, 0))]))
        self.assertEqual(synced.error_code, 0)
        return joined.member_id

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        assert self.store is not None
        return {k: v[0] for k, v in self.store.committed(group).items()}

    def reset(self, group: str, topic: str, spec: ResetSpec, **kw: Any) -> list[OffsetResetView]:
        return self.successResultOf(self.ops.reset_offsets(group, topic, spec, **kw))

    def reset_fails(self, group: str, topic: str, spec: ResetSpec, **kw: Any) -> BaseException:
        failure = self.failureResultOf(self.ops.reset_offsets(group, topic, spec, **kw))
        assert failure.value is not None
        return failure.value


class TopicOperationsTests(AdminCase):
    def test_describe_topic_and_unknown_topic(self) -> None:
        self.create("t", 2)
        self.produce("t", 1, 3)
        view = self.ops.describe_topic("t")
        self.assertEqual([p.high_watermark for p in view.partitions], [0, 3])
        self.assertRaises(UnknownTopicOrPartition, self.ops.describe_topic, "nosuch")
        self.assertRaises(InvalidTopic, self.ops.describe_topic, "bad/name")

    def test_alter_sets_and_deletes_overrides_durably(self) -> None:
        self.create("t")
        view = self.successResultOf(self.ops.alter_topic_configs(
            "t", {"retention.ms": "1000", "cleanup.policy": "compact"}))
        self.assertEqual(view.overrides, frozenset({"retention.ms", "cleanup.policy"}))
        self.assertEqual(view.configs["retention.ms"], "1000")
        view = self.successResultOf(self.ops.alter_topic_configs(
            "t", {}, ["cleanup.policy"]))
        self.assertEqual(view.overrides, frozenset({"retention.ms"}))
        self.assertEqual(view.configs["cleanup.policy"], "delete")  # the default again
        self.assertEqual(dict(self.logdir.topics()["t"].configs), {"retention.ms": "1000"})
        self.assertEqual(self.logdir.logs()[("t", 0)].config.retention_ms, 1000)

    def test_alter_refuses_bad_configs_and_changes_nothing(self) -> None:
        self.create("t")
        for set_configs, delete in (
            ({"no.such.config": "1"}, []),
            ({"retention.ms": "soon"}, []),
            ({}, ["no.such.config"]),
            ({"retention.ms": "5"}, ["retention.ms"]),
        ):
            failure = self.failureResultOf(
                self.ops.alter_topic_configs("t", set_configs, delete))
            self.assertIsInstance(failure.value, InvalidConfig)
        self.assertEqual(dict(self.logdir.topics()["t"].configs), {})
        failure = self.failureResultOf(
            self.ops.alter_topic_configs("nosuch", {"retention.ms": "1"}))
        self.assertIsInstance(failure.value, UnknownTopicOrPartition)

    def test_config_update_keeps_other_overrides(self) -> None:
        update = config_update({"retention.ms": "7"}, ["segment.ms"])
        self.assertEqual(
            update({"segment.ms": "10", "cleanup.policy": "compact"}),
            {"cleanup.policy": "compact", "retention.ms": "7"},
        )

    def test_delete_topic(self) -> None:
        self.create("t", 2)
        self.produce("t", 0, 2)
        self.successResultOf(self.ops.delete_topic("t"))
        self.assertNotIn("t", self.broker.topic_registry.topics())
        self.assertIsNone(self.inspector.topic("t"))
        failure = self.failureResultOf(self.ops.delete_topic("t"))
        self.assertIsInstance(failure.value, UnknownTopicOrPartition)
        failure = self.failureResultOf(self.ops.delete_topic(".."))
        self.assertIsInstance(failure.value, InvalidTopic)

    def test_create_partitions_grows_and_refuses_shrinking(self) -> None:
        self.create("t", 2)
        view = self.successResultOf(self.ops.create_partitions("t", 5))
        self.assertEqual([p.partition for p in view.partitions], [0, 1, 2, 3, 4])
        for total in (5, 3):
            failure = self.failureResultOf(self.ops.create_partitions("t", total))
            self.assertIsInstance(failure.value, InvalidPartitions)
        failure = self.failureResultOf(self.ops.create_partitions("nosuch", 3))
        self.assertIsInstance(failure.value, UnknownTopicOrPartition)


class ResetOffsetsTests(AdminCase):
    def setUp(self) -> None:
        super().setUp()
        self.create("t", 2)
        self.produce("t", 0, 5)  # offsets 0..4, timestamps 1000, 2000, ... 5000
        self.produce("t", 1, 2)

    def test_new_group_to_earliest_and_latest(self) -> None:
        rows = self.reset("fresh", "t", ResetSpec(ResetMode.LATEST))
        self.assertEqual(
            rows,
            [OffsetResetView("fresh", "t", 0, None, 5, 0, 5),
             OffsetResetView("fresh", "t", 1, None, 2, 0, 2)],
        )
        self.assertEqual(self.committed("fresh"), {("t", 0): 5, ("t", 1): 2})
        rows = self.reset("fresh", "t", ResetSpec(ResetMode.EARLIEST))
        self.assertEqual([(r.previous_offset, r.new_offset) for r in rows], [(5, 0), (2, 0)])
        self.assertEqual(self.committed("fresh"), {("t", 0): 0, ("t", 1): 0})
        self.assertEqual(self.inspector.group("fresh").state, "Empty")  # type: ignore[union-attr]

    def test_to_offset_is_clamped_to_the_log(self) -> None:
        self.successResultOf(self.broker.delete_records("t", 0, 2))  # log start 2
        rows = self.reset("g", "t", ResetSpec(ResetMode.OFFSET, 99))
        self.assertEqual([r.new_offset for r in rows], [5, 2])
        rows = self.reset("g", "t", ResetSpec(ResetMode.OFFSET, 0), partitions=[0])
        self.assertEqual([(r.partition, r.new_offset) for r in rows], [(0, 2)])
        rows = self.reset("g", "t", ResetSpec(ResetMode.OFFSET, 3), partitions=[0])
        self.assertEqual(self.committed("g"), {("t", 0): 3, ("t", 1): 2})

    def test_to_datetime_finds_the_first_offset_at_or_after(self) -> None:
        rows = self.reset("g", "t", ResetSpec(ResetMode.DATETIME, 2500), partitions=[0])
        self.assertEqual(rows[0].new_offset, 2)  # timestamps 1000, 2000, 3000 ...
        rows = self.reset("g", "t", ResetSpec(ResetMode.DATETIME, 3000), partitions=[0])
        self.assertEqual(rows[0].new_offset, 2)
        rows = self.reset("g", "t", ResetSpec(ResetMode.DATETIME, 0), partitions=[0])
        self.assertEqual(rows[0].new_offset, 0)
        # No record that new: the latest offset.
        rows = self.reset("g", "t", ResetSpec(ResetMode.DATETIME, 10**12), partitions=[0])
        self.assertEqual(rows[0].new_offset, 5)

    def test_dry_run_commits_nothing(self) -> None:
        self.commit("g", "t", {0: 1})
        rows = self.reset("g", "t", ResetSpec(ResetMode.LATEST), dry_run=True)
        self.assertEqual([(r.previous_offset, r.new_offset) for r in rows], [(1, 5), (None, 2)])
        self.assertEqual(self.committed("g"), {("t", 0): 1})

    def test_refused_while_the_group_has_members(self) -> None:
        self.commit("busy", "t", {0: 1})
        self.join_member("busy", "t")
        error = self.reset_fails("busy", "t", ResetSpec(ResetMode.EARLIEST))
        self.assertIsInstance(error, GroupNotEmpty)
        self.assertIn("Stable", str(error))
        self.assertIn("inactive", str(error))
        self.assertEqual(self.committed("busy"), {("t", 0): 1})

    def test_member_joining_before_the_commit_makes_it_fail(self) -> None:
        # The by-time lookup runs in the read pool: let a member join meanwhile.
        assert self.coordinator is not None
        gate: defer.Deferred[None] = defer.Deferred()
        original = self.broker.reads.offset_for_timestamp

        def slow(topic: str, partition: int, ts: int) -> defer.Deferred[tuple[int, int] | None]:
            return gate.addCallback(lambda _: original(topic, partition, ts))

        self.broker.reads.offset_for_timestamp = slow  # type: ignore[method-assign]
        d = self.ops.reset_offsets("race", "t", ResetSpec(ResetMode.DATETIME, 0), partitions=[0])
        self.assertNoResult(d)
        self.join_member("race", "t")
        gate.callback(None)
        self.assertIsInstance(self.failureResultOf(d).value, GroupNotEmpty)
        self.assertEqual(self.committed("race"), {})

    def test_unknown_topic_partition_and_bad_ids(self) -> None:
        self.assertIsInstance(
            self.reset_fails("g", "nosuch", ResetSpec(ResetMode.LATEST)), UnknownTopicOrPartition)
        error = self.reset_fails("g", "t", ResetSpec(ResetMode.LATEST), partitions=[0, 7])
        self.assertIsInstance(error, UnknownTopicOrPartition)
        self.assertIn("no partition 7", str(error))
        self.assertIsInstance(
            self.reset_fails("g" * 256, "t", ResetSpec(ResetMode.LATEST)), InvalidGroupId)
        self.assertIsInstance(
            self.reset_fails("g", "t", ResetSpec(ResetMode.OFFSET, -1)), BrokerError)
        self.assertEqual(self.committed("g"), {})


class GroupOperationsTests(AdminCase):
    def setUp(self) -> None:
        super().setUp()
        self.create("t", 1)
        self.produce("t", 0, 3)

    def test_list_and_describe(self) -> None:
        self.commit("simple", "t", {0: 1})
        member = self.join_member("live", "t")
        self.assertEqual([g.group_id for g in self.ops.list_groups()], ["live", "simple"])
        live = self.ops.describe_group("live")
        self.assertEqual((live.state, live.protocol), ("Stable", "range"))
        self.assertEqual([(m.member_id, m.assignment) for m in live.members],
                         [(member, (("t", 0),))])
        simple = self.ops.describe_group("simple")
        self.assertEqual((simple.state, simple.total_lag), ("Empty", 2))
        self.assertRaises(GroupNotFound, self.ops.describe_group, "nosuch")
        self.assertRaises(InvalidGroupId, self.ops.describe_group, "x" * 300)

    def test_delete_group(self) -> None:
        self.commit("g", "t", {0: 1})
        self.successResultOf(self.ops.delete_group("g"))
        self.assertEqual(self.committed("g"), {})
        self.assertIsNone(self.inspector.group("g"))
        failure = self.failureResultOf(self.ops.delete_group("g"))
        self.assertIsInstance(failure.value, GroupNotFound)

    def test_delete_refused_while_the_group_has_members(self) -> None:
        self.commit("busy", "t", {0: 2})
        self.join_member("busy", "t")
        failure = self.failureResultOf(self.ops.delete_group("busy"))
        self.assertIsInstance(failure.value, GroupNotEmpty)
        self.assertEqual(self.committed("busy"), {("t", 0): 2})

    def test_stopped_coordinator(self) -> None:
        assert self.coordinator is not None
        self.commit("g", "t", {0: 1})
        self.successResultOf(self.coordinator.stop())
        failure = self.failureResultOf(self.ops.delete_group("g"))
        self.assertIsInstance(failure.value, GroupsUnavailable)
        self.assertIsInstance(
            self.reset_fails("g", "t", ResetSpec(ResetMode.LATEST)), GroupsUnavailable)


class WithoutGroupsTests(AdminCase):
    """Operations built without a group coordinator (an embedded listener; the
    service tree always has one, whatever --kafka says)."""

    with_groups = False

    def test_every_group_operation_says_why(self) -> None:
        self.create("t")
        self.assertRaises(GroupsUnavailable, self.ops.list_groups)
        self.assertRaises(GroupsUnavailable, self.ops.describe_group, "g")
        error = self.reset_fails("g", "t", ResetSpec(ResetMode.LATEST))
        self.assertIsInstance(error, GroupsUnavailable)
        self.assertIn("no group coordinator", str(error))
        self.assertIsInstance(self.failureResultOf(self.ops.delete_group("g")).value,
                              GroupsUnavailable)
        # Topics still work.
        self.assertEqual(self.ops.describe_topic("t").name, "t")
