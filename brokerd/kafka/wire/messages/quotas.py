# -*- test-case-name: tests.kafka.server.handlers.test_quotas -*-
"""Request and response bodies of DescribeClientQuotas (48) and AlterClientQuotas (49),
versions 0-1 (flexible from 1), as Kafka 4.4 declares them.

Transcribed from Kafka's JSON message schemas like the rest of
:mod:`brokerd.kafka.wire.messages`; :data:`APIS` registers them
(:mod:`brokerd.kafka.wire.requests.registry`). Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, wire_message

QUOTAS_FLEXIBLE_FROM = 1


def _tuple(v: Any) -> Any:
    return None if v is None else tuple(v)


def _arr() -> Any:
    return attrs.field(default=(), converter=_tuple)


@wire_message
@attrs.frozen(kw_only=True)
class QuotaEntityPart:
    """One (type, name) of an entity; name None is the type's default entity."""

    entity_type: Annotated[str, Wire(STRING)]
    entity_name: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


# -- DescribeClientQuotas (48) ---------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class QuotaFilterComponent:
    entity_type: Annotated[str, Wire(STRING)]
    match_type: Annotated[int, Wire(INT8)]
    match: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DescribeClientQuotasRequest:
    components: Annotated[
        tuple[QuotaFilterComponent, ...], Wire(Array(Struct(QuotaFilterComponent)))
    ] = _arr()
    strict: Annotated[bool, Wire(BOOL)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = QUOTAS_FLEXIBLE_FROM


@wire_message
@attrs.frozen(kw_only=True)
class QuotaValue:
    key: Annotated[str, Wire(STRING)]
    value: Annotated[float, Wire(FLOAT64)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribedQuotaEntry:
    entity: Annotated[tuple[QuotaEntityPart, ...], Wire(Array(Struct(QuotaEntityPart)))] = _arr()
    values: Annotated[tuple[QuotaValue, ...], Wire(Array(Struct(QuotaValue)))] = _arr()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeClientQuotasResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    entries: Annotated[
        tuple[DescribedQuotaEntry, ...] | None,
        Wire(Array(Struct(DescribedQuotaEntry)), nullable_from=0),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = QUOTAS_FLEXIBLE_FROM


# -- AlterClientQuotas (49) ------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class QuotaOp:
    key: Annotated[str, Wire(STRING)]
    value: Annotated[float, Wire(FLOAT64)] = 0.0
    remove: Annotated[bool, Wire(BOOL)] = False


@wire_message
@attrs.frozen(kw_only=True)
class QuotaAlteration:
    entity: Annotated[tuple[QuotaEntityPart, ...], Wire(Array(Struct(QuotaEntityPart)))] = _arr()
    ops: Annotated[tuple[QuotaOp, ...], Wire(Array(Struct(QuotaOp)))] = _arr()


@wire_message
@attrs.frozen(kw_only=True)
class AlterClientQuotasRequest:
    entries: Annotated[
        tuple[QuotaAlteration, ...], Wire(Array(Struct(QuotaAlteration)))
    ] = _arr()
    validate_only: Annotated[bool, Wire(BOOL)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = QUOTAS_FLEXIBLE_FROM


@wire_message
@attrs.frozen(kw_only=True)
class QuotaAlterationResult:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    entity: Annotated[tuple[QuotaEntityPart, ...], Wire(Array(Struct(QuotaEntityPart)))] = _arr()


@wire_message
@attrs.frozen(kw_only=True)
class AlterClientQuotasResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    entries: Annotated[
        tuple[QuotaAlterationResult, ...], Wire(Array(Struct(QuotaAlterationResult)))
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = QUOTAS_FLEXIBLE_FROM


DESCRIBE_CLIENT_QUOTAS = ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, DescribeClientQuotasRequest,
        DescribeClientQuotasResponse, 0, 1)
ALTER_CLIENT_QUOTAS = ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, AlterClientQuotasRequest,
        AlterClientQuotasResponse, 0, 1)
APIS: tuple[ApiSpec[Any, Any], ...] = (DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS)
