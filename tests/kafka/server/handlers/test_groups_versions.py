"""The consumer-group APIs at the versions Kafka 4.2 added, through the Kafka listener.

Wire layouts are checked against bytes written out by hand from Kafka's message schemas;
behaviour with the real group coordinator (its journal in a temporary directory, writes
run inline) over ``StringTransport`` and ``task.Clock``: batched FindCoordinator (v4+) and
share keys (v6), JoinGroup's protocol type (v7) and skip_assignment (v9), SyncGroup's
protocol checks (v5), batched LeaveGroup (v3+), OffsetCommit's GROUP_ID_NOT_FOUND (v9) and
topic IDs in OffsetCommit and OffsetFetch (v10), DescribeGroups' GROUP_ID_NOT_FOUND (v6),
ListGroups' group types (v5); and their ACL rules.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import uuid
from typing import Any

from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.listener.factory_parts import ListenerSecurity
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ZERO_UUID, ApiKey, RequestHeader
from brokerd.kafka.wire.messages import groups as group_apis
from brokerd.kafka.wire.requests import apis
from brokerd.security.acl import (
    AclAuthorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
)
from brokerd.storage.stores.offsets import OffsetStore
from brokerd.storage.topic_ids import format_topic_id

from tests.fake_core import FakeCore
from tests.kafka.wire.test_codec import NO_TAGS, carr, cb, cs, i8, i16, i32, i64

RANGE = group_apis.JoinGroupProtocol(name="range", metadata=b"meta")
SESSION_MS = 10_000
UNKNOWN_ID = uuid.UUID(int=0xFEED)


def uuid_bytes(u: uuid.UUID) -> bytes:
    return u.bytes


def flex_request(key: ApiKey, version: int, body: bytes) -> bytes:
    """A header v2 request payload (client id "cli", correlation 7)."""
    return i16(key) + i16(version) + i32(7) + i16(3) + b"cli" + NO_TAGS + body


def flex_response(version: int, body: Any) -> bytes:
    """A flexible response's body bytes (after the correlation id and header tags)."""
    out = apis.encode_response(7, version, body)
    assert out[4:8] == i32(7) and out[8:9] == NO_TAGS
    return out[9:]


# -- layouts ---------------------------------------------------------------------------


def test_find_coordinator_v4_batched_layout() -> None:
    wire = flex_request(ApiKey.FIND_COORDINATOR, 4, i8(1) + carr(cs("a"), cs("b")) + NO_TAGS)
    assert apis.decode_request(wire).body == apis.FindCoordinatorRequest(
        key_type=1, coordinator_keys=("a", "b")
    )
    v3 = flex_request(ApiKey.FIND_COORDINATOR, 3, cs("g") + i8(0) + NO_TAGS)
    assert apis.decode_request(v3).body == apis.FindCoordinatorRequest(key="g")
    resp = apis.FindCoordinatorResponse(coordinators=(
        group_apis.Coordinator(key="a", node_id=0, host="h", port=9),
        group_apis.Coordinator(key="b", error_code=15, error_message="no"),
    ))
    assert flex_response(4, resp) == (
        i32(0)
        + carr(cs("a") + i32(0) + cs("h") + i32(9) + i16(0) + cs(None) + NO_TAGS,
               cs("b") + i32(-1) + cs("") + i32(-1) + i16(15) + cs("no") + NO_TAGS)
        + NO_TAGS
    )
    single = apis.FindCoordinatorResponse(node_id=0, host="h", port=9)
    assert flex_response(3, single) == (
        i32(0) + i16(0) + cs(None) + i32(0) + cs("h") + i32(9) + NO_TAGS
    )


def test_join_group_v8_v9_layouts() -> None:
    body = (cs("g") + i32(SESSION_MS) + i32(30000) + cs("") + cs(None) + cs("consumer")
            + carr(cs("range") + cb(b"meta") + NO_TAGS) + cs("because") + NO_TAGS)
    req = apis.decode_request(flex_request(ApiKey.JOIN_GROUP, 8, body)).body
    assert (req.reason, req.protocols) == ("because", (RANGE,))
    resp = apis.JoinGroupResponse(
        generation_id=3, protocol_type="consumer", protocol_name="range", leader="m",
        skip_assignment=True, member_id="m",
        members=(apis.JoinGroupMember(member_id="m", group_instance_id="i", metadata=b"x"),),
    )
    member = cs("m") + cs("i") + cb(b"x") + NO_TAGS
    head = i32(0) + i16(0) + i32(3) + cs("consumer") + cs("range") + cs("m")
    assert flex_response(9, resp) == head + i8(1) + cs("m") + carr(member) + NO_TAGS
    # v7 and v8 have the protocol type but no skip_assignment.
    assert flex_response(7, resp) == head + cs("m") + carr(member) + NO_TAGS


def test_sync_group_v5_layout() -> None:
    body = (cs("g") + i32(2) + cs("m") + cs(None) + cs("consumer") + cs("range")
            + carr(cs("m") + cb(b"A") + NO_TAGS) + NO_TAGS)
    req = apis.decode_request(flex_request(ApiKey.SYNC_GROUP, 5, body)).body
    assert (req.protocol_type, req.protocol_name) == ("consumer", "range")
    resp = apis.SyncGroupResponse(protocol_type="consumer", protocol_name="range",
                                  assignment=b"A")
    assert flex_response(5, resp) == (
        i32(0) + i16(0) + cs("consumer") + cs("range") + cb(b"A") + NO_TAGS
    )
    assert flex_response(4, resp) == i32(0) + i16(0) + cb(b"A") + NO_TAGS


def test_leave_group_v3_v5_layouts() -> None:
    v3 = (i16(13) + i16(3) + i32(7) + i16(3) + b"cli"
          + i16(1) + b"g" + i32(2) + i16(1) + b"a" + i16(-1) + i16(0) + i16(1) + b"i")
    assert apis.decode_request(v3).body == apis.LeaveGroupRequest(group_id="g", members=(
        group_apis.LeavingMember(member_id="a"),
        group_apis.LeavingMember(member_id="", group_instance_id="i"),
    ))
    v5 = flex_request(ApiKey.LEAVE_GROUP, 5, cs("g") + carr(
        cs("a") + cs(None) + cs("bye") + NO_TAGS) + NO_TAGS)
    assert apis.decode_request(v5).body.members == (
        group_apis.LeavingMember(member_id="a", reason="bye"),
    )
    resp = apis.LeaveGroupResponse(members=(
        group_apis.LeftMember(member_id="a", error_code=25),
    ))
    assert flex_response(5, resp) == (
        i32(0) + i16(0) + carr(cs("a") + cs(None) + i16(25) + NO_TAGS) + NO_TAGS
    )


def test_offset_commit_v10_topics_by_id() -> None:
    tid = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
    body = (cs("g") + i32(1) + cs("m") + cs(None)
            + carr(uuid_bytes(tid) + carr(i32(0) + i64(5) + i32(-1) + cs(None) + NO_TAGS)
                   + NO_TAGS)
            + NO_TAGS)
    req = apis.decode_request(flex_request(ApiKey.OFFSET_COMMIT, 10, body)).body
    assert req.topics == (apis.OffsetCommitTopic(topic_id=tid, partitions=(
        apis.OffsetCommitPartition(partition_index=0, committed_offset=5),)),)
    resp = apis.OffsetCommitResponse(topics=(apis.OffsetCommitTopicResponse(
        name="t", topic_id=tid,
        partitions=(apis.OffsetCommitPartitionResponse(partition_index=0, error_code=100),),
    ),))
    part = i32(0) + i16(100) + NO_TAGS
    by_id = carr(uuid_bytes(tid) + carr(part) + NO_TAGS)
    assert flex_response(10, resp) == i32(0) + by_id + NO_TAGS
    assert flex_response(9, resp) == i32(0) + carr(cs("t") + carr(part) + NO_TAGS) + NO_TAGS


def test_offset_fetch_v9_v10_layouts() -> None:
    tid = uuid.UUID(int=7)
    group = cs("g") + cs("m") + i32(4) + carr(uuid_bytes(tid) + carr(i32(0)) + NO_TAGS) + NO_TAGS
    req = apis.decode_request(flex_request(ApiKey.OFFSET_FETCH, 10, carr(group) + i8(0)
                                           + NO_TAGS)).body
    assert req.groups == (apis.OffsetFetchRequestGroup(
        group_id="g", member_id="m", member_epoch=4,
        topics=(apis.OffsetFetchTopic(topic_id=tid, partition_indexes=(0,)),),
    ),)
    v9 = cs("g") + cs(None) + i32(-1) + carr(cs("t") + carr(i32(0)) + NO_TAGS) + NO_TAGS
    req9 = apis.decode_request(flex_request(ApiKey.OFFSET_FETCH, 9, carr(v9) + i8(0)
                                            + NO_TAGS)).body
    assert req9.groups[0].topics == (apis.OffsetFetchTopic(name="t", partition_indexes=(0,)),)
    resp = apis.OffsetFetchResponse(groups=(apis.OffsetFetchResponseGroup(
        group_id="g", topics=(apis.OffsetFetchTopicResponse(
            name="t", topic_id=tid, partitions=(apis.OffsetFetchPartitionResponse(
                partition_index=0, committed_offset=5, metadata=""),)),)),))
    part = i32(0) + i64(5) + i32(-1) + cs("") + i16(0) + NO_TAGS
    assert flex_response(10, resp) == (
        i32(0) + carr(cs("g") + carr(uuid_bytes(tid) + carr(part) + NO_TAGS) + i16(0)
                      + NO_TAGS) + NO_TAGS
    )


def test_group_admin_layouts() -> None:
    v5 = flex_request(ApiKey.LIST_GROUPS, 5, carr(cs("Stable")) + carr(cs("classic")) + NO_TAGS)
    assert apis.decode_request(v5).body == apis.ListGroupsRequest(
        states_filter=("Stable",), types_filter=("classic",)
    )
    listed = apis.ListGroupsResponse(groups=(apis.ListedGroup(
        group_id="g", protocol_type="consumer", group_state="Empty", group_type="classic"),))
    assert flex_response(5, listed) == (
        i32(0) + i16(0) + carr(cs("g") + cs("consumer") + cs("Empty") + cs("classic") + NO_TAGS)
        + NO_TAGS
    )
    described = apis.DescribeGroupsResponse(groups=(apis.DescribedGroup(
        error_code=69, error_message="gone", group_id="g", group_state="Dead"),))
    tail = cs("g") + cs("Dead") + cs("") + cs("") + carr() + i32(-(2**31)) + NO_TAGS
    assert flex_response(6, described) == i32(0) + carr(i16(69) + cs("gone") + tail) + NO_TAGS
    assert flex_response(5, described) == i32(0) + carr(i16(69) + tail) + NO_TAGS
    v2 = flex_request(ApiKey.DELETE_GROUPS, 2, carr(cs("a")) + NO_TAGS)
    assert apis.decode_request(v2).body == apis.DeleteGroupsRequest(groups_names=("a",))
    deleted = apis.DeleteGroupsResponse(results=(apis.DeletableGroupResult(group_id="a"),))
    assert flex_response(2, deleted) == i32(0) + carr(cs("a") + i16(0) + NO_TAGS) + NO_TAGS


# -- the listener with the real coordinator ----------------------------------------------


class ListenerCase(SynchronousTestCase):
    authorizer: AclAuthorizer | None = None

    def setUp(self) -> None:
        base = tempfile.mkdtemp(prefix="brokerd-group-versions-")
        self.addCleanup(shutil.rmtree, base, True)
        self.clock = task.Clock()
        self.offsets = OffsetStore.open(os.path.join(base, "offsets.log"))
        self.addCleanup(self.offsets.close)
        self.coordinator = GroupCoordinator(
            clock=self.clock, offsets=self.offsets, run_blocking=defer.maybeDeferred,
            initial_rebalance_delay_ms=0,
        )
        self.core = FakeCore()
        self.core.add_topic("t", 2)
        self.topic_id = self.core.topics()["t"].topic_id
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.coordinator), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            security=ListenerSecurity(authorizer=self.authorizer),
        )
        proto = self.factory.buildProtocol(None)
        assert proto is not None
        self.proto = proto
        self.tr = StringTransport(peerAddress=IPv4Address("TCP", "10.1.2.3", 5555))
        self.proto.makeConnection(self.tr)
        self._correlation = 0

    def send(self, key: ApiKey, version: int, body: Any) -> None:
        self._correlation += 1
        header = RequestHeader(int(key), version, self._correlation, "cli")
        self.proto.dataReceived(apis.encode_request(header, body))

    def answers(self, key: ApiKey, version: int) -> list[Any]:
        frames = codec.FrameDecoder(1 << 20).feed(self.tr.value())
        self.tr.clear()
        out = []
        for payload in frames:
            struct.unpack_from(">i", payload)
            out.append(apis.decode_response(key, version, payload)[1])
        return out

    def ask(self, key: ApiKey, version: int, body: Any) -> Any:
        self.send(key, version, body)
        (answer,) = self.answers(key, version)
        return answer

    def join(self, version: int, member_id: str = "", instance: str | None = None) -> Any:
        return self.ask(ApiKey.JOIN_GROUP, version, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
            member_id=member_id, group_instance_id=instance, protocol_type="consumer",
            protocols=(RANGE,), reason="testing" if version >= 8 else None,
        ))

    def stable_member(self, version: int = 9, instance: str | None = None) -> Any:
        """One member (the leader) of a Stable generation of group "g"."""
        joined = self.join(version, instance=instance)
        if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            joined = self.join(version, joined.member_id, instance)
        self.assertEqual(joined.error_code, 0)
        synced = self.ask(ApiKey.SYNC_GROUP, 5, apis.SyncGroupRequest(
            group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id=instance, protocol_type="consumer", protocol_name="range",
            assignments=(apis.SyncGroupAssignment(member_id=joined.member_id,
                                                  assignment=b"A"),),
        ))
        self.assertEqual((synced.error_code, synced.assignment), (0, b"A"))
        return joined


class FindCoordinatorTests(ListenerCase):
    def test_v4_answers_each_key(self) -> None:
        resp = self.ask(ApiKey.FIND_COORDINATOR, 4, apis.FindCoordinatorRequest(
            key_type=0, coordinator_keys=("a", "b")))
        self.assertEqual(
            [(c.key, c.error_code, c.node_id, c.host, c.port) for c in resp.coordinators],
            [("a", 0, 0, "broker.example", 19092), ("b", 0, 0, "broker.example", 19092)],
        )
        resp = self.ask(ApiKey.FIND_COORDINATOR, 6, apis.FindCoordinatorRequest(
            key_type=1, coordinator_keys=("tx",)))
        self.assertEqual([(c.key, c.error_code) for c in resp.coordinators], [("tx", 0)])
        resp = self.ask(ApiKey.FIND_COORDINATOR, 3, apis.FindCoordinatorRequest(key="g"))
        self.assertEqual((resp.error_code, resp.port), (0, 19092))

    def test_share_keys_are_refused_as_without_a_share_coordinator(self) -> None:
        valid = f"g:{format_topic_id(self.topic_id)}:0"
        for version, keys in ((4, (valid,)), (6, (valid, "g:nope:0", "", "g:x"))):
            resp = self.ask(ApiKey.FIND_COORDINATOR, version, apis.FindCoordinatorRequest(
                key_type=2, coordinator_keys=keys))
            self.assertEqual(
                [(c.key, c.error_code, c.node_id) for c in resp.coordinators],
                [(k, ErrorCode.INVALID_REQUEST, -1) for k in keys],
            )
            self.assertTrue(all(c.error_message for c in resp.coordinators))
        resp = self.ask(ApiKey.FIND_COORDINATOR, 2, apis.FindCoordinatorRequest(
            key=valid, key_type=2))
        self.assertEqual((resp.error_code, resp.node_id), (ErrorCode.INVALID_REQUEST, -1))

    def test_unknown_key_type(self) -> None:
        resp = self.ask(ApiKey.FIND_COORDINATOR, 5, apis.FindCoordinatorRequest(
            key_type=7, coordinator_keys=("a",)))
        self.assertEqual(resp.coordinators[0].error_code, ErrorCode.INVALID_REQUEST)


class JoinSyncLeaveTests(ListenerCase):
    def test_v7_answers_the_protocol_type_and_null_names_on_error(self) -> None:
        first = self.join(7)
        self.assertEqual(first.error_code, ErrorCode.MEMBER_ID_REQUIRED)
        self.assertEqual((first.protocol_type, first.protocol_name), (None, None))
        joined = self.join(7, first.member_id)
        self.assertEqual(
            (joined.error_code, joined.protocol_type, joined.protocol_name,
             joined.skip_assignment),
            (0, "consumer", "range", False),
        )
        # Below v7 "no protocol" is the empty string (v5 cannot carry a null).
        self.assertEqual(self.join(5).protocol_name, "")

    def test_v9_static_leader_rejoining_skips_the_assignment(self) -> None:
        old = self.stable_member(9, instance="i1")
        again = self.join(9, instance="i1")
        self.assertEqual(again.error_code, 0)
        self.assertNotEqual(again.member_id, old.member_id)
        self.assertEqual(
            (again.generation_id, again.leader, again.skip_assignment,
             [m.member_id for m in again.members]),
            (old.generation_id, again.member_id, True, [again.member_id]),
        )
        # It keeps its assignment: SyncGroup of the Stable group hands it out.
        synced = self.ask(ApiKey.SYNC_GROUP, 5, apis.SyncGroupRequest(
            group_id="g", generation_id=again.generation_id, member_id=again.member_id,
            group_instance_id="i1", protocol_type="consumer", protocol_name="range"))
        self.assertEqual((synced.error_code, synced.assignment), (0, b"A"))

    def test_below_v9_the_static_leader_is_told_the_old_leader(self) -> None:
        old = self.stable_member(9, instance="i1")
        again = self.join(8, instance="i1")
        self.assertEqual(
            (again.error_code, again.leader, again.skip_assignment, again.members),
            (0, old.member_id, False, ()),
        )

    def test_v5_sync_needs_the_groups_protocol(self) -> None:
        joined = self.join(9)
        joined = self.join(9, joined.member_id)

        def sync(version: int, ptype: str | None, pname: str | None) -> Any:
            return self.ask(ApiKey.SYNC_GROUP, version, apis.SyncGroupRequest(
                group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
                protocol_type=ptype, protocol_name=pname))

        inconsistent = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        self.assertEqual(sync(5, None, "range").error_code, inconsistent)
        self.assertEqual(sync(5, "consumer", None).error_code, inconsistent)
        self.assertEqual(sync(5, "connect", "range").error_code, inconsistent)
        self.assertEqual(sync(5, "consumer", "roundrobin").error_code, inconsistent)
        ok = sync(5, "consumer", "range")
        self.assertEqual((ok.error_code, ok.protocol_type, ok.protocol_name), (0, "consumer",
                                                                              "range"))
        # v4 carries neither: nothing to check, nothing answered.
        self.assertEqual(sync(4, None, None).error_code, 0)

    def test_v4_heartbeat(self) -> None:
        joined = self.stable_member()
        resp = self.ask(ApiKey.HEARTBEAT, 4, apis.HeartbeatRequest(
            group_id="g", generation_id=joined.generation_id, member_id=joined.member_id))
        self.assertEqual(resp.error_code, 0)

    def test_v3_leave_answers_each_member(self) -> None:
        joined = self.stable_member(instance="i1")
        resp = self.ask(ApiKey.LEAVE_GROUP, 5, apis.LeaveGroupRequest(group_id="g", members=(
            group_apis.LeavingMember(member_id="nobody"),
            group_apis.LeavingMember(member_id="other", group_instance_id="i1"),
            group_apis.LeavingMember(member_id="", group_instance_id="i2"),
            group_apis.LeavingMember(member_id=joined.member_id, group_instance_id="i1",
                                     reason="shutting down"),
        )))
        self.assertEqual(resp.error_code, 0)
        self.assertEqual([(m.member_id, m.group_instance_id, m.error_code) for m in resp.members], [
            ("nobody", None, ErrorCode.UNKNOWN_MEMBER_ID),
            ("other", "i1", ErrorCode.FENCED_INSTANCE_ID),
            ("", "i2", ErrorCode.UNKNOWN_MEMBER_ID),
            (joined.member_id, "i1", 0),
        ])
        self.assertEqual(self.coordinator.group_state("g").value, "Empty")  # type: ignore[union-attr]
        resp = self.ask(ApiKey.LEAVE_GROUP, 3, apis.LeaveGroupRequest(group_id="none", members=(
            group_apis.LeavingMember(member_id="a"),)))
        self.assertEqual((resp.error_code, resp.members), (ErrorCode.UNKNOWN_MEMBER_ID, ()))

    def test_v3_leave_removes_a_static_member_by_instance_id(self) -> None:
        self.stable_member(instance="i1")
        resp = self.ask(ApiKey.LEAVE_GROUP, 4, apis.LeaveGroupRequest(group_id="g", members=(
            group_apis.LeavingMember(member_id="", group_instance_id="i1"),)))
        self.assertEqual([m.error_code for m in resp.members], [0])
        self.assertEqual(self.coordinator.group_state("g").value, "Empty")  # type: ignore[union-attr]


class OffsetTests(ListenerCase):
    def commit(self, version: int, generation: int, topic: apis.OffsetCommitTopic,
               group: str = "g") -> Any:
        return self.ask(ApiKey.OFFSET_COMMIT, version, apis.OffsetCommitRequest(
            group_id=group, generation_id=generation, member_id="m", topics=(topic,)))

    def test_v9_commit_to_a_group_that_does_not_exist(self) -> None:
        topic = apis.OffsetCommitTopic(name="t", partitions=(
            apis.OffsetCommitPartition(partition_index=0, committed_offset=5),))
        codes = {v: self.commit(v, 1, topic).topics[0].partitions[0].error_code for v in (8, 9)}
        self.assertEqual(codes, {8: ErrorCode.UNKNOWN_MEMBER_ID, 9: ErrorCode.GROUP_ID_NOT_FOUND})
        # Generation -1 (outside the group protocol) still commits, at every version.
        self.assertEqual(self.commit(9, -1, topic).topics[0].partitions[0].error_code, 0)
        # Now the group has offsets: it exists, and an unknown member is what it is.
        self.assertEqual(self.commit(9, 1, topic).topics[0].partitions[0].error_code,
                         ErrorCode.UNKNOWN_MEMBER_ID)

    def test_v10_commit_and_fetch_by_topic_id(self) -> None:
        tid = self.topic_id
        resp = self.commit(10, -1, apis.OffsetCommitTopic(topic_id=tid, partitions=(
            apis.OffsetCommitPartition(partition_index=1, committed_offset=7),
            apis.OffsetCommitPartition(partition_index=5, committed_offset=7),
        )))
        self.assertEqual(
            [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
             for t in resp.topics],
            [(tid, [(1, 0), (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])],
        )
        resp = self.commit(10, -1, apis.OffsetCommitTopic(topic_id=UNKNOWN_ID, partitions=(
            apis.OffsetCommitPartition(partition_index=0, committed_offset=1),)))
        self.assertEqual(
            [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.topics],
            [(UNKNOWN_ID, [ErrorCode.UNKNOWN_TOPIC_ID])],
        )
        self.assertEqual(set(self.offsets.committed("g")), {("t", 1)})
        fetched = self.ask(ApiKey.OFFSET_FETCH, 10, apis.OffsetFetchRequest(groups=(
            apis.OffsetFetchRequestGroup(group_id="g", topics=(
                apis.OffsetFetchTopic(topic_id=tid, partition_indexes=(0, 1)),
                apis.OffsetFetchTopic(topic_id=UNKNOWN_ID, partition_indexes=(0,)),
            )),
            apis.OffsetFetchRequestGroup(group_id="g", topics=None),
        )))
        asked, every = fetched.groups
        self.assertEqual(
            [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code)
                           for p in t.partitions]) for t in asked.topics],
            [(tid, [(0, -1, 0), (1, 7, 0)]), (UNKNOWN_ID, [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID)])],
        )
        self.assertEqual(
            [(t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions])
             for t in every.topics],
            [(tid, [(1, 7)])],
        )

    def test_v10_fetch_of_every_partition_leaves_out_a_deleted_topic(self) -> None:
        self.core.add_topic("gone", 1)
        for name in ("t", "gone"):
            resp = self.commit(9, -1, apis.OffsetCommitTopic(name=name, partitions=(
                apis.OffsetCommitPartition(partition_index=0, committed_offset=3),)))
            self.assertEqual(resp.topics[0].partitions[0].error_code, 0)
        del self.core._topics["gone"]
        every = apis.OffsetFetchRequest(groups=(
            apis.OffsetFetchRequestGroup(group_id="g", topics=None),))
        by_id = self.ask(ApiKey.OFFSET_FETCH, 10, every).groups[0].topics
        self.assertEqual([t.topic_id for t in by_id], [self.topic_id])
        # By name (v9) the offsets of the deleted topic are still answered.
        by_name = self.ask(ApiKey.OFFSET_FETCH, 9, every).groups[0].topics
        self.assertEqual(sorted(t.name for t in by_name), ["gone", "t"])
        self.assertEqual({t.topic_id for t in by_name}, {ZERO_UUID})

    def test_v9_fetch_ignores_member_id_and_epoch_of_a_classic_group(self) -> None:
        self.commit(9, -1, apis.OffsetCommitTopic(name="t", partitions=(
            apis.OffsetCommitPartition(partition_index=0, committed_offset=4),)))
        resp = self.ask(ApiKey.OFFSET_FETCH, 9, apis.OffsetFetchRequest(groups=(
            apis.OffsetFetchRequestGroup(group_id="g", member_id="whoever", member_epoch=12,
                                         topics=(apis.OffsetFetchTopic(
                                             name="t", partition_indexes=(0,)),)),)))
        part = resp.groups[0].topics[0].partitions[0]
        self.assertEqual((resp.groups[0].error_code, part.committed_offset, part.error_code),
                         (0, 4, 0))


class GroupAdminTests(ListenerCase):
    def test_v6_describe_of_an_unknown_group(self) -> None:
        self.stable_member()
        for version, expected in ((5, (0, "Dead", None)),
                                  (6, (ErrorCode.GROUP_ID_NOT_FOUND, "Dead",
                                       "Group none not found."))):
            resp = self.ask(ApiKey.DESCRIBE_GROUPS, version,
                            apis.DescribeGroupsRequest(groups=("none", "g")))
            unknown, known = resp.groups
            self.assertEqual((unknown.error_code, unknown.group_state, unknown.error_message),
                             expected)
            self.assertEqual((known.error_code, known.group_state, known.error_message),
                             (0, "Stable", None))

    def test_v5_list_groups_by_type(self) -> None:
        self.stable_member()

        def listed(*types: str) -> list[tuple[str, str, str]]:
            resp = self.ask(ApiKey.LIST_GROUPS, 5, apis.ListGroupsRequest(types_filter=types))
            self.assertEqual(resp.error_code, 0)
            return [(g.group_id, g.group_state, g.group_type) for g in resp.groups]

        self.assertEqual(listed(), [("g", "Stable", "classic")])
        self.assertEqual(listed("Classic"), [("g", "Stable", "classic")])
        self.assertEqual(listed("consumer"), [])
        self.assertEqual(listed("share", "streams"), [])
        self.assertEqual(listed("consumer", "CLASSIC"), [("g", "Stable", "classic")])
        # The states filter is trimmed, as Kafka trims it.
        resp = self.ask(ApiKey.LIST_GROUPS, 5, apis.ListGroupsRequest(states_filter=(" stable",)))
        self.assertEqual([g.group_id for g in resp.groups], ["g"])

    def test_v2_delete_groups(self) -> None:
        resp = self.ask(ApiKey.DELETE_GROUPS, 2, apis.DeleteGroupsRequest(groups_names=("x",)))
        self.assertEqual([(r.group_id, r.error_code) for r in resp.results],
                         [("x", ErrorCode.GROUP_ID_NOT_FOUND)])


# -- ACL rules ------------------------------------------------------------------------------


class AclTests(ListenerCase):
    """ACLs on; the connection is User:ANONYMOUS, which is granted only what a test grants."""

    def setUp(self) -> None:
        self.authorizer = AclAuthorizer([], [])
        super().setUp()

    def grant(self, rtype: ResourceType, name: str, op: Operation) -> None:
        self.authorizer.replace(self.authorizer.acls | {
            make_binding(rtype, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op,
                         Permission.ALLOW)
        })

    def test_v4_find_coordinator_checks_each_key(self) -> None:
        self.grant(ResourceType.GROUP, "mine", Operation.DESCRIBE)
        resp = self.ask(ApiKey.FIND_COORDINATOR, 4, apis.FindCoordinatorRequest(
            coordinator_keys=("mine", "theirs")))
        self.assertEqual(
            sorted((c.key, c.error_code, c.node_id) for c in resp.coordinators),
            [("mine", 0, 0), ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED, -1)],
        )

    def test_v6_share_keys_need_cluster_action(self) -> None:
        key = f"g:{format_topic_id(self.topic_id)}:0"
        request = apis.FindCoordinatorRequest(key_type=2, coordinator_keys=(key,))
        resp = self.ask(ApiKey.FIND_COORDINATOR, 6, request)
        self.assertEqual(resp.coordinators[0].error_code,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.grant(ResourceType.CLUSTER, "kafka-cluster", Operation.CLUSTER_ACTION)
        resp = self.ask(ApiKey.FIND_COORDINATOR, 6, request)
        self.assertEqual(resp.coordinators[0].error_code, ErrorCode.INVALID_REQUEST)

    def test_v5_sync_without_its_protocol_is_refused_before_the_acl(self) -> None:
        resp = self.ask(ApiKey.SYNC_GROUP, 5, apis.SyncGroupRequest(
            group_id="g", generation_id=1, member_id="m"))
        self.assertEqual(resp.error_code, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        resp = self.ask(ApiKey.SYNC_GROUP, 5, apis.SyncGroupRequest(
            group_id="g", generation_id=1, member_id="m", protocol_type="consumer",
            protocol_name="range"))
        self.assertEqual(resp.error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED)

    def test_v10_commit_checks_the_topics_of_the_ids(self) -> None:
        self.grant(ResourceType.GROUP, "g", Operation.READ)
        self.core.add_topic("u", 1)
        uid = self.core.topics()["u"].topic_id
        self.grant(ResourceType.TOPIC, "u", Operation.READ)
        part = (apis.OffsetCommitPartition(partition_index=0, committed_offset=1),)
        resp = self.ask(ApiKey.OFFSET_COMMIT, 10, apis.OffsetCommitRequest(
            group_id="g", topics=(
                apis.OffsetCommitTopic(topic_id=self.topic_id, partitions=part),
                apis.OffsetCommitTopic(topic_id=UNKNOWN_ID, partitions=part),
                apis.OffsetCommitTopic(topic_id=uid, partitions=part),
            )))
        self.assertEqual(
            sorted((t.topic_id.int, t.partitions[0].error_code) for t in resp.topics),
            sorted([(self.topic_id.int, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    (UNKNOWN_ID.int, ErrorCode.UNKNOWN_TOPIC_ID), (uid.int, 0)]),
        )
        self.assertEqual(set(self.offsets.committed("g")), {("u", 0)})

    def test_v10_fetch_checks_the_topics_of_the_ids(self) -> None:
        self.grant(ResourceType.GROUP, "g", Operation.DESCRIBE)
        resp = self.ask(ApiKey.OFFSET_FETCH, 10, apis.OffsetFetchRequest(groups=(
            apis.OffsetFetchRequestGroup(group_id="g", topics=(
                apis.OffsetFetchTopic(topic_id=self.topic_id, partition_indexes=(0,)),
                apis.OffsetFetchTopic(topic_id=UNKNOWN_ID, partition_indexes=(0,)),
            )),)))
        self.assertEqual(
            sorted((t.topic_id.int, t.partitions[0].error_code) for t in resp.groups[0].topics),
            sorted([(self.topic_id.int, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    (UNKNOWN_ID.int, ErrorCode.UNKNOWN_TOPIC_ID)]),
        )
