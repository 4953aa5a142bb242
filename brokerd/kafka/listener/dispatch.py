# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""Kafka request dispatch: each API's handler, behind its ACL rule, collected from the
handler modules.

Every module of ``brokerd/kafka/server/handlers/`` answers one API family and gives its
APIs as :class:`~brokerd.kafka.server.route.Route` values (key, handler, rule);
:class:`KafkaHandlers` builds each family's handler object with what it needs (core,
coordinators, identity, clock) and routes each decoded request
(:mod:`brokerd.kafka.wire.requests.apis`) to its route. A handler returns a response message or an
:class:`Outcome` (``NO_RESPONSE``, ``CLOSE_CONNECTION``: acks=0 Produce). Errors from the
core arrive as ``brokerd.errors`` exceptions and become Kafka error codes in the handlers
(:mod:`brokerd.kafka.errors`).

It does not parse or build bytes, touch transports, or decide request order: the
protocol (:mod:`brokerd.kafka.listener.protocol`) calls :meth:`KafkaHandlers.handle` for one
request at a time. The core is its role :class:`~brokerd.core.api.CoreApi`; the
coordinators are the concrete
:class:`~brokerd.kafka.groups.coordinator.GroupCoordinator` and
:class:`~brokerd.kafka.txn.coordinator.TransactionCoordinator` (a test fakes one by
subclassing it).
SaslHandshake and SaslAuthenticate are not routed here: the protocol answers them (they
change the connection's state).
"""

from __future__ import annotations

from collections.abc import Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from brokerd.clock import Clock
from brokerd.core.api import CoreApi
from brokerd.core.quotas.manager import QuotaManager
from brokerd.kafka.groups.share.state_service import ShareGroups
from brokerd.kafka.server import acl_gate as authorize
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.fetch_sessions import DEFAULT_SESSION_SLOTS
from brokerd.kafka.server.handler_base import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    BrokerIdentity,
    Handler,
    Outcome,
    RequestContext,
)
from brokerd.kafka.server.handlers.acl import AclHandlers
from brokerd.kafka.server.handlers.cluster_topics import DEFAULT_PARTITIONS, ClusterTopicHandlers
from brokerd.kafka.server.handlers.configs import ConfigHandlers
from brokerd.kafka.server.handlers.consumer_groups import ConsumerGroupHandlers
from brokerd.kafka.server.handlers.fetch import DEFAULT_FETCH_MAX_BYTES, FetchHandler
from brokerd.kafka.server.handlers.group_admin import GroupAdminHandlers
from brokerd.kafka.server.handlers.groups import GroupHandlers, PendingOffsets
from brokerd.kafka.server.handlers.leadership import LeadershipHandlers
from brokerd.kafka.server.handlers.list_offsets import ListOffsetsHandler
from brokerd.kafka.server.handlers.partitions import PartitionAdminHandlers
from brokerd.kafka.server.handlers.produce import ProduceHandler
from brokerd.kafka.server.handlers.quotas import ClientQuotaHandlers
from brokerd.kafka.server.handlers.sasl import ScramAdminHandlers
from brokerd.kafka.server.handlers.share import ShareHandlers
from brokerd.kafka.server.handlers.share_configs import ShareGroupConfigs
from brokerd.kafka.server.handlers.share_offsets import ShareOffsetHandlers
from brokerd.kafka.server.handlers.streams_groups import StreamsGroupHandlers
from brokerd.kafka.server.handlers.telemetry import TelemetryHandlers
from brokerd.kafka.server.handlers.txn import TxnHandlers
from brokerd.kafka.server.internal_topics import InternalTopics
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.kafka.server.route import AnyRoute, route_table
from brokerd.kafka.server.throttle import QuotaEnforcer
from brokerd.kafka.telemetry.clients import ClientTelemetry
from brokerd.kafka.telemetry.resources import ClientMetricsResources
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests.apis import AnyRequest
from brokerd.net.answer_budget import AnswerBudget
from brokerd.security.acl import AclAuthorizer

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.security.credentials import CredentialStore


def _pending_offsets(
    transactions: TransactionCoordinator | None,
) -> PendingOffsets | None:
    """OffsetFetch's view of open transactional commits, looked up per request."""
    if transactions is None:
        return None
    txns: TransactionCoordinator = transactions

    def pending(group_id: str) -> frozenset[tuple[str, int]]:
        return txns.pending_offsets(group_id)

    return pending


def _classic_group(coordinator: GroupCoordinator) -> Callable[[str], bool]:
    """Whether the classic group coordinator holds a group (or committed offsets) of an
    id: such an id cannot also be a share group."""

    def exists(group_id: str) -> bool:
        (found,) = coordinator.admin.describe([group_id], True)
        return bool(found.error_code == 0 and found.state != "Dead")

    return exists


def _configured_groups(
    coordinator: GroupCoordinator, shares: ShareGroups | None
) -> Callable[[], list[str]]:
    """The groups with config overrides, ``consumer.*`` or ``share.*``."""

    def configured() -> list[str]:
        found: set[str] = set(coordinator.group_configs.configured())
        if shares is not None:
            found.update(shares.service.engine.configured())
        return sorted(found)

    return configured


def _no_share_groups(group_id: str) -> bool:
    """Without share groups no id is a share group's."""
    return False


class KafkaHandlers:
    """Answers decoded requests. One instance per listener, shared by its connections.

    :param core: the broker core (:class:`~brokerd.core.api.CoreApi`).
    :param coordinators: the group and transaction coordinators, the share groups and
        the internal topics (:class:`~brokerd.kafka.server.coordinators.KafkaCoordinators`;
        without transactions see :mod:`brokerd.kafka.server.handlers.txn` for what is
        answered).
    :param identity: node id, advertised host/port and cluster id (read live).
    :param clock: for the acks=all produce timeout and the long-poll deadline.
    :param default_partitions: partitions for CreateTopics with num_partitions -1.
    :param authorizer: checks every request (:mod:`brokerd.kafka.server.acl_gate`); None =
        everything allowed. ``acls`` answers the ACL APIs (default: ACLs disabled).
    :param telemetry: the client instances and client-metrics resources of client
        telemetry (KIP-714); None: in memory only.
    :param quotas: the client quota APIs (DescribeClientQuotas, AlterClientQuotas) over
        the quotas the listener enforces (default: a set of their own, in memory);
        ``enforcer`` charges the controller mutation quota in the admin handlers.
    :param credentials: the SCRAM credentials store of the credential admin APIs; None
        = no ``--credentials`` (they answer SECURITY_DISABLED). SaslHandshake and
        SaslAuthenticate are answered by the protocol (they change connection state).
    """

    def __init__(
        self,
        core: CoreApi,
        coordinators: KafkaCoordinators,
        identity: BrokerIdentity,
        *,
        clock: Clock,
        default_partitions: int = DEFAULT_PARTITIONS,
        authorizer: AclAuthorizer | None = None,
        acls: AclHandlers | None = None,
        credentials: CredentialStore | None = None,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        answer_budget: AnswerBudget | None = None,
        telemetry: ClientTelemetry | None = None,
        quotas: ClientQuotaHandlers | None = None,
        enforcer: QuotaEnforcer | None = None,
        fetch_session_slots: int = DEFAULT_SESSION_SLOTS,
    ) -> None:
        coordinator = coordinators.groups
        transactions = coordinators.transactions
        shares = coordinators.shares
        internal_topics = coordinators.internal_topics
        if internal_topics is None:
            internal_topics = InternalTopics(lambda: identity.cluster_id)
        txn = TxnHandlers(core, transactions, clock=clock, internal_topics=internal_topics)
        if telemetry is None:
            telemetry = ClientTelemetry(ClientMetricsResources(), clock=clock)
        operations = AuthorizedOperations(authorizer)
        is_share_group = shares.exists if shares is not None else _no_share_groups

        fetch = FetchHandler(
            core, clock=clock, fetch_max_bytes=fetch_max_bytes, answer_budget=answer_budget,
            session_slots=fetch_session_slots, internal_topics=internal_topics,
        )
        #: The listener's fetch sessions (``/metrics`` reads them).
        self.fetch_sessions = fetch.sessions
        families = (
            ClusterTopicHandlers(
                core, identity, default_partitions=default_partitions, transactional=txn,
                operations=operations, quotas=enforcer, internal_topics=internal_topics,
            ),
            ProduceHandler(core, clock=clock),
            fetch,
            ListOffsetsHandler(core, internal_topics),
            GroupHandlers(
                core, coordinator, identity,
                pending_offsets=_pending_offsets(transactions),
                is_share_group=is_share_group, internal_topics=internal_topics,
            ),
            GroupAdminHandlers(
                core, coordinator, operations,
                share_groups=shares,
            ),
            ConsumerGroupHandlers(
                core, coordinator, operations,
                # A streams group's id is no consumer group's either.
                is_share_group=lambda g: is_share_group(g) or g in coordinator.streams.groups,
                internal_topics=internal_topics,
            ),
            StreamsGroupHandlers(
                core, coordinator, operations,
                is_share_group=is_share_group,
            ),
            ConfigHandlers(
                core, identity, default_partitions=default_partitions,
                groups=coordinator,
                shares=ShareGroupConfigs(shares.service) if shares is not None else None,
                client_metrics=telemetry.resources,
                telemetry_max_bytes=telemetry.max_bytes,
            ),
            PartitionAdminHandlers(core, identity, clock=clock, quotas=enforcer),
            txn,
            ScramAdminHandlers(credentials),
            acls if acls is not None else AclHandlers(None, None),
            ShareHandlers(
                core, shares, identity, clock=clock, operations=operations,
                classic_group=_classic_group(coordinator),
            ),
            ShareOffsetHandlers(core, shares, classic_group=_classic_group(coordinator)),
            LeadershipHandlers(core, identity, clock=clock),
            TelemetryHandlers(
                core, identity, telemetry,
                configured_groups=_configured_groups(coordinator, shares),
            ),
            quotas if quotas is not None else ClientQuotaHandlers(QuotaManager()),
        )
        #: Every routed API, by key (the ACL tests read the rules here).
        self.routes: dict[ApiKey, AnyRoute] = route_table(
            route for family in families for route in family.routes()
        )
        self._handlers: dict[ApiKey, Handler[Any, Any]] = {
            key: authorize.guard(route.handle, route.rule, authorizer, core)
            for key, route in self.routes.items()
        }

    def handle(self, conn: RequestContext, request: AnyRequest) -> defer.Deferred[Any]:
        """Answer ``request``: fires with a response message or an :class:`Outcome`.

        A failure means a bug (every expected error becomes an error code); the
        protocol then logs it and closes the connection.
        """
        handler = self._handlers[request.api_key]
        try:
            answer = handler(conn, request)
        except Exception:
            return defer.fail()
        # A handler's coroutine is driven as it is: no wrapping coroutine, one frame
        # and one step less on every request.
        if isinstance(answer, defer.Deferred):
            return answer
        if isinstance(answer, CoroutineType):
            return defer.Deferred.fromCoroutine(answer)
        awaitable = answer

        async def run() -> Any:
            return await awaitable

        return defer.Deferred.fromCoroutine(run())


__all__ = [
    "CLOSE_CONNECTION",
    "DEFAULT_PARTITIONS",
    "NO_RESPONSE",
    "BrokerIdentity",
    "KafkaCoordinators",
    "KafkaHandlers",
    "Outcome",
    "RequestContext",
]
