"""CreatePartitions, DeleteRecords and DescribeLogDirs through the Kafka protocol, on a real
Broker over a real data directory (synchronous runners, ``task.Clock``, StringTransport),
and the timeout path on a fake core."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.broker import Broker
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.handlers.partitions import PartitionAdminHandlers
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.logdir.registry import read_registry
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import LogDirUsage, TopicInfo

from tests.kafka.listener.test_protocol import FakeCoordinator, KafkaTestCase, temp_dir


class RealBrokerCase(KafkaTestCase):
    """The Kafka harness of test_kafka_protocol, over a real Broker and data directory."""

    def setUp(self) -> None:
        # trial's mktemp() would create directories under the current directory.
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-partition-admin-")
        self.addCleanup(tmp.cleanup)
        self.data = os.path.join(tmp.name, "data")
        self.logdir = LogDirectory.open(self.data, LogConfig(segment_bytes=400))
        self.clock = task.Clock()
        self.broker = Broker(
            self.logdir, reactor=self.clock,  # type: ignore[arg-type]
            run_read=defer.maybeDeferred, run_write=defer.maybeDeferred,
            retention_check_seconds=0, checkpoint_seconds=0,
        )
        self.broker.startService()
        self.groups = FakeCoordinator(temp_dir(self))
        self.addCleanup(self.groups.close)
        self.factory = KafkaFactory(
            self.broker, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="127.0.0.1", advertised_port=9092,
        )
        self.proto, self.tr = self.connect()
        self._correlation = 0
        self._sent: dict[int, tuple[ApiKey, int]] = {}
        self.addCleanup(self.broker.stopService)

    def create(self, name: str, partitions: int) -> None:
        self.successResultOf(self.broker.create_topic(name, partitions))

    def produce_values(self, topic: str, partition: int, count: int) -> None:
        for i in range(count):
            # Keyed, so that a compacted topic accepts them too.
            batch = encode_batch([b"v%d" % i], timestamp_ms=1000 + i, keys=[b"k%d" % i])
            self.produce(topic, partition, batch)
            self.assertEqual(self.one().responses[0].partition_responses[0].error_code, 0)

    def grow(self, *topics: apis.CreatePartitionsTopic, validate_only: bool = False,
             version: int = 1) -> list[tuple[str, int, str | None]]:
        self.send(ApiKey.CREATE_PARTITIONS, version, apis.CreatePartitionsRequest(
            topics=topics, timeout_ms=5000, validate_only=validate_only))
        return [(r.name, r.error_code, r.error_message) for r in self.one().results]

    def delete(self, topic: str, *parts: tuple[int, int],
               version: int = 1) -> list[tuple[int, int, int]]:
        self.send(ApiKey.DELETE_RECORDS, version, apis.DeleteRecordsRequest(
            topics=(apis.DeleteRecordsTopic(name=topic, partitions=tuple(
                apis.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts)),),
            timeout_ms=5000))
        (result,) = self.one().topics
        self.assertEqual(result.name, topic)
        return [(r.partition_index, r.low_watermark, r.error_code) for r in result.partitions]

    def earliest(self, topic: str, partition: int) -> int:
        self.send(ApiKey.LIST_OFFSETS, 5, apis.ListOffsetsRequest(topics=(
            apis.ListOffsetsTopic(name=topic, partitions=(
                apis.ListOffsetsPartition(partition_index=partition, timestamp=-2),)),)))
        part = self.one().topics[0].partitions[0]
        self.assertEqual(part.error_code, 0)
        return int(part.offset)

    def fetch_at(self, topic: str, partition: int, offset: int) -> apis.FetchPartitionResponse:
        self.send(ApiKey.FETCH, 11, self.fetch_request([(topic, partition, offset, 1 << 20)]))
        return self.one().responses[0].partitions[0]  # type: ignore[no-any-return]


def topic(name: str, count: int, assignments: Any = None) -> apis.CreatePartitionsTopic:
    return apis.CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if assignments is None else tuple(
            apis.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments))


class CreatePartitionsTests(RealBrokerCase):
    def test_advertised(self) -> None:
        self.send(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
        got = {r.api_key: (r.min_version, r.max_version) for r in self.one().api_keys}
        self.assertEqual((got[37], got[21], got[35]), ((0, 3), (0, 2), (1, 5)))

    def test_grow_then_metadata_produce_fetch(self) -> None:
        self.create("t", 2)
        self.assertEqual(self.grow(topic("t", 4), version=0), [("t", 0, None)])
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name="t"),)))
        parts = self.one().topics[0].partitions
        self.assertEqual([p.partition_index for p in parts], [0, 1, 2, 3])
        self.produce_values("t", 3, 2)
        fetched = self.fetch_at("t", 3, 0)
        self.assertEqual((fetched.error_code, fetched.high_watermark), (0, 2))
        # Durable: the registry on disk (snapshot and journal) says 4.
        self.assertEqual(read_registry(self.data)["t"].partitions, 4)

    def test_errors(self) -> None:
        self.create("t", 3)
        got = self.grow(topic("t", 3), topic("u", 2), topic("t2", 1))
        self.assertEqual([(n, c) for n, c, _ in got], [
            ("t", ErrorCode.INVALID_PARTITIONS),
            ("u", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("t2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ])
        self.assertEqual(got[0][2], "Topic already has 3 partitions.")
        (got1,) = self.grow(topic("t", 2))
        self.assertEqual(got1[1], ErrorCode.INVALID_PARTITIONS)
        self.assertIn("higher than the requested 2", got1[2] or "")
        self.assertEqual(self.grow(topic("t", 5), topic("t", 6))[0][1], ErrorCode.INVALID_REQUEST)
        self.assertEqual(self.grow(topic("t", 10**6))[0][1], ErrorCode.INVALID_PARTITIONS)
        self.assertEqual(self.broker.topic_registry.topics()["t"].partitions, 3)

    def test_assignments(self) -> None:
        self.create("t", 1)
        self.assertEqual(self.grow(topic("t", 3, [[0]]))[0][1],
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        self.assertEqual(self.grow(topic("t", 3, [[0], [1]]))[0][1],
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        self.assertEqual(self.grow(topic("t", 3, [[0], [0, 0]]))[0][1],
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        self.assertEqual(self.broker.topic_registry.topics()["t"].partitions, 1)
        self.assertEqual(self.grow(topic("t", 3, [[0], [0]])), [("t", 0, None)])
        self.assertEqual(self.broker.topic_registry.topics()["t"].partitions, 3)

    def test_validate_only(self) -> None:
        self.create("t", 1)
        self.assertEqual(self.grow(topic("t", 5), validate_only=True), [("t", 0, None)])
        self.assertEqual(self.broker.topic_registry.topics()["t"].partitions, 1)
        self.assertEqual(self.grow(topic("t", 1), validate_only=True)[0][1],
                         ErrorCode.INVALID_PARTITIONS)
        self.assertFalse(os.path.exists(os.path.join(self.data, "t-1")))


class DeleteRecordsTests(RealBrokerCase):
    def test_delete_then_list_offsets_and_fetch(self) -> None:
        self.create("d", 2)
        self.produce_values("d", 0, 10)
        self.assertEqual(self.delete("d", (0, 4), version=0), [(0, 4, 0)])
        self.assertEqual(self.earliest("d", 0), 4)
        self.assertEqual(self.fetch_at("d", 0, 2).error_code, ErrorCode.OFFSET_OUT_OF_RANGE)
        at = self.fetch_at("d", 0, 4)
        self.assertEqual((at.error_code, at.log_start_offset), (0, 4))
        # Below the start: nothing moves; -1: the high watermark.
        self.assertEqual(self.delete("d", (0, 1)), [(0, 4, 0)])
        self.assertEqual(self.delete("d", (0, -1), (1, -1)), [(0, 10, 0), (1, 0, 0)])
        self.assertEqual(self.earliest("d", 0), 10)

    def test_errors(self) -> None:
        self.create("d", 1)
        self.produce_values("d", 0, 3)
        self.assertEqual(self.delete("d", (0, 4), (0, -5), (7, 0)), [
            (0, -1, ErrorCode.OFFSET_OUT_OF_RANGE),
            (0, -1, ErrorCode.OFFSET_OUT_OF_RANGE),
            (7, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ])
        self.assertEqual(self.delete("nosuch", (0, 0)),
                         [(0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
        self.assertEqual(self.earliest("d", 0), 0)

    def test_compacted_topic_is_a_policy_violation(self) -> None:
        self.logdir.default_config = LogConfig(cleanup_policy={"compact"})
        self.create("c", 1)
        self.produce_values("c", 0, 2)
        self.assertEqual(self.delete("c", (0, 1)), [(0, -1, ErrorCode.POLICY_VIOLATION)])


class DescribeLogDirsTests(RealBrokerCase):
    def describe(self, topics: Any, version: int = 1) -> apis.DescribeLogDirsResult:
        self.send(ApiKey.DESCRIBE_LOG_DIRS, version, apis.DescribeLogDirsRequest(topics=topics))
        (result,) = self.one().results
        return result  # type: ignore[no-any-return]

    def test_all_and_filtered(self) -> None:
        self.create("a", 2)
        self.create("b", 1)
        self.produce_values("a", 1, 3)
        result = self.describe(None, version=1)
        self.assertEqual((result.error_code, result.log_dir), (0, os.path.abspath(self.data)))
        # v1 has no volume sizes: they decode as unknown.
        self.assertEqual((result.total_bytes, result.usable_bytes), (-1, -1))
        sizes = {(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                 for t in result.topics for p in t.partitions}
        self.assertEqual(set(sizes), {("a", 0), ("a", 1), ("b", 0)})
        self.assertGreater(sizes[("a", 1)][0], 0)
        self.assertEqual(sizes[("a", 0)], (0, 0, False))
        result = self.describe((
            apis.DescribableLogDirTopic(topic="a", partitions=(1, 5)),
            apis.DescribableLogDirTopic(topic="nosuch", partitions=(0,)),
        ))
        self.assertEqual([(t.name, [p.partition_index for p in t.partitions])
                          for t in result.topics], [("a", [1])])

    def test_v4_volume_sizes_from_the_data_directory_filesystem(self) -> None:
        self.create("a", 1)
        self.produce_values("a", 0, 3)
        for version in (2, 3, 4):
            self.send(ApiKey.DESCRIBE_LOG_DIRS, version,
                      apis.DescribeLogDirsRequest(topics=None))
            resp = self.one()
            self.assertEqual(resp.error_code, 0)
            (result,) = resp.results
            self.assertEqual([t.name for t in result.topics], ["a"])
        fs = os.statvfs(self.data)
        self.assertEqual(result.total_bytes, fs.f_blocks * fs.f_frsize)
        # Free space moves with everything else on the machine: within 64 MiB of now.
        self.assertAlmostEqual(result.usable_bytes, fs.f_bavail * fs.f_frsize,
                               delta=64 << 20)
        self.assertGreater(result.usable_bytes, 0)
        self.assertLessEqual(result.usable_bytes, result.total_bytes)


# -- timeouts, on a fake core ----------------------------------------------------------


class HeldCore:
    """Never finishes: the handlers' timeout answers."""

    def __init__(self) -> None:
        self.held: list[defer.Deferred[Any]] = []

    def topics(self) -> Mapping[str, TopicInfo]:
        return {"t": TopicInfo("t", 1)}

    def create_partitions(self, topic: str, new_total: int) -> defer.Deferred[TopicInfo]:
        d: defer.Deferred[TopicInfo] = defer.Deferred()
        self.held.append(d)
        return d

    def delete_records(self, topic: str, partition: int, before: int) -> defer.Deferred[int]:
        d: defer.Deferred[int] = defer.Deferred()
        self.held.append(d)
        return d

    @property
    def storage(self) -> HeldCore:
        return self

    @property
    def topic_registry(self) -> HeldCore:
        return self

    def describe_log_dirs(self) -> LogDirUsage:
        return LogDirUsage("/data", {})


class Identity:
    node_id = 0
    advertised_host = "h"
    advertised_port = 1
    cluster_id = "c"


class TimeoutTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = HeldCore()
        self.clock = task.Clock()
        self.handlers = PartitionAdminHandlers(self.core, Identity(), clock=self.clock)

    def call(self, method: Any, key: ApiKey, body: Any) -> defer.Deferred[Any]:
        req = apis.Request(RequestHeader(int(key), 1, 1, "c"), body)
        return defer.Deferred.fromCoroutine(method(RequestContext("/x"), req))

    def test_create_partitions_times_out(self) -> None:
        d = self.call(self.handlers.create_partitions, ApiKey.CREATE_PARTITIONS,
                      apis.CreatePartitionsRequest(topics=(topic("t", 2),), timeout_ms=1000))
        self.assertNoResult(d)
        self.clock.advance(1.0)
        (result,) = self.successResultOf(d).results
        self.assertEqual(result.error_code, ErrorCode.REQUEST_TIMED_OUT)
        # The late completion is dropped quietly.
        self.core.held[0].callback(TopicInfo("t", 2))

    def test_delete_records_times_out(self) -> None:
        d = self.call(self.handlers.delete_records, ApiKey.DELETE_RECORDS,
                      apis.DeleteRecordsRequest(topics=(apis.DeleteRecordsTopic(
                          name="t", partitions=(apis.DeleteRecordsPartition(
                              partition_index=0, offset=1),)),), timeout_ms=500))
        self.clock.advance(0.5)
        (part,) = self.successResultOf(d).topics[0].partitions
        self.assertEqual((part.low_watermark, part.error_code),
                         (-1, ErrorCode.REQUEST_TIMED_OUT))

    def test_zero_timeout_waits(self) -> None:
        d = self.call(self.handlers.delete_records, ApiKey.DELETE_RECORDS,
                      apis.DeleteRecordsRequest(topics=(apis.DeleteRecordsTopic(
                          name="t", partitions=(apis.DeleteRecordsPartition(
                              partition_index=0, offset=1),)),), timeout_ms=0))
        self.clock.advance(100)
        self.assertNoResult(d)
        self.core.held[0].callback(1)
        (part,) = self.successResultOf(d).topics[0].partitions
        self.assertEqual((part.low_watermark, part.error_code), (1, 0))

