# -*- test-case-name: tests.web.test_auth -*-
"""Who is asking, on the ``--http`` endpoint (``--http-auth``).

* ``none``: nobody is asked anything. A request's principal is its client certificate's
  (on an ``ssl:`` listener with ``--ssl-client-auth``), else ``User:ANONYMOUS``.
* ``basic``: HTTP Basic (RFC 7617), the user name and password checked against the
  salted SCRAM hashes of the ``--credentials`` file (as a SASL/PLAIN login is); the
  principal is ``User:<name>``. A missing or wrong password is answered 401 with a
  ``WWW-Authenticate: Basic`` challenge. After :data:`MAX_FAILURES` failures from one
  address within :data:`FAILURE_WINDOW` seconds that address gets 429 without a check
  for the rest of the window (each check costs a PBKDF2 on the reactor thread). A good
  password is remembered for :data:`REMEMBER_SECONDS` (a browser sends it with every
  refresh), and forgotten at once when the user's stored hash changes.
* ``certificate``: the listener is ``ssl:`` and demands a client certificate (the TLS
  handshake fails without one); the principal is the certificate's, as on the other
  listeners.

``/healthz`` and ``/readyz`` are served to everyone (probes carry no credentials);
``/readyz`` then says why the broker is not ready only to a principal allowed to see
everything (:mod:`brokerd.web.scope`).

What this module does not do: decide what a principal may see (``brokerd.web.scope``),
or hash passwords (``brokerd.security.credentials``).
"""

from __future__ import annotations

import binascii
import hashlib
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from twisted.web.resource import IResource, Resource

from brokerd.clock import Seconds
from brokerd.security.acl import ANONYMOUS
from brokerd.security.doors import HttpAuth

if TYPE_CHECKING:
    # Annotations only: the start builds the HTTP identity with --http none too, and
    # twisted.web.server (the HTTP server) is a large import it then never needs.
    from twisted.web.server import Request

    from brokerd.security.credentials import CredentialStore

__all__ = [
    "FAILURE_WINDOW",
    "MAX_FAILURES",
    "OPEN_PATHS",
    "REMEMBER_SECONDS",
    "AuthGuard",
    "BasicPasswords",
    "HttpIdentity",
]

#: Paths served without authentication: they answer whether the broker is up.
OPEN_PATHS = frozenset({b"healthz", b"readyz"})
#: Failed Basic logins from one address before it is refused for the window's rest.
MAX_FAILURES = 5
FAILURE_WINDOW = 60.0
#: How long a verified password is taken without hashing it again.
REMEMBER_SECONDS = 60.0
#: Most remembered passwords and tracked addresses (the oldest go first).
_MAX_REMEMBERED = 1024
#: Longest Authorization header looked at; a Basic one is far shorter.
_MAX_HEADER_BYTES = 4096
REALM = b'Basic realm="brokerd", charset="UTF-8"'


class BasicPasswords:
    """Checks Basic credentials, remembering good ones briefly and refusing an address
    that keeps failing. Reactor thread only."""

    def __init__(self, credentials: CredentialStore, *, clock: Seconds) -> None:
        self._credentials = credentials
        self._clock = clock
        #: (user, password digest) -> (the stored credentials it matched, when).
        self._good: dict[tuple[str, bytes], tuple[object, float]] = {}
        self._failures: dict[str, deque[float]] = {}

    def refused(self, address: str) -> bool:
        """Whether ``address`` failed too often lately to be checked at all."""
        times = self._failures.get(address)
        if times is None:
            return False
        horizon = self._clock.seconds() - FAILURE_WINDOW
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[address]
            return False
        return len(times) >= MAX_FAILURES

    def check(self, address: str, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (a failure counts against ``address``)."""
        now = self._clock.seconds()
        key = (user, hashlib.sha256(password.encode("utf-8")).digest())
        stored = self._credentials.credentials_of(user)
        remembered = self._good.get(key)
        if remembered is not None and remembered[0] == stored and (
            now - remembered[1] < REMEMBER_SECONDS
        ):
            return True
        if self._credentials.verify_password(user, password):
            if len(self._good) >= _MAX_REMEMBERED:
                del self._good[next(iter(self._good))]
            self._good[key] = (stored, now)
            return True
        self._good.pop(key, None)
        times = self._failures.get(address)
        if times is None:
            if len(self._failures) >= _MAX_REMEMBERED:
                del self._failures[next(iter(self._failures))]
            times = self._failures[address] = deque(maxlen=MAX_FAILURES)
        times.append(now)
        return False


def _basic_credentials(request: Request) -> tuple[str, str] | None:
    header = request.getHeader(b"authorization")
    if header is None or len(header) > _MAX_HEADER_BYTES:
        return None
    scheme, _, token = header.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = binascii.a2b_base64(token.strip(), strict_mode=True)
        user, sep, password = decoded.decode("utf-8").partition(":")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    if not sep or not user:
        return None
    return user, password


class HttpIdentity:
    """The principal of an HTTP request under ``--http-auth``.

    :param mode: the ``--http-auth`` value.
    :param passwords: the Basic checker (needed by ``basic``).
    :param peer_principal: the principal of a connection's verified client certificate
        (``User:ANONYMOUS`` without one), given the request's transport; the service
        tree passes the TLS layer's. Without it no certificate counts.
    """

    def __init__(
        self,
        mode: HttpAuth,
        passwords: BasicPasswords | None = None,
        *,
        peer_principal: Callable[[object], str] = lambda transport: ANONYMOUS,
    ) -> None:
        if mode is HttpAuth.BASIC and passwords is None:
            raise ValueError("--http-auth basic needs the credentials")
        self.mode = mode
        self._passwords = passwords
        self._peer_principal = peer_principal

    @property
    def asks(self) -> bool:
        """Whether requests must authenticate (anything but ``none``)."""
        return self.mode is not HttpAuth.NONE

    def principal(self, request: Request) -> str | None:
        """The request's principal, or None when it did not authenticate as
        ``--http-auth`` asks."""
        certified = self._peer_principal(request.channel.transport)
        if self.mode is HttpAuth.NONE:
            return certified
        if self.mode is HttpAuth.CERTIFICATE:
            return None if certified == ANONYMOUS else certified
        assert self._passwords is not None
        given = _basic_credentials(request)
        if given is None:
            return None
        user, password = given
        if self._passwords.check(_address(request), user, password):
            return f"User:{user}"
        return None

    def refused(self, request: Request) -> bool:
        """Whether the request's address failed Basic logins too often lately."""
        return self._passwords is not None and self._passwords.refused(_address(request))


def _address(request: Request) -> str:
    return str(getattr(request.getClientAddress(), "host", "?"))


class _Refusal(Resource):
    """401 with a Basic challenge (or 429 for an address that failed too often)."""

    isLeaf = True

    def __init__(self, status: int, challenge: bool) -> None:
        super().__init__()
        self._status = status
        self._challenge = challenge

    def render(self, request: Request) -> bytes:
        request.setResponseCode(self._status)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"cache-control", b"no-store")
        if self._challenge:
            request.setHeader(b"www-authenticate", REALM)
            return b"Authentication required (--http-auth).\n"
        request.setHeader(b"retry-after", str(int(FAILURE_WINDOW)).encode())
        return b"Too many failed logins from this address; try again later.\n"


class AuthGuard(Resource):
    """The site's root when ``--http-auth`` asks for credentials: every path but
    :data:`OPEN_PATHS` is served by ``root`` only to a request that authenticated."""

    def __init__(self, root: Resource, identity: HttpIdentity) -> None:
        super().__init__()
        self._root = root
        self._identity = identity

    def getChildWithDefault(self, path: bytes, request: Request) -> IResource:
        if path not in OPEN_PATHS or request.postpath:
            if self._identity.refused(request):
                return cast(IResource, _Refusal(429, challenge=False))
            if self._identity.principal(request) is None:
                basic = self._identity.mode is HttpAuth.BASIC
                return cast(IResource, _Refusal(401, challenge=basic))
        child: IResource = self._root.getChildWithDefault(path, request)
        return child

    def render(self, request: Request) -> bytes:
        # Only reached for an empty path (the root resource itself).
        return _Refusal(401, challenge=self._identity.mode is HttpAuth.BASIC).render(request)
