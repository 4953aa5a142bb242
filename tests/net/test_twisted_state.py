"""What ``brokerd.net.twisted_state`` relies on, checked against the real transports of the
installed Twisted, so an upgrade that changes them fails here, loudly:

* it is the only module of brokerd/ that imports a private Twisted module, names a private
  attribute in a string (``getattr(x, "_y")``) or reads or writes one it names;
* the private attributes it names exist where it says, and :func:`holds_nothing` reads
  them right on a real TCP connection (empty, then holding unsent bytes);
* the TLS protocol's session-ending hook it overrides exists with the expected
  signature;
* and the behaviour it exists for: TLS clients that close while a large answer is
  unsent leave no live connection object behind, with the garbage collector off (so only
  reference counting frees anything); the same for plaintext.

The server is :func:`brokerd.net.tls.listener_endpoint` on 127.0.0.1 in the test's reactor
(pytest-twisted), clients are the standard library's sockets in threads.
"""

from __future__ import annotations

import ast
import gc
import importlib
import inspect
import socket
import ssl
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_twisted
from twisted.application.internet import StreamServerEndpointService
from twisted.internet import abstract, defer, reactor, task, threads
from twisted.internet.interfaces import IAddress
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols.tls import TLSMemoryBIOProtocol

from brokerd.net import twisted_state
from brokerd.net.connection import DispatcherBase, RequestConnection
from brokerd.net.tls import listener_endpoint
from brokerd.net.twisted_state import PRIVATE_STATE, CycleFreeTLSProtocol, holds_nothing

from tests.net.test_connection import LineDecoder
from tests.tls_helpers import Pki, client_context, make_pki, ssl_description

ANSWER = 8 * 1024 * 1024
CLIENTS = 6


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_the_private_attributes_exist_where_named() -> None:
    """On the class or on a fresh instance (FileDescriptor sets its buffers in
    ``__init__``); the TCP test below reads them on a live connection too."""
    assert set(PRIVATE_STATE) == {
        "twisted.internet.abstract.FileDescriptor",
        "twisted.protocols.tls.TLSMemoryBIOProtocol",
        "twisted.application.internet.StreamServerEndpointService",
        "twisted.web.http.Request",
        "twisted.web._stan",
    }
    for dotted, names in PRIVATE_STATE.items():
        if dotted == "twisted.web._stan":  # a module
            for name in names:
                assert hasattr(importlib.import_module(dotted), name), dotted
            continue
        module_name, class_name = dotted.rsplit(".", 1)
        cls = getattr(importlib.import_module(module_name), class_name)
        sample = (
            abstract.FileDescriptor() if cls is abstract.FileDescriptor
            else StreamServerEndpointService(None, None) if cls is StreamServerEndpointService
            else cls
        )
        for name in names:
            assert hasattr(sample, name), f"{dotted}.{name} is gone: see twisted_state.py"


def _private_uses(path: Path) -> list[str]:
    """Private Twisted state ``path`` touches: an import of a private module, a private
    name in a getattr/setattr/hasattr string, an attribute PRIVATE_STATE names."""
    named = {name for names in PRIVATE_STATE.values() for name in names}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [
                f"import {alias.name}" for alias in node.names
                if alias.name.startswith("twisted")
                and any(part.startswith("_") for part in alias.name.split("."))
            ]
        elif (
            isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("twisted")
        ):
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"import {node.module}")
            found += [
                f"from {node.module} import {alias.name}" for alias in node.names
                if alias.name.startswith("_")
            ]
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_") and not node.args[1].value.startswith("__")
        ):
            found.append(f"{node.func.id} {node.args[1].value}")
        elif (
            isinstance(node, ast.Attribute) and node.attr in named and node.attr.startswith("_")
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ):
            found.append(f".{node.attr}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from twisted.web._stan import voidElements\n",
        "from twisted.web import _stan\n",
        "import twisted.web._stan\n",
        "import twisted.web._stan as stan\n",
    ],
)
def test_every_import_of_a_private_twisted_module_is_seen(source: str, tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    path.write_text(source)
    assert _private_uses(path)


def test_public_twisted_imports_are_not_flagged(tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    path.write_text("import twisted.web.http\nfrom twisted.web import http\nimport _thread\n")
    assert _private_uses(path) == []


def test_no_other_module_touches_private_twisted_state() -> None:
    package = Path(twisted_state.__file__).resolve().parent.parent
    found = {
        str(path.relative_to(package)): uses
        for path in sorted(package.rglob("*.py"))
        if path.name != "twisted_state.py" and (uses := _private_uses(path))
    }
    assert found == {}
    assert _private_uses(Path(twisted_state.__file__))  # the check sees them where they are


def test_the_tls_hook_takes_a_reason() -> None:
    hook = TLSMemoryBIOProtocol._tlsShutdownFinished
    assert list(inspect.signature(hook).parameters) == ["self", "reason"]
    assert issubclass(CycleFreeTLSProtocol, TLSMemoryBIOProtocol)


class Holder(Protocol):
    instances: list[Holder] = []

    def connectionMade(self) -> None:
        Holder.instances.append(self)


@pytest_twisted.ensureDeferred
async def test_holds_nothing_reads_a_real_tcp_transport() -> None:
    Holder.instances.clear()
    port = reactor.listenTCP(0, Factory.forProtocol(Holder), interface="127.0.0.1")
    client = socket.socket()
    try:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", port.getHost().port))
        for _ in range(100):
            if Holder.instances:
                break
            await task.deferLater(reactor, 0.01, lambda: None)
        transport = Holder.instances[0].transport
        for name in PRIVATE_STATE["twisted.internet.abstract.FileDescriptor"]:
            assert hasattr(transport, name), name
        assert holds_nothing(transport)
        transport.write(b"x" * (16 * 1024 * 1024))  # far more than the socket takes
        await task.deferLater(reactor, 0.05, lambda: None)
        assert not holds_nothing(transport)
        assert not holds_nothing(object())  # no buffers known: never "empty"
    finally:
        client.close()
        await defer.maybeDeferred(port.stopListening)


# -- connections closed mid-answer -----------------------------------------------------


class BigAnswerDispatcher(DispatcherBase[bytes, bytes]):
    def handle(
        self, connection: RequestConnection[bytes, bytes], request: bytes
    ) -> defer.Deferred[bytes]:
        return defer.succeed(b"a" * ANSWER)

    def deliver(
        self, connection: RequestConnection[bytes, bytes], request: bytes, answer: bytes
    ) -> bool:
        connection.write(answer)
        return True


class BigAnswer(RequestConnection[bytes, bytes]):
    """Answers each line with ANSWER bytes; every instance is tracked by weak reference."""

    alive: list[weakref.ref[BigAnswer]] = []
    transports: list[weakref.ref[object]] = []

    def __init__(self) -> None:
        super().__init__(
            LineDecoder(), BigAnswerDispatcher(),
            clock=reactor, idle_timeout=None, frame_timeout=None,
        )
        BigAnswer.alive.append(weakref.ref(self))

    def connectionMade(self) -> None:
        super().connectionMade()
        BigAnswer.transports.append(weakref.ref(self.transport))


class BigFactory(Factory):
    def buildProtocol(self, addr: IAddress | None) -> BigAnswer:  # type: ignore[override]
        return BigAnswer()


def ask_and_close(address: tuple[str, int], context: ssl.SSLContext | None) -> None:
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.settimeout(10)
    raw.connect(address)
    sock = raw if context is None else context.wrap_socket(raw, server_hostname="localhost")
    with sock:
        sock.sendall(b"go\n")
        assert sock.recv(4096)
        time.sleep(0.2)  # the server has the whole answer queued, most of it unsent


@pytest.fixture
def collector_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def closed_mid_answer(description: str, context: ssl.SSLContext | None) -> tuple[int, int]:
    BigAnswer.alive.clear()
    BigAnswer.transports.clear()
    port = await listener_endpoint(reactor, description).listen(BigFactory())
    try:
        address = ("127.0.0.1", port.getHost().port)
        await defer.gatherResults([
            threads.deferToThread(ask_and_close, address, context) for _ in range(CLIENTS)
        ])
        for _ in range(200):  # until the server has seen every close
            if not any(p is not None and p.isConnected for p in (r() for r in BigAnswer.alive)):
                break
            await task.deferLater(reactor, 0.02, lambda: None)
        await task.deferLater(reactor, 0.1, lambda: None)
    finally:
        await defer.maybeDeferred(port.stopListening)
    assert len(BigAnswer.alive) == CLIENTS
    protocols = sum(r() is not None for r in BigAnswer.alive)
    transports = sum(r() is not None for r in BigAnswer.transports)
    return protocols, transports


@pytest_twisted.ensureDeferred
async def test_tls_connections_closed_mid_answer_are_freed_without_the_collector(
    pki: Pki, collector_off: None
) -> None:
    protocols, transports = await closed_mid_answer(ssl_description(0, pki), client_context(pki))
    assert (protocols, transports) == (0, 0), "closed TLS connections still alive"


@pytest_twisted.ensureDeferred
async def test_plaintext_connections_closed_mid_answer_are_freed_without_the_collector(
    collector_off: None,
) -> None:
    protocols, transports = await closed_mid_answer("tcp:0:interface=127.0.0.1", None)
    assert (protocols, transports) == (0, 0), "closed connections still alive"
