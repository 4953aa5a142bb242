# -*- test-case-name: tests.security.test_doors -*-
"""Anonymous doors: listeners that serve clients nobody authenticated while the Kafka
listener requires authentication.

The Kafka listener requires authentication with ``--sasl``, or when it is an ``ssl:``
listener with ``--ssl-client-auth required``. Then an operator expects the broker to be
closed to strangers, so every other listener that would serve anonymous clients is a
door, and the broker refuses to start unless ``--allow-anonymous`` names it:

* the native listener, unless it is ``ssl:`` with ``--ssl-client-auth required`` (the
  native protocol has no other authentication; on loopback too, since any local user
  may connect, produce and delete);
* the HTTP console and ``/metrics``, unless ``--http-auth`` asks for credentials or the
  listener is ``ssl:`` with ``--ssl-client-auth required``. Bound to loopback (or a
  ``unix:`` socket) it is still reported, but allowed without ``--allow-anonymous``: it
  only reads, and only local users reach it. A ``systemd:`` socket's address is not
  known from its description: it counts as beyond loopback;
* the schema registry (``--schema-registry``), under the same rules as the console (it
  takes ``--http-auth`` too): on loopback it is reported and allowed, beyond it it
  needs ``--allow-anonymous schema-registry``;
* the REST Proxy (``--http-proxy``), under the console's rules (it takes ``--http-auth``
  too), but a door of its own: it produces, consumes and administers topics, so opening
  the console (``--allow-anonymous http``) does not open it; on loopback it is reported
  and allowed, beyond it it needs ``--allow-anonymous http-proxy``.

Pure: the listeners are judged from their endpoint descriptions alone.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable

import attrs

__all__ = [
    "DISABLED",
    "Door",
    "DoorReport",
    "HttpAuth",
    "ListenerSecurity",
    "anonymous_doors",
    "is_local_description",
    "kafka_authentication",
    "parse_allow_anonymous",
    "refusal",
    "split_description",
]

DISABLED = "none"


class Door(enum.Enum):
    """A listener ``--allow-anonymous`` may name."""

    NATIVE = "native"
    HTTP = "http"
    SCHEMA_REGISTRY = "schema-registry"
    HTTP_PROXY = "http-proxy"


class HttpAuth(enum.Enum):
    """``--http-auth``: what the HTTP endpoint asks of a client (``/healthz`` and
    ``/readyz`` excepted)."""

    NONE = "none"  # nothing
    BASIC = "basic"  # HTTP Basic, checked against the --credentials file
    CERTIFICATE = "certificate"  # a client certificate on an ssl: listener


@attrs.frozen
class ListenerSecurity:
    """What decides whether a listener serves anonymous clients."""

    native: str
    kafka: str
    http: str
    sasl: bool
    #: ``--ssl-client-auth required`` (every ``ssl:`` listener then demands a certificate).
    certificates_required: bool
    http_auth: HttpAuth
    #: ``--schema-registry`` (it takes ``--http-auth`` as the console does).
    schema_registry: str = "none"
    #: ``--http-proxy`` (the REST Proxy, under the same ``--http-auth``).
    http_proxy: str = DISABLED


@attrs.frozen
class DoorReport:
    """One listener serving anonymous clients: which, its description, why, and whether
    it needs ``--allow-anonymous`` to start."""

    door: Door
    description: str
    why: str
    needs_allowing: bool


def split_description(description: str) -> list[str]:
    """The colon-separated parts of a Twisted endpoint description, ``\\:`` and ``\\\\``
    unescaped."""
    parts: list[str] = []
    current: list[str] = []
    chars = iter(description)
    for char in chars:
        if char == "\\":
            current.append(next(chars, ""))
        elif char == ":":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _is_tls(description: str) -> bool:
    return split_description(description)[0] == "ssl"


def is_local_description(description: str) -> bool:
    """Whether only this machine can reach the listener: a ``unix:`` socket, or a
    ``tcp:``/``ssl:`` one whose ``interface`` is a loopback address or ``localhost``.
    No interface (every address), another type or anything unclear: False."""
    parts = split_description(description)
    kind = parts[0]
    if kind == "unix":
        return True
    if kind not in ("tcp", "tcp6", "ssl"):
        return False
    interface = next((p.split("=", 1)[1] for p in parts[1:] if p.startswith("interface=")),
                     None)
    if interface is None:
        return False
    if interface == "localhost":
        return True
    try:
        return ipaddress.ip_address(interface).is_loopback
    except ValueError:
        return False


def kafka_authentication(listeners: ListenerSecurity) -> str | None:
    """What makes the Kafka listener require authentication (the option, for messages),
    or None when it serves anonymous clients itself (or is disabled)."""
    if listeners.kafka.lower() == DISABLED:
        return None
    if listeners.sasl:
        return "--sasl"
    if listeners.certificates_required and _is_tls(listeners.kafka):
        return "--ssl-client-auth required"
    return None


def anonymous_doors(listeners: ListenerSecurity) -> list[DoorReport]:
    """Every listener serving anonymous clients while the Kafka listener requires
    authentication (nothing when it does not: then every listener is open by design)."""
    if kafka_authentication(listeners) is None:
        return []
    doors: list[DoorReport] = []
    native = listeners.native
    if native.lower() != DISABLED and not (listeners.certificates_required and _is_tls(native)):
        doors.append(DoorReport(
            Door.NATIVE, native,
            "the native protocol authenticates only by required client certificates: "
            "anyone who connects may produce, fetch, create and delete",
            needs_allowing=True,
        ))
    # The HTTP listeners share --http-auth: each is open unless it asks for a login or a
    # required client certificate on a TLS endpoint.
    http_doors = (
        (Door.HTTP, listeners.http,
         "the console and /metrics show topics, groups, offsets and commit metadata "
         "without --http-auth", " (to local clients only)"),
        (Door.SCHEMA_REGISTRY, listeners.schema_registry,
         "the schema registry registers, shows and deletes schemas without --http-auth",
         " (for local clients only)"),
        (Door.HTTP_PROXY, listeners.http_proxy,
         "the REST Proxy produces, consumes, creates and deletes topics without "
         "--http-auth", " (for local clients only)"),
    )
    for door, description, what, local_only in http_doors:
        closed = listeners.http_auth is not HttpAuth.NONE or (
            listeners.certificates_required and _is_tls(description)
        )
        if description.lower() == DISABLED or closed:
            continue
        local = is_local_description(description)
        doors.append(DoorReport(
            door, description, what + (local_only if local else ""), needs_allowing=not local,
        ))
    return doors


def parse_allow_anonymous(text: str | None) -> frozenset[Door]:
    """``--allow-anonymous``: a comma list of ``native``, ``http``, ``schema-registry``
    and ``http-proxy`` (empty: none).
    Raises ValueError naming an unknown listener."""
    doors: set[Door] = set()
    for name in (text or "").split(","):
        name = name.strip().lower()
        if not name:
            continue
        try:
            doors.add(Door(name))
        except ValueError:
            choices = ", ".join(d.value for d in Door)
            raise ValueError(
                f"--allow-anonymous: unknown listener {name!r} (choose from {choices})"
            ) from None
    return frozenset(doors)


_FIXES = {
    Door.NATIVE: "make it ssl: with --ssl-client-auth required, or disable it with "
    "--native none",
    Door.HTTP: "require credentials with --http-auth basic or certificate, bind it to "
    "127.0.0.1, or disable it with --http none",
    Door.SCHEMA_REGISTRY: "require credentials with --http-auth basic or certificate, "
    "bind it to 127.0.0.1, or disable it with --schema-registry none",
    Door.HTTP_PROXY: "require credentials with --http-auth basic or certificate, bind it "
    "to 127.0.0.1, or disable it with --http-proxy none",
}


def refusal(listeners: ListenerSecurity, allowed: Iterable[Door]) -> str | None:
    """The message refusing the start, naming each door not allowed and the option
    that would allow it; None when the start may go on."""
    allowed = frozenset(allowed)
    blocked = [
        d for d in anonymous_doors(listeners) if d.needs_allowing and d.door not in allowed
    ]
    if not blocked:
        return None
    because = kafka_authentication(listeners)
    lines = [
        f"the Kafka listener requires authentication ({because}), but "
        + ("these listeners serve" if len(blocked) > 1 else "this listener serves")
        + " anonymous clients:"
    ]
    for d in blocked:
        lines.append(
            f"  --{d.door.value} {d.description}: {d.why}; {_FIXES[d.door]}, "
            f"or accept it with --allow-anonymous {d.door.value}"
        )
    return "\n".join(lines)
