"""The registry service over a fake core: ready at once without ``_schemas``, the first
write creates it compacted and is answered once applied, a restart replays it, records
it cannot read are skipped and counted, and a deleted ``_schemas`` takes every schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from brokerd.registry.model import RegistryError, Schema, SchemaType
from brokerd.registry.service import SCHEMAS_TOPIC, SchemaRegistry, State
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import AppendInfo, LogRead, ReadSpec

from tests.fake_core import FakeCore


class RegistryCore(FakeCore):
    """FakeCore with decoded reads (one record per batch, its offset the batch's index)
    and a produce that wakes the tail's long poll."""

    def read(  # type: ignore[override]
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> defer.Deferred[LogRead]:
        try:
            log = self._log(topic, partition)
        except Exception:
            return defer.fail()
        decoded = []
        for index in range(offset, len(log)):
            [record] = decode_records(log[index], max_uncompressed=1 << 20)
            decoded.append(record.__class__(index, record.timestamp, record.key, record.value))
        return defer.succeed(LogRead(b"", len(log), 0, len(log), decoded=tuple(decoded)))

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int = -1
    ) -> defer.Deferred[AppendInfo]:
        answer = super().produce_batches(topic, partition, data, acks=acks)
        waiting, self.wait_deferreds = self.wait_deferreds, []
        for d in waiting:
            d.callback(None)
        return answer


class Parsed:
    schema_type = SchemaType.JSON

    def __init__(self, text: str) -> None:
        self.text = text

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        return self.text

    def incompatibilities(self, writer: Any) -> list[str]:
        return []


class Format:
    schema_type = SchemaType.JSON

    def parse(self, text: str, references: Mapping[str, str]) -> Parsed:
        return Parsed(text)


def schema(text: str) -> Schema:
    return Schema(SchemaType.JSON, text)


class SchemaRegistryTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = RegistryCore()
        self.clock = Clock()
        self.ready_calls = 0

    def start(self) -> SchemaRegistry:
        def ready() -> None:
            self.ready_calls += 1

        registry = SchemaRegistry(self.core, clock=self.clock, on_ready=ready,  # type: ignore[arg-type]
                                  formats=lambda t: Format())  # type: ignore[arg-type,return-value]
        registry.startService()
        self.addCleanup(registry.stopService)
        return registry

    def test_without_the_topic_it_is_ready_and_the_first_write_creates_it(self) -> None:
        registry = self.start()
        self.assertTrue(registry.ready)
        self.assertEqual(self.ready_calls, 1)
        self.assertNotIn(SCHEMAS_TOPIC, self.core.topics())
        first = self.successResultOf(registry.register("s-value", schema('{"a": 1}')))
        self.assertEqual((first.subject, first.version), ("s-value", 1))
        self.assertEqual(dict(self.core.topics()[SCHEMAS_TOPIC].configs),
                         {"cleanup.policy": "compact"})
        second = self.successResultOf(registry.register("s-value", schema('{"a": 2}')))
        self.assertEqual(second.version, 2)
        self.assertNotEqual(second.schema_id, first.schema_id)
        # The same text again is the same version, nothing written.
        produced = len(self.core.produce_calls)
        again = self.successResultOf(registry.register("s-value", schema('{"a": 1}')))
        self.assertEqual(again, first)
        self.assertEqual(len(self.core.produce_calls), produced)
        self.assertEqual(self.ready_calls, 1)

    def test_a_restart_replays_the_topic(self) -> None:
        first = self.start()
        registered = self.successResultOf(first.register("s-value", schema('{"a": 1}')))
        self.successResultOf(defer.maybeDeferred(first.stopService))
        second = self.start()
        self.assertTrue(second.ready)
        self.assertEqual(second.latest("s-value"), registered)
        self.assertEqual(second.schema_by_id(registered.schema_id), registered.schema)

    def test_an_unreadable_record_is_skipped_and_counted(self) -> None:
        self.core.add_topic(SCHEMAS_TOPIC, 1)
        self.core.logs[(SCHEMAS_TOPIC, 0)].append(
            bytes(encode_batch([b"{nonsense"], keys=[b"{also nonsense"], timestamp_ms=1)))
        registry = self.start()
        self.assertTrue(registry.ready)
        self.assertEqual(registry.unreadable, 1)
        self.assertEqual(registry.subjects(), [])
        registered = self.successResultOf(registry.register("s", schema("{}")))
        self.assertEqual(registry.latest("s"), registered)

    def test_not_ready_is_50002_and_stopped_is_50003(self) -> None:
        registry = SchemaRegistry(self.core, clock=self.clock)  # type: ignore[arg-type]
        self.assertEqual(registry.status, State.STARTING)
        with self.assertRaises(RegistryError) as caught:
            registry.check_ready()
        self.assertEqual((caught.exception.http_status, caught.exception.error_code),
                         (503, 50002))
        registry.startService()
        registry.stopService()
        failure = self.failureResultOf(registry.register("s", schema("{}")), RegistryError)
        self.assertEqual(failure.value.error_code, 50002)
        self.assertIn("stopped", failure.value.message)

    def test_a_deleted_topic_takes_every_schema(self) -> None:
        registry = self.start()
        self.successResultOf(registry.register("s", schema("{}")))
        self.core.delete_topic(SCHEMAS_TOPIC)
        del self.core.logs[(SCHEMAS_TOPIC, 0)]  # its partition goes with it
        waiting, self.core.wait_deferreds = self.core.wait_deferreds, []
        for d in waiting:
            d.callback(None)
        self.assertEqual(registry.subjects(), [])
        self.assertIsNone(registry.latest("s"))
