"""Per-topic configs: Kafka's names, types, defaults, valid values and value syntax.

A topic's *overrides* are a ``{name: value}`` mapping of strings, spelled as Kafka spells
them (``"compact,delete"``, ``"-1"`` for an unlimited retention, milliseconds and bytes as
integers, ratios as decimals, booleans ``true``/``false``). :data:`TOPIC_CONFIGS` lists
every topic config of Kafka 4.x (``config/table.py``; each says whether brokerd
applies it or why it has no effect on one node); :func:`validate` checks one entry and
returns its normal form, :func:`validate_overrides` checks a whole set (including the
checks that span two names), and :func:`to_log_config` applies a set of overrides to
the broker-wide defaults (a :class:`~brokerd.storage.log.partition_log.LogConfig` built from the
command line). :func:`broker_values` goes the other way: the broker-wide defaults as
config strings, for DescribeConfigs. Errors are :class:`InvalidConfig` with Kafka's
message wording, naming the key.

What it does not do: store anything (``logdir/log_directory.py`` keeps the overrides in the topic
registry), apply a config to an open log (``PartitionLog.reconfigure``) or know the
Kafka wire format. Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from brokerd.errors import InvalidConfig
from brokerd.storage.config.definition import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    ConfigDef,
    ConfigType,
    Parsed,
)
from brokerd.storage.config.log_config import CLEANUP_POLICIES, LogConfig
from brokerd.storage.config.table import DEFS, MIN_SEGMENT_BYTES

__all__ = [
    "BROKER_NAMES",
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "MIN_SEGMENT_BYTES",
    "TOPIC_CONFIGS",
    "TOPIC_WORDS",
    "AlterOp",
    "AlterWords",
    "ConfigDef",
    "ConfigType",
    "apply_incremental",
    "broker_values",
    "kafka_default",
    "list_altered",
    "to_log_config",
    "validate",
    "validate_overrides",
]

log = logging.getLogger("brokerd.storage")

#: Every topic config, by Kafka name, in Kafka's order.
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in DEFS}
#: Topic config name by broker-level synonym (every synonym, not only the first).
BROKER_NAMES: Mapping[str, str] = {b: d.name for d in DEFS for b in d.synonyms}


def kafka_default(name: str) -> str:
    """Kafka's own default of topic config ``name``."""
    return TOPIC_CONFIGS[name].default


def validate(name: str, value: str | None) -> str:
    """Check one override; its normal form. Raises :class:`InvalidConfig` naming
    ``name`` for an unknown name, a null or a bad value."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfig(f"Null value not supported for topic configs: {name}")
    return definition.normal(value)


def validate_overrides(overrides: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """Check a whole set of overrides (a name given twice is an error) and the rules
    that span two names; the normal forms by name."""
    out: dict[str, str] = {}
    for name, value in overrides:
        if name in out:
            raise InvalidConfig(f"Duplicate topic config name: {name}")
        out[name] = validate(name, value)
    _check_compaction_lags(out)
    if "message.format.version" in out:
        # Kafka 3.x's warning for the same setting.
        log.warning(
            "Topic configuration message.format.version with value %s is ignored: the "
            "inter-broker protocol is 3.0 or later and every batch is RecordBatch v2 "
            "(the configuration is deprecated and Kafka 4.0 removed it)",
            out["message.format.version"],
        )
    return out


def _check_compaction_lags(overrides: Mapping[str, str]) -> None:
    low = int(overrides.get("min.compaction.lag.ms", "0"))
    high = int(overrides.get("max.compaction.lag.ms", str(LONG_MAX)))
    if low > high:
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


# -- the mapping to and from LogConfig ---------------------------------------------


def _never(value: Parsed) -> int | None:
    assert isinstance(value, int)
    return None if value == LONG_MAX else value


def _unlimited(value: Parsed) -> int | None:
    # Kafka: any negative retention means "no limit".
    assert isinstance(value, int)
    return None if value < 0 else value


def _same(value: Parsed) -> object:
    return value


def _policy(value: Parsed) -> object:
    return frozenset(value) if isinstance(value, tuple) else value


def _limit_text(value: object) -> str:
    return "-1" if value is None else str(value)


def _never_text(value: object) -> str:
    return str(LONG_MAX) if value is None else str(value)


def _policy_text(value: object) -> str:
    assert isinstance(value, frozenset)
    return ",".join(sorted(value & CLEANUP_POLICIES))


def _bool_text(value: object) -> str:
    return "true" if value else "false"


def _ratio_text(value: object) -> str:
    assert isinstance(value, int | float)
    return repr(float(value))


#: The configs brokerd applies: topic config -> (LogConfig field, from parsed, to text).
#: A config not here has no LogConfig field (no effect on one node, or applied
#: elsewhere); its broker-wide default is Kafka's.
_FIELDS: Mapping[str, tuple[str, Callable[[Parsed], object], Callable[[object], str]]] = {
    "segment.bytes": ("segment_bytes", _same, str),
    "segment.ms": ("segment_ms", _never, _never_text),
    "segment.jitter.ms": ("segment_jitter_ms", _same, str),
    "segment.index.bytes": ("segment_index_bytes", _same, str),
    "flush.messages": ("flush_messages", _same, _never_text),
    "flush.ms": ("flush_ms", _same, _never_text),
    "retention.bytes": ("retention_bytes", _unlimited, _limit_text),
    "retention.ms": ("retention_ms", _unlimited, _limit_text),
    "max.message.bytes": ("max_message_bytes", _same, str),
    "index.interval.bytes": ("index_interval_bytes", _same, str),
    "delete.retention.ms": ("delete_retention_ms", _same, str),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _same, str),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _never, _never_text),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _same, _ratio_text),
    "cleanup.policy": ("cleanup_policy", _policy, _policy_text),
    "compression.type": ("compression_type", _same, str),
    "compression.gzip.level": ("compression_gzip_level", _same, str),
    "compression.lz4.level": ("compression_lz4_level", _same, str),
    "compression.zstd.level": ("compression_zstd_level", _same, str),
    "message.timestamp.type": ("message_timestamp_type", _same, str),
    "message.timestamp.before.max.ms": (
        "message_timestamp_before_max_ms", _never, _never_text
    ),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _never, _never_text),
    "confluent.key.schema.validation": ("key_schema_validation", _same, _bool_text),
    "confluent.value.schema.validation": ("value_schema_validation", _same, _bool_text),
}


def to_log_config(defaults: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """``defaults`` (the broker-wide config) with a topic's overrides applied.

    Raises :class:`InvalidConfig` for an override :func:`validate` refuses, and for a
    combination :class:`LogConfig` itself refuses (e.g. a segment larger than brokerd's
    index allows). Configs without effect on brokerd are checked and left out.
    """
    fields: dict[str, Any] = {}
    for name, value in overrides.items():
        validate(name, value)
        mapping = _FIELDS.get(name)
        if mapping is not None:
            field, convert, _text = mapping
            fields[field] = convert(TOPIC_CONFIGS[name].parse(value))
    try:
        return attrs.evolve(defaults, **fields)
    except ValueError as exc:
        raise InvalidConfig(f"Invalid topic config: {exc}") from exc


def broker_values(config: LogConfig) -> dict[str, str]:
    """The broker-wide defaults in ``config`` as topic config strings, by topic name
    (every topic config; Kafka's default for those ``config`` does not hold)."""
    out = {}
    for name, definition in TOPIC_CONFIGS.items():
        mapping = _FIELDS.get(name)
        if mapping is None:
            out[name] = definition.default
        else:
            field, _convert, text = mapping
            out[name] = text(getattr(config, field))
    return out


# -- IncrementalAlterConfigs ---------------------------------------------------------


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs operations, with Kafka's numbers."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen
class AlterWords:
    """How IncrementalAlterConfigs refuses a config of one kind of resource, in Kafka's
    words: the exception, and the texts for an unknown name and for a null value (``{}``
    stands for the name)."""

    error: Callable[[str], Exception]
    unknown: str
    null: str


TOPIC_WORDS = AlterWords(
    InvalidConfig, "Unknown topic config name: {}", "Null value not supported for topic configs: {}"
)


def apply_incremental(
    current: Mapping[str, str],
    defaults: Mapping[str, str],
    ops: Iterable[tuple[str, AlterOp, str | None]],
    *,
    table: Mapping[str, ConfigDef] = TOPIC_CONFIGS,
    check: Callable[[str, str], str] | None = validate,
    words: AlterWords = TOPIC_WORDS,
) -> dict[str, str]:
    """The overrides after applying ``ops`` to ``current`` (Kafka's semantics).

    SET replaces a value; DELETE drops the override (back to the broker default);
    APPEND and SUBTRACT, for list configs only, add the missing items of a
    comma-separated value to the current list (the override, else the broker default
    in ``defaults``, else the config's default) or remove them from it. The configs are
    the topic configs unless ``table`` names others (client metrics), each value set
    passes ``check`` (its normal form; None keeps it as given, for configs checked
    together afterwards), and a refusal is ``words.error`` naming the key
    (:class:`InvalidConfig` for topics).
    """
    out = dict(current)
    for name, op, value in ops:
        definition = table.get(name)
        if definition is None:
            raise words.error(words.unknown.format(name))
        if op is AlterOp.DELETE:
            out.pop(name, None)
            continue
        if value is None:
            raise words.error(words.null.format(name))
        if op is AlterOp.SET:
            new = value
        elif definition.type is ConfigType.LIST:
            new = list_altered(out.get(name, defaults.get(name, definition.default)), op, value)
        else:
            verb = "append" if op is AlterOp.APPEND else "subtract"
            raise words.error(f"Config value {verb} is not allowed for config key: {name}")
        out[name] = new if check is None else check(name, new)
    return out


def list_altered(base: str, op: AlterOp, value: str) -> str:
    """A list config's comma-separated ``base`` with the items of ``value`` added where
    missing (APPEND) or removed (SUBTRACT): IncrementalAlterConfigs' list operations, for
    topic and client-metrics configs alike."""
    items = [v.strip() for v in base.split(",") if v.strip()]
    given = [v.strip() for v in value.split(",") if v.strip()]
    if op is AlterOp.APPEND:
        items += [v for v in given if v not in items]
    else:
        items = [v for v in items if v not in given]
    return ",".join(items)
