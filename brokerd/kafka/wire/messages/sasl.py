# -*- test-case-name: tests.kafka.wire.messages.test_sasl, tests.kafka.server.handlers.test_sasl -*-
"""Message bodies of the SASL and SCRAM-credential APIs, registered by :data:`APIS`
(:mod:`brokerd.kafka.wire.requests.registry` collects it).

Transcribed from Kafka's JSON message schemas: SaslHandshake (17) v0-1 (never
flexible), SaslAuthenticate (36) v0-2 (v1 adds the session lifetime, v2 is flexible),
DescribeUserScramCredentials (50) v0 and AlterUserScramCredentials (51) v0 (both
flexible). A SCRAM mechanism is Kafka's int8 code there (1 = SCRAM-SHA-256,
2 = SCRAM-SHA-512).

Pure: no I/O, no Twisted, no authentication logic (:mod:`brokerd.kafka.server.sasl_session`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

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
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, wire_message


def _tuple(v: Any) -> Any:
    return None if v is None else tuple(v)


def _arr(default: Any = ()) -> Any:
    return attrs.field(default=default, converter=_tuple)


# -- SaslHandshake (17) --------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class SaslHandshakeRequest:
    mechanism: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class SaslHandshakeResponse:
    error_code: Annotated[int, Wire(INT16)] = 0
    mechanisms: Annotated[tuple[str, ...], Wire(Array(STRING))] = _arr()


# -- SaslAuthenticate (36) -----------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class SaslAuthenticateRequest:
    auth_bytes: Annotated[bytes, Wire(BYTES)]
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class SaslAuthenticateResponse:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    auth_bytes: Annotated[bytes, Wire(BYTES)] = b""
    #: v1+: 0 = the session never expires (no re-authentication, KIP-368).
    session_lifetime_ms: Annotated[int, Wire(INT64, 1)] = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 2


# -- DescribeUserScramCredentials (50) -----------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class UserName:
    name: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribeUserScramCredentialsRequest:
    #: None or empty = every user.
    users: Annotated[
        tuple[UserName, ...] | None,
        Wire(Array(Struct(UserName)), nullable_from=0),
    ] = _arr(None)
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class CredentialInfo:
    mechanism: Annotated[int, Wire(INT8)]
    iterations: Annotated[int, Wire(INT32)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribeUserScramCredentialsResult:
    user: Annotated[str, Wire(STRING)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    credential_infos: Annotated[
        tuple[CredentialInfo, ...],
        Wire(Array(Struct(CredentialInfo))),
    ] = _arr()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeUserScramCredentialsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    results: Annotated[
        tuple[DescribeUserScramCredentialsResult, ...],
        Wire(Array(Struct(DescribeUserScramCredentialsResult))),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0

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


@wire_message
@attrs.frozen(kw_only=True)
class ScramCredentialDeletion:
    name: Annotated[str, Wire(STRING)]
    mechanism: Annotated[int, Wire(INT8)]


@wire_message
@attrs.frozen(kw_only=True)
class ScramCredentialUpsertion:
    name: Annotated[str, Wire(STRING)]
    mechanism: Annotated[int, Wire(INT8)]
    iterations: Annotated[int, Wire(INT32)]
    salt: Annotated[bytes, Wire(BYTES)]
    salted_password: Annotated[bytes, Wire(BYTES)]


@wire_message
@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsRequest:
    deletions: Annotated[
        tuple[ScramCredentialDeletion, ...],
        Wire(Array(Struct(ScramCredentialDeletion))),
    ] = _arr()
    upsertions: Annotated[
        tuple[ScramCredentialUpsertion, ...],
        Wire(Array(Struct(ScramCredentialUpsertion))),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsResult:
    user: Annotated[str, Wire(STRING)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    results: Annotated[
        tuple[AlterUserScramCredentialsResult, ...],
        Wire(Array(Struct(AlterUserScramCredentialsResult))),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


SASL_HANDSHAKE = ApiSpec(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest, SaslHandshakeResponse, 0, 1)
SASL_AUTHENTICATE = ApiSpec(
    ApiKey.SASL_AUTHENTICATE,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    0,
    2,
)
DESCRIBE_USER_SCRAM_CREDENTIALS = ApiSpec(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    0,
    0,
)
# librdkafka 2.x ends this request with one tagged-fields byte too many; Kafka's
# readers never check for the end, so it works against Kafka.
ALTER_USER_SCRAM_CREDENTIALS = ApiSpec(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    0,
    0,
    trailing_bytes_ignored=True,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
#: SaslHandshake v0 switches the connection to raw SASL tokens (docs/kafka.md).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
)
