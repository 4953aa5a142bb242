"""The group admin side of consumer-protocol groups (KIP-848), on the coordinator with a
real offsets journal: ListGroups' types and filters, DescribeGroups' classic-only view
against the operators' view (brokerctl, the console, offset resets), DeleteGroups and
OffsetDelete, and offset commits and fetches checked by member epoch.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from brokerd.kafka.errors import ErrorCode

from tests.deferreds import watch
from tests.kafka.groups.consumer.test_persist import Broker


def _stable(b: Broker, *members: str) -> None:
    for m in members:
        b.hb(m)
    for _ in range(4):
        for m in members:
            b.hb(m)


def test_list_groups_reports_the_type(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    _stable(b, "a")
    admin = b.node.coord.admin
    assert admin.list_groups_with_states() == (0, [("g", "consumer", "Stable")])
    assert admin.group_type("g") == "consumer"
    assert admin.list_groups_with_states((), ["Consumer"])[1] == [("g", "consumer", "Stable")]
    assert admin.list_groups_with_states((), ["classic"])[1] == []
    assert admin.list_groups_with_states(["empty"])[1] == []


def test_describe_groups_and_the_operators_view(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    _stable(b, "a", "b")
    (wire,) = b.node.coord.admin.describe(["g"], True, classic_only=True)
    assert (wire.error_code, wire.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a classic group.")
    (old,) = b.node.coord.admin.describe(["g"], False, classic_only=True)
    assert (old.error_code, old.state) == (0, "Dead")
    (seen,) = b.node.coord.admin.describe(["g"])
    assert (seen.state, seen.protocol_type, seen.protocol) == ("Stable", "consumer", "uniform")
    parts = sorted(p for m in seen.members for p in m.assigned_partitions())
    assert parts == [("t", p) for p in range(4)]


def test_delete_groups_and_offset_delete(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    _stable(b, "a")
    epoch = b.epochs["a"]
    committed = watch(b.node.coord.commit_offsets("g", epoch, "a", [("t", 0, 3, -1, None),
                                                                    ("u", 0, 1, -1, None)]))
    assert committed == [{("t", 0): 0, ("u", 0): 0}]
    assert watch(b.node.coord.admin.delete_groups(["g"])) == [[("g", ErrorCode.NON_EMPTY_GROUP)]]
    top, per = watch(b.node.coord.admin.delete_offsets("g", [("t", 0), ("u", 0)]))[0]
    assert top == 0 and per == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
    b.hb("a", -1)
    assert watch(b.node.coord.admin.delete_groups(["g"])) == [[("g", 0)]]
    assert "g" not in b.node.coord.consumer.groups and b.node.store.committed("g") == {}


def test_commits_and_fetches_by_member_epoch(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    _stable(b, "a")
    epoch = b.epochs["a"]
    entry = [("t", 0, 3, -1, None)]
    assert watch(b.node.coord.commit_offsets("g", epoch, "a", entry)) == [{("t", 0): 0}]
    stale = watch(b.node.coord.commit_offsets("g", epoch - 1, "a", entry))
    assert stale == [{("t", 0): ErrorCode.STALE_MEMBER_EPOCH}]
    unknown = watch(b.node.coord.commit_offsets("g", epoch, "nobody", entry))
    assert unknown == [{("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}]
    admin_commit = watch(b.node.coord.commit_offsets("g", -1, "", entry))
    assert admin_commit == [{("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}]  # the group has members
    assert b.node.coord.fetch_member_error("g", "a", epoch) == 0
    assert b.node.coord.fetch_member_error("g", "a", epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert b.node.coord.fetch_member_error("g", str(uuid.uuid4()), 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.node.coord.fetch_member_error("g", None, -1) == 0
    assert b.node.coord.fetch_offsets("g", [("t", 0)])[0][:3] == ("t", 0, 3)


def _classic_join(b: Broker) -> Any:
    d = b.node.coord.join("g", "", client_id="c", client_host="h", session_timeout_ms=6000,
                     rebalance_timeout_ms=6000, protocol_type="consumer",
                     protocols=[("range", b"")], group_instance_id=None,
                     require_known_member_id=False)
    b.node.clock.advance(1)
    return watch(d)[0]


def test_members_without_the_consumer_embedded_protocol_do_not_migrate(tmp_path: Path) -> None:
    """Metadata that is not a ConsumerProtocolSubscription: a classic member cannot join
    a consumer group with members, nor a consumer-protocol member upgrade its classic
    group (the empty group of either protocol still converts)."""
    b = Broker(tmp_path)
    _stable(b, "a")
    assert _classic_join(b).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    b.hb("a", -1)
    joined = _classic_join(b)
    assert joined.error_code == 0
    assert "g" not in b.node.coord.consumer.groups and b.node.coord.group_state("g") is not None
    # Now a classic group with a member whose metadata cannot be parsed: no upgrade.
    refused = b.hb("z", 0)
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "embedded consumer protocol is malformed" in (refused.error_message or "")
    b.restart()
    assert "g" not in b.node.coord.consumer.groups


def test_transactional_commits_by_member_epoch(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    _stable(b, "a")
    epoch = b.epochs["a"]
    assert b.node.coord.check_txn_member("g", epoch, "a", None) == ErrorCode.NONE
    assert b.node.coord.check_txn_member("g", epoch - 1, "a", None) == ErrorCode.ILLEGAL_GENERATION
    assert b.node.coord.check_txn_member("g", epoch, "x", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.node.coord.check_txn_member("g", -1, "", None) == ErrorCode.NONE
