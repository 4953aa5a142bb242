# -*- test-case-name: tests.test_sasl_protocol -*-
"""Message bodies of the SASL and SCRAM-credential APIs, registered by :data:`APIS`
(:mod:`brokerd.kafka.wire.registry` collects it).

Transcribed from Kafka's JSON message schemas: SaslHandshake (17) v0-1 (never
flexible), SaslAuthenticate (36) v0-2 (v1 adds the session lifetime, v2 is flexible),
DescribeUserScramCredentials (50) v0 and AlterUserScramCredentials (51) v0 (both
flexible). A SCRAM mechanism is Kafka's int8 code there (1 = SCRAM-SHA-256,
2 = SCRAM-SHA-512).

Pure: no I/O, no Twisted, no authentication logic (:mod:`brokerd.kafka.server.sasl`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec


def _tuple(v: Any) -> Any:
    return None if v is None else tuple(v)


def _arr(default: Any = ()) -> Any:
    return attrs.field(default=default, converter=_tuple)


# -- SaslHandshake (17) --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SaslHandshakeRequest:
    mechanism: str
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("mechanism", STRING),)


@attrs.frozen(kw_only=True)
class SaslHandshakeResponse:
    error_code: int = 0
    mechanisms: tuple[str, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("mechanisms", Array(STRING)),
    )


# -- SaslAuthenticate (36) -----------------------------------------------------------


@attrs.frozen(kw_only=True)
class SaslAuthenticateRequest:
    auth_bytes: bytes
    FLEXIBLE_FROM: ClassVar[int | None] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("auth_bytes", BYTES),)


@attrs.frozen(kw_only=True)
class SaslAuthenticateResponse:
    error_code: int = 0
    error_message: str | None = None
    auth_bytes: bytes = b""
    #: v1+: 0 = the session never expires (no re-authentication, KIP-368).
    session_lifetime_ms: int = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("auth_bytes", BYTES),
        Field("session_lifetime_ms", INT64, 1),
    )


# -- DescribeUserScramCredentials (50) -----------------------------------------------


@attrs.frozen(kw_only=True)
class UserName:
    name: str
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("name", STRING),)


@attrs.frozen(kw_only=True)
class DescribeUserScramCredentialsRequest:
    #: None or empty = every user.
    users: tuple[UserName, ...] | None = _arr(None)
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("users", Array(Struct(UserName)), nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CredentialInfo:
    mechanism: int
    iterations: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("mechanism", INT8),
        Field("iterations", INT32),
    )


@attrs.frozen(kw_only=True)
class DescribeUserScramCredentialsResult:
    user: str
    error_code: int = 0
    error_message: str | None = None
    credential_infos: tuple[CredentialInfo, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("user", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("credential_infos", Array(Struct(CredentialInfo))),
    )


@attrs.frozen(kw_only=True)
class DescribeUserScramCredentialsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    results: tuple[DescribeUserScramCredentialsResult, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("results", Array(Struct(DescribeUserScramCredentialsResult))),
    )

    @classmethod
    def refused(
        cls, request: DescribeUserScramCredentialsRequest, code: int, message: str
    ) -> DescribeUserScramCredentialsResponse:
        """The whole request refused (no credentials store, not authorized).

        The error goes in one result per user named (their names kept, so a client
        can match each to its question), or in one result with an empty name when
        every user was asked for; the request-level error stays 0. Kafka puts the
        error at the request level too, but librdkafka (up to at least 2.16.1) then
        frees a string it does not own and the client process crashes, so the
        request-level fields are left clear: Java, librdkafka and Python clients all
        report the per-user error.
        """
        names = dict.fromkeys(u.name for u in request.users or ()) or {"": None}
        return cls(results=tuple(
            DescribeUserScramCredentialsResult(user=name, error_code=code, error_message=message)
            for name in names
        ))


# -- AlterUserScramCredentials (51) --------------------------------------------------


@attrs.frozen(kw_only=True)
class ScramCredentialDeletion:
    name: str
    mechanism: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("mechanism", INT8),
    )


@attrs.frozen(kw_only=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("mechanism", INT8),
        Field("iterations", INT32),
        Field("salt", BYTES),
        Field("salted_password", BYTES),
    )


@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...] = _arr()
    upsertions: tuple[ScramCredentialUpsertion, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("deletions", Array(Struct(ScramCredentialDeletion))),
        Field("upsertions", Array(Struct(ScramCredentialUpsertion))),
    )


@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsResult:
    user: str
    error_code: int = 0
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("user", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsResponse:
    throttle_time_ms: int = 0
    results: tuple[AlterUserScramCredentialsResult, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(AlterUserScramCredentialsResult))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
#: SaslHandshake v0 switches the connection to raw SASL tokens (docs/kafka.md).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
    ApiSpec(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
    ApiSpec(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        0,
        0,
    ),
    # librdkafka 2.x ends this request with one tagged-fields byte too many; Kafka's
    # readers never check for the end, so it works against Kafka.
    ApiSpec(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        0,
        0,
        trailing_bytes_ignored=True,
    ),
)
