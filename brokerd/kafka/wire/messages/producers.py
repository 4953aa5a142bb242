# -*- test-case-name: tests.kafka.wire.messages.test_txn -*-
"""Request and response bodies of DescribeProducers (61), and the version range brokerd
answers (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import INT16, INT32, INT64, STRING, ApiKey, Array, Struct
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- DescribeProducers (61) ------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DescribeProducersTopicRequest:
    name: Annotated[str, Wire(STRING)]
    partition_indexes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeProducersRequest:
    topics: Annotated[
        tuple[DescribeProducersTopicRequest, ...],
        Wire(Array(Struct(DescribeProducersTopicRequest))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class ProducerStateEntry:
    """One active producer of a partition (Kafka's ``ProducerState``)."""

    producer_id: Annotated[int, Wire(INT64)]
    #: An ``int32`` on the wire although epochs are int16 elsewhere (Kafka's schema).
    producer_epoch: Annotated[int, Wire(INT32)]
    last_sequence: Annotated[int, Wire(INT32)] = -1
    last_timestamp: Annotated[int, Wire(INT64)] = -1
    coordinator_epoch: Annotated[int, Wire(INT32)] = 0
    #: First offset of the producer's open transaction on this partition; -1 = none.
    current_txn_start_offset: Annotated[int, Wire(INT64)] = -1


@wire_message
@attrs.frozen(kw_only=True)
class DescribeProducersPartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    active_producers: Annotated[
        tuple[ProducerStateEntry, ...], Wire(Array(Struct(ProducerStateEntry)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeProducersTopicResponse:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[DescribeProducersPartitionResponse, ...],
        Wire(Array(Struct(DescribeProducersPartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeProducersResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    topics: Annotated[
        tuple[DescribeProducersTopicResponse, ...],
        Wire(Array(Struct(DescribeProducersTopicResponse))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


DESCRIBE_PRODUCERS = ApiSpec(
    ApiKey.DESCRIBE_PRODUCERS,
    DescribeProducersRequest,
    DescribeProducersResponse,
    0,
    0,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (DESCRIBE_PRODUCERS,)
