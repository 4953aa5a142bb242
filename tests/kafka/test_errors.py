"""brokerd.kafka.errors: the Kafka error code each broker error maps to, most specific
class first, and UNKNOWN_SERVER_ERROR for anything unexpected."""

from __future__ import annotations

import pytest

from brokerd import errors
from brokerd.kafka.errors import ErrorCode, error_code_for


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.OffsetOutOfRange(5, 0, 3), ErrorCode.OFFSET_OUT_OF_RANGE),
        (errors.CorruptBatch("crc"), ErrorCode.CORRUPT_MESSAGE),
        (errors.UnknownTopicOrPartition("x"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (errors.InvalidTopic("x"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (errors.TopicAlreadyExists("x"), ErrorCode.TOPIC_ALREADY_EXISTS),
        (errors.InvalidPartitions("x"), ErrorCode.INVALID_PARTITIONS),
        (errors.RecordTooLarge("x"), ErrorCode.MESSAGE_TOO_LARGE),
        (errors.StorageError("x"), ErrorCode.KAFKA_STORAGE_ERROR),
        (errors.OutOfOrderSequence("x"), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (errors.InvalidProducerEpoch("x"), ErrorCode.INVALID_PRODUCER_EPOCH),
        (errors.DuplicateSequence("x"), ErrorCode.DUPLICATE_SEQUENCE_NUMBER),
        (RuntimeError("bug"), ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_error_mapping(exc: Exception, code: ErrorCode) -> None:
    assert error_code_for(exc) is code


def test_invalid_config_maps_to_error_40() -> None:
    assert error_code_for(errors.InvalidConfig("x")) is ErrorCode.INVALID_CONFIG


def test_policy_violation_code() -> None:
    assert error_code_for(errors.PolicyViolation("compact")) == ErrorCode.POLICY_VIOLATION == 44


def test_a_stored_batch_failing_its_crc_is_corrupt_not_a_storage_error() -> None:
    assert isinstance(errors.CorruptStoredBatch("crc"), errors.StorageError)
    assert error_code_for(errors.CorruptStoredBatch("crc")) is ErrorCode.CORRUPT_MESSAGE
    assert error_code_for(errors.InvalidRecord("no key")) is ErrorCode.CORRUPT_MESSAGE


def test_shutting_down_is_a_retriable_not_leader() -> None:
    assert error_code_for(errors.ShuttingDown("stop")) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error_code_for(errors.InvalidTxnState("x")) is ErrorCode.INVALID_TXN_STATE
    assert error_code_for(errors.InvalidTimestamp("x", 2)) is ErrorCode.INVALID_TIMESTAMP
