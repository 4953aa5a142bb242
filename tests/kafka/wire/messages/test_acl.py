"""The ACL APIs' bodies (:mod:`brokerd.kafka.wire.messages.acl`), byte by byte from
Kafka's JSON schemas: v1 (classic) and v2 (flexible), the pattern type's default, and
arrays given as lists."""

from __future__ import annotations

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.acl import (
    LITERAL_PATTERN,
    AclCreation,
    AclDescription,
    CreateAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
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

TOPIC, READ, ALLOW, PREFIXED = 2, 3, 3, 4


def test_create_acls_v1_and_v2_requests() -> None:
    v1 = arr(i8(TOPIC) + s("t") + i8(PREFIXED) + s("User:a") + s("*") + i8(READ) + i8(ALLOW))
    header = i16(ApiKey.CREATE_ACLS) + i16(1) + i32(7) + s("cli")
    expected = CreateAclsRequest(creations=(AclCreation(
        resource_type=TOPIC, resource_name="t", resource_pattern_type=PREFIXED,
        principal="User:a", host="*", operation=READ, permission_type=ALLOW),))
    assert apis.decode_request(header + v1).body == expected
    v2 = carr(i8(TOPIC) + cs("t") + i8(PREFIXED) + cs("User:a") + cs("*") + i8(READ)
              + i8(ALLOW) + NO_TAGS) + NO_TAGS
    assert apis.decode_request(_flex_request(ApiKey.CREATE_ACLS, 2, v2)).body == expected


def test_describe_acls_response_v1_and_v2() -> None:
    response = DescribeAclsResponse(resources=[DescribeAclsResource(
        resource_type=TOPIC, resource_name="t",
        acls=[AclDescription(principal="User:a", host="*", operation=READ,
                             permission_type=ALLOW)])])
    assert isinstance(response.resources, tuple)
    assert response.resources[0].pattern_type == LITERAL_PATTERN
    assert encoded(1, response) == (
        i32(0) + i16(0) + s(None)
        + arr(i8(TOPIC) + s("t") + i8(LITERAL_PATTERN)
              + arr(s("User:a") + s("*") + i8(READ) + i8(ALLOW)))
    )
    assert encoded(2, response) == (
        NO_TAGS + i32(0) + i16(0) + cs(None)
        + carr(i8(TOPIC) + cs("t") + i8(LITERAL_PATTERN)
               + carr(cs("User:a") + cs("*") + i8(READ) + i8(ALLOW) + NO_TAGS) + NO_TAGS)
        + NO_TAGS
    )
