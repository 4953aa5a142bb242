# -*- test-case-name: tests.net.test_tls -*-
"""TLS on the listeners: client-certificate verification and the TLS principal.

What this module does:

* :class:`ClientVerification` (``--ssl-client-auth`` with ``--ssl-client-ca``): whether a
  TLS listener asks for a client certificate, must have one, and which CAs it trusts.
* :func:`listener_endpoint`: the server endpoint of a listener description. Twisted's own
  ``ssl:`` parser reads the string and loads the key and certificate; the endpoint it
  builds is given a reactor facade whose ``listenSSL`` adds client verification to the
  context and refuses a connection the wrapped factory refuses (over the connection limit,
  ``buildProtocol`` returns None, which Twisted's TLS wrapper does not expect).
* :func:`peer_principal`: Kafka's principal of a verified client certificate,
  ``User:`` followed by its subject in RFC 2253 form.

What it does not do: parse endpoint strings itself, decide what a principal may do, or
anything on the client side (``brokerd.client`` uses the standard library's ``ssl``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs
from cryptography import x509
from OpenSSL import SSL
from twisted.internet import endpoints
from twisted.internet.interfaces import (
    IAddress,
    IOpenSSLContextFactory,
    IProtocolFactory,
    IStreamServerEndpoint,
)
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from zope.interface import implementer

from brokerd.net.twisted_state import CycleFreeTLSProtocol
from brokerd.storage.fileio import read_at_most

#: Twisted's parser of endpoint strings (unannotated there).
_server_from_string: Callable[[Any, str], Any] = endpoints.serverFromString

__all__ = [
    "ANONYMOUS",
    "ClientAuth",
    "ClientVerification",
    "is_tls_description",
    "listener_endpoint",
    "peer_principal",
]

#: The principal of a connection nobody authenticated (Kafka's name for it).
ANONYMOUS = "User:ANONYMOUS"
#: Session id context of the server's TLS contexts: OpenSSL refuses to resume a session
#: with client verification on unless one is set.
_SESSION_ID_CONTEXT = b"brokerd"
#: A CA bundle is a handful of certificates; anything far bigger is the wrong file.
MAX_CA_BUNDLE_BYTES = 1024 * 1024


class ClientAuth(enum.Enum):
    """``--ssl-client-auth``: Kafka's ``ssl.client.auth`` values."""

    NONE = "none"  # no certificate asked for
    REQUESTED = "requested"  # asked for; a client without one connects as ANONYMOUS
    REQUIRED = "required"  # the handshake fails without a valid certificate


@attrs.frozen
class ClientVerification:
    """How TLS listeners verify client certificates."""

    mode: ClientAuth
    ca_file: str
    ca_certs: tuple[x509.Certificate, ...]

    @classmethod
    def load(cls, mode: str, ca_file: str | None) -> ClientVerification | None:
        """From the option values; None when no certificate is asked for. Raises
        ValueError, saying what is wrong, for an unknown mode, a missing or unusable CA
        file, or a CA file with nothing to use it for."""
        try:
            auth = ClientAuth(mode)
        except ValueError:
            choices = ", ".join(a.value for a in ClientAuth)
            raise ValueError(f"--ssl-client-auth must be one of {choices}, not {mode!r}") from None
        if auth is ClientAuth.NONE:
            if ca_file is not None:
                raise ValueError(
                    "--ssl-client-ca is given but --ssl-client-auth is none: "
                    "say --ssl-client-auth requested or required"
                )
            return None
        if ca_file is None:
            raise ValueError(f"--ssl-client-auth {auth.value} needs --ssl-client-ca FILE")
        return cls(auth, ca_file, load_ca_bundle(ca_file))

    def configure(self, context: SSL.Context) -> None:
        """Turn verification on in a server context not yet used for a connection."""
        flags = SSL.VERIFY_PEER
        if self.mode is ClientAuth.REQUIRED:
            flags |= SSL.VERIFY_FAIL_IF_NO_PEER_CERT
        # No callback: OpenSSL's own chain verification decides.
        context.set_verify(flags)
        context.load_verify_locations(self.ca_file)
        for cert in self.ca_certs:
            # Sent in the certificate request, so a client holding several certificates
            # can pick one these CAs issued.
            context.add_client_ca(cert)
        context.set_session_id(_SESSION_ID_CONTEXT)


def load_ca_bundle(path: str) -> tuple[x509.Certificate, ...]:
    """The certificates of a PEM bundle; ValueError if it cannot be read or has none."""
    try:
        data = read_at_most(path, MAX_CA_BUNDLE_BYTES)
    except OSError as e:
        raise ValueError(f"--ssl-client-ca {path}: {e.strerror or e}") from None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ValueError(f"--ssl-client-ca {path}: no PEM certificate in it") from None
    return tuple(certs)


def is_tls_description(description: str) -> bool:
    """Whether a listener description is Twisted's ``ssl:`` endpoint."""
    return description.split(":", 1)[0] == "ssl"


@implementer(IOpenSSLContextFactory)
class _VerifyingContextFactory:
    """An old-style context factory (``getContext``) adding client verification to the
    context of the one Twisted's ``ssl:`` parser built."""

    def __init__(self, inner: Any, verification: ClientVerification) -> None:
        self._inner = inner
        self._verification = verification
        self._configured = False

    def getContext(self) -> SSL.Context:
        context: SSL.Context = self._inner.getContext()
        if not self._configured:
            # The inner factory caches its context: configure it once, before the first
            # connection uses it (pyOpenSSL refuses changes after that).
            self._verification.configure(context)
            self._configured = True
        return context


class _AdmittingTLSFactory(TLSMemoryBIOFactory):
    """Twisted's TLS wrapper, except that it refuses a connection its wrapped factory
    refused (buildProtocol returned None) instead of failing on it, and whose TLS
    protocol leaves no reference cycle behind a closed connection
    (:class:`~brokerd.net.twisted_state.CycleFreeTLSProtocol`)."""

    protocol = CycleFreeTLSProtocol

    # Twisted's ports take None from buildProtocol (they close the socket); the stub of
    # WrappingFactory says otherwise.
    def buildProtocol(  # type: ignore[override]
        self, addr: IAddress | None
    ) -> TLSMemoryBIOProtocol | None:
        inner = self.wrappedFactory.buildProtocol(addr)
        if inner is None:
            return None
        protocol: TLSMemoryBIOProtocol = self.protocol(self, inner)
        return protocol


class _TLSListenReactor:
    """The reactor given to Twisted's ``ssl:`` parser. Its ``listenSSL`` does what the
    real reactor's does (a TLS wrapper over a TCP port) with :class:`_AdmittingTLSFactory`
    and, when asked, client verification. Everything else is the real reactor's."""

    def __init__(self, reactor: Any, verification: ClientVerification | None) -> None:
        self._reactor = reactor
        self._verification = verification

    def listenSSL(
        self,
        port: int,
        factory: IProtocolFactory,
        contextFactory: Any,
        backlog: int = 50,
        interface: str = "",
    ) -> Any:
        if self._verification is not None:
            contextFactory = _VerifyingContextFactory(contextFactory, self._verification)
        tls_factory = _AdmittingTLSFactory(contextFactory, False, factory)
        return self._reactor.listenTCP(port, tls_factory, backlog, interface)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reactor, name)


def listener_endpoint(
    reactor: Any, description: str, verification: ClientVerification | None = None
) -> IStreamServerEndpoint:
    """The endpoint of a listener description; ``ssl:`` ones verify client certificates
    as ``verification`` says (None: no certificate asked for)."""
    if not is_tls_description(description):
        if verification is not None:
            raise ValueError(f"client certificates need an ssl: listener, not {description!r}")
        endpoint: IStreamServerEndpoint = _server_from_string(reactor, description)
        return endpoint
    tls_endpoint: IStreamServerEndpoint = _server_from_string(
        _TLSListenReactor(reactor, verification), description
    )
    # The facade only reaches listenSSL through Twisted's SSL endpoint.
    assert isinstance(tls_endpoint, endpoints.SSL4ServerEndpoint), tls_endpoint
    return tls_endpoint


def peer_principal(transport: object) -> str:
    """``User:<subject in RFC 2253 form>`` of the client certificate the TLS handshake
    verified (Kafka's default TLS principal), or :data:`ANONYMOUS` without one. Call it
    once the handshake is complete."""
    get_peer_certificate = getattr(transport, "getPeerCertificate", None)
    if get_peer_certificate is None:
        return ANONYMOUS
    cert = get_peer_certificate()
    if cert is None:
        return ANONYMOUS
    # RFC 4514 is RFC 2253's successor; both list the most specific RDN first.
    subject: str = cert.to_cryptography().subject.rfc4514_string()
    return f"User:{subject}"
