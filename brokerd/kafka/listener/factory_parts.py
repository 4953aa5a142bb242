# -*- test-case-name: tests.kafka.listener.test_factory_parts -*-
"""What the Kafka listener's factory is built from, grouped by concern.

:class:`~brokerd.kafka.listener.protocol.KafkaFactory` takes the core, the coordinators,
the clock and the broker's identity, and four frozen values:

* :class:`ConnectionLimits`: how large, how slow and how many (frame size, idle and
  frame deadlines, connection count, a Fetch answer's bytes, fetch sessions, the frame
  size before SASL authentication);
* :class:`ListenerSecurity`: who may do what (the authorizer, the ACL APIs, the SASL
  mechanisms and the SCRAM credentials store);
* :class:`ListenerEdge`: what the listener shares with the rest of the broker's edge
  (the answer and request byte budgets, the per-address connection limits, where
  requests are counted);
* :class:`ClientServices`: client telemetry (KIP-714) and client quotas.

The wiring (``brokerd/app/wiring.py``) builds each once from the settings; a test builds
the defaults once and changes one field with ``attrs.evolve``. Adding an option of one
concern changes its class and its reader, not every signature between the wiring and
the connection.

Pure data, checked on construction: no behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from brokerd.kafka.server.fetch_sessions import DEFAULT_SESSION_SLOTS
from brokerd.kafka.server.handlers.fetch import DEFAULT_FETCH_MAX_BYTES
from brokerd.kafka.wire.codec import DEFAULT_MAX_FRAME_BYTES
from brokerd.net.answer_budget import AnswerBudget
from brokerd.net.connlimit import DEFAULT_MAX_CONNECTIONS
from brokerd.observers import NULL_REQUESTS, RequestObserver

if TYPE_CHECKING:
    from brokerd.kafka.server.handlers.acl import AclHandlers
    from brokerd.kafka.server.handlers.quotas import ClientQuotaHandlers
    from brokerd.kafka.server.sasl_session import SaslConfig
    from brokerd.kafka.server.throttle import QuotaEnforcer
    from brokerd.kafka.telemetry.clients import ClientTelemetry
    from brokerd.net.connlimit import AddressLimits
    from brokerd.net.request_budget import RequestBudget
    from brokerd.security.acl import AclAuthorizer
    from brokerd.security.credentials import CredentialStore

#: Largest frame before SASL authentication completes (Kafka's
#: ``sasl.server.max.receive.size`` default): SASL tokens are small, so an
#: unauthenticated client cannot make the broker buffer a large frame.
DEFAULT_SASL_MAX_RECEIVE_BYTES = 512 * 1024
#: Close a connection with no traffic either way for this long (Kafka's
#: ``connections.max.idle.ms`` default). A parked request does not count as idle.
DEFAULT_IDLE_TIMEOUT = 600.0
#: A frame must be complete this long after its first byte arrived, so that a client
#: trickling bytes cannot hold a partial buffer (or its reservation, or its place among
#: those waiting for the request budget) forever.
DEFAULT_FRAME_TIMEOUT = 60.0


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive")


@attrs.frozen
class ConnectionLimits:
    """How large, how slow and how many, per connection and per listener.

    :param max_frame_bytes: largest request accepted; a larger size prefix closes the
        connection before any of the frame is buffered.
    :param idle_timeout: seconds without traffic before closing; None = never.
    :param frame_timeout: seconds a started frame may take to arrive; None = forever.
    :param max_connections: open connections of the listener; None = no limit.
    :param fetch_max_bytes: the broker's cap of one Fetch answer's records (Kafka's
        ``fetch.max.bytes``).
    :param fetch_session_slots: most fetch sessions held (Kafka's
        ``max.incremental.fetch.session.cache.slots``; 0: none).
    :param sasl_max_receive_bytes: largest frame before SASL authentication completes
        (on a listener with SASL).
    """

    max_frame_bytes: int = attrs.field(default=DEFAULT_MAX_FRAME_BYTES, validator=_positive)
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    fetch_session_slots: int = DEFAULT_SESSION_SLOTS
    sasl_max_receive_bytes: int = attrs.field(
        default=DEFAULT_SASL_MAX_RECEIVE_BYTES, validator=_positive)


@attrs.frozen
class ListenerSecurity:
    """Who may do what. The defaults: everything allowed, no authentication.

    :param authorizer: ACL checks of every request; None allows everything.
    :param acls: the CreateAcls/DescribeAcls/DeleteAcls handlers; None: ACLs disabled.
    :param sasl: the SASL mechanisms, credentials and failure throttle; None = no
        authentication (every connection is ``User:ANONYMOUS``).
    :param credentials: the store DescribeUserScramCredentials and
        AlterUserScramCredentials read and write; None = they answer SECURITY_DISABLED.
    """

    authorizer: AclAuthorizer | None = None
    acls: AclHandlers | None = None
    sasl: SaslConfig | None = None
    credentials: CredentialStore | None = None


@attrs.frozen
class ListenerEdge:
    """What the listener shares with the broker's connection edge (``brokerd/net/``).

    :param answer_budget: answer bytes held in memory across the listener's connections
        (``brokerd/net/answer_budget.py``); default unbounded.
    :param request_budget: the broker-wide budget of buffered request bytes (shared
        with the native listener); None: no limit.
    :param addresses: the per-address connection limits (shared with the native
        listener); None: no limit.
    :param metrics: where connections and requests are counted (``brokerd.metrics``).
    """

    answer_budget: AnswerBudget = attrs.field(factory=lambda: AnswerBudget(None))
    request_budget: RequestBudget | None = None
    addresses: AddressLimits | None = None
    metrics: RequestObserver = NULL_REQUESTS


@attrs.frozen
class ClientServices:
    """Client telemetry and client quotas.

    :param telemetry: the client instances and client-metrics resources (KIP-714);
        None: in memory only.
    :param quotas: client quota enforcement; None: a quota manager of the listener's
        own, in memory (nothing is measured while no quota is set).
    :param quota_handlers: DescribeClientQuotas and AlterClientQuotas; None: over
        ``quotas``' manager, in memory.
    """

    telemetry: ClientTelemetry | None = None
    quotas: QuotaEnforcer | None = None
    quota_handlers: ClientQuotaHandlers | None = None


#: The defaults of each concern (frozen, so one value serves every factory).
DEFAULT_LIMITS = ConnectionLimits()
OPEN_SECURITY = ListenerSecurity()
IN_MEMORY_CLIENTS = ClientServices()

__all__ = [
    "DEFAULT_FRAME_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_LIMITS",
    "DEFAULT_SASL_MAX_RECEIVE_BYTES",
    "IN_MEMORY_CLIENTS",
    "OPEN_SECURITY",
    "ClientServices",
    "ConnectionLimits",
    "ListenerEdge",
    "ListenerSecurity",
]
