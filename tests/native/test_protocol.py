"""Tests of the native Twisted protocol: synchronous (StringTransport + task.Clock + a fake
core whose Deferreds are fired by hand), so they run identically under trial and pytest."""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet import task
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd import errors
from brokerd.native import client_codec as client
from brokerd.native import server_codec as server
from brokerd.native.batch_framing import raw_fetch_budget
from brokerd.native.messages import ErrorCode
from brokerd.native.protocol import (
    LONG_POLL_EAGER_READ_BYTES,
    MAX_LONG_POLL_WAIT_MS,
    MAX_UNREAD_SLACK_BYTES,
    NativeFactory,
    NativeProtocol,
)
from brokerd.storage.types import COMMITTED_BATCHES, TopicInfo

from tests.fake_core import Call, HandFiredCore
from tests.native_helpers import (
    append_info,
    error_body,
    fetch_error,
    fetch_frame,
    fetch_ok,
    list_offsets_frame,
    list_topics_frame,
    long_poll_frame,
    produce_frame,
    produce_ok,
    records,
)

IDLE = 600.0
FRAME = 30.0


class ProtocolTestCase(SynchronousTestCase):
    max_produce_bytes = 1024 * 1024
    max_fetch_bytes = 1024 * 1024

    def setUp(self) -> None:
        self.clock = task.Clock()
        self.core = HandFiredCore()
        self.factory = NativeFactory(
            self.core,
            clock=self.clock,
            max_produce_bytes=self.max_produce_bytes,
            max_fetch_bytes=self.max_fetch_bytes,
            idle_timeout=IDLE,
            frame_timeout=FRAME,
        )
        self.proto = self.factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def tearDown(self) -> None:
        if self.proto.transport is not None and not getattr(self, "_lost", False):
            self.lose()

    def lose(self) -> None:
        self._lost = True
        self.proto.connectionLost(Failure(ConnectionDone()))

    def send(self, data: bytes) -> None:
        self.proto.dataReceived(data)

    def take(self) -> bytes:
        out = self.transport.value()
        self.transport.clear()
        return out

    def only_call(self, method: str) -> Call:
        self.assertEqual([c.method for c in self.core.calls], [method])
        return self.core.calls[0]

    @property
    def paused(self) -> bool:
        return self.transport.producerState == "paused"


class WiringTests(ProtocolTestCase):
    def test_factory_builds_protocols_with_its_settings(self) -> None:
        self.assertIsInstance(self.proto, NativeProtocol)
        self.assertIs(self.proto.factory, self.factory)

    def test_registers_itself_as_streaming_producer(self) -> None:
        self.assertIs(self.transport.producer, self.proto)
        self.assertTrue(self.transport.streaming)

    def test_request_one_byte_at_a_time(self) -> None:
        frame = fetch_frame("orders", 1, 7)
        for i in range(len(frame)):
            self.assertEqual(self.core.calls, [])
            self.send(frame[i : i + 1])
        call = self.only_call("read")
        self.assertEqual(
            call.args,
            ("orders", 1, 7, raw_fetch_budget(self.max_fetch_bytes), COMMITTED_BATCHES),
        )
        call.deferred.callback(records(7, [b"a", None, b"ccc"]))
        self.assertEqual(self.take(), fetch_ok([b"a", b"", b"ccc"]))

    def test_produce_answers_base_offset(self) -> None:
        self.send(produce_frame("t", 0, [b"x", b"yy"]))
        call = self.only_call("produce_values")
        self.assertEqual(call.args, ("t", 0, [b"x", b"yy"]))
        call.deferred.callback(append_info(41, 2))
        self.assertEqual(self.take(), produce_ok(41))

    def test_an_answer_written_runs_the_wake_ups_its_core_holds(self) -> None:
        # An inline append's wake-up (brokerd/after_answer.py) runs once the answer is
        # handed over, in the same call, with the answer already in the transport.
        seen: list[bytes] = []
        self.core.after_answer.hold("writer", lambda: seen.append(self.transport.value()))
        self.send(produce_frame("t", 0, [b"x"]))
        self.assertEqual(seen, [])
        self.only_call("produce_values").deferred.callback(append_info(5))
        self.assertEqual(seen, [produce_ok(5)])
        self.assertEqual(self.core.after_answer.pending, 0)

    def test_create_list_offsets_and_list_topics(self) -> None:
        self.core.auto = {
            "create_topic": None,
            "list_offsets": (3, 10),
            "list_topics": [TopicInfo("b", 2), TopicInfo("a", 1)],
        }
        self.send(
            client.encode_create_topic("new", 4) + list_offsets_frame("t", 2) + list_topics_frame()
        )
        self.assertEqual(
            [(c.method, c.args) for c in self.core.calls],
            [("create_topic", ("new", 4)), ("list_offsets", ("t", 2)), ("list_topics", ())],
        )
        self.assertEqual(
            self.take(),
            (
                b"\x00\x00"
                + struct.pack(">HQQ", 0, 3, 10)
                + server.encode_list_topics_response([("a", 1), ("b", 2)])
            ),
        )

    def test_long_poll_arguments_are_capped(self) -> None:
        self.send(
            long_poll_frame("t", 0, 5, max_wait_ms=2**32 - 1, min_bytes=100, max_bytes=2**32 - 1)
        )
        call = self.only_call("wait_records")
        self.assertEqual(call.args, ("t", 0, 5))
        self.assertEqual(
            call.kwargs,
            {
                "max_value_bytes": self.max_fetch_bytes,
                "min_bytes": 100,
                "max_wait_ms": MAX_LONG_POLL_WAIT_MS,
            },
        )
        call.deferred.callback(records(5, [b"v", None], high_watermark=9))
        self.assertEqual(
            self.take(), server.encode_long_poll_fetch_response(9, [(5, b"v"), (6, None)])
        )

    def test_long_poll_smaller_max_bytes_is_kept(self) -> None:
        self.send(long_poll_frame("t", 0, 0, max_wait_ms=50, min_bytes=1, max_bytes=10))
        call = self.only_call("wait_records")
        self.assertEqual(call.kwargs["max_value_bytes"], 10)
        self.assertEqual(call.kwargs["max_wait_ms"], 50)


class OrderingTests(ProtocolTestCase):
    def test_pipelined_requests_in_one_chunk_are_answered_in_order(self) -> None:
        self.send(produce_frame("t", 0, [b"a"]) + fetch_frame("t", 0, 0) + list_topics_frame())
        self.assertEqual(len(self.core.calls), 1)
        # Answer them out of the order a thread pool might finish them: only one is ever
        # in flight, so later ones are not even asked yet.
        self.core.calls[0].deferred.callback(append_info(0))
        self.assertEqual(len(self.core.calls), 2)
        self.core.calls[1].deferred.callback(records(0, [b"a"]))
        self.core.calls[2].deferred.callback([TopicInfo("t", 1)])
        self.assertEqual(
            self.take(),
            produce_ok(0) + fetch_ok([b"a"]) + server.encode_list_topics_response([("t", 1)]),
        )
        self.assertFalse(self.paused)

    def test_synchronous_core_answers_pipeline_in_order(self) -> None:
        self.core.auto = {
            "produce_values": append_info(3),
            "read": records(3, [b"z"]),
            "list_offsets": (0, 4),
        }
        self.send(
            produce_frame("t", 0, [b"z"])
            + fetch_frame("t", 0, 3)
            + list_offsets_frame("t", 0)
            + produce_frame("t", 0, [b"z"])
        )
        self.assertEqual(
            self.take(),
            produce_ok(3) + fetch_ok([b"z"]) + struct.pack(">HQQ", 0, 0, 4) + produce_ok(3),
        )
        self.assertFalse(self.paused)

    def test_second_request_waits_for_the_first_and_reading_is_paused(self) -> None:
        self.send(fetch_frame("t", 0, 0) + fetch_frame("t", 0, 1))
        self.only_call("read")
        self.assertTrue(self.paused)
        self.assertEqual(self.take(), b"")
        self.core.calls[0].deferred.callback(records(0, [b"a"]))
        self.assertEqual(len(self.core.calls), 2)
        self.assertTrue(self.paused)  # the second is now in flight
        self.core.calls[1].deferred.callback(records(1, []))
        self.assertFalse(self.paused)
        self.assertEqual(self.take(), fetch_ok([b"a"]) + fetch_ok([]))

    def test_error_answers_keep_their_place_in_the_order(self) -> None:
        self.send(list_topics_frame() + fetch_frame("../x", 0, 0) + list_topics_frame())
        self.assertEqual(len(self.core.calls), 1)
        self.core.calls[0].deferred.callback([])
        self.assertEqual(len(self.core.calls), 2)  # the error needed no core call
        self.core.calls[1].deferred.callback([])
        out = self.take()
        empty = server.encode_list_topics_response([])
        self.assertTrue(out.startswith(empty + b"\xff\xff\xff\xff\x00\x03"))
        self.assertTrue(out.endswith(empty))


class FlowControlTests(ProtocolTestCase):
    def test_transport_pause_holds_the_next_request_until_resume(self) -> None:
        self.proto.pauseProducing()  # the transport's send buffer is full
        self.assertTrue(self.paused)
        self.send(fetch_frame("t", 0, 0))
        self.assertEqual(self.core.calls, [])
        self.proto.resumeProducing()
        self.only_call("read")
        self.core.calls[0].deferred.callback(records(0, []))
        self.assertEqual(self.take(), fetch_ok([]))
        self.assertFalse(self.paused)

    def test_pause_while_in_flight_holds_later_requests(self) -> None:
        self.send(fetch_frame("t", 0, 0) + fetch_frame("t", 0, 1))
        self.proto.pauseProducing()
        self.core.calls[0].deferred.callback(records(0, [b"a"]))
        self.assertEqual(self.take(), fetch_ok([b"a"]))  # the answer is still written
        self.assertEqual(len(self.core.calls), 1)  # but the next one is not taken
        self.assertTrue(self.paused)
        self.proto.resumeProducing()
        self.assertEqual(len(self.core.calls), 2)

    def test_refusals_stop_while_client_does_not_read(self) -> None:
        self.proto.pauseProducing()
        self.send(fetch_frame("../x", 0, 0) * 3)
        self.assertEqual(self.take(), b"")
        self.proto.resumeProducing()
        self.assertEqual(self.take().count(b"\xff\xff\xff\xff"), 3)


class LimitTests(ProtocolTestCase):
    max_produce_bytes = 1024

    def test_oversized_produce_refused_before_buffering_and_connection_kept(self) -> None:
        frame = produce_frame("t", 0, [b"v" * 600, b"w" * 600, b"x" * 100_000])
        for i in range(0, len(frame), 512):
            self.send(frame[i : i + 512])
            self.assertLessEqual(self.proto.decoder.buffered, 512 + 604)
        self.assertEqual(self.core.calls, [])
        out = self.take()
        code, _ = struct.unpack_from(">HH", out)
        self.assertEqual(code, ErrorCode.REQUEST_TOO_LARGE)
        self.assertFalse(self.transport.disconnecting)
        self.core.auto = {"produce_values": append_info(0)}
        self.send(produce_frame("t", 0, [b"ok"]))
        self.assertEqual(self.take(), produce_ok(0))

    def test_oversized_produce_is_answered_at_once_and_the_rest_discarded(self) -> None:
        values = [b"a" * 2000, b"b" * 10]
        frame = produce_frame("t", 0, values)
        header = len(frame) - (4 + 2000 + 4 + 10)
        self.send(frame[: header + 4])  # up to the first value's size
        code, _ = struct.unpack_from(">HH", self.take())
        self.assertEqual(code, ErrorCode.REQUEST_TOO_LARGE)
        self.send(frame[header + 4 :])
        self.assertEqual(self.take(), b"")  # one frame, one answer
        self.core.auto = {"list_topics": []}
        self.send(list_topics_frame())
        self.assertEqual(self.take(), server.encode_list_topics_response([]))
        self.assertEqual(self.core.calls[0].method, "list_topics")

    def test_refused_frame_left_unfinished_hits_the_deadline(self) -> None:
        self.send(produce_frame("t", 0, [], count=1) + struct.pack(">I", 0xFFFFFFF0))
        code, _ = struct.unpack_from(">HH", self.take())
        self.assertEqual(code, ErrorCode.REQUEST_TOO_LARGE)
        self.clock.advance(FRAME)
        self.assertTrue(self.transport.disconnected)

    def test_unknown_type_is_answered_then_connection_closed(self) -> None:
        self.send(b"\x00\x63" + b"whatever follows" + list_topics_frame())
        out = self.take()
        code, length = struct.unpack_from(">HH", out)
        self.assertEqual(code, ErrorCode.UNKNOWN_REQUEST_TYPE)
        self.assertEqual(len(out), 4 + length)
        self.assertTrue(self.transport.disconnecting)
        self.send(list_topics_frame())
        self.assertEqual(self.core.calls, [])
        self.assertEqual(self.take(), b"")

    def test_unknown_type_after_a_request_in_flight_waits_its_turn(self) -> None:
        self.send(list_topics_frame() + b"\x00\x63")
        self.assertFalse(self.transport.disconnecting)
        self.core.calls[0].deferred.callback([])
        out = self.take()
        self.assertTrue(out.startswith(server.encode_list_topics_response([])))
        self.assertTrue(self.transport.disconnecting)

    def test_invalid_topic_is_refused_and_core_never_called(self) -> None:
        self.send(fetch_frame("../x", 0, 0))
        out = self.take()
        self.assertEqual(out[:4], b"\xff\xff\xff\xff")
        code, length = struct.unpack_from(">HH", out, 4)
        self.assertEqual(code, ErrorCode.INVALID_TOPIC)
        self.assertEqual(len(out), 8 + length)
        self.send(produce_frame("../x", 0, [b"a"]))
        code, _ = struct.unpack_from(">HH", self.take())
        self.assertEqual(code, ErrorCode.INVALID_TOPIC)
        self.assertEqual(self.core.calls, [])
        self.assertFalse(self.transport.disconnecting)

    def test_transport_ignoring_pause_cannot_grow_input_without_bound(self) -> None:
        self.send(list_topics_frame())  # in flight: reading is paused
        self.assertTrue(self.paused)
        chunk = list_topics_frame() * 32768
        sent = 0
        while not self.transport.disconnecting:
            self.send(chunk)
            sent += len(chunk)
            self.assertLess(sent, self.max_produce_bytes + MAX_UNREAD_SLACK_BYTES + 2 * len(chunk))
        self.assertTrue(self.transport.disconnected)
        self.assertEqual(len(self.core.calls), 1)
        self.flushLoggedErrors()

    def test_produce_with_no_records_is_malformed(self) -> None:
        self.send(produce_frame("t", 0, []))
        code, _ = struct.unpack_from(">HH", self.take())
        self.assertEqual(code, ErrorCode.MALFORMED_REQUEST)
        self.assertEqual(self.core.calls, [])


class ErrorTests(ProtocolTestCase):
    def test_failed_fetch_uses_the_marker_form_byte_exact(self) -> None:
        self.send(fetch_frame("t", 0, 9))
        exc = errors.OffsetOutOfRange(9, 0, 3)
        self.core.calls[0].deferred.errback(exc)
        self.assertEqual(self.take(), fetch_error(ErrorCode.OFFSET_OUT_OF_RANGE, str(exc)))
        self.assertEqual(self.take(), b"")

    def test_failed_produce_uses_the_plain_form(self) -> None:
        self.send(produce_frame("t", 5, [b"a"]))
        self.core.calls[0].deferred.errback(errors.UnknownTopicOrPartition("no partition 5"))
        self.assertEqual(
            self.take(), error_body(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no partition 5")
        )

    def test_every_broker_error_maps_to_its_code(self) -> None:
        cases: list[tuple[Exception, ErrorCode]] = [
            (errors.TopicAlreadyExists("t"), ErrorCode.TOPIC_ALREADY_EXISTS),
            (errors.InvalidPartitions("0"), ErrorCode.INVALID_PARTITIONS),
            (errors.StorageError("disk"), ErrorCode.STORAGE_ERROR),
            (errors.ShuttingDown("bye"), ErrorCode.SHUTTING_DOWN),
            (errors.TooManyWaiters("full"), ErrorCode.TOO_MANY_WAITERS),
            (errors.RecordTooLarge("big"), ErrorCode.REQUEST_TOO_LARGE),
        ]
        for exc, code in cases:
            self.core.auto = {"create_topic": exc}
            self.send(client.encode_create_topic("t", 1))
            self.assertEqual(self.take(), error_body(code, str(exc)))

    def test_unexpected_exception_is_internal_error_logged_and_connection_kept(self) -> None:
        self.send(list_topics_frame())
        self.core.calls[0].deferred.errback(RuntimeError("secret detail"))
        self.assertEqual(self.take(), error_body(ErrorCode.INTERNAL_ERROR, "internal error"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertFalse(self.transport.disconnecting)
        self.core.auto = {"list_topics": []}
        self.send(list_topics_frame())
        self.assertEqual(self.take(), server.encode_list_topics_response([]))

    def test_core_raising_synchronously_is_handled_like_a_failure(self) -> None:
        def boom(*args: Any, **kwargs: Any) -> Any:
            raise errors.ShuttingDown("stopping")

        self.core.reads.list_offsets = boom  # type: ignore[method-assign]
        self.send(list_offsets_frame("t", 0))
        self.assertEqual(self.take(), error_body(ErrorCode.SHUTTING_DOWN, "stopping"))

    def test_bad_core_result_is_internal_error(self) -> None:
        self.send(list_offsets_frame("t", 0))
        self.core.calls[0].deferred.callback("not a tuple")
        code, _ = struct.unpack_from(">HH", self.take())
        self.assertEqual(code, ErrorCode.INTERNAL_ERROR)
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)


class DisconnectTests(ProtocolTestCase):
    def test_connection_closed_mid_request(self) -> None:
        self.send(fetch_frame("t", 0, 0)[:7])
        self.assertEqual(self.core.calls, [])
        self.lose()
        self.assertEqual(self.core.calls, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.take(), b"")

    def test_close_during_long_poll_cancels_it_and_leaves_nothing_scheduled(self) -> None:
        self.send(long_poll_frame("t", 0, 0, max_wait_ms=60_000))
        call = self.only_call("wait_records")
        self.lose()
        self.assertTrue(call.cancelled)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.take(), b"")
        self.assertEqual(self.flushLoggedErrors(), [])

    def test_late_result_after_close_is_not_written(self) -> None:
        self.core.cancellable = False
        self.send(list_topics_frame() + list_topics_frame())
        call = self.core.calls[0]
        self.lose()
        call.deferred.callback([])  # a core that ignores cancellation answers anyway
        self.assertEqual(self.take(), b"")
        self.assertEqual(len(self.core.calls), 1)

    def test_parked_long_poll_keeps_reading_a_little_to_notice_a_close(self) -> None:
        self.send(long_poll_frame("t", 0, 0, max_wait_ms=60_000))
        self.only_call("wait_records")
        self.assertFalse(self.paused)  # a close by the client would be seen
        self.send(list_topics_frame())
        self.assertEqual(len(self.core.calls), 1)  # read, but not taken
        self.send(list_topics_frame() * (LONG_POLL_EAGER_READ_BYTES // 2))
        self.assertTrue(self.paused)  # enough undecoded input: stop reading
        self.core.calls[0].deferred.callback(records(0, []))
        self.assertEqual(len(self.core.calls), 2)  # the next request is served in turn
        self.assertTrue(self.take().startswith(server.encode_long_poll_fetch_response(0, [])))

    def test_data_after_close_is_ignored(self) -> None:
        self.lose()
        self.send(list_topics_frame())
        self.assertEqual(self.core.calls, [])


class TimeoutTests(ProtocolTestCase):
    def test_idle_connection_is_closed(self) -> None:
        self.clock.advance(IDLE - 1)
        self.assertFalse(self.transport.disconnecting)
        self.clock.advance(1)
        self.assertTrue(self.transport.disconnecting)

    def test_activity_resets_the_idle_timer(self) -> None:
        self.core.auto = {"list_topics": []}
        self.clock.advance(IDLE - 1)
        self.send(list_topics_frame())
        self.clock.advance(IDLE - 1)
        self.assertFalse(self.transport.disconnecting)
        self.clock.advance(1)
        self.assertTrue(self.transport.disconnecting)

    def test_waiting_on_the_core_is_not_idle(self) -> None:
        self.send(long_poll_frame("t", 0, 0, max_wait_ms=1000))
        self.clock.advance(IDLE * 3)
        self.assertFalse(self.transport.disconnecting)
        self.core.calls[0].deferred.callback(records(0, []))
        self.clock.advance(IDLE)
        self.assertTrue(self.transport.disconnecting)

    def test_incomplete_frame_is_closed_at_the_deadline(self) -> None:
        self.send(produce_frame("t", 0, [b"abc"])[:-1])
        self.clock.advance(FRAME - 1)
        self.send(b"")  # a trickle of nothing does not extend the deadline
        self.assertFalse(self.transport.disconnecting)
        self.clock.advance(1)
        self.assertTrue(self.transport.disconnecting)
        self.assertTrue(self.transport.disconnected)  # aborted, not a graceful close
        self.assertEqual(self.core.calls, [])

    def test_completed_frame_cancels_the_deadline(self) -> None:
        frame = fetch_frame("t", 0, 0)
        self.send(frame[:3])
        self.clock.advance(FRAME - 1)
        self.send(frame[3:])
        self.core.calls[0].deferred.callback(records(0, []))
        self.clock.advance(FRAME)
        self.assertFalse(self.transport.disconnecting)
        self.assertEqual(
            [c.getTime() for c in self.clock.getDelayedCalls()], [FRAME - 1 + IDLE]
        )  # only the idle timer is left

    def test_deadline_does_not_run_while_a_request_is_in_flight(self) -> None:
        # The partial second frame is not the client's fault while we are not reading.
        self.send(list_topics_frame() + fetch_frame("t", 0, 0)[:5])
        self.clock.advance(FRAME * 2)
        self.assertFalse(self.transport.disconnecting)
        self.core.calls[0].deferred.callback([])
        self.clock.advance(FRAME)
        self.assertTrue(self.transport.disconnecting)

    def test_timers_are_cleaned_up_on_disconnect(self) -> None:
        self.send(b"\x00")
        self.assertEqual(len(self.clock.getDelayedCalls()), 2)
        self.lose()
        self.assertEqual(self.clock.getDelayedCalls(), [])
