# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of InitProducerId (22), and the version range brokerd answers
of each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT16,
    INT32,
    INT64,
    STRING,
    ApiKey,
    Field,
)
from brokerd.kafka.wire.schema import ApiSpec

# -- InitProducerId (22) -------------------------------------------------------------


@attrs.frozen(kw_only=True)
class InitProducerIdRequest:
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    #: v3+ (KIP-360): the producer's current id and epoch, -1 when it has none.
    producer_id: int = -1
    producer_epoch: int = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING, nullable_from=0),
        Field("transaction_timeout_ms", INT32),
        Field("producer_id", INT64, 3),
        Field("producer_epoch", INT16, 3),
    )


@attrs.frozen(kw_only=True)
class InitProducerIdResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    # To the flexible versions the transactional clients send.
    ApiSpec(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse, 0, 4),
)
