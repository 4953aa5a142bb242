"""The Inspector (brokerd/operator/inspect.py) over a real core, data directory, group
coordinator and offsets store: topic and partition views, effective configs, offline
partitions, groups with members, assignments, offsets and lag, share groups among the
groups; and the consumer-protocol assignment parser with hostile bytes."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.share.engine import ShareEngine
from brokerd.core.share.partition import AckBatch, LogSpan
from brokerd.core.share.states import AckType
from brokerd.kafka.groups.group_admin import assigned_partitions, operator_error
from brokerd.kafka.groups.share.coordinator import ShareGroupCoordinator
from brokerd.operator.errors import GroupNotFound
from brokerd.operator.inspect import Inspector
from brokerd.operator.operations import OperatorOps, ResetMode, ResetSpec
from brokerd.operator.share_groups import ShareGroupInspector
from brokerd.operator.views import (
    CLASSIC_GROUP,
    SHARE_GROUP,
    GroupOffsetView,
    PartitionView,
    to_json,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.web.console import make_console

from tests.operator_room.test_operations import AdminCase, assignment
from tests.web.test_console import get


class AssignedPartitionsTests(SynchronousTestCase):
    def test_consumer_assignment_is_sorted_pairs(self) -> None:
        data = (
            struct.pack(">hi", 1, 2)
            + struct.pack(">h", 1) + b"b" + struct.pack(">iii", 2, 3, 0)
            + struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 5)
            + b"user data is ignored"
        )
        self.assertEqual(assigned_partitions(data), (("a", 5), ("b", 0), ("b", 3)))
        self.assertEqual(assigned_partitions(assignment("t", 1, 0)), (("t", 0), ("t", 1)))

    def test_empty_or_foreign_assignments_are_empty(self) -> None:
        self.assertEqual(assigned_partitions(b""), ())
        self.assertEqual(assigned_partitions(b"\xff\xff"), ())  # negative version
        # A null topic name, and counts far beyond the bytes present.
        self.assertEqual(assigned_partitions(struct.pack(">hih", 0, 1, -1)), ())
        self.assertEqual(assigned_partitions(struct.pack(">hi", 0, 2**31 - 1)), ())
        self.assertEqual(
            assigned_partitions(struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 10**9)),
            (),
        )

    @settings(deadline=None, max_examples=300)
    @given(st.binary(max_size=200))
    def test_any_bytes_parse_or_give_nothing(self, data: bytes) -> None:
        pairs = assigned_partitions(data)
        self.assertIsInstance(pairs, tuple)
        self.assertEqual(list(pairs), sorted(pairs))


class TopicViewTests(AdminCase):
    def test_topics_partitions_and_derived_figures(self) -> None:
        self.create("b", 2)
        self.create("a", 1)
        self.produce("b", 1, 3)
        views = self.inspector.topics()
        self.assertEqual([v.name for v in views], ["a", "b"])
        b = self.inspector.topic("b")
        assert b is not None
        self.assertEqual([(p.partition, p.high_watermark, p.records) for p in b.partitions],
                         [(0, 0, 0), (1, 3, 3)])
        self.assertGreater(b.partitions[1].size_bytes, 0)
        self.assertEqual(b.size_bytes, sum(p.size_bytes for p in b.partitions))
        self.assertEqual((b.records, b.end_offsets), (3, 3))
        self.assertEqual(b.partitions[1].segments, 1)
        self.assertIsNone(self.inspector.topic("nosuch"))
        doc = to_json(b)
        self.assertEqual(doc["records"], 3)
        self.assertEqual(doc["partitions"][1]["records"], 3)

    def test_effective_configs_mark_overrides(self) -> None:
        self.successResultOf(self.broker.create_topic("t", 1, {"retention.ms": "1234"}))
        view = self.inspector.topic("t")
        assert view is not None
        self.assertEqual(view.overrides, frozenset({"retention.ms"}))
        self.assertEqual(view.configs["retention.ms"], "1234")
        self.assertEqual(view.configs["cleanup.policy"], "delete")  # a broker default
        self.assertEqual(set(view.configs), set(self.broker.topic_config_defaults()))

    def test_records_count_from_the_log_start(self) -> None:
        self.create("t")
        self.produce("t", 0, 4)
        self.successResultOf(self.broker.delete_records("t", 0, 3))
        (part,) = self.inspector.topic("t").partitions  # type: ignore[union-attr]
        self.assertEqual((part.log_start_offset, part.high_watermark, part.records), (3, 4, 1))


class OfflinePartitionTests(SynchronousTestCase):
    def test_an_offline_partition_is_shown_with_its_reason(self) -> None:
        tmp = tempfile.mkdtemp(prefix="brokerd-inspect-offline-")
        self.addCleanup(shutil.rmtree, tmp)
        data = os.path.join(tmp, "data")
        logdir = LogDirectory.open(data, LogConfig())
        logdir.topic_changes.create_topic("t", 2)
        logdir.close()
        # A symlinked partition directory is never opened: the partition is offline.
        elsewhere = os.path.join(tmp, "elsewhere")
        os.rename(os.path.join(data, "t-1"), elsewhere)
        os.symlink(elsewhere, os.path.join(data, "t-1"))
        logdir = LogDirectory.open(data, LogConfig())
        self.addCleanup(logdir.close)

        class LogDir:
            def open_logs(self) -> object:
                return logdir.logs()

            def offline_partitions(self) -> object:
                return logdir.offline

        class Topics:
            def topics(self) -> dict[str, object]:
                return dict(logdir.topics())

        class Core:
            storage = LogDir()
            topic_registry = Topics()

            def topic_config_defaults(self) -> dict[str, str]:
                return {}

        inspector = Inspector(Core())  # type: ignore[arg-type]
        self.assertEqual(list(inspector.offline_partitions()), [("t", 1)])
        view = inspector.topic("t")
        assert view is not None
        online, offline = view.partitions
        self.assertIsNone(online.offline)
        self.assertEqual(offline, PartitionView("t", 1, 0, 0, 0, 0, 0, offline.offline))
        self.assertTrue(offline.offline)
        self.assertFalse(inspector.has_groups)
        self.assertEqual((inspector.group_ids(), inspector.groups()), ([], []))
        self.assertIsNone(inspector.group("g"))


class GroupViewTests(AdminCase):
    def setUp(self) -> None:
        super().setUp()
        self.create("t", 2)
        self.produce("t", 0, 5)
        self.produce("t", 1, 1)

    def test_group_with_members_assignment_offsets_and_lag(self) -> None:
        self.commit("g", "t", {0: 2, 1: 1})
        member = self.join_member("g", "t")
        self.assertTrue(self.inspector.has_groups)
        view = self.inspector.group("g")
        assert view is not None
        self.assertEqual((view.state, view.protocol_type, view.protocol),
                         ("Stable", "consumer", "range"))
        (m,) = view.members
        self.assertEqual((m.member_id, m.client_id, m.client_host, m.assignment),
                         (member, "cli", "/127.0.0.1", (("t", 0),)))
        self.assertEqual(view.offsets, (
            GroupOffsetView("t", 0, 2, 5, 3, ""),
            GroupOffsetView("t", 1, 1, 1, 0, ""),
        ))
        self.assertEqual(view.total_lag, 3)
        self.assertEqual(to_json(view)["total_lag"], 3)

    def test_lag_never_negative_and_unknown_partitions_have_none(self) -> None:
        self.commit("g", "t", {0: 9})
        self.commit("g", "gone", {0: 4})
        view = self.inspector.group("g")
        assert view is not None
        by_topic = {o.topic: o for o in view.offsets}
        self.assertEqual((by_topic["t"].lag, by_topic["t"].high_watermark), (0, 5))
        self.assertEqual((by_topic["gone"].lag, by_topic["gone"].high_watermark), (None, None))
        self.assertEqual(view.total_lag, 0)

    def test_group_ids_and_groups_sorted_unknown_is_none(self) -> None:
        self.commit("zeta", "t", {0: 1})
        self.commit("alpha", "t", {1: 1})
        self.assertEqual(self.inspector.group_ids(), ["alpha", "zeta"])
        self.assertEqual([g.group_id for g in self.inspector.groups()], ["alpha", "zeta"])
        self.assertIsNone(self.inspector.group("nosuch"))
        self.assertIsNone(self.inspector.group("x" * 300))  # an invalid id: nothing known

    def test_deleted_group_disappears(self) -> None:
        self.commit("g", "t", {0: 1})
        self.successResultOf(self.ops.delete_group("g"))
        self.assertEqual(self.inspector.group_ids(), [])


class ShareGroupAsGroupTests(AdminCase):
    """A share group among the groups: described and listed by the operators' views (so
    ``brokerctl groups describe|list``) and shown on the console's group page, with its
    members, their assignments, and per partition its start offset and lag; beside a
    consumer group that has only committed offsets (a Classic one)."""

    def setUp(self) -> None:
        super().setUp()
        self.create("t", 2)
        self.produce("t", 0, 5)
        self.engine = ShareEngine()
        self.shares = ShareGroupCoordinator(
            clock=self.clock,
            partition_counts=lambda: {
                n: i.partitions for n, i in self.broker.topic_registry.topics().items()
            },
            on_member_gone=lambda group, member: None,
            session_timeout_ms=lambda group: 45_000,
            heartbeat_interval_ms=lambda group: 5_000,
        )
        self.addCleanup(self.shares.stop)
        assert self.coordinator is not None and self.store is not None
        self.inspector = Inspector(
            self.broker, self.coordinator.admin, self.store,
            ShareGroupInspector(self.engine, self.broker.storage.open_logs, self.shares),
        )
        self.ops = OperatorOps(self.broker, self.inspector, self.coordinator, operator_error)
        # A member joined (assigned both partitions); it acquired records 0-1 of t/0 and
        # accepted record 0: the share-partition starts at 1, and 4 records are not done.
        joined = self.shares.heartbeat("sg", "m1", 0, ["t"], client_id="app",
                                       client_host="/127.0.0.1")
        self.assertEqual(joined.assignment, frozenset({("t", 0), ("t", 1)}))
        self.engine.ensure("sg", "t", 0, log_start=0, log_end=0)
        self.engine.acquire("sg", "t", 0, "m1", [LogSpan(0, 4)], 2, 0.0)
        self.engine.acknowledge("sg", "t", 0, "m1", [AckBatch(0, 0, (AckType.ACCEPT,))])
        self.commit("classic", "t", {0: 3})

    def test_describe_a_share_group(self) -> None:
        view = self.ops.describe_group("sg")
        self.assertEqual((view.group_type, view.state, view.protocol_type, view.offsets),
                         (SHARE_GROUP, "Stable", "share", ()))
        (m,) = view.members
        self.assertEqual((m.member_id, m.client_id, m.client_host, m.assignment),
                         ("m1", "app", "/127.0.0.1", (("t", 0), ("t", 1))))
        (p,) = view.share_partitions
        self.assertEqual((p.topic, p.partition, p.start_offset, p.backlog, p.in_flight),
                         ("t", 0, 1, 4, 1))
        self.assertEqual(view.total_lag, 4)
        self.assertEqual(to_json(view)["share_partitions"][0]["start_offset"], 1)

    def test_list_every_type(self) -> None:
        listed = {g.group_id: (g.group_type, g.state, len(g.members), g.total_lag)
                  for g in self.ops.list_groups()}
        self.assertEqual(listed, {"classic": (CLASSIC_GROUP, "Empty", 0, 2),
                                  "sg": (SHARE_GROUP, "Stable", 1, 4)})
        # The consumer groups alone stay what the metrics and the console's list show.
        self.assertEqual([g.group_id for g in self.inspector.groups()], ["classic"])

    def test_a_share_group_left_by_its_members_is_empty(self) -> None:
        self.shares.heartbeat("sg", "m1", -1, None)
        view = self.ops.describe_group("sg")
        self.assertEqual((view.state, view.members, len(view.share_partitions)),
                         ("Empty", (), 1))

    def test_resetting_or_deleting_a_share_group_as_a_consumer_group_is_refused(self) -> None:
        error = self.reset_fails("sg", "t", ResetSpec(ResetMode.EARLIEST))
        self.assertIsInstance(error, GroupNotFound)
        self.assertIn("is a share group", str(error))
        self.assertEqual(self.committed("sg"), {})  # no consumer group of its id made
        deleted = self.failureResultOf(self.ops.delete_group("sg"), GroupNotFound)
        self.assertIn("kafka-share-groups.sh --delete", str(deleted.value))
        self.assertIsNotNone(self.ops.describe_group("sg"))

    def test_the_console_group_page_of_a_share_group(self) -> None:
        root = make_console(self.inspector, clock=self.clock, settings={})
        code, _, body = get(root, "/groups/sg")
        self.assertEqual(code, 200)
        self.assertIn("<h1>Share group sg</h1>", body)
        self.assertIn("<dt>state</dt><dd>Stable</dd>", body)
        self.assertIn("<td>m1</td><td>app</td>", body)
        self.assertIn('<a href="/topics/t">t</a> [0, 1]', body)  # the member's assignment
        self.assertIn("<dt>backlog</dt><dd>4</dd>", body)
        self.assertEqual(get(root, "/groups/nosuch")[0], 404)
