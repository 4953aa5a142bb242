"""The Produce handler's common case (one topic, one partition, acks 1 or all, appended
at once) is answered by a fired Deferred without a coroutine, with the same answer as
the general path; an append still running or failed takes the general path's answer."""

from __future__ import annotations

from types import CoroutineType

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import InvalidRecord
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.handlers.produce import ProduceHandler
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis

from tests.fake_core import FakeCore


def request(
    parts: int = 1, *, acks: int = -1, version: int = 9, records: bytes | None = b"batch",
    topic: str = "t",
) -> apis.Request[apis.ProduceRequest]:
    body = apis.ProduceRequest(acks=acks, timeout_ms=1000, topic_data=(
        apis.ProduceTopicData(name=topic, partition_data=tuple(
            apis.ProducePartitionData(index=i, records=records) for i in range(parts))),))
    return apis.Request(RequestHeader(int(ApiKey.PRODUCE), version, 1, "c"), body)


class ProduceFastPathTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = FakeCore()
        self.core.create_topic("t", 2)
        self.handler = ProduceHandler(self.core, clock=Clock())

    def answer(self, req: apis.Request[apis.ProduceRequest]) -> object:
        d = self.handler.produce(RequestContext("/x"), req)
        self.assertIsInstance(d, defer.Deferred)
        return self.successResultOf(d)

    def test_one_partition_is_answered_fired_and_as_the_general_path(self) -> None:
        d = self.handler.produce(RequestContext("/x"), request())
        self.assertNotIsInstance(d, CoroutineType)
        fast = self.successResultOf(d)
        general = self.successResultOf(defer.Deferred.fromCoroutine(
            self.handler._produce(request())))
        assert isinstance(fast, apis.ProduceResponse)
        assert isinstance(general, apis.ProduceResponse)
        (part,) = fast.responses[0].partition_responses
        self.assertEqual((part.error_code, part.base_offset), (0, 0))
        (other,) = general.responses[0].partition_responses
        self.assertEqual(other.base_offset, 1)
        self.assertEqual(fast.responses[0].name, general.responses[0].name)

    def test_refusals_before_the_append_are_the_same(self) -> None:
        for req, code in [
            (request(records=None), ErrorCode.CORRUPT_MESSAGE),
            (request(topic="__consumer_offsets"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ]:
            answer = self.answer(req)
            assert isinstance(answer, apis.ProduceResponse)
            self.assertEqual(answer.responses[0].partition_responses[0].error_code, code)
        self.assertEqual(self.core.produce_calls, [])

    def test_a_failed_append_is_mapped_as_before(self) -> None:
        self.core.produce_error = InvalidRecord("no key")
        answer = self.answer(request())
        assert isinstance(answer, apis.ProduceResponse)
        self.assertEqual(answer.responses[0].partition_responses[0].error_code,
                         ErrorCode.INVALID_RECORD)

    def test_an_append_still_running_is_awaited(self) -> None:
        self.core.hold_produce = True
        d = self.handler.produce(RequestContext("/x"), request())
        self.assertNoResult(d)
        for held in self.core.held:
            held.callback(None)
        answer = self.successResultOf(d)
        assert isinstance(answer, apis.ProduceResponse)
        self.assertEqual(answer.responses[0].partition_responses[0].error_code, 0)

    def test_two_partitions_take_the_general_path(self) -> None:
        answer = self.answer(request(parts=2))
        assert isinstance(answer, apis.ProduceResponse)
        self.assertEqual(
            [p.base_offset for p in answer.responses[0].partition_responses], [0, 0])
