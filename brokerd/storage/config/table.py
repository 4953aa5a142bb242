"""Every topic config of Apache Kafka 4.x, in Kafka's order, with what it does on brokerd.

Names, types, defaults, bounds and broker-level synonyms are Kafka's (its ``LogConfig``
and ``ServerTopicConfigSynonyms``). Each entry's ``effect`` is empty when brokerd applies
the config as Kafka does, else it says why the config means nothing on a single node;
those are still checked and stored, so a topic created for a Kafka cluster (by Kafka's
tools, Streams, Connect or MirrorMaker) is created here as it is there, and moves back
with its configs. ``message.format.version`` (gone from Kafka 4.0) is accepted as Kafka
3.x accepts it: checked as a version string and ignored, since every batch is v2.
docs/kafka.md ("Topic configs") is the table for readers. Pure data and small checks.
"""

from __future__ import annotations

import re

from brokerd.storage.config.definition import LONG_MAX, ConfigDef, ConfigType, Parsed

__all__ = ["COMPRESSION_TYPES", "DEFS", "MESSAGE_FORMAT_VERSION_DEFAULT"]

#: Kafka 3.x's lower bound of ``segment.bytes`` (a v0 record's overhead). Kafka 4.0 asks
#: for 1 MiB and keeps an internal config for smaller test segments; brokerd keeps the
#: old bound so that small segments stay one topic config away (docs/kafka.md).
MIN_SEGMENT_BYTES = 14
#: ``compression.type``'s values: ``producer`` keeps the producer's codec.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: What Kafka 3.x's ``message.format.version`` defaulted to (inter-broker protocol 3.0).
MESSAGE_FORMAT_VERSION_DEFAULT = "3.0-IV1"

_NO_REPLICAS = "brokerd is one node, the only replica of every partition"
_NO_TIERED = "brokerd has no tiered storage: every segment stays on the local disk"
_VERSION = re.compile(r"(\d+)\.(\d+)((?:\.\d+)*)(?:-IV(\d+))?\Z")
#: Release lines Kafka 3.x's version validator knows (major: minors).
_RELEASE_LINES = {0: range(8, 12), 1: range(0, 2), 2: range(0, 9), 3: range(0, 10)}


def _gzip_level(value: Parsed) -> str | None:
    assert isinstance(value, int)
    if value == -1 or 1 <= value <= 9:
        return None
    return "Value must be between 1 and 9 or equal to -1"


def _throttled_replicas(value: Parsed) -> str | None:
    assert isinstance(value, tuple)
    if value == ("*",) or all(re.fullmatch(r"\d+:\d+", v) for v in value if v):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _message_format_version(value: Parsed) -> str | None:
    assert isinstance(value, str)
    match = _VERSION.match(value)
    if match is not None:
        major, minor = int(match.group(1)), int(match.group(2))
        if minor in _RELEASE_LINES.get(major, ()):
            return None
    return f"Version `{value}` is not a valid version"


def _no_tiered_storage(value: Parsed) -> str | None:
    # A Kafka broker without remote.log.storage.system.enable refuses it the same way.
    if value is True:
        return (
            "Tiered Storage functionality is disabled in the broker. Topic cannot be "
            "configured with remote log storage."
        )
    return None


DEFS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "segment.bytes", ("log.segment.bytes",), ConfigType.INT, "1073741824",
        "Roll the active segment at this size.",
        minimum=MIN_SEGMENT_BYTES,
    ),
    ConfigDef(
        "segment.ms", ("log.roll.ms", "log.roll.hours"), ConfigType.LONG, "604800000",
        "Roll a non-empty active segment this old, so that retention and compaction can "
        "act on it.",
        minimum=1,
    ),
    ConfigDef(
        "segment.jitter.ms", ("log.roll.jitter.ms", "log.roll.jitter.hours"),
        ConfigType.LONG, "0",
        "Roll each segment up to this much (a random amount, below segment.ms) before "
        "segment.ms, so that partitions created together do not all roll at once.",
        minimum=0,
    ),
    ConfigDef(
        "segment.index.bytes", ("log.index.size.max.bytes",), ConfigType.INT, "10485760",
        "Largest offset index of a segment: the segment rolls once its offset index "
        "(8 bytes an entry) or time index (12 bytes an entry) is full.",
        minimum=4,
    ),
    ConfigDef(
        "flush.messages", ("log.flush.interval.messages",), ConfigType.LONG, str(LONG_MAX),
        "fdatasync the partition once this many records were appended since its last "
        "sync; 1 syncs every append before answering it. Without an override the "
        "broker's --fsync policy decides.",
        minimum=1,
    ),
    ConfigDef(
        "flush.ms", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
        ConfigType.LONG, str(LONG_MAX),
        "fdatasync the partition at most this long after an append; 0 syncs every "
        "append before answering it. Without an override the broker's --fsync policy "
        "decides.",
        minimum=0,
    ),
    ConfigDef(
        "retention.bytes", ("log.retention.bytes",), ConfigType.LONG, "-1",
        "Delete the oldest segments while a partition is larger than this (-1: no size "
        "limit). Applies when cleanup.policy includes delete.",
    ),
    ConfigDef(
        "retention.ms", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        ConfigType.LONG, "604800000",
        "Delete a segment once its newest record is older than this (-1: no time limit). "
        "Applies when cleanup.policy includes delete.",
        minimum=-1,
    ),
    ConfigDef(
        "max.message.bytes", ("message.max.bytes",), ConfigType.INT, "1048588",
        "Largest record batch (after compression, with its 12-byte log header) a "
        "producer may append.",
        minimum=0,
    ),
    ConfigDef(
        "index.interval.bytes", ("log.index.interval.bytes",), ConfigType.INT, "4096",
        "Bytes of log between two offset index entries (applies to segments created "
        "from now on).",
        minimum=0,
    ),
    ConfigDef(
        "delete.retention.ms", ("log.cleaner.delete.retention.ms",), ConfigType.LONG,
        "86400000",
        "How long a compacted topic keeps tombstones (null values).",
        minimum=0,
    ),
    ConfigDef(
        "min.compaction.lag.ms", ("log.cleaner.min.compaction.lag.ms",), ConfigType.LONG,
        "0",
        "A record stays uncompacted for at least this long.",
        minimum=0,
    ),
    ConfigDef(
        "max.compaction.lag.ms", ("log.cleaner.max.compaction.lag.ms",), ConfigType.LONG,
        str(LONG_MAX),
        "A record becomes eligible for compaction after at most this long.",
        minimum=1,
    ),
    ConfigDef(
        "file.delete.delay.ms", ("log.segment.delete.delay.ms",), ConfigType.LONG, "60000",
        "How long Kafka keeps a deleted segment's files.",
        minimum=0,
        effect="brokerd removes a deleted segment's files once no read holds it (reads "
        "pin their segments), so it needs no delay",
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio", ("log.cleaner.min.cleanable.ratio",), ConfigType.DOUBLE,
        "0.5",
        "Compact a log once this share of it has not been compacted yet.",
        minimum=0, maximum=1,
    ),
    ConfigDef(
        "cleanup.policy", ("log.cleanup.policy",), ConfigType.LIST, "delete",
        "delete: old segments are removed by retention.ms/retention.bytes; compact: the "
        "cleaner keeps the latest record of each key; or both.",
        choices=("compact", "delete"),
    ),
    ConfigDef(
        "unclean.leader.election.enable", ("unclean.leader.election.enable",),
        ConfigType.BOOLEAN, "false",
        "Whether a replica out of sync may become leader.",
        effect=f"{_NO_REPLICAS}: there is no other replica to elect",
    ),
    ConfigDef(
        "min.insync.replicas", ("min.insync.replicas",), ConfigType.INT, "1",
        "Replicas that must have a record before acks=all is answered.",
        minimum=1,
        effect=f"{_NO_REPLICAS}: acks=all is answered once the append meets the topic's "
        "flush rule (--fsync, flush.messages, flush.ms), never refused for want of "
        "replicas",
    ),
    ConfigDef(
        "compression.type", ("compression.type",), ConfigType.STRING, "producer",
        "The codec batches are stored with: producer keeps the producer's; any other "
        "value recompresses batches with that codec (uncompressed decompresses them).",
        choices=COMPRESSION_TYPES,
    ),
    ConfigDef(
        "compression.gzip.level", ("compression.gzip.level",), ConfigType.INT, "-1",
        "gzip level when compression.type is gzip (-1: zlib's default).",
        check=_gzip_level,
    ),
    ConfigDef(
        "compression.lz4.level", ("compression.lz4.level",), ConfigType.INT, "9",
        "lz4 level when compression.type is lz4.",
        minimum=1, maximum=17,
    ),
    ConfigDef(
        "compression.zstd.level", ("compression.zstd.level",), ConfigType.INT, "3",
        "zstd level when compression.type is zstd.",
        minimum=-131072, maximum=22,
    ),
    ConfigDef(
        "preallocate", ("log.preallocate",), ConfigType.BOOLEAN, "false",
        "Preallocate a new segment's file at its full size.",
        effect="brokerd grows segment files as it appends (recovery and the index rely "
        "on a file ending where its last batch ends)",
    ),
    ConfigDef(
        "message.format.version", ("log.message.format.version",), ConfigType.STRING,
        MESSAGE_FORMAT_VERSION_DEFAULT,
        "Kafka 3.x's record format version (removed in Kafka 4.0).",
        check=_message_format_version,
        effect="ignored, as Kafka 3.x ignores it with inter-broker protocol 3.0 or "
        "later: every batch is stored as RecordBatch v2",
    ),
    ConfigDef(
        "message.timestamp.type", ("log.message.timestamp.type",), ConfigType.STRING,
        "CreateTime",
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with "
        "the broker's time when it is appended.",
        choices=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "message.timestamp.before.max.ms", ("log.message.timestamp.before.max.ms",),
        ConfigType.LONG, str(LONG_MAX),
        "Refuse (INVALID_TIMESTAMP) a CreateTime record older than this, by the broker's "
        "clock.",
        minimum=0,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms", ("log.message.timestamp.after.max.ms",),
        ConfigType.LONG, "3600000",
        "Refuse (INVALID_TIMESTAMP) a CreateTime record further than this in the future, "
        "by the broker's clock.",
        minimum=0,
    ),
    ConfigDef(
        "leader.replication.throttled.replicas", (), ConfigType.LIST, "",
        "Replicas whose replication the leader throttles.",
        check=_throttled_replicas,
        effect=f"{_NO_REPLICAS}: nothing is replicated",
    ),
    ConfigDef(
        "follower.replication.throttled.replicas", (), ConfigType.LIST, "",
        "Replicas whose replication the follower throttles.",
        check=_throttled_replicas,
        effect=f"{_NO_REPLICAS}: nothing is replicated",
    ),
    ConfigDef(
        "remote.storage.enable", (), ConfigType.BOOLEAN, "false",
        "Tiered storage for the topic (true is refused, as by a Kafka broker without "
        "tiered storage).",
        check=_no_tiered_storage,
        effect=_NO_TIERED,
    ),
    ConfigDef(
        "local.retention.ms", ("log.local.retention.ms",), ConfigType.LONG, "-2",
        "Local retention of a tiered topic (-2: retention.ms).",
        minimum=-2,
        effect=_NO_TIERED,
    ),
    ConfigDef(
        "local.retention.bytes", ("log.local.retention.bytes",), ConfigType.LONG, "-2",
        "Local retention of a tiered topic (-2: retention.bytes).",
        minimum=-2,
        effect=_NO_TIERED,
    ),
    ConfigDef(
        "remote.log.copy.disable", (), ConfigType.BOOLEAN, "false",
        "Stop copying a tiered topic's segments to remote storage.",
        effect=_NO_TIERED,
    ),
    ConfigDef(
        "remote.log.delete.on.disable", (), ConfigType.BOOLEAN, "false",
        "Delete the remote data when tiered storage is turned off.",
        effect=_NO_TIERED,
    ),
    # Confluent Server's broker-side schema validation (docs/schema-registry.md).
    ConfigDef(
        "errors.deadletterqueue.group.enable", (), ConfigType.BOOLEAN, "false",
        "Let share groups write their dead-letter records (KIP-1191) to this topic; a "
        "share group naming a topic without it has its dead letters archived unwritten.",
    ),
    ConfigDef(
        "confluent.key.schema.validation", (), ConfigType.BOOLEAN, "false",
        "Refuse a produce whose record keys do not carry a schema id registered under "
        "the subject <topic>-key.",
    ),
    ConfigDef(
        "confluent.value.schema.validation", (), ConfigType.BOOLEAN, "false",
        "Refuse a produce whose record values do not carry a schema id registered under "
        "the subject <topic>-value.",
    ),
)
