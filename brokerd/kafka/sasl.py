# -*- test-case-name: tests.test_sasl_mechanisms -*-
"""SASL authentication of one Kafka connection, as a sans-IO state machine.

What this module does:

* :func:`parse_mechanisms` reads ``--sasl`` (a comma list of :data:`KNOWN_MECHANISMS`).
* :class:`SaslSession` is one connection's authentication: a handshake chooses a
  mechanism (one of those enabled; PLAIN only on a TLS connection, since it sends the
  password itself), then tokens go back and forth (:meth:`SaslSession.token`) until the
  mechanism is done and :attr:`SaslSession.principal` is ``"User:<name>"``. PLAIN
  (RFC 4616) is checked against the user's stored SCRAM hash; SCRAM-SHA-256/512 run
  :class:`~brokerd.kafka.scram.ScramServer`.
* :class:`FailureLimiter` counts failed authentications per peer address: after
  :data:`MAX_FAILURES` within :data:`FAILURE_WINDOW` seconds, further attempts from that
  address are refused without looking at the credentials until the window has passed,
  so a password cannot be guessed at network speed.
* Kafka's SASL error codes (:class:`SaslCode`).

What it does not do: parse Kafka requests (:mod:`brokerd.kafka.sasl_handlers`), I/O,
Twisted, re-authentication (KIP-368: a session never expires, and SaslAuthenticate
answers a session lifetime of 0), delegation tokens, GSSAPI or OAUTHBEARER.
"""

from __future__ import annotations

import enum
import os
from collections import deque
from collections.abc import Callable
from typing import Protocol

import attrs

from brokerd.kafka.scram import (
    DEFAULT_ITERATIONS,
    MAX_MESSAGE_BYTES,
    MAX_USERNAME_BYTES,
    MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramError,
    ScramServer,
)

PLAIN = "PLAIN"
#: Every mechanism brokerd implements, in the order the handshake lists them.
KNOWN_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", PLAIN)
#: Failed authentications per peer address tolerated within :data:`FAILURE_WINDOW`.
MAX_FAILURES = 5
#: Seconds over which failures are counted (and the longest an address stays refused).
FAILURE_WINDOW = 60.0
#: Peer addresses whose failures are remembered; the oldest is forgotten beyond this.
MAX_TRACKED_ADDRESSES = 10_000

__all__ = [
    "FAILURE_WINDOW",
    "KNOWN_MECHANISMS",
    "MAX_FAILURES",
    "PLAIN",
    "CredentialLookup",
    "FailureLimiter",
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


class CredentialLookup(Protocol):
    """Where stored SCRAM credentials come from (a
    :class:`~brokerd.security.credentials.CredentialStore`, or a fake in tests)."""

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None: ...


class SaslFailed(Exception):
    """The exchange failed: ``code`` and a message for the client. The connection is to
    be closed after answering."""

    def __init__(self, code: SaslCode, message: str, *, log: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: What to log (with the peer address), or None: a refusal by the failure
        #: limiter is not logged again for every attempt (clients retry in a loop).
        self.log = log


class FailureLimiter:
    """Failed authentications per peer address over a sliding window.

    :param clock: seconds (monotonic; the reactor's ``seconds`` or a fake in tests).
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        max_failures: int = MAX_FAILURES,
        window: float = FAILURE_WINDOW,
        max_addresses: int = MAX_TRACKED_ADDRESSES,
    ) -> None:
        if max_failures < 1 or window <= 0 or max_addresses < 1:
            raise ValueError("limits must be positive")
        self._clock = clock
        self.max_failures = max_failures
        self.window = window
        self._max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, address: str) -> deque[float] | None:
        times = self._failures.get(address)
        if times is None:
            return None
        horizon = self._clock() - self.window
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[address]
            return None
        return times

    def retry_after(self, address: str) -> float | None:
        """Seconds until ``address`` may try again, or None if it may now."""
        times = self._recent(address)
        if times is None or len(times) < self.max_failures:
            return None
        return max(times[-self.max_failures] + self.window - self._clock(), 0.0)

    def failed(self, address: str) -> bool:
        """Count one failure of ``address``; return whether it is now refused."""
        times = self._recent(address)
        if times is None:
            if len(self._failures) >= self._max_addresses:
                del self._failures[next(iter(self._failures))]  # the longest tracked
            times = self._failures[address] = deque(maxlen=self.max_failures)
        times.append(self._clock())
        return len(times) >= self.max_failures


@attrs.frozen
class SaslConfig:
    """What every connection's :class:`SaslSession` shares (one per listener)."""

    mechanisms: tuple[str, ...]
    credentials: CredentialLookup
    limiter: FailureLimiter


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


class SaslSession:
    """One connection's SASL authentication.

    :param tls: whether the connection is encrypted (PLAIN is offered only then).
    :param peer: the peer's address, for the failure limiter and messages.
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
        self._scram: ScramServer | None = None

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
            self._state = _State.FAILED
            return Handshake(SaslCode.ILLEGAL_SASL_STATE, self.available)
        if mechanism not in self.available:
            self._state = _State.FAILED
            return Handshake(SaslCode.UNSUPPORTED_SASL_MECHANISM, self.available)
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._state = _State.TOKENS
        if mechanism != PLAIN:
            scram = MECHANISMS[mechanism]
            credentials = self._config.credentials
            self._scram = ScramServer(scram, lambda user: credentials.lookup(user, scram.name))
        return Handshake(SaslCode.NONE, self.available)

    def token(self, data: bytes) -> bytes:
        """Take the client's next token; return the server's.

        Once :attr:`authenticated`, :attr:`principal` is set.

        :raises SaslFailed: out of turn, refused by the failure limiter, or the
            mechanism failed (the failure is counted for the peer address).
        """
        if self._state is not _State.TOKENS:
            was = self._state
            self._state = _State.FAILED
            message = f"unexpected SaslAuthenticate: connection is {was.value}"
            raise SaslFailed(SaslCode.ILLEGAL_SASL_STATE, message, log=message)
        limiter = self._config.limiter
        wait = limiter.retry_after(self._peer)
        if wait is not None:
            self._state = _State.FAILED
            raise SaslFailed(
                SaslCode.SASL_AUTHENTICATION_FAILED,
                f"too many failed authentications from {self._peer}; "
                f"retry in {wait:.0f} s",
            )
        try:
            return self._step(data)
        except ScramError as e:
            self._state = _State.FAILED
            message = f"Authentication failed: {e}"
            log = f"{self.mechanism}: {e}"
            if limiter.failed(self._peer):
                log += (f"; {self._peer} is refused for {limiter.window:.0f} s after "
                        f"{limiter.max_failures} failures")
            raise SaslFailed(SaslCode.SASL_AUTHENTICATION_FAILED, message, log=log) from None

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
        if authzid and authzid != user:
            raise ScramError("authorization id must be empty or the user name")
        # The strongest stored hash; an unknown user costs the same work as a known one.
        for scram in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = self._config.credentials.lookup(user, scram.name)
            if credential is not None:
                if scram.verify_password(credential, password):
                    return user
                break
        else:
            decoy = ScramCredential(os.urandom(16), DEFAULT_ITERATIONS, b"", b"")
            SCRAM_SHA_256.verify_password(decoy, password)
        raise ScramError(f"invalid user name or password for {user!r}")
