"""Native group admin under ``--authorizer acl`` leaves out the topics the principal may
not DESCRIBE, as Kafka's OffsetFetch does: the filter itself (pure), and a real broker
whose anonymous native client may DESCRIBE a group and one of its two topics."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.native.operator_messages import ResetMode
from brokerd.operator.views import GroupOffsetView, GroupView, MemberView
from brokerd.operator.visibility import Visibility
from brokerd.security.acl import (
    ANONYMOUS,
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.security.acl_store import AclStore

from tests.brokerproc import BrokerProcess


def _allow(rtype: ResourceType, name: str, op: Operation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, ANONYMOUS, "*", op, Permission.ALLOW)


#: Anonymous may DESCRIBE group g and topic "open"; nothing of topic "secret".
ACLS = [
    _allow(ResourceType.GROUP, "g", Operation.DESCRIBE),
    _allow(ResourceType.TOPIC, "open", Operation.DESCRIBE),
]


def test_a_group_view_keeps_only_describable_topics() -> None:
    view = GroupView(
        "g",
        "Stable",
        "consumer",
        "range",
        (MemberView("m", "c", "/h", None, (("open", 0), ("secret", 0))),),
        (
            GroupOffsetView("open", 0, 3, 5, 2, "o-meta"),
            GroupOffsetView("secret", 0, 1, 9, 8, "s-meta"),
        ),
    )
    other = GroupView("h", "Empty")
    visibility = Visibility(AclAuthorizer(ACLS), ANONYMOUS, "127.0.0.1")
    (seen,) = visibility.group_views([view, other])
    assert [o.topic for o in seen.offsets] == ["open"]
    assert seen.members[0].assignment == (("open", 0),)
    assert seen.total_lag == 2
    assert visibility.group_views([other]) == []


@pytest.mark.broker
def test_native_describe_and_list_leave_out_denied_topics(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # Offsets of g on both topics, committed while nothing is checked.
    proc = BrokerProcess(data, kafka=False).start()
    try:
        with proc.client() as client:
            for topic, count in (("open", 5), ("secret", 9)):
                client.produce(topic, 0, [b"x"] * count)
                client.reset_offsets("g", topic, ResetMode.OFFSET, value=2)
    finally:
        proc.stop()
    AclStore.in_directory(str(data)).save(ACLS)
    proc = BrokerProcess(data, kafka=False, args=("--authorizer", "acl")).start()
    try:
        with proc.client() as client:
            described = client.describe_group("g")
            (listed,) = client.list_groups()
    finally:
        proc.stop()
    assert [o["topic"] for o in described["offsets"]] == ["open"]  # type: ignore[index, union-attr]
    assert described["total_lag"] == 3
    assert "secret" not in repr(described)
    assert (listed["group_id"], listed["partitions"], listed["total_lag"]) == ("g", 1, 3)
