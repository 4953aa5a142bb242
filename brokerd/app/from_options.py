"""The parsed options of ``twistd broker`` checked together and turned into the typed
:class:`~brokerd.app.settings.Settings`, once, at the end of the parse.

Every refusal is a ``usage.UsageError`` whose message names the option(s) at fault, so
that ``--config FILE`` can point at the file's line (:mod:`brokerd.app.config_file_options`).
The checks run in a fixed order and the first failing one is reported.

The credentials file and the CA bundles are loaded here (a typo or a bad file must stop
the start with a clear message); nothing else is opened, and no service is built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from twisted.logger import Logger
from twisted.python import usage

from brokerd.app.options import MEBIBYTE, TOPIC_DEFAULT_FLAGS, options_text
from brokerd.app.settings import (
    AuthorizationSettings,
    CoreSettings,
    DoorSettings,
    GroupSettings,
    LimitSettings,
    ListenerSettings,
    SaslSettings,
    Settings,
    StorageSettings,
    TlsSettings,
    WebSettings,
)
from brokerd.core.cleaner_service import CleanerSettings
from brokerd.core.policy import FsyncPolicy
from brokerd.net.tls import ClientAuth, ClientVerification, is_tls_description
from brokerd.security.doors import HttpAuth, ListenerSecurity

_log = Logger()

#: Options that must be above 0.
_POSITIVE = (
    "segment-bytes",
    "default-partitions",
    "max-produce-bytes",
    "max-fetch-bytes",
    "max-request-bytes",
    "fetch-max-bytes",
    "telemetry-max-bytes",
    "quota-window-num",
    "quota-window-size-seconds",
    "max-inflight-answer-bytes",
    "read-threads",
    "write-threads",
    "log-retention-check-interval-ms",
    "transaction-max-timeout-ms",
    "group-consumer-session-timeout-ms",
    "group-consumer-heartbeat-interval-ms",
    "group-share-max-share-sessions",
)


def settings_from_options(options: Mapping[str, Any]) -> Settings:
    """The settings of the parsed ``options`` (a ``usage.Options`` after its parse).

    :raises usage.UsageError: a value out of range, or options that do not go together.
    """
    try:
        fsync = FsyncPolicy.parse(options["fsync"])
    except ValueError as e:
        raise usage.UsageError(str(e)) from None
    for name in _POSITIVE:
        if options[name] <= 0:
            raise usage.UsageError(f"--{name} must be positive")
    heartbeat = options["group-consumer-heartbeat-interval-ms"]
    if heartbeat >= options["group-consumer-session-timeout-ms"]:
        raise usage.UsageError(
            "--group-consumer-heartbeat-interval-ms must be less than "
            "--group-consumer-session-timeout-ms"
        )
    if options["segment-bytes"] < 1024:
        raise usage.UsageError("--segment-bytes must be at least 1024")
    if options["max-incremental-fetch-session-cache-slots"] < 0:
        raise usage.UsageError("--max-incremental-fetch-session-cache-slots must be 0 or more")
    if options["max-connections"] < 0:
        raise usage.UsageError("--max-connections must be 0 (no limit) or positive")
    limits = _limits(options)
    for name in ("retention-bytes", "retention-ms"):
        if options[name] < -1 or options[name] == 0:
            raise usage.UsageError(f"--{name} must be positive or -1")
    if options["segment-ms"] < 0:
        raise usage.UsageError("--segment-ms must be 0 or positive")
    storage = _storage(options)
    cleaner = _cleaner(options)
    http_auth = _http_auth_mode(options)
    tls = _tls(options, http_auth)
    sasl = _sasl(options)
    authorization = _authorization(options)
    _check_http_auth(options, http_auth, sasl)
    doors = _doors(options, tls, sasl, http_auth)
    return Settings(
        storage=storage,
        core=CoreSettings(
            fsync=fsync,
            read_threads=options["read-threads"],
            write_threads=options["write-threads"],
            retention_check_seconds=options["log-retention-check-interval-ms"] / 1000.0,
        ),
        cleaner=cleaner,
        groups=GroupSettings(
            consumer_session_timeout_ms=options["group-consumer-session-timeout-ms"],
            consumer_heartbeat_interval_ms=options["group-consumer-heartbeat-interval-ms"],
            share_max_sessions=options["group-share-max-share-sessions"],
            share_defaults=_share_defaults(options),
            share_dlq_prefix=options["errors-deadletterqueue-topic-name-prefix"],
            share_dlq_auto_create=bool(
                options["errors-deadletterqueue-auto-create-topics-enable"]
            ),
        ),
        listeners=ListenerSettings(
            native=_enabled(options["native"]),
            kafka=_enabled(options["kafka"]),
            http=_enabled(options["http"]),
            advertised_host=options["advertised-host"],
            schema_registry=_enabled(options["schema-registry"]),
            http_proxy=_enabled(options["http-proxy"]),
            ready_file=options["ready-file"] or None,
        ),
        limits=limits,
        tls=tls,
        sasl=sasl,
        authorization=authorization,
        doors=doors,
        web=WebSettings(
            auth=http_auth, shown_options=options_text(options, authorization.super_users),
            console_actions=_console_acts(options, doors, authorization),
        ),
    )


def _enabled(description: str) -> str | None:
    return None if description.lower() == "none" else description


def _limits(options: Mapping[str, Any]) -> LimitSettings:
    """The request-side bounds: the request budget both listeners share, and the
    per-address connection limits."""
    from brokerd.net.connlimit import default_per_address, parse_overrides

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
    try:
        overrides = parse_overrides(options["max-connections-per-ip-overrides"])
    except ValueError as e:
        raise usage.UsageError(f"--max-connections-per-ip-overrides: {e}") from None
    max_connections = options["max-connections"] or None
    per_ip = options["max-connections-per-ip"]
    if per_ip is None:
        per_ip = default_per_address(max_connections)
    elif per_ip < 0:
        raise usage.UsageError("--max-connections-per-ip must be 0 or more")
    elif per_ip == 0 and not overrides:
        raise usage.UsageError(
            "--max-connections-per-ip 0 refuses every address: "
            "give --max-connections-per-ip-overrides for the ones allowed"
        )
    return LimitSettings(
        max_connections=max_connections,
        per_address=per_ip,
        per_address_overrides=overrides,
        queued_request_bytes=None if budget == -1 else budget,
        max_produce_bytes=options["max-produce-bytes"],
        max_fetch_bytes=options["max-fetch-bytes"],
        max_request_bytes=options["max-request-bytes"],
        fetch_max_bytes=options["fetch-max-bytes"],
        max_inflight_answer_bytes=options["max-inflight-answer-bytes"],
        sasl_max_receive_bytes=options["sasl-server-max-receive-size"],
        transaction_max_timeout_ms=options["transaction-max-timeout-ms"],
        telemetry_max_bytes=options["telemetry-max-bytes"],
        quota_window_num=options["quota-window-num"],
        quota_window_size_seconds=options["quota-window-size-seconds"],
        fetch_session_slots=options["max-incremental-fetch-session-cache-slots"],
    )


def _storage(options: Mapping[str, Any]) -> StorageSettings:
    """The log defaults: segment and retention options, then the topic-config defaults
    the ``TOPIC_DEFAULT_FLAGS`` set, checked as Kafka checks those configs."""
    from brokerd.errors import InvalidConfig
    from brokerd.storage.config.log_config import LogConfig
    from brokerd.storage.config.topic_config import to_log_config, validate_overrides

    try:
        topic_defaults = validate_overrides(
            (topic_name, options[flag]) for flag, topic_name in TOPIC_DEFAULT_FLAGS.items()
        )
    except InvalidConfig as e:
        raise usage.UsageError(str(e)) from None

    def limit(value: int) -> int | None:
        return None if value < 0 else value

    log_config = to_log_config(
        LogConfig(
            segment_bytes=options["segment-bytes"],
            segment_ms=options["segment-ms"] or None,
            retention_bytes=limit(options["retention-bytes"]),
            retention_ms=limit(options["retention-ms"]),
        ),
        topic_defaults,
    )
    return StorageSettings(
        data_dir=os.path.abspath(options["data-dir"]),
        log_config=log_config,
        topic_defaults=topic_defaults,
        auto_create=not options["no-auto-create"],
        default_partitions=options["default-partitions"],
    )


def _cleaner(options: Mapping[str, Any]) -> CleanerSettings | None:
    for name in ("cleaner-threads", "cleaner-io-mb-per-sec", "cleaner-backoff-ms"):
        if options[name] < 0:
            raise usage.UsageError(f"--{name} must be 0 or positive")
    if options["cleaner-dedupe-buffer-mb"] < 1:
        raise usage.UsageError("--cleaner-dedupe-buffer-mb must be at least 1")
    if not options["cleaner-threads"]:
        return None
    rate = options["cleaner-io-mb-per-sec"]
    return CleanerSettings(
        threads=options["cleaner-threads"],
        io_bytes_per_second=rate * MEBIBYTE if rate > 0 else None,
        dedupe_buffer_bytes=options["cleaner-dedupe-buffer-mb"] * MEBIBYTE,
        backoff_seconds=options["cleaner-backoff-ms"] / 1000.0,
    )


def _http_auth_mode(options: Mapping[str, Any]) -> HttpAuth:
    try:
        return HttpAuth(options["http-auth"])
    except ValueError:
        choices = ", ".join(a.value for a in HttpAuth)
        raise usage.UsageError(f"--http-auth must be one of {choices}") from None


def _tls(options: Mapping[str, Any], http_auth: HttpAuth) -> TlsSettings:
    """``--ssl-client-auth`` and ``--ssl-client-ca``, checked against the listeners:
    client certificates need at least one ``ssl:`` listener (a plaintext listener beside
    it is allowed, and warned about at start). With ``--http-auth certificate`` the HTTP
    listener demands a certificate from the ``--ssl-client-ca`` CAs whatever
    ``--ssl-client-auth`` says."""
    mode, ca_file = options["ssl-client-auth"], options["ssl-client-ca"]
    try:
        http_verification = (
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
        is_tls_description(options[name])
        for name in ("native", "kafka", "http", "schema-registry", "http-proxy")
    ):
        raise usage.UsageError(
            f"--ssl-client-auth {verification.mode.value} needs an ssl: listener "
            f"(--native {options['native']}, --kafka {options['kafka']}, "
            f"--http {options['http']})"
        )
    return TlsSettings(
        client_verification=verification, http_client_verification=http_verification
    )


def _sasl(options: Mapping[str, Any]) -> SaslSettings:
    """``--sasl`` and ``--credentials``, the credentials file loaded now, so a typo or a
    bad file stops the start with a clear message."""
    from brokerd.kafka.server.sasl_session import parse_mechanisms
    from brokerd.security.credentials import CredentialsError, CredentialStore

    mechanisms = None
    credentials = None
    delay_ms = options["connection-failed-authentication-delay-ms"]
    if delay_ms < 0:
        raise usage.UsageError("--connection-failed-authentication-delay-ms must be 0 or more")
    if options["sasl"] is not None:
        try:
            mechanisms = parse_mechanisms(options["sasl"])
        except ValueError as e:
            raise usage.UsageError(f"--sasl: {e}") from None
        if options["credentials"] is None:
            raise usage.UsageError("--sasl needs --credentials FILE (see brokerctl users)")
    if options["credentials"] is not None:
        try:
            credentials = CredentialStore.open(
                options["credentials"],
                on_error=lambda message: _log.error("{message}", message=message),
            )
        except CredentialsError as e:
            raise usage.UsageError(f"--credentials: {e}") from None
    return SaslSettings(
        mechanisms=mechanisms,
        credentials=credentials,
        failed_authentication_delay_seconds=delay_ms / 1000,
    )


def _authorization(options: Mapping[str, Any]) -> AuthorizationSettings:
    from brokerd.security.acl import valid_principal

    if options["authorizer"] not in ("none", "acl"):
        raise usage.UsageError("--authorizer must be none or acl")
    users = [u.strip() for u in options["super-users"].split(",") if u.strip()]
    for user in users:
        if not valid_principal(user):
            raise usage.UsageError(f"--super-users: {user!r} is not User:<name>")
    return AuthorizationSettings(
        acl=options["authorizer"] == "acl", super_users=frozenset(users)
    )


def _check_http_auth(options: Mapping[str, Any], http_auth: HttpAuth, sasl: SaslSettings) -> None:
    """``--http-auth``: what it needs, and HTTP Basic never in clear text beyond
    loopback (the password itself crosses the wire, as with PLAIN)."""
    from brokerd.security.doors import is_local_description

    http = options["http"]
    if http_auth is HttpAuth.NONE:
        return
    if http.lower() == "none":
        raise usage.UsageError(f"--http-auth {http_auth.value} needs an --http listener")
    if http_auth is HttpAuth.BASIC:
        if sasl.credentials is None:
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
    _check_service_auth("schema-registry", options["schema-registry"], http_auth)
    _check_service_auth("http-proxy", options["http-proxy"], http_auth)


def _check_service_auth(name: str, description: str, http_auth: HttpAuth) -> None:
    """An HTTP service listener under ``--http-auth``: Basic passwords never in clear
    text beyond loopback, certificates only on ``ssl:``."""
    from brokerd.security.doors import is_local_description

    if description.lower() == "none":
        return
    if http_auth is HttpAuth.BASIC and not (
        is_tls_description(description) or is_local_description(description)
    ):
        raise usage.UsageError(
            f"--http-auth basic sends passwords in clear text on --{name} {description}: "
            f"use an ssl: listener, bind it to 127.0.0.1, or --{name} none"
        )
    if http_auth is HttpAuth.CERTIFICATE and not is_tls_description(description):
        raise usage.UsageError(
            f"--http-auth certificate needs an ssl: --{name} listener, not {description} "
            f"(or --{name} none)"
        )


def _console_acts(
    options: Mapping[str, Any], doors: DoorSettings, authorization: AuthorizationSettings
) -> bool:
    """Whether the console's actions are on: not with ``--http-console-readonly``, nor
    where the console is an anonymous door of a broker that requires authentication and
    no ACLs decide what ``User:ANONYMOUS`` may do (the doors are allowed on loopback on
    the grounds that the console only reads there)."""
    from brokerd.security.doors import Door, anonymous_doors

    if options["http-console-readonly"]:
        return False
    door = any(d.door is Door.HTTP for d in anonymous_doors(doors.listeners))
    return authorization.acl or not door


def _doors(
    options: Mapping[str, Any], tls: TlsSettings, sasl: SaslSettings, http_auth: HttpAuth
) -> DoorSettings:
    """``--allow-anonymous``: the start is refused while a listener serves anonymous
    clients the operator did not name (``brokerd.security.doors``)."""
    from brokerd.security.doors import parse_allow_anonymous, refusal

    try:
        allowed = parse_allow_anonymous(options["allow-anonymous"])
    except ValueError as e:
        raise usage.UsageError(str(e)) from None
    verification = tls.client_verification
    listeners = ListenerSecurity(
        native=options["native"],
        kafka=options["kafka"],
        http=options["http"],
        schema_registry=options["schema-registry"],
        http_proxy=options["http-proxy"],
        sasl=sasl.mechanisms is not None,
        certificates_required=(
            verification is not None and verification.mode is ClientAuth.REQUIRED
        ),
        http_auth=http_auth,
    )
    message = refusal(listeners, allowed)
    if message is not None:
        raise usage.UsageError(message)
    return DoorSettings(listeners=listeners, allowed=allowed)


def _share_defaults(options: Mapping[str, Any]) -> dict[str, str]:
    """Share groups' defaults (Kafka's ``group.share.*``), checked against Kafka's bounds.
    Each is set by the option of its broker config's name, dots as dashes."""
    from brokerd.core.share.config import (
        BROKER_LEVEL,
        InvalidShareConfig,
        broker_defaults,
        broker_name,
    )

    def option(name: str) -> str:
        return broker_name(name).replace(".", "-")

    try:
        return broker_defaults({name: str(options[option(name)]) for name in BROKER_LEVEL})
    except InvalidShareConfig as e:
        assert e.name is not None, "broker_defaults names the config at fault"
        raise usage.UsageError(f"--{option(e.name)}: {e}") from None
