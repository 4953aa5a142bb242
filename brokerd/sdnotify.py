"""systemd service notifications (``Type=notify``) without a dependency.

What it does: sends ``READY=1`` once every listener has bound and the reactor runs,
``STOPPING=1`` as the first step of a shutdown, ``STATUS=`` lines an operator sees in
``systemctl status``, and (for a start-up step that blocks before the reactor runs, such as
recovering logs after a crash) ``EXTEND_TIMEOUT_USEC=`` keep-alives from a helper thread so
that ``TimeoutStartSec=`` measures lack of progress rather than the size of the data.

What it does not do: the watchdog protocol, file-descriptor stores, or anything when
``$NOTIFY_SOCKET`` is unset (every call is then a no-op). A leading ``@`` in the socket
address names a Linux abstract socket. A send never blocks the caller: a full socket
buffer is logged and the notification dropped.

The same moment, READY, also writes the ``--ready-file`` when one is asked for: the bound
address of every listener as JSON, for a launcher (the pytest plugin, a script) that gave
the broker ``tcp:0`` endpoints and needs the ports the kernel chose.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

from twisted.application import service
from twisted.internet.defer import Deferred, DeferredList
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.net.twisted_state import pending_listen

_log = Logger()

#: The status line while serving, and while shutting down.
STATUS_SERVING = "serving"
STATUS_STOPPING = "shutting down: listeners closed, finishing queued appends, syncing logs"
#: How often a blocking start-up step tells systemd it is still making progress, and how
#: much more time each keep-alive asks for (twice the interval: one late beat is no harm).
EXTEND_INTERVAL_SECONDS = 10.0
EXTEND_BY_SECONDS = 2 * EXTEND_INTERVAL_SECONDS


class _RunningReactor(Protocol):
    def callWhenRunning(self, f: Callable[[], object]) -> object: ...


def sd_notify(state: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Send ``state`` (one or more ``KEY=value`` lines, e.g. ``READY=1``) to systemd;
    return whether it was sent."""
    addr = environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr[0] == "@":
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            # Never stall the reactor on a busy service manager.
            s.setblocking(False)
            s.connect(addr)
            s.sendall(state.encode())
    except OSError as e:
        _log.warn("sd_notify({state}) failed: {error}", state=state, error=e)
        return False
    return True


@contextmanager
def extending_start_timeout(
    what: str,
    *,
    environ: Mapping[str, str] = os.environ,
    interval: float = EXTEND_INTERVAL_SECONDS,
    monotonic: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """While the block runs (it may block the only thread that would otherwise talk to
    systemd), send ``STATUS=<what>`` at once and then, every ``interval`` seconds,
    ``EXTEND_TIMEOUT_USEC`` (twice the interval) with ``STATUS=<what> (N s)``.

    Without ``$NOTIFY_SOCKET`` no thread is started."""
    if not environ.get("NOTIFY_SOCKET"):
        yield
        return
    started = monotonic()
    sd_notify(f"STATUS={what}", environ)
    done = threading.Event()
    extend_usec = int(2 * interval * 1_000_000)

    def beat() -> None:
        while not done.wait(interval):
            elapsed = int(monotonic() - started)
            sd_notify(f"EXTEND_TIMEOUT_USEC={extend_usec}\nSTATUS={what} ({elapsed} s)", environ)

    thread = threading.Thread(target=beat, name="sd-notify-extend", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _listening(
    siblings: list[service.IService], bound: dict[str, str] | None = None
) -> list[Deferred[object]]:
    """A Deferred per listener among ``siblings``: it fires once that listener has
    bound, and fails if it did not (the listener's own Deferred keeps its result, which
    its stop needs). ``bound`` collects each named listener's ``HOST:PORT``."""
    waits: list[Deferred[object]] = []
    for sibling in siblings:
        # Most endpoints (tcp, ssl, unix, systemd) have fired it by the time
        # startService returns.
        port_d = pending_listen(sibling)
        if port_d is None:
            continue
        mine: Deferred[object] = Deferred()

        def relay(
            result: object, mine: Deferred[object] = mine, what: object = sibling
        ) -> object:
            # The service's own errback (added before this) logs a bind failure and
            # leaves None: only a port means bound.
            if isinstance(result, Failure):
                mine.errback(result)
            elif result is None:
                mine.errback(RuntimeError(f"{what!r} did not bind"))
            else:
                name = getattr(what, "name", None)
                if bound is not None and name:
                    bound[name] = _address_text(result)
                mine.callback(None)
            return result

        port_d.addBoth(relay)
        waits.append(mine)
    return waits


class ReadyNotifier(service.Service):
    """Says ``READY=1`` once the reactor runs and every listener added to the same parent
    before it has bound; says ``STOPPING=1`` when stopped (add it last, so that it is the
    first child to stop).

    Waiting for ``callWhenRunning`` matters: READY sent earlier lets systemd deliver a
    SIGTERM before twistd has installed its signal handlers, which kills the process
    without a clean shutdown. A listener that fails to bind means no READY at all (the
    start is failing; systemd reports the exit, not a half-started service).
    """

    def __init__(
        self,
        reactor: object,
        *,
        environ: Mapping[str, str] = os.environ,
        ready_file: str | None = None,
    ) -> None:
        self._reactor: _RunningReactor = reactor  # type: ignore[assignment]
        self._environ = environ
        self._ready_file = ready_file
        #: Each named listener's bound ``HOST:PORT`` (what the ready file says).
        self.bound: dict[str, str] = {}
        self.ready_sent = False

    def startService(self) -> None:
        super().startService()
        siblings = list(self.parent) if self.parent is not None else []
        before = siblings[: siblings.index(self)] if self in siblings else siblings
        waits = _listening(before, self.bound)
        running: Deferred[object] = Deferred()
        self._reactor.callWhenRunning(lambda: running.callback(None))
        everything = DeferredList([running, *waits], fireOnOneErrback=True, consumeErrors=True)
        everything.addCallbacks(self._ready, self._not_ready)

    def _ready(self, _: object) -> None:
        if not self.running:
            return
        if self._ready_file is not None:
            write_ready_file(self._ready_file, self.bound)
        self.ready_sent = sd_notify(f"READY=1\nSTATUS={STATUS_SERVING}", self._environ)

    def _not_ready(self, failure: Failure) -> None:
        _log.error("not telling systemd READY: a listener failed: {f}", f=failure.value)

    def stopService(self) -> None:
        super().stopService()
        if self._ready_file is not None:
            # A stale file would tell a waiting launcher of ports nobody serves.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._ready_file)
        sd_notify(f"STOPPING=1\nSTATUS={STATUS_STOPPING}", self._environ)


def _address_text(port: object) -> str:
    """``HOST:PORT`` of a listening port (an IPv6 host in brackets), or the address's
    text for a non-TCP one (a UNIX socket's path)."""
    get_host = getattr(port, "getHost", None)
    address = get_host() if get_host is not None else None
    host = getattr(address, "host", None)
    tcp_port = getattr(address, "port", None)
    if isinstance(host, str) and isinstance(tcp_port, int):
        return f"[{host}]:{tcp_port}" if ":" in host else f"{host}:{tcp_port}"
    name = getattr(address, "name", None)
    return name.decode() if isinstance(name, bytes) else str(name if name else address)


def write_ready_file(path: str, bound: Mapping[str, str]) -> None:
    """Write ``{"pid": ..., "listeners": {"kafka": "HOST:PORT", ...}}`` to ``path``
    whole or not at all (a temporary file renamed over it), so a reader polling for it
    never sees half of it."""
    text = json.dumps({"pid": os.getpid(), "listeners": dict(bound)}, sort_keys=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        os.replace(temporary, path)
    except OSError as e:
        _log.error("cannot write the ready file {path}: {error}", path=path, error=e)
