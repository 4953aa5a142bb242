"""TLS listeners in-process: client-certificate verification, the principal and ``tls``
flag a connection gets, and the option checks of ``twistd broker``.

The listener is :func:`brokerd.net.tls.listener_endpoint` on 127.0.0.1 port 0 in the test's
reactor (pytest-twisted runs it), serving a small :class:`RequestConnection` that answers
each line with its connection's state; clients are the standard library's ``ssl``
sockets in a thread, as the native client and brokerctl use them. Certificates are made
for each module by :func:`tests.tls_helpers.make_pki`.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import pytest_twisted
from twisted.internet import defer, reactor, threads
from twisted.internet.interfaces import IAddress, IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import ILogObserver, LogEvent, globalLogPublisher
from twisted.python import usage
from zope.interface import provider

from brokerd.net.connection import DispatcherBase, RequestConnection
from brokerd.net.tls import (
    ANONYMOUS,
    MAX_CA_BUNDLE_BYTES,
    ClientAuth,
    ClientVerification,
    listener_endpoint,
    load_ca_bundle,
)
from brokerd.tap import Options

from tests.net.test_connection import LineDecoder
from tests.tls_helpers import ALICE_PRINCIPAL, Pki, client_context, make_pki, ssl_description

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


# -- a server that tells each client what it knows of it ------------------------------


class StateEchoDispatcher(DispatcherBase[bytes, bytes]):
    """Answers every line with ``<principal> tls=<flag>``."""

    def handle(
        self, connection: RequestConnection[bytes, bytes], request: bytes
    ) -> defer.Deferred[bytes]:
        state = connection.state
        return defer.succeed(f"{state.principal} tls={state.tls}\n".encode())

    def deliver(
        self, connection: RequestConnection[bytes, bytes], request: bytes, answer: bytes
    ) -> bool:
        connection.write(answer)
        return True


class StateEcho(RequestConnection[bytes, bytes]):
    """Answers every line with ``<principal> tls=<flag>``."""

    protocolName = "state-echo"

    def __init__(self, idle_timeout: float | None = None) -> None:
        super().__init__(
            LineDecoder(), StateEchoDispatcher(),
            clock=reactor, idle_timeout=idle_timeout, frame_timeout=None,
        )


class EchoFactory(Factory):
    """Builds :class:`StateEcho` connections; refuses all when ``refuse`` is set, as a
    listener over its connection limit does (buildProtocol returns None)."""

    def __init__(self) -> None:
        self.refuse = False
        self.built = 0
        self.idle_timeout: float | None = None

    def buildProtocol(self, addr: IAddress) -> StateEcho | None:  # type: ignore[override]
        if self.refuse:
            return None
        self.built += 1
        return StateEcho(self.idle_timeout)


@attrs.define
class Listener:
    port: IListeningPort
    factory: EchoFactory

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port.getHost().port  # type: ignore[attr-defined]


async def listen(
    listeners: list[Listener], description: str, verification: ClientVerification | None
) -> Listener:
    factory = EchoFactory()
    endpoint = listener_endpoint(reactor, description, verification)
    listener = Listener(await endpoint.listen(factory), factory)
    listeners.append(listener)
    return listener


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    started: list[Listener] = []
    yield started
    for listener in started:
        pytest_twisted.blockon(defer.maybeDeferred(listener.port.stopListening))


async def tls_listener(
    listeners: list[Listener], pki: Pki, mode: ClientAuth | None, ca: Path | None = None
) -> Listener:
    verification = (
        None if mode is None else ClientVerification.load(mode.value, str(ca or pki.ca))
    )
    return await listen(listeners, ssl_description(0, pki), verification)


# -- blocking clients, run in a thread ------------------------------------------------


def ask(address: tuple[str, int], context: ssl.SSLContext | None) -> str:
    """Connect (TLS with ``context``), send one line, return the answer line."""
    with socket.create_connection(address, timeout=TIMEOUT) as raw:
        sock = raw if context is None else context.wrap_socket(raw, server_hostname="localhost")
        with sock:
            sock.sendall(b"who\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionError(f"closed after {answer!r}")
                answer += chunk
            return answer.decode().strip()


async def ask_in_thread(address: tuple[str, int], context: ssl.SSLContext | None) -> str:
    answer: str = await threads.deferToThread(ask, address, context)
    return answer


async def refused(address: tuple[str, int], context: ssl.SSLContext | None) -> OSError:
    """The connection must fail (in the handshake, or with the server's alert at the
    first read, as TLS 1.3 reports a refused client certificate)."""
    try:
        answer = await ask_in_thread(address, context)
    except OSError as e:  # ssl.SSLError and ConnectionError are OSErrors
        return e
    raise AssertionError(f"the server answered {answer!r}")


# -- principal and tls flag -----------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_required_client_certificate_names_the_principal(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, ClientAuth.REQUIRED)
    alice = client_context(pki, cert=pki.alice_cert, key=pki.alice_key)
    assert await ask_in_thread(listener.address, alice) == f"{ALICE_PRINCIPAL} tls=True"


@pytest_twisted.ensureDeferred
async def test_required_refuses_no_certificate_and_a_foreign_ca(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, ClientAuth.REQUIRED)
    await refused(listener.address, client_context(pki))
    mallory = client_context(pki, cert=pki.mallory_cert, key=pki.mallory_key)
    await refused(listener.address, mallory)
    # The refusals harmed nothing: a good client is served next.
    alice = client_context(pki, cert=pki.alice_cert, key=pki.alice_key)
    assert await ask_in_thread(listener.address, alice) == f"{ALICE_PRINCIPAL} tls=True"


@pytest_twisted.ensureDeferred
async def test_requested_lets_a_client_without_certificate_in_anonymously(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, ClientAuth.REQUESTED)
    assert await ask_in_thread(listener.address, client_context(pki)) == (
        f"{ANONYMOUS} tls=True"
    )
    alice = client_context(pki, cert=pki.alice_cert, key=pki.alice_key)
    assert await ask_in_thread(listener.address, alice) == f"{ALICE_PRINCIPAL} tls=True"
    # A certificate the listener cannot verify is refused, not ignored.
    mallory = client_context(pki, cert=pki.mallory_cert, key=pki.mallory_key)
    await refused(listener.address, mallory)


@pytest_twisted.ensureDeferred
async def test_the_trusted_ca_is_the_one_configured(pki: Pki, listeners: list[Listener]) -> None:
    listener = await tls_listener(listeners, pki, ClientAuth.REQUIRED, ca=pki.rogue_ca)
    mallory = client_context(pki, cert=pki.mallory_cert, key=pki.mallory_key)
    assert await ask_in_thread(listener.address, mallory) == "User:CN=mallory tls=True"
    alice = client_context(pki, cert=pki.alice_cert, key=pki.alice_key)
    await refused(listener.address, alice)


@pytest_twisted.ensureDeferred
async def test_without_client_auth_a_tls_connection_is_anonymous(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, None)
    # The server asks for no certificate, so the client's is never sent.
    alice = client_context(pki, cert=pki.alice_cert, key=pki.alice_key)
    assert await ask_in_thread(listener.address, alice) == f"{ANONYMOUS} tls=True"


@pytest_twisted.ensureDeferred
async def test_a_plaintext_listener_is_anonymous_and_not_tls(
    listeners: list[Listener],
) -> None:
    listener = await listen(listeners, "tcp:0:interface=127.0.0.1", None)
    assert await ask_in_thread(listener.address, None) == f"{ANONYMOUS} tls=False"


# -- bad clients ----------------------------------------------------------------------


def plaintext_exchange(address: tuple[str, int]) -> bytes:
    """Send a plaintext line and read until the server closes (what it sent back)."""
    received = b""
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        sock.sendall(b"who\n" * 100)
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    return received


@pytest_twisted.ensureDeferred
async def test_a_plaintext_client_is_closed_and_nothing_breaks(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, None)
    received: bytes = await threads.deferToThread(plaintext_exchange, listener.address)
    # At most a TLS alert record (content type 21), never an answer.
    assert received[:1] in (b"", b"\x15"), received
    assert b"tls=" not in received
    assert await ask_in_thread(listener.address, client_context(pki)) == (
        f"{ANONYMOUS} tls=True"
    )


def silent_client(address: tuple[str, int]) -> float:
    """Connect, send nothing, and return how long until the server closed."""
    start = time.monotonic()
    with (
        socket.create_connection(address, timeout=TIMEOUT) as sock,
        contextlib.suppress(ConnectionResetError),
    ):
        assert sock.recv(4096) == b""
    return time.monotonic() - start


@pytest_twisted.ensureDeferred
async def test_a_client_that_never_handshakes_is_closed_when_idle(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, ClientAuth.REQUIRED)
    listener.factory.idle_timeout = 0.3
    waited: float = await threads.deferToThread(silent_client, listener.address)
    assert waited < TIMEOUT / 2


@pytest_twisted.ensureDeferred
async def test_a_refused_connection_is_closed_without_an_error(
    pki: Pki, listeners: list[Listener]
) -> None:
    listener = await tls_listener(listeners, pki, None)
    errors: list[LogEvent] = []

    @provider(ILogObserver)
    def observe(event: LogEvent) -> None:
        # New-style failures, and legacy log.err (Twisted's ports log through it).
        if "log_failure" in event or event.get("isError"):
            errors.append(event)

    globalLogPublisher.addObserver(observe)
    try:
        listener.factory.refuse = True
        await refused(listener.address, client_context(pki))
        listener.factory.refuse = False
        assert await ask_in_thread(listener.address, client_context(pki)) == (
            f"{ANONYMOUS} tls=True"
        )
    finally:
        globalLogPublisher.removeObserver(observe)
    assert errors == []
    assert listener.factory.built == 1


# -- options --------------------------------------------------------------------------


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


def test_client_auth_options(pki: Pki) -> None:
    tls = ssl_description(9093, pki)
    assert parse().settings.tls.client_verification is None
    assert parse("--kafka", tls).settings.tls.client_verification is None
    options = parse("--kafka", tls, "--ssl-client-auth", "required", "--ssl-client-ca", str(pki.ca),
                    "--allow-anonymous", "native")
    verification = options.settings.tls.client_verification
    assert verification.mode is ClientAuth.REQUIRED
    assert [c.subject.rfc4514_string() for c in verification.ca_certs] == [
        "CN=brokerd test CA,O=brokerd tests"
    ]
    # A plaintext listener beside the TLS one is allowed (start-up warns about it).
    assert parse("--native", tls, "--ssl-client-auth", "requested", "--ssl-client-ca",
                 str(pki.ca)).settings.tls.client_verification.mode is ClientAuth.REQUESTED


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ssl-client-auth", "maybe"), "must be one of none, requested, required"),
        (("--ssl-client-auth", "required"), "needs --ssl-client-ca FILE"),
        (("--ssl-client-ca", "{ca}"), "--ssl-client-auth is none"),
        (("--ssl-client-auth", "required", "--ssl-client-ca", "{ca}"), "needs an ssl: listener"),
        (("--kafka", "{tls}", "--ssl-client-auth", "required", "--ssl-client-ca", "/nonexistent"),
         "/nonexistent: No such file"),
        (("--kafka", "{tls}", "--ssl-client-auth", "required", "--ssl-client-ca", "{key}"),
         "no PEM certificate"),
    ],
)
def test_client_auth_options_that_do_not_fit_are_refused(
    pki: Pki, args: tuple[str, ...], message: str
) -> None:
    values = {"ca": str(pki.ca), "key": str(pki.server_key), "tls": ssl_description(9093, pki)}
    with pytest.raises(usage.UsageError, match=message):
        parse(*(a.format(**values) for a in args))


def test_listener_endpoint_refuses_verification_on_plaintext(pki: Pki) -> None:
    verification = ClientVerification.load("required", str(pki.ca))
    with pytest.raises(ValueError, match="need an ssl: listener"):
        listener_endpoint(reactor, "tcp:0", verification)


def test_a_ca_bundle_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.pem"
    big.write_bytes(b"#" * (MAX_CA_BUNDLE_BYTES + 1))
    with pytest.raises(ValueError, match=re.escape(f"--ssl-client-ca {big}: larger than")):
        load_ca_bundle(str(big))
