# -*- test-case-name: tests.test_tap -*-
"""``twistd broker``: command-line options and the service tree.

This module wires the parts together and owns no logic of its own. It is the only module
that imports the global reactor (inside :func:`makeService`).

The tree, whose shape is the shutdown order (every level stops its children one at a
time, the last added first, each after the previous one finished)::

    top
    ├── broker core (brokerd.core.Broker)
    │   ├── worker pools            stopped last
    │   ├── log directory           last snapshots, sync, checkpoint, clean marker
    │   ├── group state             coordinator's last journal writes, offsets store
    │   └── transaction coordinator its operations in progress, then transactions.log
    ├── native listener             (unless --native none)
    ├── Kafka listener              (unless --kafka none)
    ├── console sampler             (unless --http none)
    ├── HTTP endpoint               metrics, health checks, console (unless --http none)
    └── readiness notifier          STOPPING=1 first

So at SIGTERM the listeners stop accepting first; the broker then refuses new appends,
answers parked fetches and finishes queued appends before its own children stop.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import attrs
from twisted.application import service
from twisted.application.internet import StreamServerEndpointService
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger, LogLevel
from twisted.python import usage
from zope.interface import implementer

from brokerd import start_gc
from brokerd.core import FsyncPolicy
from brokerd.core.services import SequentialMultiService
from brokerd.net.tls import (
    ClientAuth,
    ClientVerification,
    is_tls_description,
    listener_endpoint,
    peer_principal,
)

if TYPE_CHECKING:
    from brokerd.core import Broker
    from brokerd.core.cleaner_service import CleanerService
    from brokerd.core.store_recovery import StoreRecovery
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.server.handlers.share import ShareGroups
    from brokerd.kafka.server.sasl import SaslConfig
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.metrics.registry import BrokerMetrics
    from brokerd.security.acl import AclAuthorizer
    from brokerd.security.doors import ListenerSecurity
    from brokerd.storage.stores.offsets import OffsetStore
    from brokerd.storage.stores.producer_ids import ProducerIdAllocator
    from brokerd.storage.stores.share_state import ShareStateStore
    from brokerd.storage.stores.txn_log import TxnLog
    from brokerd.web.auth import HttpIdentity
    from brokerd.web.health import Readiness

_log = Logger()

DEFAULT_NATIVE = "tcp:7070:interface=127.0.0.1"
DEFAULT_KAFKA = "tcp:9092:interface=127.0.0.1"
DEFAULT_HTTP = "tcp:8070:interface=127.0.0.1"
#: Kafka's defaults: 1 GiB segments, 7 days of retention, no size limit.
DEFAULT_SEGMENT_BYTES = 1024**3
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
MEBIBYTE = 1024 * 1024
#: Flags that set a broker-wide default of a topic config (Kafka's broker config names),
#: with the topic config each one is the default of.
TOPIC_DEFAULT_FLAGS = {
    "log-cleanup-policy": "cleanup.policy",
    "message-max-bytes": "max.message.bytes",
    "log-message-timestamp-type": "message.timestamp.type",
    "log-cleaner-min-cleanable-ratio": "min.cleanable.dirty.ratio",
    "log-cleaner-min-compaction-lag-ms": "min.compaction.lag.ms",
    "log-cleaner-max-compaction-lag-ms": "max.compaction.lag.ms",
    "log-cleaner-delete-retention-ms": "delete.retention.ms",
    "compression-type": "compression.type",
    "log-message-timestamp-before-max-ms": "message.timestamp.before.max.ms",
    "log-message-timestamp-after-max-ms": "message.timestamp.after.max.ms",
    "log-roll-jitter-ms": "segment.jitter.ms",
    "log-index-size-max-bytes": "segment.index.bytes",
    "log-index-interval-bytes": "index.interval.bytes",
}


def _size(text: str) -> int:
    return int(text)


class Options(usage.Options):
    """Options of ``twistd broker``; every size is in bytes and every time in ms."""

    optParameters = [
        ["config", None, None, "TOML file of these options (docs/operations.md, Config file)."],
        ["data-dir", "d", "./data", "Directory holding the partition logs."],
        ["native", None, DEFAULT_NATIVE, "Endpoint of the native protocol listener, or 'none'."],
        ["kafka", None, DEFAULT_KAFKA, "Endpoint of the Kafka listener, or 'none'."],
        [
            "http",
            None,
            DEFAULT_HTTP,
            "Endpoint of the metrics, health checks and web console, or 'none'.",
        ],
        [
            "advertised-host",
            None,
            None,
            "Host name Kafka clients are told to connect to "
            "(default: the listener's interface, or 127.0.0.1 for a wildcard bind).",
        ],
        [
            "fsync",
            None,
            "always",
            "always | interval:MS | never (see Durability in docs/operations.md).",
        ],
        ["segment-bytes", None, DEFAULT_SEGMENT_BYTES, "Roll a segment at this size.", int],
        ["segment-ms", None, 0, "Also roll a non-empty segment this old (0: never).", int],
        ["retention-bytes", None, -1, "Default per-partition size limit (-1: none).", int],
        ["retention-ms", None, DEFAULT_RETENTION_MS, "Default age limit (-1: none).", int],
        [
            "log-cleanup-policy",
            None,
            "delete",
            "Default cleanup.policy: delete, compact or compact,delete.",
        ],
        [
            "message-max-bytes",
            None,
            "1048588",
            "Default max.message.bytes: largest record batch a producer may append.",
        ],
        [
            "log-message-timestamp-type",
            None,
            "CreateTime",
            "Default message.timestamp.type: CreateTime or LogAppendTime.",
        ],
        [
            "log-cleaner-min-cleanable-ratio",
            None,
            "0.5",
            "Default min.cleanable.dirty.ratio.",
        ],
        [
            "log-cleaner-min-compaction-lag-ms",
            None,
            "0",
            "Default min.compaction.lag.ms.",
        ],
        [
            "log-cleaner-max-compaction-lag-ms",
            None,
            "9223372036854775807",
            "Default max.compaction.lag.ms.",
        ],
        [
            "log-cleaner-delete-retention-ms",
            None,
            "86400000",
            "Default delete.retention.ms: how long tombstones stay in compacted topics.",
        ],
        [
            "compression-type",
            None,
            "producer",
            "Default compression.type: producer (keep the producer's codec), "
            "uncompressed, gzip, snappy, lz4 or zstd (recompress to it).",
        ],
        [
            "log-message-timestamp-before-max-ms",
            None,
            "9223372036854775807",
            "Default message.timestamp.before.max.ms: refuse CreateTime records older.",
        ],
        [
            "log-message-timestamp-after-max-ms",
            None,
            "3600000",
            "Default message.timestamp.after.max.ms: refuse CreateTime records this far "
            "in the future.",
        ],
        ["log-roll-jitter-ms", None, "0", "Default segment.jitter.ms."],
        [
            "log-index-size-max-bytes",
            None,
            "10485760",
            "Default segment.index.bytes: roll a segment whose index reaches this size.",
        ],
        ["log-index-interval-bytes", None, "4096", "Default index.interval.bytes."],
        [
            "log-retention-check-interval-ms",
            None,
            300_000,
            "How often retention looks for segments to delete.",
            int,
        ],
        ["default-partitions", None, 1, "Partitions of an auto-created topic.", int],
        ["max-produce-bytes", None, MEBIBYTE, "Largest native produce payload.", int],
        ["max-fetch-bytes", None, MEBIBYTE, "Cap of a native fetch response's values.", int],
        ["max-request-bytes", None, 8 * MEBIBYTE, "Largest Kafka request frame.", int],
        # Kafka Fetch answers (docs/operations.md, "Bounded memory").
        [
            "fetch-max-bytes",
            None,
            57_671_680,
            "Cap of a Kafka Fetch answer's records (Kafka's fetch.max.bytes).",
            int,
        ],
        [
            "max-inflight-answer-bytes",
            None,
            64 * MEBIBYTE,
            "Kafka answer bytes held in memory across connections before reads wait.",
            int,
        ],
        [
            "transaction-max-timeout-ms",
            None,
            900_000,
            "Longest transaction timeout a producer may ask for.",
            int,
        ],
        ["max-connections", None, 1024, "Open connections per listener (0: no limit).", int],
        # Request-side bounds of the connection edge (docs/operations.md, "Bounded memory").
        [
            "max-connections-per-ip",
            None,
            None,
            "Open connections per client address, both listeners together "
            "(default: half of --max-connections).",
            int,
        ],
        [
            "max-connections-per-ip-overrides",
            None,
            "",
            "Per-address exceptions: address:count,address:count.",
        ],
        [
            "queued-max-request-bytes",
            None,
            64 * MEBIBYTE,
            "Request bytes buffered by all connections together (-1: no limit).",
            int,
        ],
        [
            "sasl-server-max-receive-size",
            None,
            512 * 1024,
            "Largest Kafka frame before SASL authentication completes.",
            int,
        ],
        ["read-threads", None, 4, "Threads reading logs.", int],
        ["write-threads", None, 2, "Threads appending and syncing logs.", int],
        # Log compaction (docs/compaction.md).
        ["cleaner-threads", None, 1, "Log cleaner threads (0: no compaction).", int],
        ["cleaner-io-mb-per-sec", None, 0.0, "Cleaner I/O limit, MiB/s (0: none).", float],
        ["cleaner-dedupe-buffer-mb", None, 128, "Cleaner key-map memory, MiB.", int],
        ["cleaner-backoff-ms", None, 15000, "Cleaner sleep when nothing is due.", int],
        # Authorization (docs/security.md).
        ["authorizer", None, "none", "none (allow everything) or acl (Kafka's ACLs)."],
        ["super-users", None, "", "Principals allowed everything: User:a,User:b."],
        # TLS (the TLS section of docs/operations.md).
        [
            "ssl-client-auth",
            None,
            "none",
            "Client certificates on ssl: listeners: none, requested or required.",
        ],
        ["ssl-client-ca", None, None, "PEM bundle of the CAs that issue client certificates."],
        # SASL on the Kafka listener (docs/operations.md, "SASL").
        [
            "sasl",
            None,
            None,
            "SASL mechanisms required on the Kafka listener: a comma list of "
            "SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (default: no authentication).",
        ],
        [
            "credentials",
            None,
            None,
            "JSON file of SCRAM credentials (brokerctl users); needed by --sasl.",
        ],
        [
            "connection-failed-authentication-delay-ms",
            None,
            100,
            "Milliseconds before a failed SASL authentication is answered, doubled per "
            "repeated failure of one user from one address up to 2 s (0: no delay).",
            int,
        ],
        # Anonymous doors and HTTP authentication (docs/operations.md, "Anonymous doors").
        [
            "allow-anonymous",
            None,
            "",
            "With authentication on the Kafka listener, these listeners may still serve "
            "anonymous clients: a comma list of native, http.",
        ],
        [
            "http-auth",
            None,
            "none",
            "What the console and /metrics ask of a client: none, basic (HTTP Basic "
            "against --credentials) or certificate (an ssl: --http listener).",
        ],
    ]
    optFlags = [
        ["no-auto-create", None, "Refuse produce/metadata for unknown topics."],
    ]

    def parseOptions(self, options: list[str] | None = None) -> None:
        """Load ``--config FILE`` (if any) over the defaults first, so that the command
        line, parsed next, overrides the file."""
        from brokerd.app.config_file_options import parse_with_config

        parse_with_config(
            self, super().parseOptions, options, aliases=TOPIC_DEFAULT_FLAGS
        )

    def postOptions(self) -> None:
        try:
            self["fsync-policy"] = FsyncPolicy.parse(self["fsync"])
        except ValueError as e:
            raise usage.UsageError(str(e)) from None
        positive = (
            "segment-bytes",
            "default-partitions",
            "max-produce-bytes",
            "max-fetch-bytes",
            "max-request-bytes",
            "fetch-max-bytes",
            "max-inflight-answer-bytes",
            "read-threads",
            "write-threads",
            "log-retention-check-interval-ms",
            "transaction-max-timeout-ms",
        )
        for name in positive:
            if self[name] <= 0:
                raise usage.UsageError(f"--{name} must be positive")
        if self["segment-bytes"] < 1024:
            raise usage.UsageError("--segment-bytes must be at least 1024")
        if self["max-connections"] < 0:
            raise usage.UsageError("--max-connections must be 0 (no limit) or positive")
        _edge_options(self)
        for name in ("retention-bytes", "retention-ms"):
            if self[name] < -1 or self[name] == 0:
                raise usage.UsageError(f"--{name} must be positive or -1")
        if self["segment-ms"] < 0:
            raise usage.UsageError("--segment-ms must be 0 or positive")
        from brokerd.errors import InvalidConfig
        from brokerd.storage.config.topic_config import validate_overrides

        try:
            self["topic-defaults"] = validate_overrides(
                (topic_name, self[flag]) for flag, topic_name in TOPIC_DEFAULT_FLAGS.items()
            )
        except InvalidConfig as e:
            raise usage.UsageError(str(e)) from None
        for name in ("cleaner-threads", "cleaner-io-mb-per-sec", "cleaner-backoff-ms"):
            if self[name] < 0:
                raise usage.UsageError(f"--{name} must be 0 or positive")
        if self["cleaner-dedupe-buffer-mb"] < 1:
            raise usage.UsageError("--cleaner-dedupe-buffer-mb must be at least 1")
        self["client-verification"] = _client_verification(self)
        _sasl_options(self)
        self._authorization_options()
        _http_auth_options(self)
        _door_options(self)

    def _authorization_options(self) -> None:
        from brokerd.security.acl import valid_principal

        if self["authorizer"] not in ("none", "acl"):
            raise usage.UsageError("--authorizer must be none or acl")
        users = [u.strip() for u in self["super-users"].split(",") if u.strip()]
        for user in users:
            if not valid_principal(user):
                raise usage.UsageError(f"--super-users: {user!r} is not User:<name>")
        self["super-users"] = frozenset(users)


def _edge_options(options: Options) -> None:
    """Check the request-side bounds and build what both listeners share: the request
    budget (``request-budget``) and the per-address limits (``connection-addresses``)."""
    from brokerd.net.connlimit import AddressLimits, default_per_address, parse_overrides
    from brokerd.net.request_budget import RequestBudget

    if options["sasl-server-max-receive-size"] <= 0:
        raise usage.UsageError("--sasl-server-max-receive-size must be positive")
    budget = options["queued-max-request-bytes"]
    if budget != -1:
        largest = max(options["max-request-bytes"], options["max-produce-bytes"])
        if budget < largest:
            raise usage.UsageError(
                f"--queued-max-request-bytes {budget} cannot hold one largest request "
                f"({largest} bytes, --max-request-bytes/--max-produce-bytes); "
                "raise it, or -1 for no limit"
            )
    options["request-budget"] = RequestBudget(None if budget == -1 else budget)
    try:
        overrides = parse_overrides(options["max-connections-per-ip-overrides"])
    except ValueError as e:
        raise usage.UsageError(f"--max-connections-per-ip-overrides: {e}") from None
    per_ip = options["max-connections-per-ip"]
    if per_ip is None:
        per_ip = default_per_address(options["max-connections"] or None)
    elif per_ip < 0:
        raise usage.UsageError("--max-connections-per-ip must be 0 or more")
    elif per_ip == 0 and not overrides:
        raise usage.UsageError(
            "--max-connections-per-ip 0 refuses every address: "
            "give --max-connections-per-ip-overrides for the ones allowed"
        )
    options["connection-addresses"] = AddressLimits(per_ip, overrides)


def _client_verification(options: Options) -> ClientVerification | None:
    """``--ssl-client-auth`` and ``--ssl-client-ca``, checked against the listeners:
    client certificates need at least one ``ssl:`` listener (a plaintext listener beside
    it is allowed, and warned about at start). Also reads ``--http-auth``: with
    ``certificate`` the HTTP listener demands a certificate from the ``--ssl-client-ca``
    CAs whatever ``--ssl-client-auth`` says."""
    from brokerd.security.doors import HttpAuth

    try:
        http_auth = HttpAuth(options["http-auth"])
    except ValueError:
        choices = ", ".join(a.value for a in HttpAuth)
        raise usage.UsageError(f"--http-auth must be one of {choices}") from None
    options["http-auth-mode"] = http_auth
    mode, ca_file = options["ssl-client-auth"], options["ssl-client-ca"]
    try:
        options["http-client-verification"] = (
            ClientVerification.load(ClientAuth.REQUIRED.value, ca_file)
            if http_auth is HttpAuth.CERTIFICATE and ca_file is not None
            else None
        )
        # --http-auth certificate alone uses --ssl-client-ca for the HTTP listener only.
        only_http = http_auth is HttpAuth.CERTIFICATE and mode == ClientAuth.NONE.value
        verification = None if only_http else ClientVerification.load(mode, ca_file)
    except ValueError as e:
        raise usage.UsageError(str(e)) from None
    if verification is not None and not any(
        is_tls_description(options[name]) for name in ("native", "kafka", "http")
    ):
        raise usage.UsageError(
            f"--ssl-client-auth {verification.mode.value} needs an ssl: listener "
            f"(--native {options['native']}, --kafka {options['kafka']}, "
            f"--http {options['http']})"
        )
    return verification


def _http_auth_options(options: Options) -> None:
    """``--http-auth``: what it needs, and HTTP Basic never in clear text beyond
    loopback (the password itself crosses the wire, as with PLAIN)."""
    from brokerd.security.doors import HttpAuth, is_local_description

    http_auth: HttpAuth = options["http-auth-mode"]
    http = options["http"]
    if http_auth is HttpAuth.NONE:
        return
    if http.lower() == "none":
        raise usage.UsageError(f"--http-auth {http_auth.value} needs an --http listener")
    if http_auth is HttpAuth.BASIC:
        if options["credential-store"] is None:
            raise usage.UsageError("--http-auth basic needs --credentials FILE")
        if not is_tls_description(http) and not is_local_description(http):
            raise usage.UsageError(
                f"--http-auth basic sends passwords in clear text on --http {http}: "
                "use an ssl: listener, or bind it to 127.0.0.1"
            )
    elif not is_tls_description(http):
        raise usage.UsageError(f"--http-auth certificate needs an ssl: --http listener, "
                               f"not {http}")
    elif options["ssl-client-ca"] is None:
        raise usage.UsageError("--http-auth certificate needs --ssl-client-ca FILE")


def _listener_security(options: Options) -> ListenerSecurity:
    from brokerd.security.doors import ListenerSecurity

    verification: ClientVerification | None = options["client-verification"]
    return ListenerSecurity(
        native=options["native"],
        kafka=options["kafka"],
        http=options["http"],
        sasl=options["sasl-mechanisms"] is not None,
        certificates_required=(
            verification is not None and verification.mode is ClientAuth.REQUIRED
        ),
        http_auth=options["http-auth-mode"],
    )


def _door_options(options: Options) -> None:
    """``--allow-anonymous``: the start is refused while a listener serves anonymous
    clients the operator did not name (``brokerd.security.doors``)."""
    from brokerd.security.doors import parse_allow_anonymous, refusal

    try:
        allowed = parse_allow_anonymous(options["allow-anonymous"])
    except ValueError as e:
        raise usage.UsageError(str(e)) from None
    options["anonymous-allowed"] = allowed
    message = refusal(_listener_security(options), allowed)
    if message is not None:
        raise usage.UsageError(message)


def _log_anonymous_doors(options: Options) -> None:
    """One warning per listener serving anonymous clients, so a broker that requires
    authentication says at start where it does not."""
    from brokerd.security.doors import anonymous_doors

    for door in anonymous_doors(_listener_security(options)):
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


def _sasl_options(options: Options) -> None:
    """Check ``--sasl`` and ``--credentials`` and load the credentials file now, so a
    typo or a bad file stops the start with a clear message."""
    from brokerd.kafka.server.sasl import parse_mechanisms
    from brokerd.security.credentials import CredentialsError, CredentialStore

    options["sasl-mechanisms"] = None
    options["credential-store"] = None
    if options["connection-failed-authentication-delay-ms"] < 0:
        raise usage.UsageError("--connection-failed-authentication-delay-ms must be 0 or more")
    if options["sasl"] is not None:
        try:
            options["sasl-mechanisms"] = parse_mechanisms(options["sasl"])
        except ValueError as e:
            raise usage.UsageError(f"--sasl: {e}") from None
        if options["credentials"] is None:
            raise usage.UsageError("--sasl needs --credentials FILE (see brokerctl users)")
    if options["credentials"] is not None:
        try:
            options["credential-store"] = CredentialStore.open(
                options["credentials"],
                on_error=lambda message: _log.error("{message}", message=message),
            )
        except CredentialsError as e:
            raise usage.UsageError(f"--credentials: {e}") from None


@implementer(IStreamServerEndpoint)
class _PortReportingEndpoint:
    """Wraps an endpoint to report the bound address (port 0 and systemd sockets are
    known only after listening) to a callback, before the first client connects."""

    def __init__(self, wrapped: Any, on_listen: Any) -> None:
        self._wrapped = wrapped
        self._on_listen = on_listen

    def listen(self, factory: Factory) -> Deferred[Any]:
        d: Deferred[Any] = self._wrapped.listen(factory)

        def report(port: Any) -> Any:
            self._on_listen(port.getHost())
            return port

        return d.addCallback(report)


def _listener(
    reactor: Any,
    description: str,
    factory: Factory[Any],
    options: Options,
    on_listen: Any = None,
    *,
    own_verification: ClientVerification | None = None,
) -> service.Service:
    verification: ClientVerification | None = own_verification or options["client-verification"]
    if not is_tls_description(description):
        if verification is not None:
            _log.warn(
                "Listener {description} is plaintext: no client certificates on it",
                description=description,
            )
        verification = None
    endpoint: Any = listener_endpoint(reactor, description, verification)
    if on_listen is not None:
        endpoint = _PortReportingEndpoint(endpoint, on_listen)
    svc = StreamServerEndpointService(endpoint, factory)
    # A bind failure must abort start-up (exit status 1) rather than be logged.
    svc._raiseSynchronously = True
    return svc


_LEVELS = {
    logging.DEBUG: LogLevel.debug,
    logging.INFO: LogLevel.info,
    logging.WARNING: LogLevel.warn,
    logging.ERROR: LogLevel.error,
    logging.CRITICAL: LogLevel.critical,
}


class _TwistedLogHandler(logging.Handler):
    """Routes the storage layer's stdlib logging (it must not import Twisted) into
    Twisted's log, so recovery and disk errors land in the broker's log or journal."""

    def emit(self, record: logging.LogRecord) -> None:
        level = _LEVELS.get(record.levelno, LogLevel.info)
        Logger(namespace=record.name).emit(level, "{message}", message=record.getMessage())


def _route_storage_logging() -> None:
    logger = logging.getLogger("brokerd")
    if not any(isinstance(h, _TwistedLogHandler) for h in logger.handlers):
        logger.addHandler(_TwistedLogHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _add_cleaner(
    broker: service.MultiService, logdir: Any, reactor: Any, options: Options
) -> CleanerService | None:
    """The log cleaner, a child of the broker added after its log directory, so that it
    stops (abandoning a pass) before the logs close."""
    from brokerd.core.cleaner_service import CleanerService, CleanerSettings

    if not options["cleaner-threads"]:
        return None
    rate = options["cleaner-io-mb-per-sec"]
    settings = CleanerSettings(
        threads=options["cleaner-threads"],
        io_bytes_per_second=rate * MEBIBYTE if rate > 0 else None,
        dedupe_buffer_bytes=options["cleaner-dedupe-buffer-mb"] * MEBIBYTE,
        backoff_seconds=options["cleaner-backoff-ms"] / 1000.0,
    )
    cleaner = CleanerService(logdir, settings, reactor=reactor)
    cleaner.setServiceParent(broker)
    return cleaner


def makeService(options: Options) -> service.MultiService:
    """Build the service tree: broker core, then listeners, then the readiness notice."""
    from twisted.internet import reactor

    from brokerd.admin.inspect import Inspector
    from brokerd.admin.operations import AdminOps
    from brokerd.admin.share_groups import ShareGroupInspector
    from brokerd.core import Broker
    from brokerd.kafka.groups.admin import operator_error
    from brokerd.native.protocol import NativeFactory
    from brokerd.native.queue_handlers import QueueOps
    from brokerd.sdnotify import ReadyNotifier, extending_start_timeout
    from brokerd.storage.config.topic_config import to_log_config
    from brokerd.storage.log import LogConfig
    from brokerd.storage.logdir import LogDirectory

    def limit(value: int) -> int | None:
        return None if value < 0 else value

    config = to_log_config(
        LogConfig(
            segment_bytes=options["segment-bytes"],
            segment_ms=options["segment-ms"] or None,
            retention_bytes=limit(options["retention-bytes"]),
            retention_ms=limit(options["retention-ms"]),
        ),
        options["topic-defaults"],
    )
    data_dir = os.path.abspath(options["data-dir"])
    _route_storage_logging()
    # A long recovery must not trip systemd's start timeout: keep extending it.
    with extending_start_timeout(f"opening and recovering {data_dir}"):
        logdir = LogDirectory.open(
            data_dir,
            config,
            auto_create=not options["no-auto-create"],
            default_partitions=options["default-partitions"],
        )
    _log.info(
        "data directory {path}: {topics} topic(s); previous shutdown was {how}; fsync {fsync}",
        path=data_dir,
        topics=len(logdir.topics()),
        how="clean" if logdir.was_clean else "not clean (logs recovered)",
        fsync=options["fsync-policy"],
    )
    top = SequentialMultiService()
    broker = Broker(
        logdir,
        reactor=reactor,
        fsync=options["fsync-policy"],
        read_threads=options["read-threads"],
        write_threads=options["write-threads"],
        retention_check_seconds=options["log-retention-check-interval-ms"] / 1000.0,
    )
    broker.setServiceParent(top)
    cleaner = _add_cleaner(broker, logdir, reactor, options)

    authorization = _authorization(broker, options, data_dir)
    kafka_on = options["kafka"].lower() != "none"
    # Built whatever --kafka says: native group admin (brokerctl groups) reads and
    # changes the same groups, and transactions left prepared still get completed.
    groups = _add_group_state(broker, reactor, options, data_dir)
    inspector = Inspector(broker, groups.coordinator.admin, groups.offsets)
    share_inspector = ShareGroupInspector(groups.shares.service.engine, broker.logdir.logs)
    http_on = options["http"].lower() != "none"
    metrics = _metrics(broker, inspector, cleaner, groups) if http_on else None
    if metrics is not None:
        metrics.add_share_groups(share_inspector)
    readiness = _readiness(inspector, groups)
    native = NativeFactory(
        broker,
        clock=reactor,
        max_produce_bytes=options["max-produce-bytes"],
        max_fetch_bytes=options["max-fetch-bytes"],
        max_connections=options["max-connections"] or None,
        request_budget=options["request-budget"],
        addresses=options["connection-addresses"],
        authorizer=authorization["authorizer"],
        admin=AdminOps(broker, inspector, groups.coordinator, operator_error),
        queues=QueueOps(groups.shares.service, share_inspector),
    )
    if metrics is not None:
        native.metrics = metrics.listener("native")
    if options["native"].lower() != "none":
        bound = readiness.wait_for("native listener", "not bound yet")
        _listener(reactor, options["native"], native, options, bound).setServiceParent(top)
    _log_anonymous_doors(options)

    if kafka_on:
        _add_kafka(top, broker, reactor, options, groups, authorization, metrics, readiness)
    if metrics is not None:
        _add_http(top, reactor, options, inspector, metrics, readiness,
                  authorization["authorizer"], share_inspector)

    ReadyNotifier(reactor).setServiceParent(top)
    # Runs once the service tree has started (twistd starts it before the reactor runs).
    reactor.callWhenRunning(start_gc.resume)
    return top


#: Options never shown on the console's broker page.
#: (Objects built from other options; the options they come from are shown.)
_PRIVATE_OPTIONS = frozenset(
    {
        "credential-store",
        "client-verification",
        "topic-defaults",
        "fsync-policy",
        "http-client-verification",
        "http-auth-mode",
        "anonymous-allowed",
    }
    | {"request-budget", "connection-addresses"}
)


def _setting_text(value: object, *, flag: bool) -> str:
    if flag:
        return "true" if value else "false"
    if isinstance(value, set | frozenset | list | tuple):
        return ",".join(sorted(str(v) for v in value)) or "(none)"
    return str(value)


def broker_settings(options: Options) -> dict[str, str]:
    """The effective options as text, for operators to read (objects built from the
    options are left out; file names are shown, never file contents)."""
    flags = {flag[0] for flag in Options.optFlags}
    return {
        name: _setting_text(value, flag=name in flags)
        for name, value in sorted(options.items())
        if name not in _PRIVATE_OPTIONS and value is not None
    }


def _metrics(
    broker: Broker, inspector: Any, cleaner: CleanerService | None, groups: _KafkaState | None
) -> BrokerMetrics:
    """The broker's metrics registry (``brokerd.metrics``), its write observer installed
    in the core before any partition opens."""
    from brokerd.kafka.txn.state import TxnState
    from brokerd.metrics.registry import BrokerMetrics

    metrics = BrokerMetrics(inspector)
    broker.writes = metrics.writes
    if cleaner is not None:
        metrics.add_cleaner(cleaner)
    if groups is not None:
        metrics.add_transactions(groups.transactions, [s.value for s in TxnState])
        metrics.add_stores(groups.recovery.stores)
    return metrics


def _readiness(inspector: Any, groups: _KafkaState | None) -> Readiness:
    """What ``/readyz`` waits for: the listeners (each marks itself bound), no offline
    partition, and the transaction coordinator's start-up completions (built now, before
    the coordinator starts, so the prepared transactions it must complete are known)."""
    from brokerd.web.health import Readiness, startup_completions

    readiness = Readiness(inspector)
    if groups is not None:
        readiness.add_check(startup_completions(groups.transactions))
        # An offsets store or transaction log offline after a failed fsync.
        readiness.add_check(groups.recovery.problems)
    return readiness


def _add_http(
    top: service.MultiService,
    reactor: Any,
    options: Options,
    inspector: Any,
    metrics: BrokerMetrics,
    readiness: Readiness,
    authorizer: AclAuthorizer | None,
    shares: Any = None,
) -> None:
    """The HTTP endpoint: console, metrics and health checks (``brokerd.web``), showing
    each principal what ``authorizer`` lets it DESCRIBE."""
    from brokerd.web.console import ConsoleSampler
    from brokerd.web.site import make_site

    sampler = ConsoleSampler(inspector, clock=reactor)
    sampler.setServiceParent(top)
    site = make_site(
        inspector,
        clock=reactor,
        settings=broker_settings(options),
        sampler=sampler,
        registry=metrics.registry,
        readiness=readiness,
        identity=_http_identity(reactor, options),
        authorizer=authorizer,
        shares=shares,
    )
    bound = readiness.wait_for("http listener", "not bound yet")

    def on_listen(address: Any) -> None:
        bound()
        _log.info("HTTP endpoint (metrics, health, console) on {address}", address=address)

    _listener(
        reactor, options["http"], site, options, on_listen,
        own_verification=options["http-client-verification"],
    ).setServiceParent(top)


def _http_identity(reactor: Any, options: Options) -> HttpIdentity:
    from brokerd.security.doors import HttpAuth
    from brokerd.web.auth import BasicPasswords, HttpIdentity

    mode: HttpAuth = options["http-auth-mode"]
    passwords = None
    if mode is HttpAuth.BASIC:
        _log.info("HTTP endpoint requires HTTP Basic (--credentials)")
        passwords = BasicPasswords(options["credential-store"], clock=reactor)
    elif mode is HttpAuth.CERTIFICATE:
        _log.info("HTTP endpoint requires client certificates")
    return HttpIdentity(mode, passwords, peer_principal=peer_principal)


class _GroupState(service.Service):
    """The group coordinator, its offsets store and the producer-id allocator, as a child
    of the broker core: it stops before the core closes the log directory and stops its
    pools, so the coordinator's last journal writes (the Stable generations that let
    groups survive the restart) still have the write pool."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        offsets: OffsetStore,
        producer_ids: ProducerIdAllocator,
    ) -> None:
        self._coordinator = coordinator
        self._offsets = offsets
        self._producer_ids = producer_ids

    def stopService(self) -> Deferred[None]:
        super().stopService()
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self) -> None:
        await self._coordinator.stop()
        self._offsets.close()
        self._producer_ids.close()


class _TxnState(service.Service):
    """The transaction coordinator and its log, as a child of the broker core added after
    the group state: it stops first (its completions still hand offsets to the group
    coordinator and write markers through the core), and its log is closed only once no
    operation is in progress."""

    def __init__(self, coordinator: TransactionCoordinator, txn_log: TxnLog) -> None:
        self._coordinator = coordinator
        self._txn_log = txn_log

    def startService(self) -> None:
        super().startService()
        self._coordinator.startService()

    def stopService(self) -> Deferred[None]:
        super().stopService()
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self) -> None:
        await self._coordinator.stopService()
        self._txn_log.close()


def _add_transactions(
    broker: Broker,
    reactor: Any,
    options: Options,
    data_dir: str,
    groups: GroupCoordinator,
    producer_ids: ProducerIdAllocator,
) -> tuple[TransactionCoordinator, TxnLog]:
    """The transaction coordinator (``transactions.log`` in the data directory), wired to
    the core's marker writes and produce verifier; and its log."""
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.storage.stores.txn_log import TXN_LOG_FILE_NAME, TxnLog

    txn_log = TxnLog.open(os.path.join(data_dir, TXN_LOG_FILE_NAME))
    coordinator = TransactionCoordinator(
        clock=reactor,
        log=txn_log,
        run_blocking=broker.run_write,
        allocate_producer_id=producer_ids.next_id,
        core=broker,
        groups=groups,
        max_timeout_ms=options["transaction-max-timeout-ms"],
    )
    _TxnState(coordinator, txn_log).setServiceParent(broker)
    return coordinator, txn_log


def _authorization(broker: Broker, options: Options, data_dir: str) -> dict[str, Any]:
    """The listeners' authorizer and the ACL handlers (``acls.json`` loaded now; a file
    that cannot be read stops the start: running without its DENYs would grant too
    much)."""
    from brokerd.kafka.server.handlers.acl import AclHandlers
    from brokerd.security.acl import AclAuthorizer
    from brokerd.security.acl_store import AclStore

    if options["authorizer"] != "acl":
        return {"authorizer": None, "acls": AclHandlers(None, None)}
    store = AclStore.in_directory(data_dir)
    authorizer = AclAuthorizer(store.load(), options["super-users"])
    _log.info(
        "authorizer acl: {count} ACL(s), super users {users}",
        count=len(authorizer.acls), users=sorted(authorizer.super_users) or "none",
    )
    return {
        "authorizer": authorizer,
        "acls": AclHandlers(authorizer, store, run_blocking=broker.run_write),
    }
def _sasl_config(reactor: Any, options: Options) -> SaslConfig | None:
    from brokerd.kafka.server.sasl import SaslConfig
    from brokerd.security.auth_throttle import MAX_DELAY, AuthThrottle
    from brokerd.security.scram import DecoyCredentials
    from brokerd.security.server_secret import load_or_create

    mechanisms = options["sasl-mechanisms"]
    if mechanisms is None:
        return None
    _log.info("Kafka listener requires SASL: {mechanisms}", mechanisms=", ".join(mechanisms))
    # Made once, kept in the data directory (a bad file stops the start, as acls.json
    # does): unknown user names must get the same made-up salt after a restart.
    secret = load_or_create(os.path.abspath(options["data-dir"]))
    delay = options["connection-failed-authentication-delay-ms"] / 1000
    throttle = AuthThrottle(reactor.seconds, delay=delay, max_delay=max(delay, MAX_DELAY))
    return SaslConfig(mechanisms, options["credential-store"], throttle, DecoyCredentials(secret))


@attrs.frozen
class _KafkaState:
    """The Kafka side's durable state: the group coordinator with its offsets store, and
    the transaction coordinator."""

    coordinator: GroupCoordinator
    offsets: OffsetStore
    transactions: TransactionCoordinator
    #: Reopens the offsets store and the transaction log after a failed fsync.
    recovery: StoreRecovery
    #: Share groups (KIP-932): members and sessions, and the records engine.
    shares: ShareGroups


def _add_group_state(
    broker: Broker, reactor: Any, options: Options, data_dir: str
) -> _KafkaState:
    """The group and transaction coordinators, children of the broker core (created
    before the listeners: the admin views and commands of both protocols read them)."""
    from brokerd.core.store_recovery import StoreRecovery
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.storage.stores.offsets import OffsetStore
    from brokerd.storage.stores.producer_ids import ProducerIdAllocator

    offsets = OffsetStore.open(os.path.join(data_dir, "consumer-offsets.log"))
    producer_ids = ProducerIdAllocator(os.path.join(data_dir, "producer-ids"))
    broker.set_producer_id_source(producer_ids.next_id)
    coordinator = GroupCoordinator(clock=reactor, offsets=offsets, run_blocking=broker.run_write)

    _GroupState(coordinator, offsets, producer_ids).setServiceParent(broker)
    # Added after the group state, so it stops before it (children stop last added first).
    transactions, txn_log = _add_transactions(
        broker, reactor, options, data_dir, coordinator, producer_ids
    )
    shares, share_store = _add_share_groups(broker, reactor, data_dir)
    # Added last, so it stops first: no reopen runs while the stores close.
    recovery = StoreRecovery(
        [offsets, txn_log, producer_ids, share_store], clock=reactor,
        run_blocking=broker.run_write,
    )
    recovery.setServiceParent(broker)
    return _KafkaState(coordinator, offsets, transactions, recovery, shares)


class _ShareState(service.Service):
    """Share groups' coordinator and records engine, as a child of the broker core: it
    stops before the core stops its pools; every answered change is already durable."""

    def __init__(self, shares: ShareGroups, store: ShareStateStore) -> None:
        self._shares = shares
        self._store = store

    def startService(self) -> None:
        super().startService()
        self._shares.service.start()

    def stopService(self) -> None:
        super().stopService()
        self._shares.coordinator.stop()
        self._shares.service.stop()
        self._store.close()


def _add_share_groups(
    broker: Broker, reactor: Any, data_dir: str
) -> tuple[ShareGroups, ShareStateStore]:
    """Share groups (KIP-932): ``share-state.log`` in the data directory, replayed now."""
    from brokerd.core.share.service import ShareService
    from brokerd.kafka.groups.share.coordinator import ShareGroupCoordinator
    from brokerd.kafka.server.handlers.share import ShareGroups
    from brokerd.storage.stores.share_state import SHARE_STATE_FILE_NAME, ShareStateStore

    store = ShareStateStore.open(os.path.join(data_dir, SHARE_STATE_FILE_NAME))
    records = ShareService(broker, store, clock=reactor)

    def member_gone(group: str, member: str) -> None:
        Deferred.fromCoroutine(records.release_member(group, member)).addErrback(
            lambda f: _log.failure("releasing a share member's records", f)
        )

    coordinator = ShareGroupCoordinator(
        clock=reactor,
        partition_counts=lambda: {n: t.partitions for n, t in broker.topics().items()},
        on_member_gone=member_gone,
        session_timeout_ms=lambda g: records.engine.config(g).session_timeout_ms,
        heartbeat_interval_ms=lambda g: records.engine.config(g).heartbeat_interval_ms,
    )
    shares = ShareGroups(coordinator, records)
    _ShareState(shares, store).setServiceParent(broker)
    return shares, store


def _add_kafka(
    top: service.MultiService,
    broker: Broker,
    reactor: Any,
    options: Options,
    state: _KafkaState,
    authorization: dict[str, Any],
    metrics: BrokerMetrics | None,
    readiness: Readiness,
) -> None:
    from brokerd.kafka.listener.protocol import KafkaFactory
    from brokerd.net.answer_budget import AnswerBudget
    from brokerd.observers import NULL_REQUESTS

    factory = KafkaFactory(
        broker,
        state.coordinator,
        clock=reactor,
        advertised_host=options["advertised-host"] or "127.0.0.1",
        advertised_port=0,
        max_frame_bytes=options["max-request-bytes"],
        default_partitions=options["default-partitions"],
        max_connections=options["max-connections"] or None,
        transactions=state.transactions,
        **authorization,
        sasl=_sasl_config(reactor, options),
        credentials=options["credential-store"],
        metrics=metrics.listener("kafka") if metrics is not None else NULL_REQUESTS,
        fetch_max_bytes=options["fetch-max-bytes"],
        answer_budget=AnswerBudget(options["max-inflight-answer-bytes"]),
        sasl_max_receive_bytes=options["sasl-server-max-receive-size"],
        request_budget=options["request-budget"],
        addresses=options["connection-addresses"],
        shares=state.shares,
    )
    listening = readiness.wait_for("kafka listener", "not bound yet")

    def on_listen(address: Any) -> None:
        listening()
        host = options["advertised-host"]
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

    _listener(reactor, options["kafka"], factory, options, on_listen).setServiceParent(top)
