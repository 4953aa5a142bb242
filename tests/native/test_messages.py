"""The native protocol's vocabulary (:mod:`brokerd.native.messages`): the wire code of
each broker error and the few computed parts of the messages."""

from __future__ import annotations

from brokerd import errors
from brokerd.native import messages as msg
from brokerd.native.messages import ErrorCode


def test_every_broker_error_has_a_code() -> None:
    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.BrokerError)
    ]
    assert len(classes) > 10
    for klass in classes:
        assert msg.error_code_for(klass.__new__(klass)) is not None
    assert msg.error_code_for(errors.InvalidTopic("x")) is ErrorCode.INVALID_TOPIC
    assert msg.error_code_for(errors.OffsetOutOfRange(9, 0, 5)) is (ErrorCode.OFFSET_OUT_OF_RANGE)
    assert msg.error_code_for(errors.RecordTooLarge("x")) is ErrorCode.REQUEST_TOO_LARGE
    assert msg.error_code_for(errors.TooManyWaiters("x")) is ErrorCode.TOO_MANY_WAITERS
    assert msg.error_code_for(RuntimeError("boom")) is None
    assert msg.error_code_for(KeyError("k")) is None


def test_a_subclass_of_a_mapped_error_takes_its_code() -> None:
    class NarrowTopic(errors.InvalidTopic):
        pass

    assert msg.error_code_for(NarrowTopic("x")) is ErrorCode.INVALID_TOPIC


def test_produce_count_is_the_number_of_values() -> None:
    assert msg.ProduceRequest("t", 0, (b"a", b"", b"c")).count == 3


def test_an_error_response_knows_its_code_or_says_it_does_not() -> None:
    assert msg.ErrorResponse(1, int(ErrorCode.SHUTTING_DOWN), "bye").error_code is (
        ErrorCode.SHUTTING_DOWN)
    assert msg.ErrorResponse(1, 0xFFFF, "newer server").error_code is None
