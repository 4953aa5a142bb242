"""Tests for the Kafka listener's Protocol/Factory and handlers, with a fake core and a
fake group coordinator, ``StringTransport`` and ``task.Clock`` (no reactor, no sockets).
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import uuid
from typing import Any

import attrs
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd import errors
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS, ListenerEdge
from brokerd.kafka.listener.protocol import (
    MAX_PIPELINED_PRODUCES,
    PIPELINE_READ_BYTES,
    KafkaFactory,
    KafkaProtocol,
)
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.net.answer_budget import AnswerBudget
from brokerd.storage.record.header import batch_codecs
from brokerd.storage.stores.offsets import OffsetStore

from tests.fake_core import FakeCore


def batch(size: int = 100, *, codec_id: int = 0, base_offset: int = 0) -> bytes:
    """Bytes shaped like a RecordBatch v2 (header fields only; the fake core does not
    validate): ``size`` bytes in all, compression codec in the attributes."""
    assert size >= 61
    header = struct.pack(">qii", base_offset, size - 12, 0) + b"\x02" + b"\x00" * 4
    header += struct.pack(">h", codec_id)
    return header + b"\x00" * (size - len(header))


# -- fakes ---------------------------------------------------------------------------


@attrs.frozen
class JoinResult:
    error_code: int
    generation_id: int
    protocol_name: str
    leader_id: str
    member_id: str
    members: list[tuple[str, str | None, bytes]] = attrs.field(factory=list)
    protocol_type: str | None = None
    skip_assignment: bool = False


@attrs.frozen
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


def temp_dir(case: SynchronousTestCase) -> str:
    """A private temporary directory, removed after the test."""
    path = tempfile.mkdtemp(prefix="brokerd-listener-")
    case.addCleanup(shutil.rmtree, path, True)
    return path


def offsets_store(directory: str) -> OffsetStore:
    """A fresh offsets journal in ``directory`` (made if missing)."""
    os.makedirs(directory, exist_ok=True)
    return OffsetStore.open(os.path.join(directory, "consumer-offsets.log"))


class FakeCoordinator(GroupCoordinator):
    """A real group coordinator over an offsets journal in ``directory`` (its group
    admin, group configs and streams groups are the real ones, empty), whose classic
    group protocol and committed offsets are scripted: JoinGroup waits for the test,
    SyncGroup hands each member its assignment, heartbeats with generation 99 are told
    to rebalance, and commits are kept in memory. :meth:`close` stops it and closes
    its journal."""

    def __init__(self, directory: str) -> None:
        self.store = offsets_store(directory)
        super().__init__(clock=task.Clock(), offsets=self.store, run_blocking=defer.maybeDeferred)
        self.joins: list[tuple[tuple[Any, ...], dict[str, Any], defer.Deferred[Any]]] = []
        self.join_cancels = 0
        self.syncs: list[tuple[Any, ...]] = []
        self.heartbeats: list[tuple[str, int, str]] = []
        self.commits: list[tuple[str, int, str, list[Any]]] = []
        self.committed: dict[tuple[str, int], tuple[int, int, str | None]] = {}

    def join(self, group_id: str, member_id: str, **kw: Any) -> defer.Deferred[Any]:
        def cancelled(d: defer.Deferred[Any]) -> None:
            self.join_cancels += 1

        d: defer.Deferred[Any] = defer.Deferred(cancelled)
        self.joins.append(((group_id, member_id), kw, d))
        return d

    def sync(
        self, group_id: str, generation_id: int, member_id: str,
        assignments: list[tuple[str, bytes]], *, group_instance_id: str | None = None,
        **protocol: str | None,
    ) -> defer.Deferred[Any]:
        self.syncs.append((group_id, generation_id, member_id, assignments))
        return defer.succeed(SyncResult(0, dict(assignments).get(member_id, b"")))

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str,
        *, group_instance_id: str | None = None,
    ) -> int:
        self.heartbeats.append((group_id, generation_id, member_id))
        return ErrorCode.REBALANCE_IN_PROGRESS if generation_id == 99 else 0

    def leave(self, group_id: str, member_id: str) -> defer.Deferred[int]:
        return defer.succeed(ErrorCode.UNKNOWN_MEMBER_ID if member_id == "nobody" else 0)

    def commit_offsets(
        self, group_id: str, generation_id: int, member_id: str,
        offsets: list[tuple[str, int, int, int, str | None]],
        *, group_instance_id: str | None = None, missing_group_not_found: bool = False,
    ) -> defer.Deferred[Any]:
        self.commits.append((group_id, generation_id, member_id, offsets))
        for t, p, o, e, m in offsets:
            self.committed[(t, p)] = (o, e, m)
        return defer.succeed({(t, p): 0 for t, p, *_ in offsets})

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> list[tuple[str, int, int, int, str | None, int]]:
        keys = sorted(self.committed) if partitions is None else partitions
        out = []
        for t, p in keys:
            if (t, p) in self.committed:
                o, e, m = self.committed[(t, p)]
                out.append((t, p, o, e, m, 0))
            else:
                out.append((t, p, -1, -1, "", 0))
        return out

    def fetch_member_error(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        return 0

    def close(self) -> None:
        self.stop()
        self.store.close()


# -- the harness ---------------------------------------------------------------------


class KafkaTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = FakeCore()
        self.groups = FakeCoordinator(temp_dir(self))
        self.addCleanup(self.groups.close)
        self.clock = task.Clock()
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=4096),
        )
        self.proto, self.tr = self.connect()
        self._correlation = 0
        self._sent: dict[int, tuple[ApiKey, int]] = {}

    def connect(self) -> tuple[KafkaProtocol, StringTransport]:
        proto = self.factory.buildProtocol(None)
        assert proto is not None
        tr = StringTransport(peerAddress=IPv4Address("TCP", "10.1.2.3", 5555))
        proto.makeConnection(tr)
        return proto, tr

    def frame(self, key: ApiKey, version: int, body: Any) -> bytes:
        self._correlation += 1
        self._sent[self._correlation] = (key, version)
        return apis.encode_request(
            RequestHeader(int(key), version, self._correlation, "test-client"), body
        )

    def send(self, key: ApiKey, version: int, body: Any) -> int:
        self.proto.dataReceived(self.frame(key, version, body))
        return self._correlation

    def responses(self) -> list[tuple[int, Any]]:
        """Decode (and clear) everything written so far."""
        frames = codec.FrameDecoder(1 << 30).feed(self.tr.value())
        self.tr.clear()
        out = []
        for payload in frames:
            (correlation,) = struct.unpack_from(">i", payload)
            key, version = self._sent[correlation]
            out.append(apis.decode_response(key, version, payload))
        return out

    def one(self) -> Any:
        got = self.responses()
        self.assertEqual(len(got), 1, got)
        return got[0][1]

    def produce(
        self, topic: str, partition: int, data: bytes | None, *, acks: int = 1,
        version: int = 8, transactional_id: str | None = None, timeout_ms: int = 30000,
    ) -> int:
        return self.send(ApiKey.PRODUCE, version, apis.ProduceRequest(
            transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
            topic_data=(apis.ProduceTopicData(name=topic, partition_data=(
                apis.ProducePartitionData(index=partition, records=data),)),),
        ))

    def fetch_request(
        self, parts: list[tuple[str, int, int, int]], *, max_wait: int = 0, min_bytes: int = 1,
        max_bytes: int = 1 << 20, isolation: int = 0,
    ) -> apis.FetchRequest:
        topics: dict[str, list[apis.FetchPartition]] = {}
        for topic, partition, offset, pmax in parts:
            topics.setdefault(topic, []).append(apis.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=pmax))
        return apis.FetchRequest(
            max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
            isolation_level=isolation,
            topics=tuple(apis.FetchTopic(topic=t, partitions=tuple(ps))
                         for t, ps in topics.items()),
        )


# -- connection-level behaviour ------------------------------------------------------


class ConnectionTests(KafkaTestCase):
    def test_api_versions_lists_the_supported_ranges(self) -> None:
        self.send(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
        resp = self.one()
        self.assertEqual(resp.error_code, 0)
        got = {r.api_key: (r.min_version, r.max_version) for r in resp.api_keys}
        self.assertEqual(got, {int(k): v for k, v in apis.SUPPORTED_VERSIONS.items()})

    def test_api_versions_v3_and_v4_answer_flexibly_with_header_v0(self) -> None:
        for version in (3, 4):
            # librdkafka's first request: header v2, compact client software name/version.
            flexible = (struct.pack(">hhi", 18, version, 77) + b"\x00\x07rdkafka\x00"
                        + b"\x0blibrdkafka\x062.0.2\x00")
            self.proto.dataReceived(codec.frame(flexible))
            out = self.tr.value()
            self.tr.clear()
            # Response header v0: the body's error code right after the correlation id.
            self.assertEqual(out[4:10], struct.pack(">ih", 77, 0))
            _, resp = apis.decode_response(ApiKey.API_VERSIONS, version, out[4:])
            got = {r.api_key: (r.min_version, r.max_version) for r in resp.api_keys}
            self.assertEqual(got[ApiKey.API_VERSIONS], (0, 5))
            self.assertEqual(got[ApiKey.PRODUCE], (0, 13))
            self.assertFalse(self.tr.disconnecting)

    def test_api_versions_bad_client_software_is_an_invalid_request(self) -> None:
        self.send(ApiKey.API_VERSIONS, 3, apis.ApiVersionsRequest(
            client_software_name="@scope/client", client_software_version="1.0"))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.api_keys), (ErrorCode.INVALID_REQUEST, ()))
        self.assertFalse(self.tr.disconnecting)
        self.send(ApiKey.API_VERSIONS, 4, apis.ApiVersionsRequest(
            client_software_name="client", client_software_version="1.0"))
        self.assertEqual(self.one().error_code, 0)

    def test_api_versions_v5_checks_the_cluster_and_node_it_names(self) -> None:
        """KIP-1242: a client that names this cluster and node is answered; one that
        names another cluster or node is told to bootstrap again (REBOOTSTRAP_REQUIRED)
        and the connection stays open."""
        mine = self.factory.cluster_id
        for cluster, node, code in (
            (None, -1, 0), (mine, 0, 0), (mine, 1, ErrorCode.REBOOTSTRAP_REQUIRED),
            ("another-cluster", 0, ErrorCode.REBOOTSTRAP_REQUIRED),
        ):
            self.send(ApiKey.API_VERSIONS, 5, apis.ApiVersionsRequest(
                client_software_name="apache-kafka-java", client_software_version="4.4.0",
                cluster_id=cluster, node_id=node))
            resp = self.one()
            self.assertEqual(resp.error_code, code, (cluster, node))
            self.assertEqual(bool(resp.api_keys), code == 0)
        self.assertFalse(self.tr.disconnecting)

    def test_api_versions_v6_gets_the_v0_fallback_and_stays_open(self) -> None:
        flexible = (struct.pack(">hhi", 18, 6, 77) + b"\x00\x07rdkafka\x00"
                    + b"\x0blibrdkafka\x062.0.2\x00\x09")
        self.proto.dataReceived(codec.frame(flexible))
        self.assertEqual(
            self.tr.value(),
            struct.pack(">iihi", 16, 77, 35, 1) + struct.pack(">hhh", 18, 0, 5),
        )
        self.tr.clear()
        self.assertFalse(self.tr.disconnecting)
        self.send(ApiKey.API_VERSIONS, 0, apis.ApiVersionsRequest())
        self.assertEqual(self.one().error_code, 0)

    def test_responses_stay_in_order_when_a_later_request_could_finish_first(self) -> None:
        self.core.add_topic("t")
        self.core.hold_produce = True
        first = self.produce("t", 0, batch())
        second = self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))
        self.assertEqual(self.tr.value(), b"")  # metadata is ready but must wait
        self.core.held[0].callback(None)
        got = self.responses()
        self.assertEqual([c for c, _ in got], [first, second])
        self.assertEqual(got[0][1].responses[0].partition_responses[0].base_offset, 0)

    def test_consecutive_produces_run_together_and_answer_in_order(self) -> None:
        self.core.add_topic("t")
        self.core.hold_produce = True
        first = self.produce("t", 0, batch())
        second = self.produce("t", 0, batch())
        third = self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))
        # Both produces reached the core (one group commit can serve them); metadata waits.
        self.assertEqual(len(self.core.produce_calls), 2)
        self.core.held[1].callback(None)
        self.assertEqual(self.tr.value(), b"")  # the second is done but answers second
        self.core.held[0].callback(None)
        got = self.responses()
        self.assertEqual([c for c, _ in got], [first, second, third])

    def test_produce_pipeline_is_bounded(self) -> None:
        self.core.add_topic("t")
        self.core.hold_produce = True
        for _ in range(MAX_PIPELINED_PRODUCES + 3):
            self.produce("t", 0, batch())
        self.assertEqual(len(self.core.produce_calls), MAX_PIPELINED_PRODUCES)
        self.core.held[0].callback(None)
        self.assertEqual(len(self.core.produce_calls), MAX_PIPELINED_PRODUCES + 1)

    def test_connections_beyond_the_cap_are_refused(self) -> None:
        self.factory.connections.maximum = 2  # this test's setUp holds one already
        second, _ = self.connect()
        self.assertIsNone(self.factory.buildProtocol(None))
        second.connectionLost(Failure(ConnectionError("gone")))
        self.assertIsNotNone(self.factory.buildProtocol(None))
        self.assertEqual(self.factory.connections.refused, 1)

    def test_one_request_in_flight(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"))
        self.send(ApiKey.HEARTBEAT, 3, apis.HeartbeatRequest(
            group_id="g", generation_id=1, member_id="m"))
        self.assertEqual(self.groups.heartbeats, [])  # not even dispatched yet
        self.groups.joins[0][2].callback(JoinResult(0, 1, "range", "m", "m", []))
        got = self.responses()
        self.assertEqual([type(b).__name__ for _, b in got],
                         ["JoinGroupResponse", "HeartbeatResponse"])
        self.assertEqual(self.groups.heartbeats, [("g", 1, "m")])

    def test_pipelined_requests_in_one_chunk(self) -> None:
        data = b"".join(
            self.frame(ApiKey.HEARTBEAT, 0, apis.HeartbeatRequest(
                group_id="g", generation_id=i, member_id="m"))
            for i in range(200)
        )
        self.proto.dataReceived(data)
        got = self.responses()
        self.assertEqual([c for c, _ in got], list(range(1, 201)))

    def test_unknown_api_key_closes_the_connection(self) -> None:
        payload = struct.pack(">hhi", 4, 1, 5) + b"\x00\x01x"  # LeaderAndIsr (inter-broker)
        self.proto.dataReceived(codec.frame(payload))
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnecting)

    def test_unsupported_version_closes_the_connection(self) -> None:
        payload = struct.pack(">hhi", int(ApiKey.FETCH), 19, 5) + b"\x00\x00"
        self.proto.dataReceived(codec.frame(payload))
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnecting)

    def test_malformed_body_closes_the_connection(self) -> None:
        payload = struct.pack(">hhi", int(ApiKey.HEARTBEAT), 0, 5) + b"\x00\x00\x00\x01g"
        self.proto.dataReceived(codec.frame(payload))
        self.assertTrue(self.tr.disconnecting)
        # Nothing after it is served.
        self.send(ApiKey.API_VERSIONS, 0, apis.ApiVersionsRequest())
        self.assertEqual(self.tr.value(), b"")

    def test_oversized_frame_refused_from_its_size_alone(self) -> None:
        self.proto.dataReceived(struct.pack(">i", 4097))
        self.assertTrue(self.tr.disconnected)  # aborted before any payload arrives

    def test_negative_frame_size_refused(self) -> None:
        self.proto.dataReceived(struct.pack(">i", -5))
        self.assertTrue(self.tr.disconnected)

    def test_registers_as_streaming_producer(self) -> None:
        self.assertIs(self.tr.producer, self.proto)
        self.assertTrue(self.tr.streaming)

    def test_write_side_backpressure_holds_requests(self) -> None:
        self.proto.pauseProducing()  # the client stopped reading our responses
        self.assertEqual(self.tr.producerState, "paused")
        self.send(ApiKey.API_VERSIONS, 0, apis.ApiVersionsRequest())
        self.assertEqual(self.tr.value(), b"")
        self.proto.resumeProducing()
        self.assertEqual(self.tr.producerState, "producing")
        self.assertEqual(self.one().error_code, 0)

    def test_reading_pauses_once_enough_is_pipelined_behind_a_busy_request(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"))
        self.assertEqual(self.tr.producerState, "producing")  # still reads (disconnects)
        body = apis.HeartbeatRequest(group_id="g" * 1000, generation_id=1, member_id="m")
        sent = 0
        while self.tr.producerState == "producing":
            self.send(ApiKey.HEARTBEAT, 0, body)
            sent += 1
        size = len(self.frame(ApiKey.HEARTBEAT, 0, body))
        self.assertEqual(sent, -(-PIPELINE_READ_BYTES // size))  # paused at the threshold
        self.groups.joins[0][2].callback(JoinResult(0, 1, "range", "m", "m", []))
        self.assertEqual(self.tr.producerState, "producing")
        self.assertEqual(len(self.responses()), 1 + len(self.groups.heartbeats))

    def test_held_join_is_cancelled_on_disconnect(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"))
        self.proto.connectionLost(Failure(ConnectionError("gone")))
        self.assertEqual(self.groups.join_cancels, 1)
        self.assertEqual(self.tr.value(), b"")

    def test_requests_received_before_a_disconnect_are_still_carried_out(self) -> None:
        self.core.add_topic("t")
        self.core.hold_produce = True
        data = b"".join([
            self.frame(ApiKey.PRODUCE, 7, apis.ProduceRequest(
                acks=acks, timeout_ms=1000, topic_data=(apis.ProduceTopicData(
                    name="t", partition_data=(apis.ProducePartitionData(
                        index=0, records=batch()),)),)))
            for acks in (1, 0)
        ] + [
            self.frame(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 100)])),
            self.frame(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
                group_id="g", session_timeout_ms=10000, member_id="",
                protocol_type="consumer")),
            self.frame(ApiKey.LEAVE_GROUP, 1, apis.LeaveGroupRequest(group_id="g",
                                                                    member_id="m")),
            self.frame(ApiKey.PRODUCE, 7, apis.ProduceRequest(
                acks=0, timeout_ms=1000, topic_data=(apis.ProduceTopicData(
                    name="t", partition_data=(apis.ProducePartitionData(
                        index=0, records=batch()),)),))),
        ])
        self.proto.dataReceived(data)
        self.proto.connectionLost(Failure(ConnectionError("client closed")))
        # The two leading produces run together (pipelined); the rest waits for them.
        self.assertEqual(len(self.core.produce_calls), 2)
        self.core.held[1].callback(None)
        self.assertEqual(len(self.core.produce_calls), 2)
        self.core.held[0].callback(None)
        self.assertEqual(self.core.fetch_calls, [])  # skipped: no effect
        self.assertEqual(self.groups.join_cancels, 1)  # nobody will re-join from here
        self.assertEqual(len(self.core.produce_calls), 3)
        self.core.held[2].callback(None)
        self.assertEqual(len(self.core.logs[("t", 0)]), 3)
        self.assertEqual(self.tr.value(), b"")

    def test_idle_connection_is_closed(self) -> None:
        self.clock.advance(599)
        self.send(ApiKey.API_VERSIONS, 0, apis.ApiVersionsRequest())
        self.clock.advance(599)
        self.assertFalse(self.tr.disconnecting)
        self.clock.advance(2)
        self.assertTrue(self.tr.disconnecting)

    def test_parked_request_is_not_idle(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"))
        self.clock.advance(1000)
        self.assertFalse(self.tr.disconnecting)

    def test_incomplete_frame_times_out(self) -> None:
        self.proto.dataReceived(struct.pack(">i", 100) + b"abc")
        self.clock.advance(61)
        self.assertTrue(self.tr.disconnected)

    def test_handler_bug_closes_the_connection(self) -> None:
        def broken(*args: object, **kw: object) -> int:
            raise RuntimeError("bug")

        self.groups.heartbeat = broken  # type: ignore[method-assign]
        self.send(ApiKey.HEARTBEAT, 0, apis.HeartbeatRequest(
            group_id="g", generation_id=1, member_id="m"))
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnected)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_response_that_cannot_be_encoded_closes_the_connection(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"))
        self.groups.joins[0][2].callback(JoinResult(0, 1, "range", None, "m", []))  # type: ignore[arg-type]
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnected)
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)

    def test_client_host_reaches_the_coordinator(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 3, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=60000,
            member_id="", protocol_type="consumer",
            protocols=(apis.JoinGroupProtocol(name="range", metadata=b"M"),)))
        (args, kw, _) = self.groups.joins[0]
        self.assertEqual(args, ("g", ""))
        self.assertEqual(kw["client_host"], "/10.1.2.3")
        self.assertEqual(kw["client_id"], "test-client")
        self.assertEqual(kw["rebalance_timeout_ms"], 60000)
        self.assertEqual(kw["protocols"], [("range", b"M")])
        self.assertFalse(kw["require_known_member_id"])


# -- Metadata / FindCoordinator ------------------------------------------------------


class MetadataTests(KafkaTestCase):
    def test_all_topics_with_advertised_address_set_after_construction(self) -> None:
        self.core.add_topic("b", 2)
        self.core.add_topic("a")
        self.factory.advertised_host = "10.0.0.9"
        self.factory.advertised_port = 45678
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))
        resp = self.one()
        self.assertEqual(resp.brokers, (apis.MetadataBroker(
            node_id=0, host="10.0.0.9", port=45678, rack=None),))
        self.assertEqual(resp.controller_id, 0)
        self.assertIsNotNone(resp.cluster_id)
        self.assertEqual([t.name for t in resp.topics], ["a", "b"])
        p1 = resp.topics[1].partitions[1]
        self.assertEqual((p1.partition_index, p1.leader_id, p1.leader_epoch, p1.replica_nodes,
                          p1.isr_nodes), (1, 0, 0, (0,), (0,)))

    def test_v0_empty_list_means_all_but_v1_means_none(self) -> None:
        self.core.add_topic("a")
        self.send(ApiKey.METADATA, 0, apis.MetadataRequest(topics=()))
        self.assertEqual([t.name for t in self.one().topics], ["a"])
        self.send(ApiKey.METADATA, 1, apis.MetadataRequest(topics=()))
        self.assertEqual(self.one().topics, ())

    def test_auto_create(self) -> None:
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name="new"),), allow_auto_topic_creation=True))
        topic = self.one().topics[0]
        self.assertEqual((topic.error_code, topic.name, len(topic.partitions)), (0, "new", 1))
        self.assertIn("new", self.core.topics())

    def test_no_auto_create_when_the_client_says_no(self) -> None:
        self.send(ApiKey.METADATA, 4, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name="new"),), allow_auto_topic_creation=False))
        self.assertEqual(self.one().topics[0].error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertNotIn("new", self.core.topics())

    def test_no_auto_create_when_the_broker_says_no(self) -> None:
        self.core.auto_create_topics = False
        self.send(ApiKey.METADATA, 1, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name="new"),)))
        self.assertEqual(self.one().topics[0].error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def test_invalid_topic_name(self) -> None:
        self.send(ApiKey.METADATA, 5, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name="bad/name"),)))
        self.assertEqual(self.one().topics[0].error_code, ErrorCode.INVALID_TOPIC_EXCEPTION)

    def test_find_coordinator_is_this_broker(self) -> None:
        self.factory.advertised_port = 1234
        self.send(ApiKey.FIND_COORDINATOR, 2, apis.FindCoordinatorRequest(key="g", key_type=0))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.node_id, resp.host, resp.port),
                         (0, 0, "broker.example", 1234))
        # Key type 1: a transactional id; this node is its coordinator too.
        self.send(ApiKey.FIND_COORDINATOR, 1, apis.FindCoordinatorRequest(key="tx", key_type=1))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.node_id, resp.port), (0, 0, 1234))
        self.send(ApiKey.FIND_COORDINATOR, 2, apis.FindCoordinatorRequest(key="x", key_type=2))
        self.assertEqual(self.one().error_code, ErrorCode.INVALID_REQUEST)


# -- Produce -------------------------------------------------------------------------


class ProduceTests(KafkaTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t", 2)

    def partition(self) -> apis.ProducePartitionResponse:
        resp: apis.ProduceResponse = self.one()
        part: apis.ProducePartitionResponse = resp.responses[0].partition_responses[0]
        return part

    def test_stores_the_client_batch_as_it_arrived(self) -> None:
        data = batch(200, codec_id=3)
        self.produce("t", 1, data, acks=-1)
        part = self.partition()
        self.assertEqual((part.error_code, part.base_offset, part.log_start_offset), (0, 0, 0))
        self.assertEqual(self.core.produce_calls, [("t", 1, data, -1)])

    def test_acks_zero_gets_no_response_at_all(self) -> None:
        self.produce("t", 0, batch(), acks=0)
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(len(self.core.logs[("t", 0)]), 1)
        # The next request's response is the first thing on the wire.
        corr = self.send(ApiKey.API_VERSIONS, 0, apis.ApiVersionsRequest())
        self.assertEqual([c for c, _ in self.responses()], [corr])
        self.assertFalse(self.tr.disconnecting)

    def test_acks_zero_failure_closes_the_connection(self) -> None:
        self.produce("nope", 0, batch(), acks=0)
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnecting)

    def test_invalid_acks(self) -> None:
        self.produce("t", 0, batch(), acks=2)
        self.assertEqual(self.partition().error_code, ErrorCode.INVALID_REQUIRED_ACKS)
        self.assertEqual(self.core.produce_calls, [])

    def test_zstd_needs_produce_v7(self) -> None:
        self.produce("t", 0, batch(codec_id=4), version=6)
        self.assertEqual(self.partition().error_code, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        self.produce("t", 0, batch(codec_id=4), version=7)
        self.assertEqual(self.partition().error_code, 0)

    def test_transactional_produce_goes_to_the_core(self) -> None:
        self.produce("t", 0, batch(), transactional_id="tx")
        self.assertEqual(self.partition().error_code, 0)
        self.assertEqual(self.core.produce_calls, [("t", 0, batch(), 1)])

    def test_transactional_produce_refused_by_the_core(self) -> None:
        # The core's verifier: no ongoing transaction with this partition, or fenced.
        for exc, code in [
            (errors.InvalidTxnState("partition not in the transaction"),
             ErrorCode.INVALID_TXN_STATE),
            (errors.InvalidProducerEpoch("epoch 1 is older than 2"),
             ErrorCode.INVALID_PRODUCER_EPOCH),
        ]:
            self.core.produce_error = exc
            self.produce("t", 0, batch(), transactional_id="tx")
            part = self.partition()
            self.assertEqual((part.error_code, part.error_message), (code, str(exc)))

    def test_old_message_format_versions_refused(self) -> None:
        for version in (0, 1, 2):
            self.produce("t", 0, batch(), version=version)
            self.assertEqual(self.partition().error_code, ErrorCode.UNSUPPORTED_VERSION)
        self.assertEqual(self.core.produce_calls, [])

    def test_flexible_versions_produce_by_name(self) -> None:
        for version in (9, 10, 11, 12):
            self.produce("t", 1, batch(), version=version, acks=-1)
            resp: apis.ProduceResponse = self.one()
            self.assertEqual(resp.responses[0].name, "t")
            self.assertEqual(resp.responses[0].partition_responses[0].error_code, 0)
        self.assertEqual([c[:2] for c in self.core.produce_calls], [("t", 1)] * 4)

    def produce_by_id(self, topic_id: uuid.UUID, *, acks: int = 1, version: int = 13) -> int:
        return self.send(ApiKey.PRODUCE, version, apis.ProduceRequest(
            acks=acks, timeout_ms=30000,
            topic_data=(apis.ProduceTopicData(topic_id=topic_id, partition_data=(
                apis.ProducePartitionData(index=1, records=batch()),)),),
        ))

    def test_v13_produces_to_the_topic_the_id_names_and_answers_the_id(self) -> None:
        topic_id = self.core.topics()["t"].topic_id
        self.produce_by_id(topic_id)
        resp: apis.ProduceResponse = self.one()
        self.assertEqual(resp.responses[0].topic_id, topic_id)
        self.assertEqual(resp.responses[0].partition_responses[0].error_code, 0)
        self.assertEqual(self.core.produce_calls, [("t", 1, batch(), 1)])

    def test_v13_unknown_topic_id(self) -> None:
        for unknown in (uuid.uuid4(), codec.ZERO_UUID):
            self.produce_by_id(unknown)
            resp: apis.ProduceResponse = self.one()
            self.assertEqual(resp.responses[0].topic_id, unknown)
            part = resp.responses[0].partition_responses[0]
            self.assertEqual((part.index, part.error_code), (1, ErrorCode.UNKNOWN_TOPIC_ID))
        self.assertEqual(self.core.produce_calls, [])  # nothing auto-created or written
        self.assertEqual(sorted(self.core.topics()), ["t"])

    def test_v13_id_of_a_deleted_topic_is_unknown_even_if_the_name_is_reused(self) -> None:
        old_id = self.core.topics()["t"].topic_id
        self.core.delete_topic("t")
        self.core.add_topic("t", 2)
        self.produce_by_id(old_id)
        self.assertEqual(self.partition().error_code, ErrorCode.UNKNOWN_TOPIC_ID)
        self.assertEqual(self.core.produce_calls, [])

    def test_v13_acks_zero_to_an_unknown_id_closes(self) -> None:
        self.produce_by_id(uuid.uuid4(), acks=0)
        self.assertEqual(self.tr.value(), b"")
        self.assertTrue(self.tr.disconnecting)

    def test_null_records(self) -> None:
        self.produce("t", 0, None)
        self.assertEqual(self.partition().error_code, ErrorCode.CORRUPT_MESSAGE)

    def test_core_errors_become_codes(self) -> None:
        self.core.produce_error = errors.CorruptBatch("bad CRC")
        self.produce("t", 0, batch())
        part = self.partition()
        self.assertEqual((part.error_code, part.base_offset, part.error_message),
                         (ErrorCode.CORRUPT_MESSAGE, -1, "bad CRC"))
        self.core.produce_error = errors.OutOfOrderSequence("gap")
        self.produce("t", 0, batch())
        self.assertEqual(self.partition().error_code, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)

    def test_unexpected_core_failure_is_logged_and_answered(self) -> None:
        self.core.produce_error = RuntimeError("bug")
        self.produce("t", 0, batch())
        self.assertEqual(self.partition().error_code, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_unknown_partition(self) -> None:
        self.produce("t", 5, batch())
        self.assertEqual(self.partition().error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def test_acks_all_times_out_if_not_durable_in_time(self) -> None:
        self.core.hold_produce = True
        self.produce("t", 0, batch(), acks=-1, timeout_ms=1500)
        self.clock.advance(1.4)
        self.assertEqual(self.tr.value(), b"")
        self.clock.advance(0.2)
        self.assertEqual(self.partition().error_code, ErrorCode.REQUEST_TIMED_OUT)
        self.core.held[0].callback(None)  # the late result is dropped quietly
        self.assertEqual(self.tr.value(), b"")

    def test_many_partitions_in_one_request(self) -> None:
        self.core.add_topic("u", 1)
        self.send(ApiKey.PRODUCE, 8, apis.ProduceRequest(acks=1, timeout_ms=100, topic_data=(
            apis.ProduceTopicData(name="t", partition_data=(
                apis.ProducePartitionData(index=0, records=batch()),
                apis.ProducePartitionData(index=1, records=batch()),
            )),
            apis.ProduceTopicData(name="u", partition_data=(
                apis.ProducePartitionData(index=0, records=batch()),
            )),
        )))
        resp = self.one()
        self.assertEqual([(t.name, [p.index for p in t.partition_responses])
                          for t in resp.responses], [("t", [0, 1]), ("u", [0])])

    def test_batch_codecs_reads_each_header(self) -> None:
        data = batch(80, codec_id=1) + batch(100, codec_id=4) + b"\x00" * 5
        self.assertEqual(batch_codecs(data), [1, 4])


# -- Fetch ---------------------------------------------------------------------------


class FetchTests(KafkaTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t", 3)

    def test_reads_raw_bytes_with_truthful_offsets(self) -> None:
        self.core.logs[("t", 0)] = [batch(100), batch(100)]
        self.core.log_start[("t", 0)] = 0
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 1, 1000)]))
        part = self.one().responses[0].partitions[0]
        self.assertEqual((part.error_code, part.high_watermark, part.last_stable_offset,
                          part.log_start_offset, part.preferred_read_replica),
                         (0, 2, 2, 0, -1))
        self.assertEqual(part.records, batch(100))
        self.assertIsNone(part.aborted_transactions)

    def test_read_committed_gets_an_empty_aborted_list(self) -> None:
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], isolation=1))
        self.assertEqual(self.one().responses[0].partitions[0].aborted_transactions, ())

    def test_isolation_level_reaches_the_core(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)]
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], isolation=1))
        self.one()
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], isolation=0))
        self.one()
        self.assertEqual([c[4] for c in self.core.fetch_calls], [True, False])

    def test_read_committed_stops_at_the_lso_and_gets_the_aborted_list(self) -> None:
        # Offsets 0-3; a transaction of producer 7 aborted at 2 (first offset 1), and
        # an ongoing one from offset 3 holds the LSO there.
        self.core.logs[("t", 0)] = [batch(100, base_offset=i) for i in range(4)]
        self.core.lso[("t", 0)] = 3
        self.core.aborted[("t", 0)] = [(7, 1, 2)]
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], isolation=1))
        part = self.one().responses[0].partitions[0]
        self.assertEqual((part.high_watermark, part.last_stable_offset), (4, 3))
        self.assertEqual(part.records, b"".join(batch(100, base_offset=i) for i in range(3)))
        self.assertEqual(part.aborted_transactions,
                         (apis.AbortedTransaction(producer_id=7, first_offset=1),))
        # read_uncommitted: everything to the HW, the same LSO, and no aborted list.
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], isolation=0))
        part = self.one().responses[0].partitions[0]
        self.assertEqual((part.high_watermark, part.last_stable_offset), (4, 3))
        self.assertEqual(len(part.records), 400)
        self.assertIsNone(part.aborted_transactions)

    def test_read_committed_between_lso_and_hw_is_empty_not_out_of_range(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)] * 3
        self.core.lso[("t", 0)] = 1
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 2, 1000)], isolation=1))
        part = self.one().responses[0].partitions[0]
        self.assertEqual((part.error_code, part.records, part.last_stable_offset,
                          part.aborted_transactions), (0, b"", 1, ()))

    def test_read_committed_long_poll_counts_only_stable_bytes(self) -> None:
        # 300 bytes in the log but only 100 below the LSO: MinBytes 200 is not met.
        self.core.logs[("t", 0)] = [batch(100)] * 3
        self.core.lso[("t", 0)] = 1
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], isolation=1,
                                                       max_wait=500, min_bytes=200))
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(self.core.waits[0][3], 100)
        # The transaction commits (the LSO reaches the HW) and the wait wakes.
        del self.core.lso[("t", 0)]
        self.core.wait_deferreds[0].callback(None)
        part = self.one().responses[0].partitions[0]
        self.assertEqual((len(part.records), part.last_stable_offset), (300, 3))

    def test_offsets_only_partitions_report_the_lso(self) -> None:
        self.core.logs[("t", 0)] = [batch(300)]
        self.core.logs[("t", 1)] = [batch(100)] * 4
        self.core.lso[("t", 1)] = 2
        req = self.fetch_request([("t", 0, 0, 1000), ("t", 1, 0, 1000)], max_bytes=300,
                                 isolation=1)
        self.send(ApiKey.FETCH, 11, req)
        p0, p1 = self.one().responses[0].partitions
        self.assertEqual(len(p0.records), 300)
        self.assertEqual((p1.records, p1.high_watermark, p1.last_stable_offset,
                          p1.log_start_offset, p1.aborted_transactions), (b"", 4, 2, 0, ()))

    def test_offsets_only_partition_out_of_range(self) -> None:
        self.core.logs[("t", 0)] = [batch(300)]
        req = self.fetch_request([("t", 0, 0, 1000), ("t", 1, 9, 1000)], max_bytes=300)
        self.send(ApiKey.FETCH, 11, req)
        p1 = self.one().responses[0].partitions[1]
        self.assertEqual(p1.error_code, ErrorCode.OFFSET_OUT_OF_RANGE)

    def test_offset_out_of_range_answers_at_once(self) -> None:
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 5, 1000)], max_wait=500))
        part = self.one().responses[0].partitions[0]
        self.assertEqual((part.error_code, part.high_watermark, part.records),
                         (ErrorCode.OFFSET_OUT_OF_RANGE, -1, b""))
        self.assertEqual(self.core.waits, [])

    def test_unknown_topic(self) -> None:
        self.send(ApiKey.FETCH, 4, self.fetch_request([("nope", 0, 0, 1000)]))
        self.assertEqual(self.one().responses[0].partitions[0].error_code,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def test_max_bytes_first_partition_whole_batch_then_partial_then_offsets_only(self) -> None:
        self.core.logs[("t", 0)] = [batch(300)]
        self.core.logs[("t", 1)] = [batch(300)]
        self.core.logs[("t", 2)] = [batch(300)]
        req = self.fetch_request(
            [("t", 0, 0, 100), ("t", 1, 0, 1000), ("t", 2, 0, 1000)], max_bytes=400)
        self.send(ApiKey.FETCH, 11, req)
        p0, p1, p2 = self.one().responses[0].partitions
        self.assertEqual(p0.records, batch(300))       # beyond both limits: one whole batch
        self.assertEqual(p1.records, batch(300)[:100])  # cut at the response limit
        self.assertEqual((p2.records, p2.high_watermark, p2.error_code), (b"", 1, 0))

    def test_partition_limit_with_several_batches(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)] * 5
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 250)]))
        self.assertEqual(len(self.one().responses[0].partitions[0].records), 250)

    def test_long_poll_waits_across_all_partitions(self) -> None:
        req = self.fetch_request([("t", 0, 0, 1000), ("t", 1, 0, 1000)], max_wait=500,
                                 min_bytes=10)
        self.send(ApiKey.FETCH, 11, req)
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(self.core.waits, [([("t", 0, 0), ("t", 1, 0)], 10, 500, 0)])
        self.core.logs[("t", 1)].append(batch(100))
        self.core.wait_deferreds[0].callback(None)
        p0, p1 = self.one().responses[0].partitions
        self.assertEqual((p0.records, p1.records), (b"", batch(100)))

    def test_long_poll_counts_bytes_already_there(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)]
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], max_wait=500,
                                                       min_bytes=1000))
        self.assertEqual(self.core.waits[0][3], 100)

    def test_enough_data_answers_without_waiting(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)]
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], max_wait=500))
        self.assertEqual(self.one().responses[0].partitions[0].records, batch(100))
        self.assertEqual(self.core.waits, [])

    def test_long_poll_cancelled_on_disconnect(self) -> None:
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], max_wait=500))
        self.assertEqual(len(self.core.wait_deferreds), 1)
        self.proto.connectionLost(Failure(ConnectionError("gone")))
        self.assertEqual(self.core.cancelled_waits, 1)
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(len(self.core.fetch_calls), 1)  # no second read after cancel

    def test_too_many_waiters_answers_now(self) -> None:
        self.core.wait_error = errors.TooManyWaiters("busy")
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)], max_wait=500))
        self.assertEqual(self.one().responses[0].partitions[0].records, b"")


class FetchCapTests(KafkaTestCase):
    """The broker's ``--fetch-max-bytes`` and answer budget (``--max-inflight-answer-bytes``)."""

    CAP = 250

    def setUp(self) -> None:
        super().setUp()
        self.budget = AnswerBudget(1000)
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=4096, fetch_max_bytes=self.CAP),
            edge=ListenerEdge(answer_budget=self.budget),
        )
        self.proto, self.tr = self.connect()
        self.core.add_topic("t", 2)

    def test_the_broker_cap_bounds_what_the_client_asks_for(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)] * 5
        self.core.logs[("t", 1)] = [batch(100)] * 5
        everything = 2**31 - 1
        req = self.fetch_request(
            [("t", 0, 0, everything), ("t", 1, 0, everything)], max_bytes=everything
        )
        self.send(ApiKey.FETCH, 11, req)
        p0, p1 = self.one().responses[0].partitions
        self.assertEqual(len(p0.records), self.CAP)
        self.assertEqual(p1.records, b"")  # the cap is the whole answer's, not a partition's
        self.assertEqual(self.core.fetch_calls[0][3], self.CAP)

    def test_a_first_batch_larger_than_the_cap_still_comes_whole(self) -> None:
        self.core.logs[("t", 0)] = [batch(400), batch(100)]
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 2**31 - 1)],
                                                       max_bytes=2**31 - 1))
        self.assertEqual(self.one().responses[0].partitions[0].records, batch(400))

    def test_a_full_answer_budget_defers_the_read(self) -> None:
        self.core.logs[("t", 0)] = [batch(100)]
        self.budget.charge(1000)  # answers being sent hold all of it
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)]))
        self.assertEqual((self.core.fetch_calls, self.tr.value()), ([], b""))
        self.budget.give(1000)
        self.assertEqual(self.one().responses[0].partitions[0].records, batch(100))

    def test_closing_while_waiting_for_the_budget_forgets_the_wait(self) -> None:
        self.budget.charge(1000)
        self.send(ApiKey.FETCH, 11, self.fetch_request([("t", 0, 0, 1000)]))
        self.assertEqual(self.budget.waiting, 1)
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.budget.waiting, 0)
        self.assertEqual(self.core.fetch_calls, [])


# -- groups --------------------------------------------------------------------------


class GroupTests(KafkaTestCase):
    def test_join_v5_requires_known_member_id_and_passes_members(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=-1, member_id="",
            group_instance_id="inst", protocol_type="consumer"))
        (_, kw, d) = self.groups.joins[0]
        self.assertTrue(kw["require_known_member_id"])
        self.assertEqual(kw["group_instance_id"], "inst")
        d.callback(JoinResult(0, 3, "range", "m1", "m1", [("m1", "inst", b"meta")]))
        resp = self.one()
        self.assertEqual((resp.generation_id, resp.leader, resp.member_id), (3, "m1", "m1"))
        self.assertEqual(resp.members, (apis.JoinGroupMember(
            member_id="m1", group_instance_id="inst", metadata=b"meta"),))

    def test_join_v0_uses_session_timeout_for_rebalance(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 0, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=7000, member_id="", protocol_type="consumer"))
        self.assertEqual(self.groups.joins[0][1]["rebalance_timeout_ms"], 7000)

    def test_sync_heartbeat_leave(self) -> None:
        self.send(ApiKey.SYNC_GROUP, 3, apis.SyncGroupRequest(
            group_id="g", generation_id=1, member_id="m",
            assignments=(apis.SyncGroupAssignment(member_id="m", assignment=b"A"),)))
        self.assertEqual(self.one().assignment, b"A")
        self.send(ApiKey.HEARTBEAT, 1, apis.HeartbeatRequest(
            group_id="g", generation_id=99, member_id="m"))
        self.assertEqual(self.one().error_code, ErrorCode.REBALANCE_IN_PROGRESS)
        self.send(ApiKey.LEAVE_GROUP, 1, apis.LeaveGroupRequest(group_id="g", member_id="nobody"))
        self.assertEqual(self.one().error_code, ErrorCode.UNKNOWN_MEMBER_ID)

    def test_offset_commit_and_fetch(self) -> None:
        self.core.add_topic("t", 2)
        self.send(ApiKey.OFFSET_COMMIT, 7, apis.OffsetCommitRequest(
            group_id="g", generation_id=1, member_id="m", topics=(
                apis.OffsetCommitTopic(name="t", partitions=(
                    apis.OffsetCommitPartition(partition_index=0, committed_offset=5,
                                               committed_leader_epoch=0,
                                               committed_metadata="md"),
                    apis.OffsetCommitPartition(partition_index=9, committed_offset=1),
                )),
                apis.OffsetCommitTopic(name="nope", partitions=(
                    apis.OffsetCommitPartition(partition_index=0, committed_offset=1),)),
            )))
        resp = self.one()
        self.assertEqual(
            [[p.error_code for p in t.partitions] for t in resp.topics],
            [[0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]],
        )
        self.assertEqual(self.groups.commits,
                         [("g", 1, "m", [("t", 0, 5, 0, "md")])])
        self.send(ApiKey.OFFSET_FETCH, 5, apis.OffsetFetchRequest(group_id="g", topics=(
            apis.OffsetFetchTopic(name="t", partition_indexes=(0, 1)),)))
        parts = self.one().topics[0].partitions
        self.assertEqual([(p.partition_index, p.committed_offset, p.committed_leader_epoch,
                           p.metadata) for p in parts], [(0, 5, 0, "md"), (1, -1, -1, "")])
        self.send(ApiKey.OFFSET_FETCH, 2, apis.OffsetFetchRequest(group_id="g", topics=None))
        resp = self.one()
        self.assertEqual([(t.name, [p.partition_index for p in t.partitions])
                          for t in resp.topics], [("t", [0])])


# -- admin ---------------------------------------------------------------------------


class AdminTests(KafkaTestCase):
    def create(self, *topics: apis.CreatableTopic, validate_only: bool = False) -> list[Any]:
        self.send(ApiKey.CREATE_TOPICS, 4, apis.CreateTopicsRequest(
            topics=topics, validate_only=validate_only))
        return [(r.name, r.error_code) for r in self.one().topics]

    def test_create_topics(self) -> None:
        self.core.add_topic("exists")
        got = self.create(
            apis.CreatableTopic(name="a", num_partitions=3, replication_factor=1),
            apis.CreatableTopic(name="b", num_partitions=-1, replication_factor=-1),
            apis.CreatableTopic(name="exists", num_partitions=1, replication_factor=1),
            apis.CreatableTopic(name="c", num_partitions=1, replication_factor=3),
            apis.CreatableTopic(name="bad name", num_partitions=1, replication_factor=1),
            apis.CreatableTopic(name="d", num_partitions=0, replication_factor=1),
            apis.CreatableTopic(name="e", num_partitions=1, replication_factor=1, configs=(
                apis.CreatableTopicConfig(name="retention.ms", value="soon"),)),
            apis.CreatableTopic(name="f", assignments=(
                apis.CreatableReplicaAssignment(partition_index=0, broker_ids=(0,)),
                apis.CreatableReplicaAssignment(partition_index=1, broker_ids=(0,)))),
            apis.CreatableTopic(name="g", assignments=(
                apis.CreatableReplicaAssignment(partition_index=0, broker_ids=(5,)),)),
        )
        self.assertEqual(got, [
            ("a", 0), ("b", 0), ("exists", ErrorCode.TOPIC_ALREADY_EXISTS),
            ("c", ErrorCode.INVALID_REPLICATION_FACTOR),
            ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
            ("d", ErrorCode.INVALID_PARTITIONS), ("e", ErrorCode.INVALID_CONFIG), ("f", 0),
            ("g", ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ])
        self.assertEqual(self.core.created, [("a", 3), ("b", 1), ("f", 2)])

    def test_duplicate_names_and_validate_only(self) -> None:
        got = self.create(
            apis.CreatableTopic(name="x", num_partitions=1, replication_factor=1),
            apis.CreatableTopic(name="x", num_partitions=1, replication_factor=1),
            apis.CreatableTopic(name="y", num_partitions=1, replication_factor=1),
            validate_only=True,
        )
        self.assertEqual(got, [("x", ErrorCode.INVALID_REQUEST),
                               ("x", ErrorCode.INVALID_REQUEST), ("y", 0)])
        self.assertEqual(self.core.created, [])

    def test_delete_topics(self) -> None:
        self.core.add_topic("a")
        self.send(ApiKey.DELETE_TOPICS, 3, apis.DeleteTopicsRequest(topic_names=("a", "b")))
        self.assertEqual([(r.name, r.error_code) for r in self.one().responses],
                         [("a", 0), ("b", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
        self.assertEqual(self.core.deleted, ["a"])

    def test_init_producer_id(self) -> None:
        self.send(ApiKey.INIT_PRODUCER_ID, 1, apis.InitProducerIdRequest(transactional_id=None))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.producer_id, resp.producer_epoch), (0, 1001, 0))
        # Without a transaction coordinator a transactional id gets a fatal error.
        for version in range(5):
            self.send(ApiKey.INIT_PRODUCER_ID, version,
                      apis.InitProducerIdRequest(transactional_id="tx"))
            resp = self.one()
            self.assertEqual((resp.error_code, resp.producer_id),
                             (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1))

    def test_idempotent_init_producer_id_every_version_gets_a_new_id(self) -> None:
        # v3+ may name the current id and epoch (KIP-360): an idempotent producer still
        # gets a fresh id, epoch 0.
        got = []
        for version in range(5):
            self.send(ApiKey.INIT_PRODUCER_ID, version, apis.InitProducerIdRequest(
                transactional_id=None, producer_id=1001, producer_epoch=3))
            resp = self.one()
            got.append((resp.error_code, resp.producer_id, resp.producer_epoch))
        self.assertEqual(got, [(0, 1001 + i, 0) for i in range(5)])
