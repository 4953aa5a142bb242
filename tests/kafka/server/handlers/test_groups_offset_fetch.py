"""OffsetFetch v6-v8 through the Kafka listener.

With the real group coordinator and the real transaction coordinator (journals in a
temporary directory, writes run inline): ``require_stable`` (v7+) answers
UNSTABLE_OFFSET_COMMIT for a partition whose transactional offset commit is not yet
complete, and the completed offset once EndTxn has finished; v8 asks for several groups
at once. With the ACL authorizer: v8 checks each group, then each group's topics.
"""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.txn.types import TxnOffset
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.security.acl import Operation, ResourceType

from tests.deferreds import result_of
from tests.fake_core import FakeCore
from tests.kafka.server.handlers.test_acl import AclTestCase
from tests.kafka.txn.test_coordinator import CoordinatorTestCase

T0, T1 = ("orders", 0), ("orders", 1)


class RequireStableTests(CoordinatorTestCase):
    def setUp(self) -> None:
        super().setUp()
        factory = KafkaFactory(
            FakeCore(),  # type: ignore[arg-type]
            KafkaCoordinators(self.group_coordinator, transactions=self.coordinator),
            clock=self.clock,
            advertised_host="broker.example", advertised_port=19092,
        )
        proto = factory.buildProtocol(None)
        assert proto is not None
        self.proto = proto
        self.tr = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 5555))
        self.proto.makeConnection(self.tr)
        self._correlation = 0
        # A plain commit first: what a read_uncommitted fetch sees while the
        # transaction is open.
        codes = result_of(self.group_coordinator.commit_offsets("g", -1, "", [
            ("orders", 0, 3, -1, ""), ("orders", 1, 7, -1, ""),
        ]))
        self.assertEqual(set(codes.values()), {0})

    def fetch(self, version: int, stable: bool, topics: Any = "both") -> dict[Any, Any]:
        """One OffsetFetch; ``{(topic, partition): (offset, error)}`` and the top error."""
        if topics == "both":
            topics = (apis.OffsetFetchTopic(name="orders", partition_indexes=(0, 1)),)
        self._correlation += 1
        body = apis.OffsetFetchRequest(group_id="g", topics=topics, require_stable=stable)
        header = RequestHeader(int(ApiKey.OFFSET_FETCH), version, self._correlation, "t")
        self.proto.dataReceived(apis.encode_request(header, body))
        (payload,) = codec.FrameDecoder(1 << 20).feed(self.tr.value())
        self.tr.clear()
        self.assertEqual(struct.unpack_from(">i", payload), (self._correlation,))
        _, resp = apis.decode_response(ApiKey.OFFSET_FETCH, version, payload)
        out: dict[Any, Any] = {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in resp.topics for p in t.partitions
        }
        out["top"] = resp.error_code
        return out

    def open_txn_with_offset(self) -> Any:
        r = self.begin(T0)
        self.assertEqual(self.add_offsets(r), ErrorCode.NONE)
        codes = self.commit_offsets(r, {T0: TxnOffset(42, -1, "")})
        self.assertEqual(codes, {T0: ErrorCode.NONE})
        return r

    def test_pending_partition_is_unstable_only_when_asked(self) -> None:
        self.open_txn_with_offset()
        unstable = ErrorCode.UNSTABLE_OFFSET_COMMIT
        self.assertEqual(
            self.fetch(7, stable=True),
            {T0: (-1, unstable), T1: (7, 0), "top": 0},
        )
        # Without the flag (and at v6, which cannot carry it): the last completed offset.
        self.assertEqual(self.fetch(7, stable=False), {T0: (3, 0), T1: (7, 0), "top": 0})
        self.assertEqual(self.fetch(6, stable=True), {T0: (3, 0), T1: (7, 0), "top": 0})
        # Every committed partition (null topics) is judged the same way.
        self.assertEqual(
            self.fetch(7, stable=True, topics=None),
            {T0: (-1, unstable), T1: (7, 0), "top": 0},
        )

    def test_commit_completes_the_offset(self) -> None:
        r = self.open_txn_with_offset()
        self.assertEqual(self.end(r, commit=True), ErrorCode.NONE)
        self.assertEqual(self.fetch(7, stable=True), {T0: (42, 0), T1: (7, 0), "top": 0})

    def test_abort_drops_the_pending_offset(self) -> None:
        r = self.open_txn_with_offset()
        self.assertEqual(self.end(r, commit=False), ErrorCode.NONE)
        self.assertEqual(self.fetch(7, stable=True), {T0: (3, 0), T1: (7, 0), "top": 0})

    def test_another_groups_transaction_is_not_pending_here(self) -> None:
        r = self.begin(T0)
        self.assertEqual(self.add_offsets(r, group="other"), ErrorCode.NONE)
        codes = result_of(self.coordinator.txn_offset_commit(
            "tx-1", "other", r.producer_id, r.producer_epoch, {T0: TxnOffset(9, -1, "")}
        ))
        self.assertEqual(codes, {T0: ErrorCode.NONE})
        self.assertEqual(self.fetch(7, stable=True), {T0: (3, 0), T1: (7, 0), "top": 0})
        self.assertEqual(self.coordinator.pending_offsets("other"), frozenset({T0}))

    def test_v8_answers_each_group(self) -> None:
        self.open_txn_with_offset()
        self._correlation += 1
        both = (apis.OffsetFetchTopic(name="orders", partition_indexes=(0, 1)),)
        body = apis.OffsetFetchRequest(require_stable=True, groups=(
            apis.OffsetFetchRequestGroup(group_id="g", topics=both),
            apis.OffsetFetchRequestGroup(group_id="empty", topics=None),
        ))
        header = RequestHeader(int(ApiKey.OFFSET_FETCH), 8, self._correlation, "t")
        self.proto.dataReceived(apis.encode_request(header, body))
        (payload,) = codec.FrameDecoder(1 << 20).feed(self.tr.value())
        _, resp = apis.decode_response(ApiKey.OFFSET_FETCH, 8, payload)
        self.assertEqual(resp.topics, ())
        got = {
            g.group_id: (g.error_code, {(t.name, p.partition_index): (p.committed_offset,
                                                                      p.error_code)
                                        for t in g.topics for p in t.partitions})
            for g in resp.groups
        }
        self.assertEqual(got, {
            "g": (0, {T0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), T1: (7, 0)}),
            "empty": (0, {}),
        })


class GroupsFormAclTests(AclTestCase):
    def test_each_group_then_its_topics(self) -> None:
        self.groups.committed.update({("t", 0): (5, -1, ""), ("secret", 0): (6, -1, "")})
        self.grant(ResourceType.GROUP, "g", Operation.DESCRIBE)
        self.grant(ResourceType.GROUP, "all", Operation.DESCRIBE)
        self.grant(ResourceType.TOPIC, "t", Operation.DESCRIBE)
        self.send(ApiKey.OFFSET_FETCH, 8, apis.OffsetFetchRequest(groups=(
            apis.OffsetFetchRequestGroup(group_id="g", topics=(
                apis.OffsetFetchTopic(name="t", partition_indexes=(0,)),
                apis.OffsetFetchTopic(name="secret", partition_indexes=(0,)),
            )),
            apis.OffsetFetchRequestGroup(group_id="denied", topics=(
                apis.OffsetFetchTopic(name="t", partition_indexes=(0,)),
            )),
            apis.OffsetFetchRequestGroup(group_id="all", topics=None),
        )))
        got = {
            g.group_id: (g.error_code, {(t.name, p.partition_index): (p.committed_offset,
                                                                      p.error_code)
                                        for t in g.topics for p in t.partitions})
            for g in self.one().groups
        }
        taf = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        self.assertEqual(got, {
            "g": (0, {("t", 0): (5, 0), ("secret", 0): (-1, taf)}),
            "denied": (ErrorCode.GROUP_AUTHORIZATION_FAILED, {}),
            # Every committed partition: topics it may not describe are left out.
            "all": (0, {("t", 0): (5, 0)}),
        })
