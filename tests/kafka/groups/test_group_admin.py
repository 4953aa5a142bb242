"""brokerd.kafka.groups.group_admin on the classic coordinator with a real offsets
journal: ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, and the bounded
parse of a consumer subscription's topics (consumer-protocol groups' side:
tests/kafka/groups/consumer/test_coordinator_admin.py)."""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet.defer import Deferred

from brokerd.errors import BrokerError
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.group_admin import assigned_partitions, operator_error, subscribed_topics
from brokerd.operator.errors import GroupNotEmpty, GroupNotFound, GroupsUnavailable, InvalidGroupId

from tests.kafka.groups.test_coordinator import DELAY_MS, _Base, _subscription


class GroupAdminTests(_Base):
    """ListGroups, DescribeGroups, DeleteGroups and OffsetDelete."""

    def test_list_includes_empty_and_offsets_only_groups(self) -> None:
        self.assertEqual(self.coord.admin.list_groups(), (0, []))
        self.stable_single()
        self.result(self.coord.commit_offsets("simple", -1, "", [("t", 0, 3, 0, None)]))
        self.assertEqual(
            self.coord.admin.list_groups(), (0, [("g", "consumer"), ("simple", "")])
        )

    def test_list_with_states_and_states_filter(self) -> None:
        self.stable_single()
        self.result(self.coord.commit_offsets("simple", -1, "", [("t", 0, 3, 0, None)]))
        admin = self.coord.admin
        both = [("g", "consumer", "Stable"), ("simple", "", "Empty")]
        self.assertEqual(admin.list_groups_with_states(), (0, both))
        # Case-insensitive, as Kafka; a name that is no state matches nothing.
        self.assertEqual(admin.list_groups_with_states(["stable"]), (0, both[:1]))
        self.assertEqual(admin.list_groups_with_states(["EMPTY", "Dead"]), (0, both[1:]))
        self.assertEqual(admin.list_groups_with_states(["NoSuchState"]), (0, []))

    def test_describe(self) -> None:
        d = self.join(protocols=[("range", _subscription("t"))], instance_id="i")
        self.assertEqual(self.coord.admin.describe(["g"])[0].state, "PreparingRebalance")
        self.assertEqual(self.coord.admin.describe(["g"])[0].members[0].metadata, b"")
        self.clock.advance(DELAY_MS / 1000)
        a = self.result(d).member_id
        self.result(self.coord.sync("g", 1, a, [(a, b"assigned")]))
        got = self.coord.admin.describe(["g", "nope", "x" * 300])
        self.assertEqual(
            (got[0].error_code, got[0].state, got[0].protocol_type, got[0].protocol),
            (0, "Stable", "consumer", "range"),
        )
        m = got[0].members[0]
        self.assertEqual(
            (m.member_id, m.group_instance_id, m.client_id, m.client_host),
            (a, "i", "client", "/127.0.0.1"),
        )
        self.assertEqual((m.metadata, m.assignment), (_subscription("t"), b"assigned"))
        self.assertEqual((got[1].error_code, got[1].state, got[1].members), (0, "Dead", ()))
        self.assertEqual(got[2].error_code, 24)

    def test_delete_groups(self) -> None:
        a = self.stable_single().member_id
        self.result(self.coord.commit_offsets("g", 1, a, [("t", 0, 3, 0, None)]))
        self.result(self.coord.commit_offsets("simple", -1, "", [("t", 0, 3, 0, None)]))
        self.assertEqual(
            self.result(self.coord.admin.delete_groups(["g", "nope", "simple"])),
            [("g", 68), ("nope", 69), ("simple", 0)],
        )
        self.assertIsNone(self.store.fetch("simple", "t", 0))
        self.assertEqual(self.result(self.coord.leave("g", a)), 0)
        self.assertEqual(self.result(self.coord.admin.delete_groups(["g"])), [("g", 0)])
        self.assertIsNone(self.coord.group_state("g"))
        self.assertEqual(self.store.committed("g"), {})
        self.assertNotIn("g", self.store.groups_metadata())
        # Deleted for good, across a restart too: the next group starts afresh.
        self.coord.stop()
        self.coord = self.make_coordinator()
        self.assertEqual(self.coord.admin.list_groups(), (0, []))
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        self.assertEqual(self.result(d).generation_id, 1)

    def test_delete_waits_for_the_journal(self) -> None:
        held: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

        def run(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((f, args, d))
            return d

        def finish() -> None:
            while held:
                f, args, d = held.pop(0)
                d.callback(f(*args))

        self.coord = self.make_coordinator(run_blocking=run)
        self.coord.commit_offsets("simple", -1, "", [("t", 0, 3, 0, None)])
        finish()
        self.coord.commit_offsets("simple", -1, "", [("t", 2, 5, 0, None)])
        deleted = self.coord.admin.delete_groups(["simple"])
        late = self.coord.commit_offsets("simple", -1, "", [("t", 1, 4, 0, None)])
        self.assertNoResult(deleted)
        finish()
        self.assertEqual(self.result(deleted), [("simple", 0)])
        self.assertEqual(self.result(late), {("t", 1): 0})
        # The commit queued before the deletion is gone, the one after it survives.
        self.assertEqual(self.store.committed("simple"), {("t", 1): (4, 0, None)})

    def test_offset_delete(self) -> None:
        d = self.join(protocols=[("range", _subscription("t"))])
        self.clock.advance(DELAY_MS / 1000)
        a = self.result(d).member_id
        self.result(self.coord.sync("g", 1, a, []))
        entries = [("t", 0, 3, 0, None), ("u", 0, 4, 0, None)]
        self.result(self.coord.commit_offsets("g", 1, a, entries))
        got = self.result(self.coord.admin.delete_offsets("g", [("t", 0), ("u", 0)]))
        self.assertEqual(got, (0, {("t", 0): 86, ("u", 0): 0}))
        self.assertEqual(self.store.committed("g"), {("t", 0): (3, 0, None)})
        self.assertEqual(self.result(self.coord.leave("g", a)), 0)
        got = self.result(self.coord.admin.delete_offsets("g", [("t", 0)]))
        self.assertEqual(got, (0, {("t", 0): 0}))
        self.assertEqual(self.store.committed("g"), {})
        self.assertEqual(self.result(self.coord.admin.delete_offsets("nope", [])), (69, {}))

    def test_offset_delete_of_a_non_consumer_group_with_members(self) -> None:
        self.join(protocol_type="connect")
        self.assertEqual(self.result(self.coord.admin.delete_offsets("g", [("t", 0)])), (68, {}))

    def test_stopped_coordinator_refuses(self) -> None:
        self.coord.stop()
        self.assertEqual(self.coord.admin.list_groups(), (15, []))
        self.assertEqual(self.coord.admin.describe(["g"])[0].error_code, 15)
        self.assertEqual(self.result(self.coord.admin.delete_groups(["g"])), [("g", 15)])
        self.assertEqual(self.result(self.coord.admin.delete_offsets("g", [])), (15, {}))


def test_subscribed_topics_parses_only_what_fits() -> None:
    assert subscribed_topics(_subscription("a", "b")) == frozenset({"a", "b"})
    assert subscribed_topics(_subscription()) == frozenset()
    assert subscribed_topics(b"") is None
    assert subscribed_topics(struct.pack(">hi", 0, 2**31 - 1)) is None  # count lies
    assert subscribed_topics(struct.pack(">hih", 0, 1, 5) + b"ab") is None  # short topic
    assert subscribed_topics(struct.pack(">hi", 0, -1)) is None
    assert subscribed_topics(struct.pack(">hih", 0, 1, 1) + b"\xff") is None


def test_assigned_partitions_sorted_or_empty_when_not_parsed() -> None:
    data = struct.pack(">hih", 0, 2, 1) + b"u" + struct.pack(">ii", 1, 3)
    data += struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 1, 0) + b"userdata"
    assert assigned_partitions(data) == (("t", 0), ("t", 1), ("u", 3))
    assert assigned_partitions(b"") == ()
    assert assigned_partitions(struct.pack(">hi", 0, 2**31 - 1)) == ()  # count lies
    assert assigned_partitions(struct.pack(">h", -1)) == ()


def test_operator_errors_of_coordinator_codes() -> None:
    assert isinstance(operator_error(ErrorCode.GROUP_ID_NOT_FOUND, "g"), GroupNotFound)
    assert isinstance(operator_error(ErrorCode.UNKNOWN_MEMBER_ID, "g"), GroupNotEmpty)
    assert isinstance(operator_error(ErrorCode.NON_EMPTY_GROUP, "g"), GroupNotEmpty)
    assert isinstance(operator_error(ErrorCode.INVALID_GROUP_ID, "g"), InvalidGroupId)
    assert isinstance(operator_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "g"),
                      GroupsUnavailable)
    other = operator_error(ErrorCode.NOT_COORDINATOR, "g")
    assert type(other) is BrokerError
    assert str(other) == "group 'g': the coordinator answered NOT_COORDINATOR"
    assert str(operator_error(9999, "g")).endswith("answered 9999")
