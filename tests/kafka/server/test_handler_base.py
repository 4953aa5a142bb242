"""What every Kafka handler shares (:mod:`brokerd.kafka.server.handler_base`): the request
context and its waits, concurrent coroutines, repeated names, topic names by ID and the
error code of an unexpected exception."""

from __future__ import annotations

import uuid
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from brokerd import errors
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handler_base import (
    RequestContext,
    gather,
    message,
    repeated,
    topic_name_now,
    unexpected_code,
)
from brokerd.kafka.wire.codec import ZERO_UUID

from tests.fake_core import FakeCore


class RequestContextTests(SynchronousTestCase):
    def test_the_peer_host_comes_from_the_client_host(self) -> None:
        conn = RequestContext("/10.1.2.3")
        self.assertEqual(conn.state.peer_host, "10.1.2.3")
        self.assertEqual(conn.state.principal, "User:ANONYMOUS")

    def test_close_cancels_the_waits_still_open_and_later_ones_at_once(self) -> None:
        conn = RequestContext("/h")
        fired: defer.Deferred[int] = defer.Deferred()
        parked: defer.Deferred[int] = defer.Deferred()
        conn.track(fired)
        conn.track(parked)
        fired.callback(1)
        conn.close()
        self.assertEqual(self.successResultOf(fired), 1)
        self.failureResultOf(parked, defer.CancelledError)
        late: defer.Deferred[int] = defer.Deferred()
        self.assertIs(conn.track(late), late)
        self.failureResultOf(late, defer.CancelledError)


class GatherTests(SynchronousTestCase):
    def test_results_in_order_one_or_many(self) -> None:
        waits = [defer.Deferred[int](), defer.Deferred[int]()]

        async def wait(i: int) -> int:
            return await waits[i] * 10

        async def one() -> str:
            return "only"

        self.assertEqual(self.successResultOf(gather([one()])), ["only"])
        both = gather([wait(0), wait(1)])
        waits[1].callback(2)
        self.assertNoResult(both)
        waits[0].callback(1)
        self.assertEqual(self.successResultOf(both), [10, 20])


class HelpersTests(SynchronousTestCase):
    def test_repeated_names_are_those_given_more_than_once(self) -> None:
        self.assertEqual(repeated(["a", "b", "a", "c", "a", "b"]), {"a", "b"})
        self.assertEqual(repeated([]), set())

    def test_topic_name_now(self) -> None:
        core = FakeCore()
        core.add_topic("t")
        info = core.topics()["t"]
        self.assertEqual(topic_name_now(core, info.topic_id), "t")
        self.assertEqual(topic_name_now(core, uuid.uuid4()), "")
        self.assertEqual(topic_name_now(core, ZERO_UUID), "")

    def test_message_is_the_text_or_the_class_name(self) -> None:
        self.assertEqual(message(ValueError("bad value")), "bad value")
        self.assertEqual(message(ValueError()), "ValueError")

    def test_unexpected_code_logs_only_what_is_not_brokerds_own(self) -> None:
        events: list[dict[str, Any]] = []
        log = Logger(observer=events.append)
        code = unexpected_code(log, "produce", errors.UnknownTopicOrPartition("t"))
        self.assertIs(code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertEqual(events, [])
        code = unexpected_code(log, "produce", RuntimeError("boom"))
        self.assertIs(code, ErrorCode.UNKNOWN_SERVER_ERROR)
        (event,) = events
        self.assertEqual(event["what"], "produce")
        self.assertIsInstance(event["log_failure"].value, RuntimeError)
