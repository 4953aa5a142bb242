# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of InitProducerId (22), and the version range brokerd answers
of each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT16,
    INT32,
    INT64,
    STRING,
    ApiKey,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, wire_message

# -- InitProducerId (22) -------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class InitProducerIdRequest:
    transactional_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    transaction_timeout_ms: Annotated[int, Wire(INT32)] = 60_000
    #: v3+ (KIP-360): the producer's current id and epoch, -1 when it has none.
    producer_id: Annotated[int, Wire(INT64, 3)] = -1
    producer_epoch: Annotated[int, Wire(INT16, 3)] = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class InitProducerIdResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    producer_id: Annotated[int, Wire(INT64)] = -1
    producer_epoch: Annotated[int, Wire(INT16)] = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 2


# v5 only adds TRANSACTION_ABORTABLE to the codes a client knows (brokerd never
# answers it); v6 (two-phase commit, KIP-939) is unstable in Kafka and not answered.
INIT_PRODUCER_ID = ApiSpec(
    ApiKey.INIT_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
    0,
    5,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (INIT_PRODUCER_ID,)
