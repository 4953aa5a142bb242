"""LogConfig: one partition's storage settings, Kafka's topic configs in snake case.

What it does: holds and validates the values (bounds, allowed names); topic_config.py maps
Kafka's config names and strings onto it. What it does not do: read or write files.
"""

from __future__ import annotations

from typing import cast

import attrs

from brokerd.storage.record.compression import CODECS_BY_NAME, Compression

INT32_MAX = 2**31 - 1
DEFAULT_SEGMENT_BYTES = 1024**3
DEFAULT_INDEX_INTERVAL = 4096
#: Kafka's ``segment.ms`` default (7 days): without it a quiet partition's active segment
#: would never roll, and retention could not tell its old records from new ones.
DEFAULT_SEGMENT_MS = 7 * 24 * 3600 * 1000
#: Bytes of one offset index entry and one time index entry, as Kafka counts them for
#: ``segment.index.bytes``.
OFFSET_ENTRY_BYTES = 8
TIME_ENTRY_BYTES = 12
#: The values ``cleanup.policy`` may combine.
CLEANUP_POLICIES = frozenset({"delete", "compact"})
#: Kafka's ``max.message.bytes`` default: 1 MiB plus a batch's 12-byte log overhead.
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12
#: The values of ``message.timestamp.type``.
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
#: Kafka's ``segment.index.bytes`` default: 10 MiB.
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
#: The values of ``compression.type``.
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be positive, got {value}")


def _optional_nonneg(
    _inst: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must be None or >= 0, got {value}")


def _nonneg(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _ratio_ok(_inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be in 0..1, got {value}")


def _cleanup_policy_ok(
    _inst: object, attribute: attrs.Attribute[frozenset[str]], value: frozenset[str]
) -> None:
    if not value or not value <= CLEANUP_POLICIES:
        raise ValueError(f"cleanup_policy must be a non-empty subset of {sorted(CLEANUP_POLICIES)}")


def _segment_index_bytes_ok(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 4:
        raise ValueError(f"segment_index_bytes must be at least 4, got {value}")


def _segment_bytes_ok(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    # File positions in the index are int32.
    if not 1 <= value <= INT32_MAX:
        raise ValueError(f"segment_bytes must be in 1..{INT32_MAX}, got {value}")


@attrs.frozen
class LogConfig:
    """Per-partition storage settings (Kafka's names in snake case).

    ``segment_ms`` rolls a non-empty active segment older than that (Kafka's 7 days by
    default; None: never by age): its age counts from its first append (by the injected
    clock), or after a restart from its first batch's timestamp, as Kafka does.
    ``retention_bytes`` bounds the partition's total size and ``retention_ms`` the age of
    each segment's newest record timestamp (file mtime if it has none); both delete whole
    segments, the active one included once all its records are expired. None means no
    limit.
    """

    segment_bytes: int = attrs.field(default=DEFAULT_SEGMENT_BYTES, validator=_segment_bytes_ok)
    # The cast: attrs' mypy plugin would type the field by its int default.
    segment_ms: int | None = attrs.field(
        default=cast("int | None", DEFAULT_SEGMENT_MS), validator=_optional_nonneg
    )
    #: ``index.interval.bytes``; 0 indexes every batch.
    index_interval_bytes: int = attrs.field(default=DEFAULT_INDEX_INTERVAL, validator=_nonneg)
    retention_bytes: int | None = attrs.field(default=None, validator=_optional_nonneg)
    retention_ms: int | None = attrs.field(default=None, validator=_optional_nonneg)
    #: ``cleanup.policy``: "delete" (retention deletes old segments), "compact" (the
    #: cleaner keeps the latest record per key), or both.
    cleanup_policy: frozenset[str] = attrs.field(
        default=frozenset({"delete"}), converter=frozenset, validator=_cleanup_policy_ok
    )
    #: Compaction settings (Kafka's ``min.cleanable.dirty.ratio``,
    #: ``min.compaction.lag.ms``, ``max.compaction.lag.ms``, ``delete.retention.ms``).
    min_cleanable_dirty_ratio: float = attrs.field(default=0.5, validator=_ratio_ok)
    min_compaction_lag_ms: int = attrs.field(default=0, validator=_nonneg)
    max_compaction_lag_ms: int | None = attrs.field(default=None, validator=_optional_nonneg)
    delete_retention_ms: int = attrs.field(default=86_400_000, validator=_nonneg)
    #: ``max.message.bytes``: the largest batch (its stored size, header included) a
    #: producer may append to this topic; Kafka's default.
    max_message_bytes: int = attrs.field(default=DEFAULT_MAX_MESSAGE_BYTES, validator=_nonneg)
    #: ``message.timestamp.type``: "CreateTime" (the producer's) or "LogAppendTime"
    #: (the broker stamps each batch when it appends it).
    message_timestamp_type: str = attrs.field(
        default="CreateTime", validator=attrs.validators.in_(TIMESTAMP_TYPES)
    )
    #: ``message.timestamp.before.max.ms`` / ``after.max.ms``: how far a CreateTime
    #: record's timestamp may lie behind / ahead of the broker's clock (None: any).
    message_timestamp_before_max_ms: int | None = attrs.field(
        default=None, validator=_optional_nonneg
    )
    message_timestamp_after_max_ms: int | None = attrs.field(
        default=None, validator=_optional_nonneg
    )
    #: ``segment.jitter.ms``: each segment rolls by age a random amount below
    #: ``min(segment_jitter_ms, segment_ms)`` early.
    segment_jitter_ms: int = attrs.field(default=0, validator=_nonneg)
    #: ``segment.index.bytes``: a segment rolls once its offset index (8 bytes an entry)
    #: or time index (12 bytes an entry) would outgrow this.
    segment_index_bytes: int = attrs.field(
        default=DEFAULT_SEGMENT_INDEX_BYTES, validator=_segment_index_bytes_ok
    )
    #: ``flush.messages`` / ``flush.ms`` overrides; None: the broker's ``--fsync``
    #: decides (the broker core applies them, ``brokerd.core.policy.flush_rule``).
    flush_messages: int | None = attrs.field(default=None, validator=_optional_nonneg)
    flush_ms: int | None = attrs.field(default=None, validator=_optional_nonneg)
    #: ``compression.type``: "producer" stores batches as they come; a codec name
    #: recompresses them with it (``storage/log/recompress.py``), at the level below for its codec.
    compression_type: str = attrs.field(
        default="producer", validator=attrs.validators.in_(COMPRESSION_TYPES)
    )
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    #: ``confluent.key.schema.validation`` / ``confluent.value.schema.validation``:
    #: every record's key (value) must carry a schema id of the topic's subject (the
    #: broker core asks the schema registry, ``brokerd.registry.validation``).
    key_schema_validation: bool = False
    value_schema_validation: bool = False

    @property
    def compression(self) -> tuple[Compression, int | None] | None:
        """The codec and level batches are stored with (``compression.type``), or None
        to keep the producer's."""
        codec = CODECS_BY_NAME.get(self.compression_type)
        if codec is None:
            return None
        level = {
            Compression.GZIP: self.compression_gzip_level,
            Compression.LZ4: self.compression_lz4_level,
            Compression.ZSTD: self.compression_zstd_level,
        }.get(codec)
        return codec, level

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy
