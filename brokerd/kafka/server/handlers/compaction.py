"""Kafka's answer to a produce a compacted topic refuses (a record without a key).

Kafka answers INVALID_RECORD (87) from Produce v8 on, with each offending record's
index and reason in ``record_errors`` and a summary in ``error_message``; before v8 (no
such code in the clients' tables) CORRUPT_MESSAGE (2). Pure: builds the partition
response.
"""

from __future__ import annotations

from brokerd.errors import InvalidRecord
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.requests import apis

__all__ = ["INVALID_RECORD_MIN_PRODUCE_VERSION", "invalid_record_response"]

#: First Produce version with ``record_errors`` and INVALID_RECORD.
INVALID_RECORD_MIN_PRODUCE_VERSION = 8


def invalid_record_response(
    index: int, version: int, exc: InvalidRecord
) -> apis.ProducePartitionResponse:
    text = str(exc)
    if version < INVALID_RECORD_MIN_PRODUCE_VERSION:
        return apis.ProducePartitionResponse(
            index=index, error_code=ErrorCode.CORRUPT_MESSAGE, error_message=text
        )
    return apis.ProducePartitionResponse(
        index=index,
        error_code=ErrorCode.INVALID_RECORD,
        record_errors=tuple(
            apis.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=why)
            for index, why in exc.record_errors
        ),
        error_message=text,
    )
