"""The broker's service tree, built from its typed settings: one function per service,
called in the order of the tree.

The tree's shape is the shutdown order (every level stops its children one at a time,
the last added first, each after the previous one finished)::

    top
    ├── broker core (brokerd.core.Broker)
    │   ├── worker pools            stopped last
    │   ├── log directory           last snapshots, sync, checkpoint, clean marker
    │   ├── log cleaner             (unless --cleaner-threads 0) abandons a pass first
    │   ├── group state             coordinator's last journal writes, offsets store
    │   ├── transaction coordinator its operations in progress, then transactions.log
    │   └── store recovery          no reopen while the stores close
    ├── native listener             (unless --native none)
    ├── Kafka listener              (unless --kafka none)
    ├── schema registry             tails _schemas (unless --schema-registry none)
    ├── console sampler             (unless --http none)
    ├── HTTP endpoint               metrics, health checks, console (unless --http none)
    ├── REST Proxy instances        close (leave their groups) after its listener stops
    ├── REST Proxy listener         (unless --http-proxy none)
    ├── schema registry listener    Confluent's REST API
    └── readiness notifier          STOPPING=1 first

So at SIGTERM the listeners stop accepting first; the broker then refuses new appends,
answers parked fetches and finishes queued appends before its own children stop.

The group coordinator with its offsets store, and the transaction coordinator, are built
whatever the listeners are: the native admin commands (``brokerctl groups``), the
console and the metrics read the same groups, and transactions left prepared are still
completed. A service is added by one function here and one call in
:func:`build_services`.

This module holds no logic of its own and reads no option: it gets the reactor (the
global one from ``brokerd.tap``, a fake in tests) and :class:`~brokerd.app.settings.Settings`.
Modules of a listener that is off are not imported.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import attrs
from twisted.application import service
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd import start_gc
from brokerd.core.services import SequentialMultiService
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.net.listener_service import listener_service

if TYPE_CHECKING:
    from brokerd.app.settings import Settings
    from brokerd.core import Broker
    from brokerd.core.cleaner_service import CleanerService
    from brokerd.core.quotas.manager import QuotaManager
    from brokerd.core.quotas.store import QuotaStore
    from brokerd.core.store_recovery import StoreRecovery
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.groups.share.state_service import ShareGroups
    from brokerd.kafka.server.handlers.acl import AclHandlers
    from brokerd.kafka.server.internal_topics import InternalTopics
    from brokerd.kafka.server.sasl_session import SaslConfig
    from brokerd.kafka.telemetry.clients import ClientTelemetry
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.metrics.registry import BrokerMetrics
    from brokerd.net.connlimit import AddressLimits
    from brokerd.net.request_budget import RequestBudget
    from brokerd.net.tls import ClientVerification
    from brokerd.operator.inspect import Inspector
    from brokerd.operator.share_groups import ShareGroupInspector
    from brokerd.registry.service import SchemaRegistry
    from brokerd.security.acl import AclAuthorizer
    from brokerd.storage.logdir.log_directory import LogDirectory
    from brokerd.storage.stores.offsets import OffsetStore
    from brokerd.storage.stores.producer_ids import ProducerIdAllocator
    from brokerd.storage.stores.share_state import ShareStateStore
    from brokerd.storage.stores.txn_log import TxnLog
    from brokerd.web.auth import HttpIdentity
    from brokerd.web.health import Readiness

_log = Logger()


@attrs.frozen
class Coordinators:
    """The broker's durable group and transaction state: the group coordinator with its
    offsets store, and the transaction coordinator."""

    groups: GroupCoordinator
    offsets: OffsetStore
    transactions: TransactionCoordinator
    #: Reopens the offsets store and the transaction log after a failed fsync.
    recovery: StoreRecovery
    #: Share groups (KIP-932): members and sessions, and the records engine.
    shares: ShareGroups
    #: Kafka's internal topics as clients see them (Metadata; KIP-848 regexes).
    internal_topics: InternalTopics


@attrs.frozen
class Authorization:
    """The listeners' authorizer (None: ``--authorizer none``) and the Kafka ACL
    handlers over it."""

    authorizer: AclAuthorizer | None
    acls: AclHandlers


@attrs.frozen
class ClientQuotas:
    """The client quotas the Kafka listener enforces, and their file
    (``client-quotas.json``)."""

    manager: QuotaManager
    store: QuotaStore


@attrs.frozen
class Edge:
    """What both listeners share at the connection edge, counted while they run."""

    request_budget: RequestBudget
    addresses: AddressLimits


@attrs.frozen
class BrokerServices:
    """The tree (``top``, what twistd runs) and the parts the listeners are built over."""

    top: service.MultiService
    broker: Broker
    coordinators: Coordinators
    inspector: Inspector
    #: Share groups' figures (backlog, in flight, ...) for the console, metrics, native.
    share_inspector: ShareGroupInspector
    authorization: Authorization
    #: None with ``--http none`` (no one scrapes the metrics).
    metrics: BrokerMetrics | None
    readiness: Readiness
    edge: Edge
    #: The schema registry (None: ``--schema-registry none``), for the HTTP services
    #: that read it (the console, the proxy) and produce validation.
    registry: SchemaRegistry | None = None
    #: Who an HTTP request is (``--http-auth``), one for every HTTP listener: a client
    #: failing Basic logins is refused on all of them, not counted anew on each.
    http_identity: HttpIdentity | None = None
    #: Client telemetry (KIP-714): client-metrics resources, client instances and what
    #: they pushed (None: ``--kafka none``).
    telemetry: ClientTelemetry | None = None
    #: Client quotas by user and client id (None: in memory only, as tests build it).
    quotas: ClientQuotas | None = None


def build_services(settings: Settings, reactor: Any) -> BrokerServices:
    """The whole tree: broker core (with the cleaner and the coordinators), then the
    listeners, then the readiness notice."""
    from brokerd.operator.inspect import Inspector
    from brokerd.operator.share_groups import ShareGroupInspector
    from brokerd.sdnotify import ReadyNotifier

    top = SequentialMultiService()
    logdir = open_log_directory(settings)
    broker = add_core(top, logdir, settings, reactor)
    cleaner = add_cleaner(broker, logdir, settings, reactor)
    authorization = build_authorization(broker, settings)
    quotas = build_quotas(settings)
    coordinators = add_coordinators(broker, settings, reactor)
    share_inspector = ShareGroupInspector(
        coordinators.shares.service.engine,
        broker.storage.open_logs,
        coordinators.shares.coordinator,
    )
    inspector = Inspector(
        broker, coordinators.groups.admin, coordinators.offsets, share_inspector
    )
    metrics = (
        build_metrics(broker, inspector, cleaner, coordinators)
        if settings.listeners.http is not None
        else None
    )
    telemetry = build_telemetry(broker, settings, reactor)
    if metrics is not None:
        metrics.add_share_groups(share_inspector)
        if telemetry is not None:
            metrics.add_client_telemetry(telemetry)
    readiness = build_readiness(inspector, coordinators)
    services = BrokerServices(
        top=top,
        broker=broker,
        coordinators=coordinators,
        inspector=inspector,
        share_inspector=share_inspector,
        authorization=authorization,
        metrics=metrics,
        readiness=readiness,
        edge=build_edge(settings),
        registry=build_schema_registry(broker, settings, reactor, readiness),
        http_identity=http_identity(settings, reactor),
        telemetry=telemetry,
        quotas=quotas,
    )
    if metrics is not None:
        metrics.add_quotas(quotas.manager, reactor.seconds)
    add_native(services, settings, reactor)
    log_anonymous_doors(settings)
    add_kafka(services, settings, reactor)
    if services.registry is not None:
        # Before the HTTP services that read it, so it stops after them.
        services.registry.setServiceParent(top)
    add_http(services, settings, reactor)
    add_http_proxy(services, settings, reactor)
    add_schema_registry(services, settings, reactor)
    ReadyNotifier(reactor, ready_file=settings.listeners.ready_file).setServiceParent(top)
    # Runs once the service tree has started (twistd starts it before the reactor runs).
    reactor.callWhenRunning(start_gc.resume)
    return services


def open_log_directory(settings: Settings) -> LogDirectory:
    """The data directory, opened and recovered (the storage layer's logging routed into
    Twisted's log first)."""
    from brokerd.app.stdlib_logging import route_storage_logging
    from brokerd.sdnotify import extending_start_timeout
    from brokerd.storage.logdir.log_directory import LogDirectory

    storage = settings.storage
    data_dir = storage.data_dir
    route_storage_logging()
    # A long recovery must not trip systemd's start timeout: keep extending it.
    with extending_start_timeout(f"opening and recovering {data_dir}"):
        logdir = LogDirectory.open(
            data_dir,
            storage.log_config,
            auto_create=storage.auto_create,
            default_partitions=storage.default_partitions,
        )
    _log.info(
        "data directory {path}: {topics} topic(s); previous shutdown was {how}; fsync {fsync}",
        path=data_dir,
        topics=len(logdir.topics()),
        how="clean" if logdir.was_clean else "not clean (logs recovered)",
        fsync=settings.core.fsync,
    )
    return logdir


def add_core(
    top: service.MultiService, logdir: LogDirectory, settings: Settings, reactor: Any
) -> Broker:
    """The broker core over the log directory, the first child of the tree (so it stops
    last)."""
    from brokerd.core import Broker

    core = settings.core
    broker = Broker(
        logdir,
        reactor=reactor,
        fsync=core.fsync,
        read_threads=core.read_threads,
        write_threads=core.write_threads,
        retention_check_seconds=core.retention_check_seconds,
    )
    broker.setServiceParent(top)
    return broker


def add_cleaner(
    broker: Broker, logdir: LogDirectory, settings: Settings, reactor: Any
) -> CleanerService | None:
    """The log cleaner, a child of the broker added after its log directory, so that it
    stops (abandoning a pass) before the logs close."""
    from brokerd.core.cleaner_service import CleanerService

    if settings.cleaner is None:
        return None
    cleaner = CleanerService(logdir, settings.cleaner, reactor=reactor)
    cleaner.setServiceParent(broker)
    return cleaner


def build_authorization(broker: Broker, settings: Settings) -> Authorization:
    """The listeners' authorizer and the ACL handlers (``acls.json`` loaded now; a file
    that cannot be read stops the start: running without its DENYs would grant too
    much)."""
    from brokerd.kafka.server.handlers.acl import AclHandlers
    from brokerd.security.acl import AclAuthorizer
    from brokerd.security.acl_store import AclStore

    if not settings.authorization.acl:
        return Authorization(None, AclHandlers(None, None))
    store = AclStore.in_directory(settings.storage.data_dir)
    authorizer = AclAuthorizer(store.load(), settings.authorization.super_users)
    _log.info(
        "authorizer acl: {count} ACL(s), super users {users}",
        count=len(authorizer.acls), users=sorted(authorizer.super_users) or "none",
    )
    return Authorization(
        authorizer, AclHandlers(authorizer, store, run_blocking=broker.pools.run_write)
    )


def build_quotas(settings: Settings) -> ClientQuotas:
    """The client quotas, ``client-quotas.json`` loaded now (a file that cannot be read
    stops the start: running without its quotas would let every client run free)."""
    from brokerd.core.quotas.entities import QuotaConfigs
    from brokerd.core.quotas.manager import QuotaManager
    from brokerd.core.quotas.store import QuotaStore

    store = QuotaStore.in_directory(settings.storage.data_dir)
    configs = QuotaConfigs(store.load())
    if configs.entities():
        _log.info("client quotas: {count} entit(ies) with quotas",
                  count=len(configs.entities()))
    limits = settings.limits
    return ClientQuotas(QuotaManager(
        configs, samples=limits.quota_window_num,
        window_ms=limits.quota_window_size_seconds * 1000,
    ), store)


def add_coordinators(broker: Broker, settings: Settings, reactor: Any) -> Coordinators:
    """The group and transaction coordinators, children of the broker core (created
    before the listeners: the admin views and commands of both protocols read them)."""
    from brokerd.core.store_recovery import StoreRecovery
    from brokerd.kafka.groups.consumer.coordinator import GroupSettings as ConsumerGroupDefaults
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.groups.group_service import GroupStateService
    from brokerd.kafka.listener.protocol import DEFAULT_CLUSTER_ID
    from brokerd.kafka.server.internal_topics import OFFSETS_TOPIC_PARTITIONS, with_internal
    from brokerd.kafka.server.internal_topics import InternalTopics as _InternalTopics
    from brokerd.kafka.server.offsets_topic import OffsetsTopicLog, next_run
    from brokerd.storage.stores.offsets import OffsetStore
    from brokerd.storage.stores.producer_ids import ProducerIdAllocator

    data_dir = settings.storage.data_dir
    offsets = OffsetStore.open(os.path.join(data_dir, "consumer-offsets.log"))
    producer_ids = ProducerIdAllocator(os.path.join(data_dir, "producer-ids"))
    broker.set_producer_id_source(producer_ids.next_id)
    consumer_defaults = ConsumerGroupDefaults(
        session_timeout_ms=settings.groups.consumer_session_timeout_ms,
        heartbeat_interval_ms=settings.groups.consumer_heartbeat_interval_ms,
    )
    offsets_log = OffsetsTopicLog(OFFSETS_TOPIC_PARTITIONS, next_run(data_dir))
    offsets.follow(
        lambda committed, stored: offsets_log.seed(committed.items(), stored.items()),
        offsets_log.journal_written,
    )
    internal_topics = _InternalTopics(lambda: DEFAULT_CLUSTER_ID, offsets_log)
    groups = GroupCoordinator(
        clock=reactor,
        offsets=offsets,
        run_blocking=broker.pools.run_write,
        consumer_defaults=consumer_defaults,
        # The internal topics presented too: Kafka's KIP-848 regexes do not skip them.
        topics=lambda: with_internal(
            {n: (i.topic_id, i.partitions) for n, i in broker.topic_registry.topics().items()},
            internal_topics,
        ),
    )
    GroupStateService(groups, offsets, producer_ids).setServiceParent(broker)

    def forget_offsets(topic: str) -> None:
        # As Kafka: a deleted topic's committed offsets go with it, so a topic created
        # again under the name is not read from where the old one's consumers stopped.
        broker.pools.run_write(offsets.delete_topic, topic).addErrback(
            lambda f: _log.failure("forgetting deleted topic {topic}'s offsets", f, topic=topic)
        )

    broker.topic_registry.on_topic_deleted(forget_offsets)
    # Added after the group state, so it stops before it (children stop last added first).
    transactions, txn_log = add_transactions(broker, settings, reactor, groups, producer_ids)
    shares, share_store = add_share_groups(broker, settings, reactor)
    # Added last, so it stops first: no reopen runs while the stores close.
    recovery = StoreRecovery(
        [offsets, txn_log, producer_ids, share_store], clock=reactor,
        run_blocking=broker.pools.run_write,
    )
    recovery.setServiceParent(broker)
    return Coordinators(groups, offsets, transactions, recovery, shares, internal_topics)


def add_share_groups(
    broker: Broker, settings: Settings, reactor: Any
) -> tuple[ShareGroups, ShareStateStore]:
    """Share groups (KIP-932): ``share-state.log`` in the data directory, replayed now;
    the records engine and the share group coordinator over it."""
    from brokerd.core.share.config import DEFAULTS
    from brokerd.core.share.dead_letters import DeadLetterRules, DeadLetterWriter
    from brokerd.core.share.service import ShareService
    from brokerd.kafka.groups.share.coordinator import ShareGroupCoordinator
    from brokerd.kafka.groups.share.state_service import ShareGroups, ShareStateService
    from brokerd.storage.stores.share_state import SHARE_STATE_FILE_NAME, ShareStateStore

    store = ShareStateStore.open(
        os.path.join(settings.storage.data_dir, SHARE_STATE_FILE_NAME)
    )
    dead_letters = DeadLetterWriter(
        broker,
        DeadLetterRules(
            prefix=settings.groups.share_dlq_prefix,
            auto_create=settings.groups.share_dlq_auto_create,
            partitions=settings.storage.default_partitions,
        ),
        lambda: time.time() * 1000.0,
    )
    records = ShareService(
        broker, store, run_write=broker.pools.run_write, clock=reactor,
        defaults=settings.groups.share_defaults or DEFAULTS, dead_letters=dead_letters,
    )
    broker.share = records

    def member_gone(group: str, member: str) -> None:
        Deferred.fromCoroutine(records.release_member(group, member)).addErrback(
            lambda f: _log.failure("releasing a share member's records", f)
        )

    coordinator = ShareGroupCoordinator(
        clock=reactor,
        partition_counts=lambda: {
            n: t.partitions for n, t in broker.topic_registry.topics().items()
        },
        on_member_gone=member_gone,
        session_timeout_ms=lambda g: records.engine.config(g).session_timeout_ms,
        heartbeat_interval_ms=lambda g: records.engine.config(g).heartbeat_interval_ms,
        max_sessions=settings.groups.share_max_sessions,
    )
    broker.topic_registry.on_topic_deleted(records.forget_topic)
    shares = ShareGroups(coordinator, records)
    ShareStateService(shares, store).setServiceParent(broker)
    return shares, store


def add_transactions(
    broker: Broker,
    settings: Settings,
    reactor: Any,
    groups: GroupCoordinator,
    producer_ids: ProducerIdAllocator,
) -> tuple[TransactionCoordinator, TxnLog]:
    """The transaction coordinator (``transactions.log`` in the data directory), wired to
    the core's marker writes and produce verifier; and its log."""
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.kafka.txn.txn_service import TxnStateService
    from brokerd.storage.stores.txn_log import TXN_LOG_FILE_NAME, TxnLog

    txn_log = TxnLog.open(os.path.join(settings.storage.data_dir, TXN_LOG_FILE_NAME))
    coordinator = TransactionCoordinator(
        clock=reactor,
        log=txn_log,
        run_blocking=broker.pools.run_write,
        allocate_producer_id=producer_ids.next_id,
        core=broker.transactions,
        groups=groups,
        max_timeout_ms=settings.limits.transaction_max_timeout_ms,
    )
    TxnStateService(coordinator, txn_log).setServiceParent(broker)
    return coordinator, txn_log


def build_metrics(
    broker: Broker,
    inspector: Inspector,
    cleaner: CleanerService | None,
    coordinators: Coordinators,
) -> BrokerMetrics:
    """The broker's metrics registry (``brokerd.metrics``), its write observer installed
    in the core before any partition opens."""
    from brokerd.kafka.txn.state import TxnState
    from brokerd.metrics.registry import BrokerMetrics

    metrics = BrokerMetrics(inspector)
    broker.writes = metrics.writes
    if cleaner is not None:
        metrics.add_cleaner(cleaner)
    metrics.add_transactions(coordinators.transactions, [s.value for s in TxnState])
    metrics.add_stores(coordinators.recovery.stores)
    return metrics


def build_telemetry(broker: Broker, settings: Settings, reactor: Any) -> ClientTelemetry | None:
    """Client telemetry (unless ``--kafka none``): the client-metrics resources from
    ``client-metrics.json`` (written in the write pool), pushes decoded in the read pool."""
    if settings.listeners.kafka is None:
        return None
    from brokerd.kafka.telemetry.clients import ClientTelemetry
    from brokerd.kafka.telemetry.resources import ClientMetricsResources
    from brokerd.storage.stores.client_metrics import ClientMetricsStore

    resources = ClientMetricsResources(
        ClientMetricsStore.in_directory(settings.storage.data_dir),
        run_blocking=broker.pools.run_write,
    )
    return ClientTelemetry(
        resources,
        clock=reactor,
        max_bytes=settings.limits.telemetry_max_bytes,
        run_blocking=broker.pools.run_read,
    )


def build_readiness(inspector: Inspector, coordinators: Coordinators) -> Readiness:
    """What ``/readyz`` waits for: the listeners (each marks itself bound), no offline
    partition, and the transaction coordinator's start-up completions (built now, before
    the coordinator starts, so the prepared transactions it must complete are known)."""
    from brokerd.web.health import Readiness, startup_completions

    readiness = Readiness(inspector.offline_partitions)
    readiness.add_check(startup_completions(coordinators.transactions))
    # An offsets store or transaction log offline after a failed fsync.
    readiness.add_check(coordinators.recovery.problems)
    return readiness


def build_edge(settings: Settings) -> Edge:
    """The request budget and the per-address connection counts both listeners share."""
    from brokerd.net.connlimit import AddressLimits
    from brokerd.net.request_budget import RequestBudget

    limits = settings.limits
    return Edge(
        RequestBudget(limits.queued_request_bytes),
        AddressLimits(limits.per_address, limits.per_address_overrides),
    )


def add_native(services: BrokerServices, settings: Settings, reactor: Any) -> None:
    """The native listener (unless ``--native none``), with the admin operations of
    ``brokerctl``."""
    description = settings.listeners.native
    if description is None:
        return
    from brokerd.kafka.groups.group_admin import operator_error
    from brokerd.native.protocol import NativeFactory
    from brokerd.native.queue_handlers import QueueOps
    from brokerd.operator.operations import OperatorOps

    limits = settings.limits
    broker = services.broker
    native = NativeFactory(
        broker,
        clock=reactor,
        max_produce_bytes=limits.max_produce_bytes,
        max_fetch_bytes=limits.max_fetch_bytes,
        max_connections=limits.max_connections,
        request_budget=services.edge.request_budget,
        addresses=services.edge.addresses,
        authorizer=services.authorization.authorizer,
        operator=OperatorOps(
            broker, services.inspector, services.coordinators.groups, operator_error
        ),
        queues=QueueOps(services.coordinators.shares.service, services.share_inspector),
    )
    if services.metrics is not None:
        native.metrics = services.metrics.listener("native")
    bound = services.readiness.wait_for("native listener", "not bound yet")
    named(
        listener_service(reactor, description, native, settings.tls.client_verification, bound),
        "native",
    ).setServiceParent(services.top)


def log_anonymous_doors(settings: Settings) -> None:
    """One warning per listener serving anonymous clients, so a broker that requires
    authentication says at start where it does not."""
    from brokerd.security.doors import anonymous_doors

    for door in anonymous_doors(settings.doors.listeners):
        how = (
            f"allowed by --allow-anonymous {door.door.value}"
            if door.needs_allowing
            else "loopback only"
        )
        _log.warn(
            "Anonymous door: --{name} {description} serves clients nobody authenticated "
            "({how}): {why}",
            name=door.door.value, description=door.description, how=how, why=door.why,
        )


def sasl_config(settings: Settings, reactor: Any) -> SaslConfig | None:
    """The Kafka listener's SASL session settings (None: no authentication)."""
    from brokerd.kafka.server.sasl_session import SaslConfig
    from brokerd.security.auth_throttle import MAX_DELAY, AuthThrottle
    from brokerd.security.scram import DecoyCredentials
    from brokerd.security.server_secret import load_or_create

    sasl = settings.sasl
    if sasl.mechanisms is None or sasl.credentials is None:
        return None
    _log.info("Kafka listener requires SASL: {mechanisms}", mechanisms=", ".join(sasl.mechanisms))
    # Made once, kept in the data directory (a bad file stops the start, as acls.json
    # does): unknown user names must get the same made-up salt after a restart.
    secret = load_or_create(settings.storage.data_dir)
    delay = sasl.failed_authentication_delay_seconds
    throttle = AuthThrottle(reactor.seconds, delay=delay, max_delay=max(delay, MAX_DELAY))
    return SaslConfig(sasl.mechanisms, sasl.credentials, throttle, DecoyCredentials(secret))


def add_kafka(services: BrokerServices, settings: Settings, reactor: Any) -> None:
    """The Kafka listener (unless ``--kafka none``); it learns the port it advertises
    once bound."""
    description = settings.listeners.kafka
    if description is None:
        return
    from brokerd.kafka.listener.factory_parts import (
        ClientServices,
        ConnectionLimits,
        ListenerEdge,
        ListenerSecurity,
    )
    from brokerd.kafka.listener.protocol import KafkaFactory
    from brokerd.net.answer_budget import AnswerBudget
    from brokerd.observers import NULL_REQUESTS

    limits = settings.limits
    advertised_host = settings.listeners.advertised_host
    coordinators, authorization, metrics = (
        services.coordinators, services.authorization, services.metrics
    )
    factory = KafkaFactory(
        services.broker,
        KafkaCoordinators(
            coordinators.groups,
            transactions=coordinators.transactions,
            shares=coordinators.shares,
            internal_topics=coordinators.internal_topics,
        ),
        clock=reactor,
        advertised_host=advertised_host or "127.0.0.1",
        advertised_port=0,
        default_partitions=settings.storage.default_partitions,
        limits=ConnectionLimits(
            max_frame_bytes=limits.max_request_bytes,
            max_connections=limits.max_connections,
            fetch_max_bytes=limits.fetch_max_bytes,
            fetch_session_slots=limits.fetch_session_slots,
            sasl_max_receive_bytes=limits.sasl_max_receive_bytes,
        ),
        security=ListenerSecurity(
            authorizer=authorization.authorizer,
            acls=authorization.acls,
            sasl=sasl_config(settings, reactor),
            credentials=settings.sasl.credentials,
        ),
        edge=ListenerEdge(
            answer_budget=AnswerBudget(limits.max_inflight_answer_bytes),
            request_budget=services.edge.request_budget,
            addresses=services.edge.addresses,
            metrics=metrics.listener("kafka") if metrics is not None else NULL_REQUESTS,
        ),
        clients=ClientServices(
            telemetry=services.telemetry,
            **kafka_quotas(services, broker=services.broker, clock=reactor),
        ),
    )
    if metrics is not None:
        metrics.add_fetch_sessions(factory.handlers.fetch_sessions)
    listening = services.readiness.wait_for("kafka listener", "not bound yet")

    def on_listen(address: Any) -> None:
        listening()
        host = advertised_host
        if host is None:
            bound = getattr(address, "host", "127.0.0.1")
            host = "127.0.0.1" if bound in ("0.0.0.0", "::", "") else bound
        factory.advertised_host = host
        factory.advertised_port = getattr(address, "port", 0)
        _log.info(
            "Kafka listener on {address}, advertised as {host}:{port}",
            address=address,
            host=host,
            port=factory.advertised_port,
        )

    named(
        listener_service(
            reactor, description, factory, settings.tls.client_verification, on_listen
        ),
        "kafka",
    ).setServiceParent(services.top)


def kafka_quotas(services: BrokerServices, *, broker: Broker, clock: Any) -> dict[str, Any]:
    """The Kafka listener's client quota enforcement and APIs over the broker's quotas."""
    from brokerd.kafka.server.handlers.quotas import ClientQuotaHandlers
    from brokerd.kafka.server.throttle import QuotaEnforcer

    quotas = services.quotas
    if quotas is None:
        return {}
    return {
        "quotas": QuotaEnforcer(quotas.manager, clock),
        "quota_handlers": ClientQuotaHandlers(
            quotas.manager, quotas.store, run_blocking=broker.pools.run_write),
    }


def add_http(services: BrokerServices, settings: Settings, reactor: Any) -> None:
    """The HTTP endpoint (unless ``--http none``): console, metrics and health checks
    (``brokerd.web``), showing each principal what the authorizer lets it DESCRIBE; the
    console's registry pages and record decoding read the schema registry (if on)."""
    description, metrics = settings.listeners.http, services.metrics
    if description is None or metrics is None:
        return
    from brokerd.kafka.groups.group_admin import operator_error
    from brokerd.operator.operations import OperatorOps
    from brokerd.web.console import ConsoleSampler
    from brokerd.web.data_face import BrokerData
    from brokerd.web.site import make_site

    admin = OperatorOps(
        services.broker, services.inspector, services.coordinators.groups, operator_error
    )
    if not settings.web.console_actions:
        _log.info(
            "The web console is read-only (--http-console-readonly, or anonymous on a "
            "broker that requires authentication without --authorizer acl)"
        )
    sampler = ConsoleSampler(services.inspector, clock=reactor)
    sampler.setServiceParent(services.top)
    site = make_site(
        services.inspector,
        clock=reactor,
        settings=settings.web.shown_options,
        sampler=sampler,
        registry=metrics.registry,
        readiness=services.readiness,
        identity=services.http_identity or http_identity(settings, reactor),
        authorizer=services.authorization.authorizer,
        shares=services.share_inspector,
        data=BrokerData(services.broker, admin),
        schemas=services.registry,
        actions=settings.web.console_actions,
        telemetry=services.telemetry,
        quotas=services.quotas.manager if services.quotas is not None else None,
    )
    serve_http(
        services, settings, reactor, description, site,
        "http listener", "HTTP endpoint (metrics, health, console)",
    )


def build_schema_registry(
    broker: Broker, settings: Settings, reactor: Any, readiness: Readiness
) -> SchemaRegistry | None:
    """The schema registry (unless ``--schema-registry none``): the service tailing
    ``_schemas`` (ready once replayed), installed as the core's validator of topics with
    ``confluent.*.schema.validation``. The caller adds it to the tree."""
    if settings.listeners.schema_registry is None:
        return None
    from brokerd.registry.service import SchemaRegistry
    from brokerd.registry.validation import SchemaValidator

    replayed = readiness.wait_for("schema registry", "reading _schemas")
    registry = SchemaRegistry(broker, clock=reactor, on_ready=replayed)
    broker.set_record_validator(SchemaValidator(registry).validate)
    return registry


def add_schema_registry(services: BrokerServices, settings: Settings, reactor: Any) -> None:
    """The schema registry's REST listener (``--http-auth`` and ``--authorizer`` as the
    console's)."""
    description, registry = settings.listeners.schema_registry, services.registry
    if description is None or registry is None:
        return
    from brokerd.registry.http import make_registry_site

    site = make_registry_site(
        registry,
        identity=services.http_identity or http_identity(settings, reactor),
        authorizer=services.authorization.authorizer,
    )
    serve_http(
        services, settings, reactor, description, site,
        "schema registry listener", "Schema registry (Confluent's REST API)",
    )


def add_http_proxy(services: BrokerServices, settings: Settings, reactor: Any) -> None:
    """The REST Proxy (unless ``--http-proxy none``): Confluent's v2 and v3 APIs
    (``brokerd.proxy``), with the ``--http-auth`` identity and the ACLs; its consumer
    instances are members of the coordinator's groups; the schema formats go through
    the schema registry (refused with ``--schema-registry none``)."""
    description = settings.listeners.http_proxy
    if description is None:
        return
    from brokerd.kafka.groups.group_admin import operator_error
    from brokerd.kafka.groups.proxy_members import ProxyMembers
    from brokerd.kafka.listener.protocol import DEFAULT_CLUSTER_ID
    from brokerd.net.connlimit import ConnectionLimit
    from brokerd.operator.operations import OperatorOps
    from brokerd.proxy.context import ProxyContext
    from brokerd.proxy.instances import ConsumerInstances
    from brokerd.proxy.limits import ProxyLimits
    from brokerd.proxy.produce import Appender
    from brokerd.proxy.site import InstancesService, make_site
    from brokerd.security.doors import split_description

    broker, groups = services.broker, services.coordinators.groups
    limits = ProxyLimits()
    members = ProxyMembers(
        groups,
        lambda: {
            n: (i.topic_id, i.partitions) for n, i in broker.topic_registry.topics().items()
        },
    )
    kafka = settings.listeners.kafka
    kafka_port = None
    if kafka is not None:
        port = next((p for p in split_description(kafka)[1:] if p.isdigit()), None)
        kafka_port = None if port is None else int(port)
    ctx = ProxyContext(
        core=broker,
        inspector=services.inspector,
        admin=OperatorOps(broker, services.inspector, groups, operator_error),
        appender=Appender(broker, lambda: int(reactor.seconds() * 1000)),
        instances=ConsumerInstances(members, reactor, limits),
        limits=limits,
        registry=services.registry,
        cluster_id=DEFAULT_CLUSTER_ID,
        kafka_host=settings.listeners.advertised_host or "127.0.0.1",
        kafka_port=kafka_port,
    )
    InstancesService(ctx).setServiceParent(services.top)
    scheme = "https" if split_description(description)[0] == "ssl" else "http"
    site = make_site(
        ctx, identity=services.http_identity or http_identity(settings, reactor),
        authorizer=services.authorization.authorizer, scheme=scheme,
        connections=ConnectionLimit(
            settings.limits.max_connections, "http-proxy", services.edge.addresses
        ),
    )
    serve_http(
        services, settings, reactor, description, site,
        "http proxy listener", "REST Proxy (Confluent v2, v3)",
    )



def named(svc: service.Service, name: str) -> service.Service:
    """``svc`` under the option name of its listener (how ``--ready-file`` keys the
    addresses)."""
    svc.setName(name)
    return svc


def serve_http(
    services: BrokerServices,
    settings: Settings,
    reactor: Any,
    description: str,
    site: Any,
    ready: str,
    what: str,
) -> None:
    """Listen with one of the HTTP sites (console, registry, proxy) on ``description``,
    asking client certificates as ``--http-auth certificate`` or ``--ssl-client-auth``
    say; ``/readyz`` waits for ``ready`` until it is bound."""
    bound = services.readiness.wait_for(ready, "not bound yet")

    def on_listen(address: Any) -> None:
        bound()
        _log.info("{what} on {address}", what=what, address=address)

    verification: ClientVerification | None = (
        settings.tls.http_client_verification or settings.tls.client_verification
    )
    # The option's name ("http", "schema-registry", "http-proxy"): the ready file's key.
    name = ready.removesuffix(" listener").replace(" ", "-")
    named(
        listener_service(reactor, description, site, verification, on_listen), name
    ).setServiceParent(services.top)

def http_identity(settings: Settings, reactor: Any) -> HttpIdentity:
    """Who an HTTP client is: nobody asked, HTTP Basic against the credentials file, or
    its client certificate (``--http-auth``)."""
    from brokerd.net.tls import peer_principal
    from brokerd.security.doors import HttpAuth
    from brokerd.web.auth import BasicPasswords, HttpIdentity

    mode = settings.web.auth
    passwords = None
    if mode is HttpAuth.BASIC:
        _log.info("HTTP endpoint requires HTTP Basic (--credentials)")
        assert settings.sasl.credentials is not None, "checked with the options"
        passwords = BasicPasswords(settings.sasl.credentials, clock=reactor)
    elif mode is HttpAuth.CERTIFICATE:
        _log.info("HTTP endpoint requires client certificates")
    return HttpIdentity(mode, passwords, peer_principal=peer_principal)


#: The parts of brokerd a test-mode broker's start (the options' parsing, then
#: :func:`build_services` with the Kafka and native listeners and no HTTP services) never
#: imports: the schema registry and the REST proxy (HTTP services of their own, their
#: formats loading Avro, JSON Schema and Protobuf libraries), the HTTP ``/metrics``, the
#: command-line tools and the test helpers. :func:`preload` imports every other module
#: of brokerd (the web package's too: the start imports its HTTP authentication and
#: health checks, the rest is cheap).
NOT_STARTED = frozenset(
    {"brokerd.registry", "brokerd.proxy", "brokerd.metrics", "brokerd.cli", "brokerd.testing"}
)


def start_modules() -> list[str]:
    """Every module of brokerd but those of :data:`NOT_STARTED` and the ``__main__``
    scripts (which run when imported), found on disk without importing anything: what
    :func:`preload` imports. ``tests/plugin/test_fork_server.py`` checks that a start
    after :func:`preload` imports no brokerd module, so a module the start imports is
    never missed here (a package it should not need is left out by name above)."""
    import pkgutil

    import brokerd

    found: list[str] = []

    def walk(path: str, prefix: str) -> None:
        for info in pkgutil.iter_modules([path], prefix):
            if info.name in NOT_STARTED or info.name.endswith(".__main__"):
                continue
            found.append(info.name)
            if info.ispkg:
                walk(os.path.join(path, info.name.rpartition(".")[2]), info.name + ".")

    for path in brokerd.__path__:
        walk(path, "brokerd.")
    return found


def preload() -> None:
    """Import what building a test-mode broker imports, and plan every Kafka message
    class at every version served, without building anything: a process that will
    start brokers later (the test launcher's fork server) pays their imports in advance. It
    opens no file, port or thread."""
    import importlib

    from brokerd.kafka.wire import codec
    from brokerd.kafka.wire.requests.registry import SPECS

    for name in start_modules():
        importlib.import_module(name)
    for spec in SPECS.values():
        for cls in (spec.request, spec.response):
            layout = codec._layout(cls)
            for version in range(spec.min_version, spec.max_version + 1):
                layout.plan(version)
