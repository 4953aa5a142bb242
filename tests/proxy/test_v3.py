"""REST Proxy v3's cluster, topic and produce handlers over a fake core: the one
cluster, topics as the principal may see them, a create's checks, and a produce stream
whose records are answered one by one."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.proxy.access import Access
from brokerd.proxy.context import DEFAULT_CLUSTER_ID, ProxyContext
from brokerd.proxy.errors import ProxyError, topic_not_found
from brokerd.proxy.http import Answer, Call
from brokerd.proxy.limits import ProxyLimits
from brokerd.proxy.produce import OutRecord, Placed
from brokerd.proxy.v3 import V3Api
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

from tests.fake_core import FakeCore

ALICE = "User:alice"
CID = DEFAULT_CLUSTER_ID


class Appender:
    def __init__(self, core: FakeCore) -> None:
        self.core = core
        self.appended: list[OutRecord] = []

    async def topic(self, topic: str) -> Any:
        info = self.core.topics().get(topic)
        if info is None:
            raise topic_not_found(topic)
        return info

    async def append(
        self, topic: str, records: Sequence[OutRecord], *, partition: int | None = None
    ) -> list[Placed]:
        placed = []
        for record in records:
            self.appended.append(record)
            placed.append(Placed(record.partition or 0, len(self.appended) - 1,
                                 timestamp_ms=record.timestamp_ms or 1_700_000_000_123))
        return placed


class V3ApiTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = FakeCore()
        self.core.add_topic("orders", 2)
        self.core.add_topic("secret", 1)
        self.appender = Appender(self.core)
        none: Any = None
        self.api = V3Api(ProxyContext(self.core, none, none, self.appender, none,  # type: ignore[arg-type]
                                      ProxyLimits(max_records_per_produce=3), kafka_port=9))

    def call(self, body: bytes = b"", acls: list[AclBinding] | None = None) -> Call:
        access = Access(None if acls is None else AclAuthorizer(acls), ALICE, "h")
        return Call("POST", (), {}, body, "application/json", None, access, "http://p", "h")

    def answer(self, handler: Any, *args: Any) -> Answer:
        result: Answer = self.successResultOf(defer.Deferred.fromCoroutine(handler(*args)))
        return result

    def refusal(self, handler: Any, *args: Any) -> ProxyError:
        failure = self.failureResultOf(defer.Deferred.fromCoroutine(handler(*args)), ProxyError)
        error: ProxyError = failure.value
        return error

    def test_the_one_cluster_and_broker(self) -> None:
        listed = self.answer(self.api.clusters, self.call()).body
        assert isinstance(listed, dict)
        self.assertEqual([c["cluster_id"] for c in listed["data"]], [CID])
        broker = self.answer(self.api.broker, self.call(), CID, "0").body
        assert isinstance(broker, dict)
        self.assertEqual((broker["host"], broker["port"]), ("127.0.0.1", 9))
        self.assertEqual(self.refusal(self.api.cluster, self.call(), "other").http_status, 404)
        self.assertEqual(self.refusal(self.api.broker, self.call(), CID, "1").http_status, 404)

    def test_topics_are_listed_as_the_principal_may_see_them(self) -> None:
        describe = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, ALICE, "*",
                              Operation.DESCRIBE, Permission.ALLOW)
        listed = self.answer(self.api.topics, self.call(acls=[describe]), CID).body
        assert isinstance(listed, dict)
        self.assertEqual([(t["topic_name"], t["partitions_count"]) for t in listed["data"]],
                         [("orders", 2)])
        self.assertEqual(
            self.refusal(self.api.topic, self.call(acls=[describe]), CID, "secret").error_code,
            40401)
        for bad in ("2", "x"):
            error = self.refusal(self.api.partition, self.call(), CID, "orders", bad)
            self.assertEqual(error.error_code, 40402)

    def test_create_topic_checks_its_body(self) -> None:
        def create(body: object) -> Any:
            return defer.Deferred.fromCoroutine(
                self.api.create_topic(self.call(json.dumps(body).encode()), CID))

        made = self.successResultOf(create({"topic_name": "new", "partitions_count": 3,
                                            "configs": [{"name": "retention.ms",
                                                         "value": 5}]}))
        self.assertEqual(made.status, 201)
        self.assertEqual(self.core.topics()["new"].configs, {"retention.ms": "5"})
        for body, code in (
            ({"partitions_count": 1}, 422),
            ({"topic_name": "x", "partitions_count": 0}, 422),
            ({"topic_name": "x", "replication_factor": 3}, 40002),
            ({"topic_name": "new"}, 40002),
            ({"topic_name": "x", "configs": "no"}, 422),
        ):
            error = self.failureResultOf(create(body), ProxyError).value
            self.assertEqual(error.error_code, code, body)
        self.assertEqual(sorted(self.core.topics()), ["new", "orders", "secret"])

    def test_a_produce_stream_is_answered_record_by_record(self) -> None:
        stream = b"".join(json.dumps(r).encode() + b"\n" for r in (
            {"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": [1]},
             "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}],
             "timestamp": "2024-01-02T03:04:05.678Z", "partition_id": 1},
            {"value": {"type": "NOPE", "data": 1}},
            {"value": {"type": "BINARY", "data": base64.b64encode(b"raw").decode()}},
        ))
        answer = self.answer(self.api.produce, self.call(stream), CID, "orders")
        assert answer.raw is not None
        first, second, third = (json.loads(line) for line in
                                answer.raw.replace(b"}{", b"}\n{").splitlines())
        self.assertEqual((first["error_code"], first["partition_id"], first["offset"]),
                         (200, 1, 0))
        self.assertEqual(first["timestamp"], "2024-01-02T03:04:05.678Z")
        self.assertEqual(first["key"], {"type": "STRING", "size": 1})
        self.assertEqual(second["error_code"], 422)
        self.assertEqual(third["value"], {"type": "BINARY", "size": 3})
        self.assertEqual(self.appender.appended[0], OutRecord(
            b"k", b"[1]", 1, (("h", b"hv"),), 1704164645678))
        self.assertEqual(self.appender.appended[1].value, b"raw")

    def test_a_single_record_failing_sets_the_status_and_streams_are_bounded(self) -> None:
        one = self.answer(self.api.produce, self.call(b'{"value": 5}'), CID, "orders")
        self.assertEqual(one.status, 422)
        too_many = b'{"value": null}' * 4
        self.assertEqual(self.refusal(self.api.produce, self.call(too_many), CID,
                                      "orders").http_status, 422)
        self.assertEqual(self.refusal(self.api.produce, self.call(b"{}"), CID,
                                      "missing").error_code, 40401)
        self.assertEqual(self.appender.appended, [])
