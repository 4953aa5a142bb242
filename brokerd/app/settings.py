"""The broker's typed settings: what ``twistd broker``'s options mean, grouped by concern,
as frozen values the wiring reads (:mod:`brokerd.app.wiring`).

Every value is already checked (:func:`brokerd.app.from_options.settings_from_options`
builds them once from the parsed options): the wiring never sees an option name nor a
value it must still interpret. "No limit" and "off" are ``None``, not ``-1`` or ``0``.

A few settings hold what had to be loaded to check the option: the credentials file
(:class:`~brokerd.security.credentials.CredentialStore`, which reloads itself on change)
and the CA bundles of client-certificate verification; a bad file stops the start with a
usage error rather than at the first client. Objects that count while the broker runs
(the request budget, the per-address connection counts) are not settings: the wiring
builds them from these numbers.

This module does not parse options, check values nor build services.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from brokerd.core.cleaner_service import CleanerSettings
    from brokerd.core.policy import FsyncPolicy
    from brokerd.net.tls import ClientVerification
    from brokerd.security.credentials import CredentialStore
    from brokerd.security.doors import Door, HttpAuth, ListenerSecurity
    from brokerd.storage.config.log_config import LogConfig


@attrs.frozen
class StorageSettings:
    """The data directory and the broker-wide defaults of its topics."""

    #: ``--data-dir``, absolute (resolved against the working directory of the start).
    data_dir: str
    #: Segment size and age, retention, and every ``--log-*``-style topic default
    #: (``--compression-type``, ``--message-max-bytes``, ...) applied.
    log_config: LogConfig
    #: The topic-config defaults those flags set, by Kafka topic-config name.
    topic_defaults: Mapping[str, str]
    auto_create: bool
    #: Partitions of an auto-created topic (also the Kafka listener's CreateTopics default).
    default_partitions: int


@attrs.frozen
class CoreSettings:
    """The broker core: durability and its worker pools."""

    fsync: FsyncPolicy
    read_threads: int
    write_threads: int
    retention_check_seconds: float


@attrs.frozen
class GroupSettings:
    """Defaults of consumer-protocol groups (KIP-848) and of share groups (KIP-932: group
    config name -> text, checked); a group's configs override them. And the most share
    sessions the broker holds (Kafka's ``group.share.max.share.sessions``)."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_max_sessions: int
    share_defaults: Mapping[str, str] = attrs.field(factory=dict)
    #: KIP-1191's ``errors.deadletterqueue.topic.name.prefix`` and
    #: ``errors.deadletterqueue.auto.create.topics.enable``.
    share_dlq_prefix: str = "dlq."
    share_dlq_auto_create: bool = False


@attrs.frozen
class ListenerSettings:
    """The endpoint descriptions of the three listeners; ``None``: that listener is off."""

    native: str | None
    kafka: str | None
    http: str | None
    #: The host Kafka clients are told to connect to (None: from the bound address).
    advertised_host: str | None
    #: ``--schema-registry`` (None: no registry).
    schema_registry: str | None = None
    #: ``--http-proxy``: the REST Proxy's endpoint (docs/http-proxy.md).
    http_proxy: str | None = None
    #: ``--ready-file``: where the bound addresses are written once all are bound.
    ready_file: str | None = None


@attrs.frozen
class LimitSettings:
    """The bounds of the connection edge and of requests and answers."""

    #: Open connections per listener (None: no limit).
    max_connections: int | None
    #: Open connections per client address, both listeners together (None: no limit).
    per_address: int | None
    per_address_overrides: Mapping[str, int]
    #: Request bytes buffered by all connections together (None: no limit).
    queued_request_bytes: int | None
    max_produce_bytes: int
    max_fetch_bytes: int
    max_request_bytes: int
    fetch_max_bytes: int
    max_inflight_answer_bytes: int
    sasl_max_receive_bytes: int
    transaction_max_timeout_ms: int
    #: Largest metrics payload of a PushTelemetry (Kafka's ``telemetry.max.bytes``).
    telemetry_max_bytes: int = 1024 * 1024
    #: Client quota rates: samples and their length (Kafka's quota.window.*).
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    #: Most Kafka fetch sessions held (KIP-227); 0: none.
    fetch_session_slots: int = 1000


@attrs.frozen
class TlsSettings:
    """Client certificates on ``ssl:`` listeners."""

    #: ``--ssl-client-auth`` with its CAs, for every ``ssl:`` listener (None: none asked).
    client_verification: ClientVerification | None
    #: The HTTP listener's own, under ``--http-auth certificate`` (None: as the others).
    http_client_verification: ClientVerification | None


@attrs.frozen
class SaslSettings:
    """Authentication on the Kafka listener, and the credentials file."""

    #: ``--sasl``: mechanism names, upper case (None: no authentication).
    mechanisms: tuple[str, ...] | None
    #: ``--credentials``, loaded (None: no file given).
    credentials: CredentialStore | None
    failed_authentication_delay_seconds: float


@attrs.frozen
class AuthorizationSettings:
    """``--authorizer`` and ``--super-users``."""

    acl: bool
    super_users: frozenset[str]


@attrs.frozen
class DoorSettings:
    """Which listeners serve anonymous clients (``--allow-anonymous``)."""

    #: What decides it, per listener (also read for the start's warnings).
    listeners: ListenerSecurity
    allowed: frozenset[Door]


@attrs.frozen
class WebSettings:
    """The HTTP endpoint: its authentication and what its broker page shows."""

    auth: HttpAuth
    #: The effective options as text, by option name (file names, never contents).
    shown_options: Mapping[str, str]
    #: Whether the console may change anything (``--http-console-readonly`` says no).
    console_actions: bool = True


@attrs.frozen
class Settings:
    """Every setting of one broker."""

    storage: StorageSettings
    core: CoreSettings
    #: The log cleaner (None: ``--cleaner-threads 0``, no compaction).
    cleaner: CleanerSettings | None
    groups: GroupSettings
    listeners: ListenerSettings
    limits: LimitSettings
    tls: TlsSettings
    sasl: SaslSettings
    authorization: AuthorizationSettings
    doors: DoorSettings
    web: WebSettings
