"""REST Proxy v2's metadata and produce handlers over a fake core: topics only as the
principal may see them, configs only with DESCRIBE_CONFIGS, Confluent's 404s, and a
produce's records encoded by their embedded format and handed to the appender."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.proxy.access import Access
from brokerd.proxy.context import ProxyContext
from brokerd.proxy.errors import ProxyError
from brokerd.proxy.http import Answer, Call
from brokerd.proxy.limits import ProxyLimits
from brokerd.proxy.produce import OutRecord, Placed
from brokerd.proxy.v2 import V2Api
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


def allow(operation: Operation, topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, ALICE, "*", operation,
                      Permission.ALLOW)


class Appender:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[OutRecord], int | None]] = []

    async def append(
        self, topic: str, records: Sequence[OutRecord], *, partition: int | None = None
    ) -> list[Placed]:
        self.calls.append((topic, list(records), partition))
        return [Placed(partition or 0, offset) for offset, _r in enumerate(records)]


class V2ApiTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = FakeCore()
        self.core.add_topic("orders", 2)
        self.core.add_topic("secret", 1)
        self.appender = Appender()
        inspector = SimpleNamespace(
            topic=lambda name: SimpleNamespace(configs={"retention.ms": "5"})
        )
        none: Any = None
        self.api = V2Api(ProxyContext(
            self.core, inspector, none, self.appender, none, ProxyLimits(  # type: ignore[arg-type]
                max_records_per_produce=3)))

    def call(self, body: object = None, *, acls: list[AclBinding] | None = None,
             content_type: str = "application/vnd.kafka.json.v2+json") -> Call:
        access = Access(None if acls is None else AclAuthorizer(acls), ALICE, "h")
        raw = b"" if body is None else json.dumps(body).encode()
        return Call("POST", (), {}, raw, content_type, None, access, "http://x", "h")

    def answer(self, handler: Any, *args: Any) -> Answer:
        result: Answer = self.successResultOf(defer.Deferred.fromCoroutine(handler(*args)))
        return result

    def refusal(self, handler: Any, *args: Any) -> ProxyError:
        failure = self.failureResultOf(defer.Deferred.fromCoroutine(handler(*args)), ProxyError)
        error: ProxyError = failure.value
        return error

    def test_topics_are_listed_and_described_as_the_principal_may(self) -> None:
        self.assertEqual(self.answer(self.api.list_topics, self.call()).body, ["orders", "secret"])
        seeing = self.call(acls=[allow(Operation.DESCRIBE, "orders")])
        self.assertEqual(self.answer(self.api.list_topics, seeing).body, ["orders"])
        described = self.answer(self.api.get_topic, seeing, "orders").body
        assert isinstance(described, dict)
        self.assertEqual(described["configs"], {})  # no DESCRIBE_CONFIGS
        self.assertEqual([p["partition"] for p in described["partitions"]], [0, 1])
        full = self.answer(self.api.get_topic, self.call(), "orders").body
        assert isinstance(full, dict)
        self.assertEqual(full["configs"], {"retention.ms": "5"})
        self.assertEqual(self.refusal(self.api.get_topic, seeing, "secret").error_code, 40401)

    def test_partitions_and_their_offsets(self) -> None:
        self.core.logs[("orders", 1)].extend([b"a", b"b"])
        offsets = self.answer(self.api.offsets, self.call(), "orders", "1").body
        self.assertEqual(offsets, {"beginning_offset": 0, "end_offset": 2})
        for bad in ("2", "x", "-1"):
            error = self.refusal(self.api.get_partition, self.call(), "orders", bad)
            self.assertEqual((error.http_status, error.error_code), (404, 40402))
        self.assertEqual(self.answer(self.api.brokers, self.call()).body, {"brokers": [0]})

    def test_a_produce_encodes_json_records_for_the_appender(self) -> None:
        body = {"records": [{"key": {"k": 1}, "value": [1, "x"]}, {"value": None,
                                                                   "partition": 1}]}
        answer = self.answer(self.api.produce_partition, self.call(body), "orders", "1")
        [(topic, records, partition)] = self.appender.calls
        self.assertEqual((topic, partition), ("orders", 1))
        self.assertEqual(records, [OutRecord(b'{"k":1}', b'[1,"x"]', None),
                                   OutRecord(None, None, 1)])
        assert isinstance(answer.body, dict)
        self.assertEqual([o["offset"] for o in answer.body["offsets"]], [0, 1])
        self.assertIsNone(answer.body["value_schema_id"])

    def test_a_bad_produce_is_refused_before_anything_is_appended(self) -> None:
        cases = [
            (self.call({"records": [{}]} , content_type="application/json"), 415),
            (self.call({"records": [{"value": 1}]} , acls=[]), 403),
            (self.call({"records": "no"}), 422),
            (self.call({"records": [{}] * 4}), 422),
            (self.call({"records": [{"value": 1, "partition": "0"}]}), 422),
            (self.call({"records": [{"value": "x"}]},
                       content_type="application/vnd.kafka.binary.v2+json"), 422),
            (self.call({"records": [{"value": 1}]},
                       content_type="application/vnd.kafka.avro.v2+json"), 422),
        ]
        for call, status in cases:
            error = self.refusal(self.api.produce, call, "orders")
            self.assertEqual(error.http_status, status, error.message)
        self.assertEqual(self.appender.calls, [])
