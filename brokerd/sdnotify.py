"""systemd readiness notification (``Type=notify``) without a dependency.

One datagram to ``$NOTIFY_SOCKET``; a no-op when not started by systemd. A leading ``@``
names a Linux abstract socket.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from twisted.application import service
from twisted.logger import Logger

_log = Logger()


def sd_notify(state: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Send ``state`` (e.g. ``READY=1``) to systemd; return whether it was sent."""
    addr = environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr[0] == "@":
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(state.encode())
    except OSError as e:
        _log.warn("sd_notify({state}) failed: {error}", state=state, error=e)
        return False
    return True


class ReadyNotifier(service.Service):
    """Says READY=1 once the reactor runs, after every listener before it has bound.

    Waiting for ``callWhenRunning`` matters: READY sent earlier lets systemd deliver a
    SIGTERM before twistd has installed its signal handlers, which kills the process
    without a clean shutdown.
    """

    def __init__(self, reactor: object) -> None:
        self._reactor = reactor

    def startService(self) -> None:
        super().startService()
        self._reactor.callWhenRunning(sd_notify, "READY=1")  # type: ignore[attr-defined]

    def stopService(self) -> None:
        super().stopService()
        sd_notify("STOPPING=1")
