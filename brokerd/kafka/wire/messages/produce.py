# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of Produce (0), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BYTES,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ZERO_UUID,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- Produce (0) ---------------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ProducePartitionData:
    index: Annotated[int, Wire(INT32)]
    records: Annotated[bytes | None, Wire(BYTES, nullable_from=0)]


@wire_message
@attrs.frozen(kw_only=True)
class ProduceTopicData:
    #: v0-12; from v13 the topic is named by ``topic_id`` only.
    name: Annotated[str, Wire(STRING, 0, 12)] = ""
    #: v13+ (KIP-516).
    topic_id: Annotated[uuid.UUID, Wire(UUID, 13)] = ZERO_UUID
    partition_data: Annotated[
        tuple[ProducePartitionData, ...],
        Wire(Array(Struct(ProducePartitionData))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ProduceRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 9

    transactional_id: Annotated[str | None, Wire(STRING, 3, nullable_from=3)] = None
    acks: Annotated[int, Wire(INT16)]
    timeout_ms: Annotated[int, Wire(INT32)]
    topic_data: Annotated[
        tuple[ProduceTopicData, ...],
        Wire(Array(Struct(ProduceTopicData))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class BatchIndexAndErrorMessage:
    batch_index: Annotated[int, Wire(INT32)]
    batch_index_error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class ProducePartitionResponse:
    index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    base_offset: Annotated[int, Wire(INT64)] = -1
    log_append_time_ms: Annotated[int, Wire(INT64, 2)] = -1
    log_start_offset: Annotated[int, Wire(INT64, 5)] = -1
    record_errors: Annotated[
        tuple[BatchIndexAndErrorMessage, ...],
        Wire(Array(Struct(BatchIndexAndErrorMessage)), 8),
    ] = array()
    error_message: Annotated[str | None, Wire(STRING, 8, nullable_from=8)] = None


@wire_message
@attrs.frozen(kw_only=True)
class ProduceTopicResponse:
    #: v0-12; from v13 the topic is answered by ``topic_id`` only.
    name: Annotated[str, Wire(STRING, 0, 12)] = ""
    #: v13+: the ID the request named.
    topic_id: Annotated[uuid.UUID, Wire(UUID, 13)] = ZERO_UUID
    partition_responses: Annotated[
        tuple[ProducePartitionResponse, ...],
        Wire(Array(Struct(ProducePartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ProduceResponse:
    """v10+'s tagged ``CurrentLeader`` (per partition) and ``NodeEndpoints`` are not
    written: Kafka fills them only beside NOT_LEADER_OR_FOLLOWER, which the one broker
    never answers."""

    FLEXIBLE_FROM: ClassVar[int | None] = 9

    responses: Annotated[
        tuple[ProduceTopicResponse, ...],
        Wire(Array(Struct(ProduceTopicResponse))),
    ] = array()
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0


# From 0 only so that librdkafka < 2.11.1 enables compression (it probes Produce
# v0 for that); versions 0-2 are answered UNSUPPORTED_VERSION per partition. v9
# flexible; v10-12 add nothing brokerd must fill (tagged leader hints, a
# TRANSACTION_ABORTABLE it never answers, and KIP-890 part 2 implicit
# AddPartitionsToTxn, which a client uses only when the broker finalizes
# transaction.version 2, and brokerd finalizes none); v13 names topics by ID.
PRODUCE = ApiSpec(ApiKey.PRODUCE, ProduceRequest, ProduceResponse, 0, 13)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (PRODUCE,)
