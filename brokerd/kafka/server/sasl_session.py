# -*- test-case-name: tests.kafka.server.test_sasl_session -*-
"""SASL authentication of one Kafka connection, as a sans-IO state machine.

What this module does:

* :func:`parse_mechanisms` reads ``--sasl`` (a comma list of :data:`KNOWN_MECHANISMS`).
* :class:`SaslSession` is one connection's authentication: a handshake chooses a
  mechanism (one of those enabled; PLAIN only on a TLS connection, since it sends the
  password itself), then tokens go back and forth (:meth:`SaslSession.token`) until the
  mechanism is done and :attr:`SaslSession.principal` is ``"User:<name>"``. PLAIN
  (RFC 4616) is checked against the user's stored SCRAM hash; SCRAM-SHA-256/512 run
  :class:`~brokerd.security.scram.ScramServer`.
* Failed authentications are slowed, not refused: each answer to a failure waits, longer
  for repeated failures of the same (address, user name) pair, and a correct credential
  is always accepted (:mod:`brokerd.security.auth_throttle`). :attr:`SaslSession.answer_delay`
  says how long the caller is to hold the answer it just got.
* Kafka's SASL error codes (:class:`SaslCode`).

What it does not do: parse Kafka requests (:mod:`brokerd.kafka.server.handlers.sasl`), I/O,
Twisted, re-authentication (KIP-368: a session never expires, and SaslAuthenticate
answers a session lifetime of 0), delegation tokens, GSSAPI or OAUTHBEARER.
"""

from __future__ import annotations

import enum
import os
from typing import TYPE_CHECKING

import attrs

from brokerd.security.auth_throttle import AuthThrottle, FailureLog
from brokerd.security.scram import (
    MAX_MESSAGE_BYTES,
    MAX_USERNAME_BYTES,
    MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    DecoyCredentials,
    ScramError,
    ScramServer,
)

if TYPE_CHECKING:
    from brokerd.security.credentials import CredentialStore

PLAIN = "PLAIN"
#: Every mechanism brokerd implements, in the order the handshake lists them.
KNOWN_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", PLAIN)
#: What a failure before any mechanism ran is logged as (see :class:`FailureLog`).
HANDSHAKE_FAILURE = "SASL handshake"

__all__ = [
    "HANDSHAKE_FAILURE",
    "KNOWN_MECHANISMS",
    "PLAIN",
    "SaslCode",
    "SaslConfig",
    "SaslFailed",
    "SaslSession",
    "parse_mechanisms",
]


class SaslCode(enum.IntEnum):
    """Kafka error codes of the SASL and SCRAM-credential APIs."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    SECURITY_DISABLED = 54
    SASL_AUTHENTICATION_FAILED = 58
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93


def parse_mechanisms(text: str) -> tuple[str, ...]:
    """``--sasl``'s value as a tuple of mechanism names (upper case, no duplicates).

    :raises ValueError: empty, or a mechanism brokerd does not implement.
    """
    names: list[str] = []
    for part in text.split(","):
        name = part.strip().upper()
        if not name:
            continue
        if name not in KNOWN_MECHANISMS:
            raise ValueError(
                f"unknown SASL mechanism {part.strip()!r} (known: {', '.join(KNOWN_MECHANISMS)})"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("no SASL mechanism given")
    return tuple(names)


class SaslFailed(Exception):
    """The exchange failed: ``code`` and a message for the client. The connection is to
    be closed after answering, which waits ``delay`` seconds."""

    def __init__(
        self, code: SaslCode, message: str, *, log: str, kind: str, delay: float = 0.0
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: What to log (with the peer address).
        self.log = log
        #: What failed (a mechanism, or :data:`HANDSHAKE_FAILURE`): log lines are
        #: rate-limited per kind.
        self.kind = kind
        self.delay = delay


def _random_decoys() -> DecoyCredentials:
    return DecoyCredentials(os.urandom(32))


@attrs.frozen
class SaslConfig:
    """What every connection's :class:`SaslSession` shares (one per listener)."""

    mechanisms: tuple[str, ...]
    credentials: CredentialStore
    throttle: AuthThrottle
    #: Unknown users' made-up credentials. The broker passes one made from the secret
    #: in its data directory; the default (a secret of this process) suits tests.
    decoys: DecoyCredentials = attrs.field(factory=_random_decoys)
    #: Rate limit of the failure log lines; the default shares the throttle's clock.
    failure_log: FailureLog = attrs.field(
        default=attrs.Factory(lambda self: FailureLog(self.throttle.clock), takes_self=True)
    )


class _State(enum.Enum):
    HANDSHAKE = "awaiting SaslHandshake"
    TOKENS = "awaiting SaslAuthenticate"
    DONE = "authenticated"
    FAILED = "failed"


@attrs.frozen
class Handshake:
    """A handshake's answer: the error code and the mechanisms offered."""

    code: SaslCode
    mechanisms: tuple[str, ...]
    #: Seconds to hold the answer (a refused mechanism is a failed authentication).
    delay: float = 0.0


class SaslSession:
    """One connection's SASL authentication.

    :param tls: whether the connection is encrypted (PLAIN is offered only then).
    :param peer: the peer's address, for the throttle and messages.
    """

    def __init__(self, config: SaslConfig, *, tls: bool, peer: str) -> None:
        self._config = config
        self._peer = peer
        self._state = _State.HANDSHAKE
        self.available = tuple(m for m in config.mechanisms if tls or m != PLAIN)
        self.mechanism: str | None = None
        #: Whether tokens come as raw frames (after a SaslHandshake v0), not requests.
        self.raw_tokens = False
        self.principal: str | None = None
        #: Seconds the answer to the latest :meth:`token` is to be held before it is
        #: sent (0 unless this address and user name failed recently).
        self.answer_delay = 0.0
        self._scram: ScramServer | None = None
        self._plain_user = ""  # the user a PLAIN token names, once parsed

    @property
    def authenticated(self) -> bool:
        return self._state is _State.DONE

    @property
    def awaiting_handshake(self) -> bool:
        return self._state is _State.HANDSHAKE

    @property
    def awaiting_tokens(self) -> bool:
        return self._state is _State.TOKENS

    def handshake(self, mechanism: str, version: int) -> Handshake:
        """Choose ``mechanism``; after a version-0 handshake tokens come raw.

        An unsupported mechanism, or a handshake out of turn, fails the session (the
        caller answers and closes, as Kafka does).
        """
        if self._state is not _State.HANDSHAKE:
            return self._refused_handshake(SaslCode.ILLEGAL_SASL_STATE)
        if mechanism not in self.available:
            return self._refused_handshake(SaslCode.UNSUPPORTED_SASL_MECHANISM)
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._state = _State.TOKENS
        if mechanism != PLAIN:
            scram = MECHANISMS[mechanism]
            credentials = self._config.credentials
            self._scram = ScramServer(
                scram, lambda user: credentials.lookup(user, scram.name), self._config.decoys
            )
        return Handshake(SaslCode.NONE, self.available)

    def _refused_handshake(self, code: SaslCode) -> Handshake:
        self._state = _State.FAILED
        return Handshake(code, self.available, self._config.throttle.failed(self._peer, ""))

    @property
    def _user(self) -> str:
        """The user name the attempt claims, once known ("" before)."""
        if self._scram is not None:
            return self._scram.username or ""
        return self._plain_user

    def token(self, data: bytes) -> bytes:
        """Take the client's next token; return the server's.

        Once :attr:`authenticated`, :attr:`principal` is set. The answer (or the
        failure) is to be held :attr:`answer_delay` seconds (or ``SaslFailed.delay``).

        :raises SaslFailed: out of turn, or the mechanism failed (the failure is
            counted for the peer address and user name).
        """
        throttle = self._config.throttle
        self.answer_delay = 0.0
        if self._state is not _State.TOKENS:
            was = self._state
            self._state = _State.FAILED
            message = f"unexpected SaslAuthenticate: connection is {was.value}"
            raise SaslFailed(SaslCode.ILLEGAL_SASL_STATE, message, log=message,
                             kind=HANDSHAKE_FAILURE, delay=throttle.failed(self._peer, ""))
        try:
            answer = self._step(data)
        except ScramError as e:
            self._state = _State.FAILED
            user = self._user
            held = throttle.hold(self._peer, user)
            delay = throttle.failed(self._peer, user, held=held)
            failures = throttle.failures(self._peer, user)
            log = f"{self.mechanism}: {e}"
            if failures > 1:
                log += f" ({failures} failures of this user from this address; " \
                       f"answered after {delay:.1f} s)"
            raise SaslFailed(SaslCode.SASL_AUTHENTICATION_FAILED, f"Authentication failed: {e}",
                             log=log, kind=self.mechanism or HANDSHAKE_FAILURE,
                             delay=delay) from None
        if self.authenticated:
            user = self._user
            self.answer_delay = throttle.hold(self._peer, user)
            throttle.succeeded(self._peer, user)
        return answer

    def _step(self, data: bytes) -> bytes:
        if len(data) > MAX_MESSAGE_BYTES:
            raise ScramError(f"token of {len(data)} bytes is longer than {MAX_MESSAGE_BYTES}")
        if self._scram is None:
            self._done(self._plain(data))
            return b""
        if self._scram.username is None:
            return self._scram.first(data)
        result = self._scram.final(data)
        self._done(result.username)
        return result.server_final

    def _done(self, user: str) -> None:
        self._state = _State.DONE
        self._scram = None
        self._plain_user = user
        self.principal = f"User:{user}"

    def _plain(self, data: bytes) -> str:
        parts = data.split(b"\x00")
        if len(parts) != 3:
            raise ScramError("malformed PLAIN message")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise ScramError("PLAIN message is not UTF-8") from None
        if not user or len(user.encode("utf-8")) > MAX_USERNAME_BYTES or not password:
            raise ScramError("PLAIN needs a user name and a password")
        self._plain_user = user
        if authzid and authzid != user:
            raise ScramError("authorization id must be empty or the user name")
        # The strongest stored hash; an unknown user costs the same work as a known one
        # (one PBKDF2 at the default iteration count).
        for scram in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = self._config.credentials.lookup(user, scram.name)
            if credential is not None:
                if scram.verify_password(credential, password):
                    return user
                break
        else:
            decoy = self._config.decoys.credential(SCRAM_SHA_512, user)
            SCRAM_SHA_512.verify_password(decoy, password)
        raise ScramError(f"invalid user name or password for {user!r}")
