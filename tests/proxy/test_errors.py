"""The REST Proxy's error answers: the broker's errors as Confluent's codes."""

from __future__ import annotations

from brokerd.errors import InvalidConfig, RecordTooLarge, UnknownTopicOrPartition
from brokerd.proxy.errors import from_broker


def test_broker_errors_answer_confluents_codes() -> None:
    assert from_broker(UnknownTopicOrPartition("x")).error_code == 40401
    assert from_broker(RecordTooLarge("x")).http_status == 413
    assert from_broker(InvalidConfig("x")).http_status == 400
    internal = from_broker(KeyError("secret"))
    assert (internal.http_status, internal.message) == (500, "internal error")
