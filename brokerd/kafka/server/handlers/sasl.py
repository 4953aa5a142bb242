# -*- test-case-name: tests.kafka.server.handlers.test_sasl -*-
"""Kafka's SASL APIs and SCRAM-credential admin APIs, in terms of decoded requests.

* :func:`answer_sasl` answers SaslHandshake (17) and SaslAuthenticate (36) for one
  connection's :class:`~brokerd.kafka.server.sasl_session.SaslSession` (or None: SASL
  disabled, every such request gets ILLEGAL_SASL_STATE, as Kafka answers on a listener
  without SASL),
  says whether the connection must be closed after the answer (a failed
  authentication; Kafka closes then), and how long the answer is to be held
  (:mod:`brokerd.security.auth_throttle`).
* :class:`ScramAdminHandlers` answers DescribeUserScramCredentials (50) and
  AlterUserScramCredentials (51) from the credentials store; without ``--credentials``
  both answer SECURITY_DISABLED (per user: see
  :meth:`~brokerd.kafka.wire.messages.sasl.DescribeUserScramCredentialsResponse.refused`).
  Alter takes salted passwords computed by the client (it never sees a password) and
  stores only StoredKey and ServerKey derived from them; all changes of one user are
  applied together or not at all, and one atomic rewrite of the file carries every
  accepted user.

What it does not do: decide which requests a connection may send before
authenticating (:mod:`brokerd.kafka.listener.protocol`), authorize (any authenticated principal
may call them until an authorizer says otherwise), or parse bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import attrs
from twisted.logger import Logger

from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    DENIED_TEXT,
    Access,
    Gate,
    answer_now,
)
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.server.sasl_session import HANDSHAKE_FAILURE, SaslCode, SaslFailed, SaslSession
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import sasl as m
from brokerd.kafka.wire.messages.sasl import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
)
from brokerd.kafka.wire.requests.apis import AnyRequest, Request
from brokerd.security.acl import Operation
from brokerd.security.credentials import CredentialChange, CredentialsError, CredentialStore
from brokerd.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS_BY_CODE,
    MIN_ITERATIONS,
    ScramMechanism,
)

#: Longest salt accepted from AlterUserScramCredentials.
MAX_SALT_BYTES = 1024

__all__ = ["SASL_API_KEYS", "SaslAnswer", "ScramAdminHandlers", "answer_sasl"]

#: The APIs a connection may send before it has authenticated (with ApiVersions).
SASL_API_KEYS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


@attrs.frozen
class SaslAnswer:
    """A SASL response, and whether to close the connection once it is written."""

    response: m.SaslHandshakeResponse | m.SaslAuthenticateResponse
    close: bool = False
    #: The failure's message, to log with the peer address.
    failure: str | None = None
    #: What failed, for the rate limit of log lines (a mechanism or the handshake).
    failure_kind: str = HANDSHAKE_FAILURE
    #: Seconds to hold the response before it is sent (a failure's delay, or the
    #: throttle of a user and address that failed recently).
    delay: float = 0.0


def answer_sasl(session: SaslSession | None, request: AnyRequest) -> SaslAnswer:
    """Answer a SaslHandshake or SaslAuthenticate request of one connection (the
    protocol's, not routed: they change the connection's state)."""
    if request.api_key is ApiKey.SASL_HANDSHAKE:
        return _handshake(session, request)
    return _authenticate(session, request)


def _handshake(
    session: SaslSession | None, request: Request[m.SaslHandshakeRequest]
) -> SaslAnswer:
    if session is None or session.authenticated:
        # Not an error that closes: Kafka answers this way on a listener without SASL
        # and to a second handshake (re-authentication is not supported).
        offered = () if session is None else session.available
        return SaslAnswer(m.SaslHandshakeResponse(
            error_code=SaslCode.ILLEGAL_SASL_STATE, mechanisms=offered))
    body = request.body
    result = session.handshake(body.mechanism, request.api_version)
    response = m.SaslHandshakeResponse(error_code=result.code, mechanisms=result.mechanisms)
    if result.code != SaslCode.NONE:
        return SaslAnswer(
            response,
            close=True,
            failure=f"SASL mechanism {body.mechanism!r} refused ({result.code.name}); "
            f"offered: {', '.join(result.mechanisms) or 'none'}",
            delay=result.delay,
        )
    return SaslAnswer(response)


def _authenticate(
    session: SaslSession | None, request: Request[m.SaslAuthenticateRequest]
) -> SaslAnswer:
    if session is None or session.authenticated:
        why = (
            "SASL is not enabled on this listener" if session is None
            else "SaslAuthenticate received after successful authentication"
        )
        return SaslAnswer(m.SaslAuthenticateResponse(
            error_code=SaslCode.ILLEGAL_SASL_STATE, error_message=why))
    body = request.body
    try:
        token = session.token(body.auth_bytes)
    except SaslFailed as e:
        return SaslAnswer(
            m.SaslAuthenticateResponse(error_code=e.code, error_message=e.message),
            close=True,
            failure=e.log,
            failure_kind=e.kind,
            delay=e.delay,
        )
    return SaslAnswer(m.SaslAuthenticateResponse(auth_bytes=token), delay=session.answer_delay)


class ScramAdminHandlers:
    """DescribeUserScramCredentials and AlterUserScramCredentials over ``store``
    (None: no ``--credentials``, both answer SECURITY_DISABLED)."""

    _log = Logger()

    def __init__(self, store: CredentialStore | None) -> None:
        self._store = store

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(
                DESCRIBE_USER_SCRAM_CREDENTIALS,
                self.describe,
                describe_user_scram_credentials_rule,
            ),
            route(
                ALTER_USER_SCRAM_CREDENTIALS,
                self.alter,
                alter_user_scram_credentials_rule,
            ),
        )

    async def describe(
        self, conn: RequestContext, req: Request[m.DescribeUserScramCredentialsRequest]
    ) -> m.DescribeUserScramCredentialsResponse:
        body = req.body
        if self._store is None:
            return m.DescribeUserScramCredentialsResponse.refused(
                body, SaslCode.SECURITY_DISABLED,
                "no credentials file is configured (--credentials)",
            )
        users = self._store.users()
        wanted = [u.name for u in body.users or ()]
        names = wanted or sorted(users)
        counts: dict[str, int] = defaultdict(int)
        for name in wanted:
            counts[name] += 1
        results = []
        for name in dict.fromkeys(names):
            if counts[name] > 1:
                results.append(m.DescribeUserScramCredentialsResult(
                    user=name, error_code=SaslCode.DUPLICATE_RESOURCE,
                    error_message="user named more than once in the request"))
            elif not users.get(name):
                results.append(m.DescribeUserScramCredentialsResult(
                    user=name, error_code=SaslCode.RESOURCE_NOT_FOUND,
                    error_message=f"attempt to describe a user credential that does not "
                    f"exist: {name}"))
            else:
                infos = tuple(
                    m.CredentialInfo(mechanism=mech.code, iterations=cred.iterations)
                    for code, mech in sorted(MECHANISMS_BY_CODE.items())
                    if (cred := users[name].get(mech.name)) is not None
                )
                results.append(m.DescribeUserScramCredentialsResult(
                    user=name, credential_infos=infos))
        return m.DescribeUserScramCredentialsResponse(results=tuple(results))

    async def alter(
        self, conn: RequestContext, req: Request[m.AlterUserScramCredentialsRequest]
    ) -> m.AlterUserScramCredentialsResponse:
        body = req.body
        order = list(dict.fromkeys(
            [d.name for d in body.deletions] + [u.name for u in body.upsertions]))
        if self._store is None:
            return m.AlterUserScramCredentialsResponse(results=tuple(
                m.AlterUserScramCredentialsResult(
                    user=name, error_code=SaslCode.SECURITY_DISABLED,
                    error_message="no credentials file is configured (--credentials)")
                for name in order))
        errors: dict[str, tuple[SaslCode, str]] = {}
        changes: dict[str, list[CredentialChange]] = defaultdict(list)
        seen: dict[tuple[str, int], int] = defaultdict(int)
        for d in body.deletions:
            seen[(d.name, d.mechanism)] += 1
        for u in body.upsertions:
            seen[(u.name, u.mechanism)] += 1
        existing = self._store.users()

        def refuse(name: str, code: SaslCode, text: str) -> None:
            errors.setdefault(name, (code, text))

        for d in body.deletions:
            mech = _entry_mechanism(d.name, d.mechanism, seen)
            if not isinstance(mech, ScramMechanism):
                refuse(d.name, *mech)
            elif mech.name not in existing.get(d.name, {}):
                refuse(d.name, SaslCode.RESOURCE_NOT_FOUND,
                       f"attempt to delete a user credential that does not exist: "
                       f"{d.name} {mech.name}")
            else:
                changes[d.name].append(CredentialChange(d.name, mech.name, None))
        for u in body.upsertions:
            mech = _entry_mechanism(u.name, u.mechanism, seen)
            if not isinstance(mech, ScramMechanism):
                refuse(u.name, *mech)
            elif u.iterations < MIN_ITERATIONS:
                refuse(u.name, SaslCode.UNACCEPTABLE_CREDENTIAL,
                       f"too few iterations ({u.iterations} < {MIN_ITERATIONS})")
            elif u.iterations > MAX_ITERATIONS:
                refuse(u.name, SaslCode.UNACCEPTABLE_CREDENTIAL,
                       f"too many iterations ({u.iterations} > {MAX_ITERATIONS})")
            elif not 0 < len(u.salt) <= MAX_SALT_BYTES:
                refuse(u.name, SaslCode.UNACCEPTABLE_CREDENTIAL,
                       f"salt must be 1 to {MAX_SALT_BYTES} bytes")
            elif len(u.salted_password) != mech.digest_size:
                refuse(u.name, SaslCode.UNACCEPTABLE_CREDENTIAL,
                       f"salted password must be {mech.digest_size} bytes for {mech.name}")
            else:
                credential = mech.credential_from_salted(u.salted_password, u.salt, u.iterations)
                changes[u.name].append(CredentialChange(u.name, mech.name, credential))
        accepted = [c for name in order if name not in errors for c in changes[name]]
        if accepted:
            try:
                self._store.alter(accepted)
            except (OSError, CredentialsError) as e:
                self._log.error("AlterUserScramCredentials could not write: {error}", error=e)
                for name in order:
                    refuse(name, SaslCode.UNKNOWN_SERVER_ERROR,
                           f"the credentials file could not be written: {e}")
            else:
                self._log.info("SCRAM credentials altered for {users}",
                               users=", ".join(n for n in order if n not in errors))
        return m.AlterUserScramCredentialsResponse(results=tuple(
            m.AlterUserScramCredentialsResult(
                user=name,
                error_code=errors[name][0] if name in errors else 0,
                error_message=errors[name][1] if name in errors else None,
            )
            for name in order))


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def describe_user_scram_credentials_rule(
    access: Access, req: Request[m.DescribeUserScramCredentialsRequest]
) -> Gate[m.DescribeUserScramCredentialsRequest, m.DescribeUserScramCredentialsResponse]:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return answer_now(req, m.DescribeUserScramCredentialsResponse.refused(
        req.body, CLUSTER_DENIED, DENIED_TEXT
    ))


def alter_user_scram_credentials_rule(
    access: Access, req: Request[m.AlterUserScramCredentialsRequest]
) -> Gate[m.AlterUserScramCredentialsRequest, m.AlterUserScramCredentialsResponse]:
    if access.cluster(Operation.ALTER):
        return Gate(req)
    users = dict.fromkeys(
        [d.name for d in req.body.deletions] + [u.name for u in req.body.upsertions]
    )
    return answer_now(req, m.AlterUserScramCredentialsResponse(results=tuple(
        m.AlterUserScramCredentialsResult(
            user=user, error_code=CLUSTER_DENIED, error_message=DENIED_TEXT
        )
        for user in users
    )))


def _entry_mechanism(
    name: str, mechanism: int, seen: Mapping[tuple[str, int], int]
) -> ScramMechanism | tuple[SaslCode, str]:
    """The mechanism an AlterUserScramCredentials deletion or upsertion names, or why
    the entry is refused whatever it asks: no user name, an unknown mechanism, or the
    user and mechanism named twice in the request (``seen`` counts them)."""
    mech = MECHANISMS_BY_CODE.get(mechanism)
    if not name:
        return SaslCode.UNACCEPTABLE_CREDENTIAL, "user name must not be empty"
    if mech is None:
        return SaslCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism {mechanism}"
    if seen[(name, mechanism)] > 1:
        return (SaslCode.DUPLICATE_RESOURCE,
                "a user and mechanism may appear only once per request")
    return mech
