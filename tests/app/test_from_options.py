"""brokerd.app.from_options: every option of ``twistd broker`` reaches its typed setting,
and combinations that cannot work are refused with the messages operators know."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.python import usage

from brokerd.app.options import MEBIBYTE, TOPIC_DEFAULT_FLAGS, Options
from brokerd.app.settings import Settings
from brokerd.core.policy import FsyncPolicy
from brokerd.net.tls import ClientAuth
from brokerd.security.credentials import CredentialStore
from brokerd.security.doors import Door, HttpAuth

from tests.tls_helpers import Pki, make_pki, ssl_description


def settings(*args: str) -> Settings:
    options = Options()
    options.parseOptions(list(args))
    return options.settings


def refusal(*args: str) -> str:
    with pytest.raises(usage.UsageError) as info:
        settings(*args)
    return str(info.value)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def creds(tmp_path: Path) -> str:
    path = tmp_path / "credentials.json"
    CredentialStore.open(str(path), create=True).alter([])
    return str(path)


Check = Callable[[Settings], bool]


def option_cases(tmp_path: Path, pki: Pki, creds: str) -> dict[str, tuple[list[str], Check]]:
    """Per option: a command line giving it a value other than its default, and what
    the settings must then say."""
    tls = ssl_description(9093, pki)
    config = tmp_path / "brokerd.toml"
    config.write_text("read-threads = 7\n")
    cases: dict[str, tuple[list[str], Check]] = {
        "config": (["--config", str(config)], lambda s: s.core.read_threads == 7),
        "data-dir": (["--data-dir", "/srv/b"], lambda s: s.storage.data_dir == "/srv/b"),
        "native": (["--native", "none"], lambda s: s.listeners.native is None),
        "kafka": (["--kafka", "tcp:19092"], lambda s: s.listeners.kafka == "tcp:19092"),
        "http": (["--http", "None"], lambda s: s.listeners.http is None),
        "schema-registry": (
            ["--schema-registry", "none"], lambda s: s.listeners.schema_registry is None
        ),
        "http-proxy": (
            ["--http-proxy", "tcp:18082"], lambda s: s.listeners.http_proxy == "tcp:18082"
        ),
        "advertised-host": (
            ["--advertised-host", "b.example"],
            lambda s: s.listeners.advertised_host == "b.example",
        ),
        "fsync": (
            ["--fsync", "interval:50"], lambda s: s.core.fsync == FsyncPolicy("interval", 50)
        ),
        "segment-bytes": (
            ["--segment-bytes", "2048"], lambda s: s.storage.log_config.segment_bytes == 2048
        ),
        "segment-ms": (
            ["--segment-ms", "60000"], lambda s: s.storage.log_config.segment_ms == 60000
        ),
        "retention-bytes": (
            ["--retention-bytes", "4096"], lambda s: s.storage.log_config.retention_bytes == 4096
        ),
        "retention-ms": (
            ["--retention-ms", "-1"], lambda s: s.storage.log_config.retention_ms is None
        ),
        "log-retention-check-interval-ms": (
            ["--log-retention-check-interval-ms", "2500"],
            lambda s: s.core.retention_check_seconds == 2.5,
        ),
        "default-partitions": (
            ["--default-partitions", "3"], lambda s: s.storage.default_partitions == 3
        ),
        "max-produce-bytes": (
            ["--max-produce-bytes", "1000"], lambda s: s.limits.max_produce_bytes == 1000
        ),
        "max-fetch-bytes": (
            ["--max-fetch-bytes", "1001"], lambda s: s.limits.max_fetch_bytes == 1001
        ),
        "max-request-bytes": (
            ["--max-request-bytes", "1002"], lambda s: s.limits.max_request_bytes == 1002
        ),
        "telemetry-max-bytes": (
            ["--telemetry-max-bytes", "2048"], lambda s: s.limits.telemetry_max_bytes == 2048
        ),
        "fetch-max-bytes": (
            ["--fetch-max-bytes", "1003"], lambda s: s.limits.fetch_max_bytes == 1003
        ),
        "quota-window-num": (
            ["--quota-window-num", "3"], lambda s: s.limits.quota_window_num == 3
        ),
        "quota-window-size-seconds": (
            ["--quota-window-size-seconds", "2"],
            lambda s: s.limits.quota_window_size_seconds == 2,
        ),
        "max-incremental-fetch-session-cache-slots": (
            ["--max-incremental-fetch-session-cache-slots", "7"],
            lambda s: s.limits.fetch_session_slots == 7,
        ),
        "max-inflight-answer-bytes": (
            ["--max-inflight-answer-bytes", "1004"],
            lambda s: s.limits.max_inflight_answer_bytes == 1004,
        ),
        "transaction-max-timeout-ms": (
            ["--transaction-max-timeout-ms", "1005"],
            lambda s: s.limits.transaction_max_timeout_ms == 1005,
        ),
        "group-consumer-session-timeout-ms": (
            ["--group-consumer-session-timeout-ms", "60000"],
            lambda s: s.groups.consumer_session_timeout_ms == 60000,
        ),
        "group-consumer-heartbeat-interval-ms": (
            ["--group-consumer-heartbeat-interval-ms", "3000"],
            lambda s: s.groups.consumer_heartbeat_interval_ms == 3000,
        ),
        "group-share-record-lock-duration-ms": (
            ["--group-share-record-lock-duration-ms", "1000"],
            lambda s: s.groups.share_defaults["share.record.lock.duration.ms"] == "1000",
        ),
        "group-share-delivery-count-limit": (
            ["--group-share-delivery-count-limit", "2"],
            lambda s: s.groups.share_defaults["share.delivery.count.limit"] == "2",
        ),
        "group-share-session-timeout-ms": (
            ["--group-share-session-timeout-ms", "10000"],
            lambda s: s.groups.share_defaults["share.session.timeout.ms"] == "10000",
        ),
        "group-share-heartbeat-interval-ms": (
            ["--group-share-heartbeat-interval-ms", "1000"],
            lambda s: s.groups.share_defaults["share.heartbeat.interval.ms"] == "1000",
        ),
        "group-share-max-share-sessions": (
            ["--group-share-max-share-sessions", "10"],
            lambda s: s.groups.share_max_sessions == 10,
        ),
        "group-share-partition-max-record-locks": (
            ["--group-share-partition-max-record-locks", "100"],
            lambda s: s.groups.share_defaults["share.partition.max.record.locks"] == "100",
        ),
        "max-connections": (["--max-connections", "0"], lambda s: s.limits.max_connections is None),
        "max-connections-per-ip": (
            ["--max-connections-per-ip", "7"], lambda s: s.limits.per_address == 7
        ),
        "max-connections-per-ip-overrides": (
            ["--max-connections-per-ip-overrides", "127.0.0.2:9"],
            lambda s: s.limits.per_address_overrides == {"127.0.0.2": 9},
        ),
        "queued-max-request-bytes": (
            ["--queued-max-request-bytes", "-1"], lambda s: s.limits.queued_request_bytes is None
        ),
        "sasl-server-max-receive-size": (
            ["--sasl-server-max-receive-size", "1006"],
            lambda s: s.limits.sasl_max_receive_bytes == 1006,
        ),
        "read-threads": (["--read-threads", "3"], lambda s: s.core.read_threads == 3),
        "write-threads": (["--write-threads", "5"], lambda s: s.core.write_threads == 5),
        "cleaner-threads": (["--cleaner-threads", "0"], lambda s: s.cleaner is None),
        "cleaner-io-mb-per-sec": (
            ["--cleaner-io-mb-per-sec", "2.5"],
            lambda s: s.cleaner is not None and s.cleaner.io_bytes_per_second == 2.5 * MEBIBYTE,
        ),
        "cleaner-dedupe-buffer-mb": (
            ["--cleaner-dedupe-buffer-mb", "3"],
            lambda s: s.cleaner is not None and s.cleaner.dedupe_buffer_bytes == 3 * MEBIBYTE,
        ),
        "cleaner-backoff-ms": (
            ["--cleaner-backoff-ms", "500"],
            lambda s: s.cleaner is not None and s.cleaner.backoff_seconds == 0.5,
        ),
        "authorizer": (["--authorizer", "acl"], lambda s: s.authorization.acl),
        "super-users": (
            ["--super-users", "User:b, User:a"],
            lambda s: s.authorization.super_users == {"User:a", "User:b"},
        ),
        "ssl-client-auth": (
            ["--kafka", tls, "--ssl-client-auth", "requested", "--ssl-client-ca", str(pki.ca)],
            lambda s: s.tls.client_verification is not None
            and s.tls.client_verification.mode is ClientAuth.REQUESTED,
        ),
        "ssl-client-ca": (
            ["--kafka", tls, "--ssl-client-auth", "required", "--ssl-client-ca", str(pki.ca),
             "--allow-anonymous", "native"],
            lambda s: s.tls.client_verification is not None
            and s.tls.client_verification.ca_file == str(pki.ca),
        ),
        "sasl": (
            ["--sasl", "scram-sha-256", "--credentials", creds, "--native", "none"],
            lambda s: s.sasl.mechanisms == ("SCRAM-SHA-256",),
        ),
        "credentials": (["--credentials", creds], lambda s: s.sasl.credentials is not None),
        "connection-failed-authentication-delay-ms": (
            ["--connection-failed-authentication-delay-ms", "250"],
            lambda s: s.sasl.failed_authentication_delay_seconds == 0.25,
        ),
        "allow-anonymous": (
            ["--allow-anonymous", "native,http"],
            lambda s: s.doors.allowed == {Door.NATIVE, Door.HTTP},
        ),
        "http-auth": (
            ["--http-auth", "basic", "--credentials", creds],
            lambda s: s.web.auth is HttpAuth.BASIC,
        ),
        "no-auto-create": (["--no-auto-create"], lambda s: not s.storage.auto_create),
        "ready-file": (
            ["--ready-file", str(tmp_path / "ready.json")],
            lambda s: s.listeners.ready_file == str(tmp_path / "ready.json"),
        ),
        "errors-deadletterqueue-topic-name-prefix": (
            ["--errors-deadletterqueue-topic-name-prefix", "dead."],
            lambda s: s.groups.share_dlq_prefix == "dead.",
        ),
        "errors-deadletterqueue-auto-create-topics-enable": (
            ["--errors-deadletterqueue-auto-create-topics-enable"],
            lambda s: s.groups.share_dlq_auto_create,
        ),
        "http-console-readonly": (
            ["--http-console-readonly"], lambda s: not s.web.console_actions
        ),
    }
    topic_values = {
        "log-cleanup-policy": "compact",
        "message-max-bytes": "2000000",
        "log-message-timestamp-type": "LogAppendTime",
        "log-cleaner-min-cleanable-ratio": "0.25",
        "log-cleaner-min-compaction-lag-ms": "10",
        "log-cleaner-max-compaction-lag-ms": "20000",
        "log-cleaner-delete-retention-ms": "30",
        "compression-type": "zstd",
        "log-message-timestamp-before-max-ms": "40",
        "log-message-timestamp-after-max-ms": "50",
        "log-roll-jitter-ms": "60",
        "log-index-size-max-bytes": "8192",
        "log-index-interval-bytes": "70",
    }
    assert set(topic_values) == set(TOPIC_DEFAULT_FLAGS)
    for flag, value in topic_values.items():
        topic_name = TOPIC_DEFAULT_FLAGS[flag]
        cases[flag] = (
            [f"--{flag}", value],
            lambda s, n=topic_name, v=value: s.storage.topic_defaults[n] == v,
        )
    return cases


def every_option() -> set[str]:
    return {p[0] for p in Options.optParameters} | {f[0] for f in Options.optFlags}


def test_every_option_reaches_its_setting(tmp_path: Path, pki: Pki, creds: str) -> None:
    cases = option_cases(tmp_path, pki, creds)
    assert set(cases) == every_option()
    defaults = settings()
    for name, (argv, check) in cases.items():
        assert not check(defaults), f"--{name}: the case must differ from the default"
        assert check(settings(*argv)), f"--{name} {argv} did not reach its setting"


def test_topic_defaults_reach_the_log_config() -> None:
    config = settings("--compression-type", "zstd", "--log-roll-jitter-ms", "50").storage.log_config
    assert (config.compression_type, config.segment_jitter_ms) == ("zstd", 50)


def test_defaults() -> None:
    s = settings()
    assert s.storage.data_dir == os.path.abspath("./data")
    assert s.storage.auto_create and s.storage.default_partitions == 1
    assert s.listeners.native == "tcp:7070:interface=127.0.0.1"
    assert s.listeners.kafka == "tcp:9092:interface=127.0.0.1"
    assert s.listeners.http == "tcp:8070:interface=127.0.0.1"
    assert s.core.fsync == FsyncPolicy("always")
    assert (s.core.read_threads, s.core.write_threads) == (4, 2)
    assert s.limits.max_connections == 1024 and s.limits.per_address == 512
    assert s.limits.queued_request_bytes == 64 * MEBIBYTE
    assert s.cleaner is not None and s.cleaner.threads == 1
    assert s.cleaner.io_bytes_per_second is None
    assert s.tls.client_verification is None and s.tls.http_client_verification is None
    assert s.sasl.mechanisms is None and s.sasl.credentials is None
    assert s.sasl.failed_authentication_delay_seconds == 0.1
    assert not s.authorization.acl and s.authorization.super_users == frozenset()
    assert s.doors.allowed == frozenset() and s.web.auth is HttpAuth.NONE


def test_http_certificate_gets_its_own_verification(pki: Pki) -> None:
    tls = ssl_description(8443, pki)
    s = settings("--http", tls, "--http-auth", "certificate", "--ssl-client-ca", str(pki.ca),
                 "--schema-registry", ssl_description(8444, pki),
                 "--http-proxy", ssl_description(8445, pki))
    assert s.listeners.schema_registry is not None
    assert s.tls.client_verification is None
    assert s.tls.http_client_verification is not None
    assert s.tls.http_client_verification.mode is ClientAuth.REQUIRED


def test_shown_options_are_text_of_the_options_only(creds: str) -> None:
    shown = settings("--credentials", creds, "--super-users", "User:b,User:a").web.shown_options
    assert shown["credentials"] == creds  # the file's name, never its content
    assert shown["super-users"] == "User:a,User:b"
    assert shown["no-auto-create"] == "false"
    assert "config" not in shown and "advertised-host" not in shown  # unset: not shown
    assert set(shown) == every_option() - {"config", "advertised-host", "ssl-client-ca",
                                            "sasl", "max-connections-per-ip",
                                            "ready-file"}


#: Command lines refused, with the message (or its start) each gets, in the order the
#: checks run.
REFUSED: list[tuple[list[str], str]] = [
    (["--fsync", "sometimes"], "--fsync must be always, never or interval:MS (MS > 0), not "
                               "'sometimes'"),
    (["--segment-bytes", "0"], "--segment-bytes must be positive"),
    (["--default-partitions", "0"], "--default-partitions must be positive"),
    (["--max-produce-bytes", "-1"], "--max-produce-bytes must be positive"),
    (["--read-threads", "0"], "--read-threads must be positive"),
    (["--transaction-max-timeout-ms", "0"], "--transaction-max-timeout-ms must be positive"),
    (["--group-share-max-share-sessions", "0"],
     "--group-share-max-share-sessions must be positive"),
    (
        ["--group-consumer-heartbeat-interval-ms", "0"],
        "--group-consumer-heartbeat-interval-ms must be positive",
    ),
    (
        ["--group-consumer-heartbeat-interval-ms", "45000"],
        "--group-consumer-heartbeat-interval-ms must be less than "
        "--group-consumer-session-timeout-ms",
    ),
    (["--segment-bytes", "10"], "--segment-bytes must be at least 1024"),
    (["--max-connections", "-1"], "--max-connections must be 0 (no limit) or positive"),
    (["--sasl-server-max-receive-size", "0"], "--sasl-server-max-receive-size must be positive"),
    (["--queued-max-request-bytes", "100"],
     "--queued-max-request-bytes 100 cannot hold one largest request (8388608 bytes, "
     "--max-request-bytes/--max-produce-bytes); raise it, or -1 for no limit"),
    (["--max-connections-per-ip-overrides", "host:1"], "--max-connections-per-ip-overrides: "),
    (["--max-connections-per-ip", "-1"], "--max-connections-per-ip must be 0 or more"),
    (["--max-connections-per-ip", "0"],
     "--max-connections-per-ip 0 refuses every address: "
     "give --max-connections-per-ip-overrides for the ones allowed"),
    (["--retention-ms", "0"], "--retention-ms must be positive or -1"),
    (["--retention-bytes", "-2"], "--retention-bytes must be positive or -1"),
    (["--segment-ms", "-1"], "--segment-ms must be 0 or positive"),
    (["--compression-type", "brotli"], "Invalid value brotli for configuration compression.type"),
    (["--cleaner-threads", "-1"], "--cleaner-threads must be 0 or positive"),
    (["--cleaner-backoff-ms", "-1"], "--cleaner-backoff-ms must be 0 or positive"),
    (["--cleaner-dedupe-buffer-mb", "0"], "--cleaner-dedupe-buffer-mb must be at least 1"),
    (["--http-auth", "digest"], "--http-auth must be one of none, basic, certificate"),
    (["--ssl-client-auth", "maybe"],
     "--ssl-client-auth must be one of none, requested, required, not 'maybe'"),
    (["--ssl-client-auth", "required"], "--ssl-client-auth required needs --ssl-client-ca FILE"),
    (["--connection-failed-authentication-delay-ms", "-1"],
     "--connection-failed-authentication-delay-ms must be 0 or more"),
    (["--sasl", "GSSAPI"], "--sasl: unknown SASL mechanism 'GSSAPI'"),
    (["--sasl", "PLAIN"], "--sasl needs --credentials FILE (see brokerctl users)"),
    (["--credentials", "/nonexistent/credentials.json"], "--credentials: "),
    (["--authorizer", "simple"], "--authorizer must be none or acl"),
    (["--super-users", "admin"], "--super-users: 'admin' is not User:<name>"),
    (["--http", "none", "--http-auth", "basic"], "--http-auth basic needs an --http listener"),
    (["--http-auth", "basic"], "--http-auth basic needs --credentials FILE"),
    (["--http-auth", "certificate"],
     "--http-auth certificate needs an ssl: --http listener, not tcp:8070:interface=127.0.0.1"),
    (["--allow-anonymous", "kafka"], "--allow-anonymous: unknown listener"),
    (
        ["--group-share-delivery-count-limit", "11"],
        "--group-share-delivery-count-limit: Invalid value 11 for configuration "
        "share.delivery.count.limit: Value must be in the range [2, 10]",
    ),
    (
        ["--group-share-partition-max-record-locks", "99"],
        "--group-share-partition-max-record-locks: Invalid value 99 for configuration "
        "share.partition.max.record.locks: Value must be in the range [100, 10000]",
    ),
    (
        ["--group-share-heartbeat-interval-ms", "15000", "--group-share-session-timeout-ms",
         "15000"],
        "--group-share-session-timeout-ms: group.share.heartbeat.interval.ms must be less "
        "than group.share.session.timeout.ms",
    ),
]


@pytest.mark.parametrize(("argv", "message"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_refused_with_todays_message(argv: list[str], message: str) -> None:
    assert refusal(*argv).startswith(message)


def test_refusals_that_need_files(tmp_path: Path, pki: Pki, creds: str) -> None:
    assert refusal("--ssl-client-auth", "required", "--ssl-client-ca", str(pki.ca)) == (
        "--ssl-client-auth required needs an ssl: listener (--native "
        "tcp:7070:interface=127.0.0.1, --kafka tcp:9092:interface=127.0.0.1, "
        "--http tcp:8070:interface=127.0.0.1)"
    )
    assert refusal("--ssl-client-ca", str(pki.ca)) == (
        "--ssl-client-ca is given but --ssl-client-auth is none: "
        "say --ssl-client-auth requested or required"
    )
    assert refusal("--http", "tcp:8070", "--http-auth", "basic", "--credentials", creds) == (
        "--http-auth basic sends passwords in clear text on --http tcp:8070: "
        "use an ssl: listener, or bind it to 127.0.0.1"
    )
    tls = ssl_description(8443, pki)
    assert refusal("--http", tls, "--http-auth", "certificate") == (
        "--http-auth certificate needs --ssl-client-ca FILE"
    )
    assert "--allow-anonymous native" in refusal("--sasl", "PLAIN", "--credentials", creds)


def test_the_first_failing_check_is_reported() -> None:
    # Both are wrong; --fsync is checked first, as before the settings were typed.
    assert refusal("--fsync", "x", "--segment-bytes", "0").startswith("--fsync must be")
    assert refusal("--segment-ms", "-1", "--authorizer", "x") == (
        "--segment-ms must be 0 or positive"
    )


def test_refusal_of_a_file_value_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "brokerd.toml"
    config.write_text("authorizer = 'simple'\n")
    message = refusal("--config", str(config))
    assert message.startswith("--authorizer must be none or acl (authorizer set in ")


def test_settings_are_frozen() -> None:
    import attrs

    s: Any = settings()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.core = None


def test_an_anonymous_console_of_a_closed_broker_only_reads(creds: str) -> None:
    """The console's actions are off where it is an anonymous door (loopback, allowed
    because it only reads) unless ACLs decide what User:ANONYMOUS may do."""
    closed = ("--sasl", "SCRAM-SHA-256", "--credentials", creds, "--native", "none")
    assert settings().web.console_actions
    assert not settings("--http-console-readonly").web.console_actions
    assert not settings(*closed).web.console_actions
    assert settings(*closed, "--authorizer", "acl").web.console_actions
    assert settings(*closed, "--http-auth", "basic").web.console_actions
