# -*- test-case-name: tests.app.test_options -*-
"""``twistd broker``'s command-line options: names, defaults and help text (a pinned
contract: docs/operations.md lists them), and the text of the effective options that the
console's broker page shows.

Parsing reads ``--config FILE`` first (:mod:`brokerd.app.config_file_options`), then the
command line over it; the checks and the typed settings are
:func:`brokerd.app.from_options.settings_from_options`, run once at the end of the parse.
This module does not build any service.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from twisted.python import usage

from brokerd.core.policy import DEFAULT_FSYNC
from brokerd.storage.config.log_config import DEFAULT_SEGMENT_MS

if TYPE_CHECKING:
    from brokerd.app.settings import Settings

DEFAULT_NATIVE = "tcp:7070:interface=127.0.0.1"
DEFAULT_KAFKA = "tcp:9092:interface=127.0.0.1"
DEFAULT_HTTP = "tcp:8070:interface=127.0.0.1"
#: The platform's HTTP services: Confluent's Schema Registry API (docs/schema-registry.md).
DEFAULT_SCHEMA_REGISTRY = "tcp:8081:interface=127.0.0.1"
DEFAULT_HTTP_PROXY = "tcp:8082:interface=127.0.0.1"
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
        # The platform's HTTP services beside the console, each on its own listener
        # (--schema-registry here; further services go after it).
        [
            "schema-registry",
            None,
            DEFAULT_SCHEMA_REGISTRY,
            "Endpoint of the Confluent Schema Registry API (docs/schema-registry.md), "
            "or 'none'.",
        ],
        [
            "http-proxy",
            None,
            DEFAULT_HTTP_PROXY,
            "Endpoint of the Confluent REST Proxy API (v2 and v3; docs/http-proxy.md), "
            "or 'none'.",
        ],
        [
            "ready-file",
            None,
            None,
            "Once every listener is bound, write their addresses here as JSON "
            "(docs/operations.md, Ready file); removed at a clean stop.",
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
            str(DEFAULT_FSYNC),
            "always | interval:MS | never (see Durability in docs/operations.md).",
        ],
        ["segment-bytes", None, DEFAULT_SEGMENT_BYTES, "Roll a segment at this size.", int],
        [
            "segment-ms",
            None,
            DEFAULT_SEGMENT_MS,
            "Also roll a non-empty segment this old (Kafka's 7 days; 0: never).",
            int,
        ],
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
        # Client telemetry (KIP-714; docs/operations.md, "Client telemetry").
        [
            "telemetry-max-bytes",
            None,
            MEBIBYTE,
            "Largest metrics payload of a client's PushTelemetry (Kafka's telemetry.max.bytes).",
            int,
        ],
        # Client quotas (docs/operations.md, "Client quotas").
        [
            "quota-window-num",
            None,
            11,
            "Samples a client quota's rate is measured over (Kafka's quota.window.num).",
            int,
        ],
        [
            "quota-window-size-seconds",
            None,
            1,
            "Length of one quota sample (Kafka's quota.window.size.seconds).",
            int,
        ],
        [
            "max-incremental-fetch-session-cache-slots",
            None,
            1000,
            "Most Kafka fetch sessions held (KIP-227; Kafka's option of that name; "
            "0: none, every fetch is a full fetch).",
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
        [
            "group-consumer-session-timeout-ms",
            None,
            45_000,
            "Default session timeout of consumer-protocol groups (KIP-848).",
            int,
        ],
        [
            "group-consumer-heartbeat-interval-ms",
            None,
            5_000,
            "Default heartbeat interval of consumer-protocol groups (KIP-848).",
            int,
        ],
        # Share groups' defaults (Kafka's group.share.* broker configs, its bounds).
        [
            "group-share-record-lock-duration-ms",
            None,
            30_000,
            "Default acquisition lock of share groups' records (1000-3600000).",
            int,
        ],
        [
            "group-share-delivery-count-limit",
            None,
            5,
            "Default deliveries of a share group's record before it is archived (2-10).",
            int,
        ],
        [
            "group-share-session-timeout-ms",
            None,
            45_000,
            "Default session timeout of share group members (1000-60000).",
            int,
        ],
        [
            "group-share-heartbeat-interval-ms",
            None,
            5_000,
            "Default heartbeat interval of share group members (1000-15000).",
            int,
        ],
        [
            "group-share-partition-max-record-locks",
            None,
            2_000,
            "Default most records of a share-partition acquired at once (100-10000).",
            int,
        ],
        [
            "errors-deadletterqueue-topic-name-prefix",
            None,
            "dlq.",
            "Required prefix of share groups' dead-letter topics (KIP-1191; empty: any).",
        ],
        [
            "group-share-max-share-sessions",
            None,
            2_000,
            "Most share sessions the broker holds; a new one beyond is refused "
            "(SHARE_SESSION_LIMIT_REACHED), the open ones go on.",
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
            "anonymous clients: a comma list of native, http, schema-registry, http-proxy.",
        ],
        [
            "http-auth",
            None,
            "none",
            "What the console, /metrics, the schema registry and the REST Proxy ask of a "
            "client: none, basic (HTTP Basic against --credentials) or certificate (ssl: "
            "listeners).",
        ],
    ]
    optFlags = [
        ["no-auto-create", None, "Refuse produce/metadata for unknown topics."],
        [
            "errors-deadletterqueue-auto-create-topics-enable",
            None,
            "Create a share group's missing dead-letter topic on its first dead letter.",
        ],
        [
            "http-console-readonly",
            None,
            "The web console shows the broker and its records but changes nothing (no "
            "produce, topic create, config edit, delete or offset reset).",
        ],
    ]

    def parseOptions(self, options: list[str] | None = None) -> None:
        """Load ``--config FILE`` (if any) over the defaults first, so that the command
        line, parsed next, overrides the file."""
        from brokerd.app.config_file_options import parse_with_config

        parse_with_config(
            self, super().parseOptions, options, aliases=TOPIC_DEFAULT_FLAGS
        )

    def postOptions(self) -> None:
        """Check the options together and build the typed settings, once: a bad value or
        combination stops the start with a usage error."""
        from brokerd.app.from_options import settings_from_options

        self.settings: Settings = settings_from_options(self)


def _setting_text(value: object, *, flag: bool) -> str:
    if flag:
        return "true" if value else "false"
    if isinstance(value, set | frozenset | list | tuple):
        return ",".join(sorted(str(v) for v in value)) or "(none)"
    return str(value)


def options_text(values: Mapping[str, object], super_users: frozenset[str]) -> dict[str, str]:
    """The effective options as text, for operators to read (file names are shown,
    never file contents). ``--super-users`` is shown as the parsed set of principals,
    sorted."""
    flags = {flag[0] for flag in Options.optFlags}
    shown: dict[str, object] = {**values, "super-users": super_users}
    return {
        name: _setting_text(value, flag=name in flags)
        for name, value in sorted(shown.items())
        if value is not None
    }
