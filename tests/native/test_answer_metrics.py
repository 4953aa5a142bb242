"""What a native request's answer tells the metrics (:mod:`brokerd.native.answer_metrics`),
reported to a recording observer."""

from __future__ import annotations

from collections.abc import Iterable

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd import errors
from brokerd.native.answer_metrics import (
    native_api_name,
    native_error,
    observe_native,
    observe_records,
    observe_refusal,
)
from brokerd.native.batch_framing import FramedValues
from brokerd.native.messages import ErrorCode, RequestType
from brokerd.storage.types import LogRead, Record


class Recorder:
    def __init__(self) -> None:
        self.done: list[tuple[str, float, tuple[str, ...]]] = []
        self.out: list[tuple[str, int, int]] = []

    def connection_opened(self) -> None: ...

    def connection_closed(self) -> None: ...

    def now(self) -> float:
        return 42.0

    def request_done(self, api: str, started: float, errors: Iterable[str]) -> None:
        self.done.append((api, started, tuple(errors)))

    def records_out(self, topic: str, records: int, size: int) -> None:
        self.out.append((topic, records, size))


class AnswerMetricsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.observer = Recorder()

    def test_names_of_request_types_and_unknown_numbers(self) -> None:
        self.assertEqual(native_api_name(RequestType.LONG_POLL_FETCH), "LongPollFetch")
        self.assertEqual(native_api_name(9999), "Unknown")

    def test_errors_are_named_by_their_native_code_others_internal(self) -> None:
        self.assertEqual(native_error(Failure(errors.InvalidTopic("x"))), "INVALID_TOPIC")
        self.assertEqual(native_error(Failure(RuntimeError("boom"))), "INTERNAL_ERROR")

    def test_an_answer_and_a_failure_pass_through_counted(self) -> None:
        ok: defer.Deferred[str] = defer.Deferred()
        bad: defer.Deferred[str] = defer.Deferred()
        out_ok = observe_native(self.observer, RequestType.PRODUCE, 1.5, ok)
        out_bad = observe_native(self.observer, RequestType.FETCH, 2.5, bad)
        self.assertEqual(self.observer.done, [])
        ok.callback("answer")
        bad.errback(errors.UnknownTopicOrPartition("t"))
        self.assertEqual(self.successResultOf(out_ok), "answer")
        self.failureResultOf(out_bad, errors.UnknownTopicOrPartition)
        self.assertEqual(self.observer.done, [
            ("Produce", 1.5, ()), ("Fetch", 2.5, ("UNKNOWN_TOPIC_OR_PARTITION",))])

    def test_records_out_of_framed_and_decoded_reads(self) -> None:
        observe_records(self.observer, "t", FramedValues([b"x"], 3, 30, False))
        observe_records(self.observer, "t", FramedValues([], 0, 0, False))  # nothing sent
        decoded = (Record(0, 0, None, b"abc"), Record(1, 0, None, None))
        observe_records(self.observer, "u", LogRead(b"", 2, 0, 2, decoded=decoded))
        observe_records(self.observer, "u", LogRead(b"", 2, 0, 2))  # no decoded records
        observe_records(self.observer, None, FramedValues([b"x"], 3, 30, False))
        self.assertEqual(self.observer.out, [("t", 3, 30), ("u", 2, 3)])

    def test_a_refusal_is_counted_at_the_observers_now(self) -> None:
        observe_refusal(self.observer, 77, ErrorCode.MALFORMED_REQUEST)
        self.assertEqual(self.observer.done, [("Unknown", 42.0, ("MALFORMED_REQUEST",))])
