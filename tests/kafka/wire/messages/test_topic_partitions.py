"""DescribeTopicPartitions' bodies (:mod:`brokerd.kafka.wire.messages.topic_partitions`):
its cursor, a nullable struct, read and written byte by byte."""

from __future__ import annotations

import pytest

from brokerd.kafka.wire.codec import ApiKey, MalformedRequest, Reader, Writer
from brokerd.kafka.wire.messages.topic_partitions import (
    PARTITION_LIMIT,
    DescribeTopicPartitionsPartition,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsTopic,
    NullableStruct,
    TopicPartitionsCursor,
)
from brokerd.kafka.wire.requests import apis

from tests.kafka.wire.test_codec import (
    NO_TAGS,
    TOPIC_ID,
    _flex_request,
    carr,
    cs,
    encoded,
    i8,
    i16,
    i32,
)


def test_describe_topic_partitions_cursor_is_a_nullable_struct() -> None:
    # A nullable struct: one byte, -1 = null, 1 = present, then the struct.
    body = carr(cs("t") + NO_TAGS) + i32(100) + i8(1) + cs("t") + i32(4) + NO_TAGS + NO_TAGS
    req = apis.decode_request(_flex_request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)).body
    assert req.cursor == TopicPartitionsCursor(topic_name="t", partition_index=4)
    null_cursor = carr() + i32(2000) + i8(-1) + NO_TAGS
    null = apis.decode_request(_flex_request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, null_cursor))
    assert null.body.cursor is None
    response = DescribeTopicPartitionsResponse(topics=(
        DescribeTopicPartitionsTopic(name="t", topic_id=TOPIC_ID, partitions=(
            DescribeTopicPartitionsPartition(partition_index=0, leader_id=0, leader_epoch=0,
                                             replica_nodes=(0,), isr_nodes=(0,)),
        )),
    ))
    assert encoded(0, response) == (
        NO_TAGS + i32(0)
        + carr(
            i16(0) + cs("t") + TOPIC_ID.bytes + i8(0)
            + carr(i16(0) + i32(0) + i32(0) + i32(0) + carr(i32(0)) + carr(i32(0))
                   + carr() + carr() + carr() + NO_TAGS)        # ELR, last known ELR, offline
            + i32(-(2**31)) + NO_TAGS
        )
        + i8(-1)                                             # no next cursor
        + NO_TAGS
    )



def test_a_request_without_cursor_or_limit_takes_kafkas_defaults() -> None:
    request = DescribeTopicPartitionsRequest()
    assert (request.topics, request.cursor) == ((), None)
    assert request.response_partition_limit == PARTITION_LIMIT == 2000
    body = carr() + i32(PARTITION_LIMIT) + i8(-1) + NO_TAGS
    decoded = apis.decode_request(_flex_request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body))
    assert decoded.body == request


def test_a_null_cursor_where_the_schema_forbids_it() -> None:
    cursor = NullableStruct(TopicPartitionsCursor)
    with pytest.raises(MalformedRequest):
        cursor.read(Reader(i8(-1)), 0, False)
    with pytest.raises(ValueError):
        cursor.write(Writer(), None, 0, False)
    assert cursor.min_size(0) == 1
