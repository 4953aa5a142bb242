"""The client quota APIs' bodies (:mod:`brokerd.kafka.wire.messages.quotas`), byte by
byte from Kafka's JSON schemas: v0 (classic) and v1 (flexible), default entities as null
names, a null entries array, and arrays given as lists."""

from __future__ import annotations

import struct

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribedQuotaEntry,
    QuotaAlteration,
    QuotaEntityPart,
    QuotaOp,
    QuotaValue,
)
from brokerd.kafka.wire.requests import apis

from tests.kafka.wire.test_codec import (
    NO_TAGS,
    _flex_request,
    arr,
    carr,
    cs,
    encoded,
    i8,
    i16,
    i32,
    s,
)


def f64(v: float) -> bytes:
    return struct.pack(">d", v)


def test_alter_client_quotas_v0_and_v1_requests() -> None:
    expected = AlterClientQuotasRequest(entries=(QuotaAlteration(
        entity=(QuotaEntityPart(entity_type="client-id", entity_name=None),),
        ops=(QuotaOp(key="producer_byte_rate", value=1024.0),
             QuotaOp(key="request_percentage", remove=True)),
    ),), validate_only=True)
    v0 = arr(
        arr(s("client-id") + s(None))
        + arr(s("producer_byte_rate") + f64(1024.0) + i8(0),
              s("request_percentage") + f64(0.0) + i8(1))
    ) + i8(1)
    header = i16(ApiKey.ALTER_CLIENT_QUOTAS) + i16(0) + i32(7) + s("cli")
    assert apis.decode_request(header + v0).body == expected
    v1 = carr(
        carr(cs("client-id") + cs(None) + NO_TAGS)
        + carr(cs("producer_byte_rate") + f64(1024.0) + i8(0) + NO_TAGS,
               cs("request_percentage") + f64(0.0) + i8(1) + NO_TAGS)
        + NO_TAGS
    ) + i8(1) + NO_TAGS
    assert apis.decode_request(_flex_request(ApiKey.ALTER_CLIENT_QUOTAS, 1, v1)).body == expected


def test_describe_client_quotas_response_v0_v1_and_a_null_entries_array() -> None:
    response = DescribeClientQuotasResponse(entries=[DescribedQuotaEntry(
        entity=[QuotaEntityPart(entity_type="user", entity_name="alice")],
        values=[QuotaValue(key="consumer_byte_rate", value=2.5)])])
    assert isinstance(response.entries, tuple)
    assert encoded(0, response) == (
        i32(0) + i16(0) + s(None)
        + arr(arr(s("user") + s("alice")) + arr(s("consumer_byte_rate") + f64(2.5)))
    )
    assert encoded(1, response) == (
        NO_TAGS + i32(0) + i16(0) + cs(None)
        + carr(carr(cs("user") + cs("alice") + NO_TAGS)
               + carr(cs("consumer_byte_rate") + f64(2.5) + NO_TAGS) + NO_TAGS)
        + NO_TAGS
    )
    failed = DescribeClientQuotasResponse(error_code=42, error_message="bad", entries=None)
    assert failed.entries is None
    assert encoded(0, failed) == i32(0) + i16(42) + s("bad") + i32(-1)
