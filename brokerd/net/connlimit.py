# -*- test-case-name: tests.net.test_connlimit -*-
"""Caps on open connections: per listener (:class:`ConnectionLimit`) and per client
address across both listeners (:class:`AddressLimits`, Kafka's ``max.connections.per.ip``
and ``max.connections.per.ip.overrides``).

Per-connection memory is bounded by the protocols and the request budget
(``brokerd.net.request_budget``); these bound how many connections there are, and keep one
address from taking every slot. A factory asks :meth:`ConnectionLimit.admit` with the
peer's address in ``buildProtocol`` and returns None when refused, which makes Twisted
close the new socket at once, and hands the limit to the protocol it builds; the
connection base (``brokerd.net.connection``) calls :meth:`ConnectionLimit.release` from
``connectionLost``. Neither closes anything itself. Refusals are counted and logged at a
bounded rate (:class:`~brokerd.net.refusals.RefusalLog`), so a flood cannot fill logs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from brokerd.net.refusals import RefusalLog

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "MIN_DEFAULT_PER_ADDRESS",
    "AddressLimits",
    "ConnectionLimit",
    "default_per_address",
    "parse_overrides",
]

#: Per listener; the systemd unit raises the file-descriptor limit well above two of these.
DEFAULT_MAX_CONNECTIONS = 1024

#: The per-address default never goes below this many (a machine's worth of local
#: clients), unless the listeners themselves allow fewer.
MIN_DEFAULT_PER_ADDRESS = 64


def default_per_address(max_connections: int | None) -> int | None:
    """The per-address limit when none is configured: half a listener's slots, so one
    address can never take them all, yet at least :data:`MIN_DEFAULT_PER_ADDRESS` so a
    machine's worth of local clients fits (on a listener capped below that, one address
    may use all of it); no limit when the listeners have none."""
    if max_connections is None:
        return None
    return min(max_connections, max(MIN_DEFAULT_PER_ADDRESS, max_connections // 2))


def normal_address(text: str) -> str:
    """An IP address in the form the transports report it (``ValueError`` if it is not
    one)."""
    return ipaddress.ip_address(text.strip()).compressed


def parse_overrides(text: str) -> dict[str, int]:
    """``--max-connections-per-ip-overrides``: ``address:count,address:count`` (Kafka's
    form; an IPv6 address is everything before the last colon). ``ValueError`` saying
    what is wrong. Host names are refused: resolved once at start they would go stale."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{item!r} is not address:count")
        try:
            address = normal_address(host.strip("[]"))
        except ValueError:
            raise ValueError(
                f"{host!r} is not an IP address (host names are not accepted)"
            ) from None
        try:
            limit = int(count)
        except ValueError:
            raise ValueError(f"{item!r}: {count!r} is not a count") from None
        if limit < 0:
            raise ValueError(f"{item!r}: the count must be 0 or more")
        overrides[address] = limit
    return overrides


class AddressLimits:
    """Open connections per client address, across every listener that shares it.

    ``default`` applies to every address without an override (None: no limit); an
    override of 0 refuses the address entirely. Connections without an IP address (UNIX
    sockets) are not counted.
    """

    def __init__(self, default: int | None, overrides: Mapping[str, int] | None = None) -> None:
        self.default = default
        self.overrides = {normal_address(a): n for a, n in (overrides or {}).items()}
        self.open: dict[str, int] = {}
        self._refusals = RefusalLog()

    @property
    def refused(self) -> int:
        """Connections refused for their address, on either listener."""
        return self._refusals.count

    def limit_of(self, host: str) -> int | None:
        return self.overrides.get(host, self.default)

    def admit(self, host: str, listener: str) -> bool:
        if not host:
            return True
        limit = self.limit_of(host)
        count = self.open.get(host, 0)
        if limit is not None and count >= limit:
            self._refusals.refused(
                "{listener}: {host} has {open} connections open, refusing more "
                "(see --max-connections-per-ip)",
                listener=listener,
                host=host,
                open=count,
            )
            return False
        self.open[host] = count + 1
        return True

    def release(self, host: str) -> None:
        count = self.open.get(host, 0)
        if count <= 1:
            self.open.pop(host, None)
        else:
            self.open[host] = count - 1


class ConnectionLimit:
    """Counts open connections of one listener and refuses those beyond ``maximum``, or
    beyond the per-address limit of ``addresses`` (shared with the other listener)."""

    def __init__(
        self, maximum: int | None, name: str, addresses: AddressLimits | None = None
    ) -> None:
        self.maximum = maximum
        self.name = name
        self.addresses = addresses
        self.open = 0
        self._refusals = RefusalLog()
        self._refused_for_address = 0

    @property
    def refused(self) -> int:
        """Connections this listener refused: over its cap, or over their address's."""
        return self._refusals.count + self._refused_for_address

    def admit(self, host: str = "") -> bool:
        if self.maximum is not None and self.open >= self.maximum:
            self._refusals.refused(
                "{name}: {open} connections open, refusing new ones "
                "(see --max-connections)",
                name=self.name,
                open=self.open,
            )
            return False
        if self.addresses is not None and not self.addresses.admit(host, self.name):
            self._refused_for_address += 1
            return False
        self.open += 1
        return True

    def release(self, host: str = "") -> None:
        self.open = max(0, self.open - 1)
        if self.addresses is not None and host:
            self.addresses.release(host)
