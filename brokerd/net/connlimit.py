"""A cap on a listener's open connections.

Per-connection memory is bounded by the protocols (few requests in flight, paused
reading); this bounds how many connections there are. A factory asks :meth:`admit` in
``buildProtocol`` and returns None when refused, which makes Twisted close the new socket
at once, and hands the limit to the protocol it builds; the connection base
(``brokerd.net.connection``) calls :meth:`release` from ``connectionLost``. It does not
close anything itself.
"""

from __future__ import annotations

from twisted.logger import Logger

#: Per listener; the systemd unit raises the file-descriptor limit well above two of these.
DEFAULT_MAX_CONNECTIONS = 1024
#: Refusals are logged at the first and then every this many, so a flood cannot fill logs.
LOG_EVERY = 100


class ConnectionLimit:
    """Counts open connections of one listener and refuses those beyond ``maximum``."""

    _log = Logger()

    def __init__(self, maximum: int | None, name: str) -> None:
        self.maximum = maximum
        self.name = name
        self.open = 0
        self.refused = 0

    def admit(self) -> bool:
        if self.maximum is not None and self.open >= self.maximum:
            if self.refused % LOG_EVERY == 0:
                self._log.warn(
                    "{name}: {open} connections open, refusing new ones "
                    "({refused} refused so far; see --max-connections)",
                    name=self.name,
                    open=self.open,
                    refused=self.refused + 1,
                )
            self.refused += 1
            return False
        self.open += 1
        return True

    def release(self) -> None:
        self.open = max(0, self.open - 1)
