"""Per-topic configs: Kafka's names, types, defaults, valid values and value syntax.

A topic's *overrides* are a ``{name: value}`` mapping of strings, spelled as Kafka spells
them (``"compact,delete"``, ``"-1"`` for an unlimited retention, milliseconds and bytes as
integers, ratios as decimals). :data:`TOPIC_CONFIGS` lists every name brokerd knows;
:func:`validate` checks one entry and returns its normal form, :func:`validate_overrides`
checks a whole set (including the checks that span two names), and
:func:`to_log_config` applies a set of overrides to the broker-wide defaults (a
:class:`~brokerd.storage.log.LogConfig` built from the command line).
:func:`broker_values` goes the other way: the broker-wide defaults as config strings, for
DescribeConfigs. Errors are :class:`InvalidConfig` with Kafka's message wording, naming
the key.

What it does not do: store anything (``logdir.py`` keeps the overrides in the topic
registry), apply a config to an open log (``PartitionLog.reconfigure``) or know the
Kafka wire format. Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from brokerd.errors import InvalidConfig
from brokerd.storage.log import CLEANUP_POLICIES, LogConfig

__all__ = [
    "BROKER_NAMES",
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "AlterOp",
    "ConfigDef",
    "ConfigType",
    "apply_incremental",
    "broker_values",
    "kafka_default",
    "to_log_config",
    "validate",
    "validate_overrides",
]

#: Kafka's ``Long.MAX_VALUE``: what it spells "never" with for ``segment.ms`` and
#: ``max.compaction.lag.ms``.
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
#: Kafka 3.x's lower bound of ``segment.bytes`` (a v0 record's overhead).
MIN_SEGMENT_BYTES = 14


class ConfigType(enum.IntEnum):
    """Kafka's config types, with the numbers DescribeConfigs v3 uses for them."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


Parsed = int | float | str | tuple[str, ...]


@attrs.frozen
class ConfigDef:
    """One topic config: its Kafka name and broker-level synonym, type, Kafka's default,
    valid range or values, and a line of documentation (DescribeConfigs v3)."""

    name: str
    broker_name: str
    type: ConfigType
    default: str
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()

    def parse(self, value: str) -> Parsed:
        """``value`` checked and converted (raises :class:`InvalidConfig`)."""
        text = value.strip()
        if self.type is ConfigType.LIST:
            items = tuple(v.strip() for v in text.split(",")) if text else ()
            if not items or any(v not in self.choices for v in items):
                raise self._not_one_of(value)
            return items
        if self.type is ConfigType.STRING:
            if self.choices and text not in self.choices:
                raise self._not_one_of(value)
            return text
        number: int | float
        try:
            number = float(text) if self.type is ConfigType.DOUBLE else int(text, 10)
        except ValueError:
            raise _invalid(self.name, value, f"Not a number of type {self.type.name}") from None
        low, high = _BOUNDS.get(self.type, (None, None))
        if (low is not None and number < low) or (high is not None and number > high):
            raise _invalid(self.name, value, f"Not a number of type {self.type.name}")
        if self.type is ConfigType.DOUBLE and number != number:  # NaN
            raise _invalid(self.name, value, "Not a number of type DOUBLE")
        if self.minimum is not None and number < self.minimum:
            raise _invalid(self.name, value, f"Value must be at least {self.minimum}")
        if self.maximum is not None and number > self.maximum:
            raise _invalid(self.name, value, f"Value must be no more than {self.maximum}")
        return number

    def _not_one_of(self, value: str) -> InvalidConfig:
        return _invalid(self.name, value, "String must be one of: " + ", ".join(self.choices))

    def normal(self, value: str) -> str:
        """The stored spelling of a valid ``value`` (trimmed, lists without blanks)."""
        parsed = self.parse(value)
        if isinstance(parsed, tuple):
            return ",".join(parsed)
        return repr(parsed) if isinstance(parsed, float) else str(parsed)


_BOUNDS: dict[ConfigType, tuple[int | None, int | None]] = {
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def _invalid(name: str, value: str | None, why: str) -> InvalidConfig:
    # ConfigException's wording in Kafka.
    return InvalidConfig(f"Invalid value {value} for configuration {name}: {why}")


_DEFS = (
    ConfigDef(
        "cleanup.policy", "log.cleanup.policy", ConfigType.LIST, "delete",
        "delete: old segments are removed by retention.ms/retention.bytes; compact: the "
        "cleaner keeps the latest record of each key; or both.",
        choices=("compact", "delete"),
    ),
    ConfigDef(
        "retention.ms", "log.retention.ms", ConfigType.LONG, "604800000",
        "Delete a segment once its newest record is older than this (-1: no time limit). "
        "Applies when cleanup.policy includes delete.",
        minimum=-1,
    ),
    ConfigDef(
        "retention.bytes", "log.retention.bytes", ConfigType.LONG, "-1",
        "Delete the oldest segments while a partition is larger than this (-1: no size "
        "limit). Applies when cleanup.policy includes delete.",
    ),
    ConfigDef(
        "segment.bytes", "log.segment.bytes", ConfigType.INT, "1073741824",
        "Roll the active segment at this size.",
        minimum=MIN_SEGMENT_BYTES,
    ),
    ConfigDef(
        "segment.ms", "log.roll.ms", ConfigType.LONG, "604800000",
        "Roll a non-empty active segment this old, so that retention and compaction can "
        "act on it.",
        minimum=1,
    ),
    ConfigDef(
        "max.message.bytes", "message.max.bytes", ConfigType.INT, "1048588",
        "Largest record batch (after compression, with its 12-byte log header) a "
        "producer may append.",
        minimum=0,
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE,
        "0.5",
        "Compact a log once this share of it has not been compacted yet.",
        minimum=0, maximum=1,
    ),
    ConfigDef(
        "min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", ConfigType.LONG, "0",
        "A record stays uncompacted for at least this long.",
        minimum=0,
    ),
    ConfigDef(
        "max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", ConfigType.LONG,
        str(LONG_MAX),
        "A record becomes eligible for compaction after at most this long.",
        minimum=1,
    ),
    ConfigDef(
        "delete.retention.ms", "log.cleaner.delete.retention.ms", ConfigType.LONG,
        "86400000",
        "How long a compacted topic keeps tombstones (null values).",
        minimum=0,
    ),
    ConfigDef(
        "message.timestamp.type", "log.message.timestamp.type", ConfigType.STRING,
        "CreateTime",
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with "
        "the broker's time when it is appended.",
        choices=("CreateTime", "LogAppendTime"),
    ),
)

#: Every topic config brokerd knows, by Kafka name, in a stable order.
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in _DEFS}
#: Topic config name by broker-level synonym.
BROKER_NAMES: Mapping[str, str] = {d.broker_name: d.name for d in _DEFS}


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


def _never(value: int) -> int | None:
    return None if value == LONG_MAX else value


def _unlimited(value: int) -> int | None:
    # Kafka: any negative retention means "no limit".
    return None if value < 0 else value


def _field(name: str, value: Parsed) -> tuple[str, object]:
    """The LogConfig field and value a parsed config becomes."""
    if isinstance(value, tuple):  # cleanup.policy, the only list
        return "cleanup_policy", frozenset(value)
    if isinstance(value, str):  # message.timestamp.type, the only string
        return "message_timestamp_type", value
    if isinstance(value, float):  # min.cleanable.dirty.ratio, the only double
        return "min_cleanable_dirty_ratio", value
    field = name.replace(".", "_")
    if name in ("retention.ms", "retention.bytes"):
        return field, _unlimited(value)
    if name in ("segment.ms", "max.compaction.lag.ms"):
        return field, _never(value)
    return field, value


def to_log_config(defaults: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """``defaults`` (the broker-wide config) with a topic's overrides applied.

    Raises :class:`InvalidConfig` for an override :func:`validate` refuses, and for a
    combination :class:`LogConfig` itself refuses (e.g. a segment larger than brokerd's
    index allows).
    """
    fields: dict[str, Any] = {}
    for name, value in overrides.items():
        validate(name, value)
        field, converted = _field(name, TOPIC_CONFIGS[name].parse(value))
        fields[field] = converted
    try:
        return attrs.evolve(defaults, **fields)
    except ValueError as exc:
        raise InvalidConfig(f"Invalid topic config: {exc}") from exc


def broker_values(config: LogConfig) -> dict[str, str]:
    """The broker-wide defaults in ``config`` as topic config strings, by topic name."""

    def limit(value: int | None) -> str:
        return "-1" if value is None else str(value)

    def never(value: int | None) -> str:
        return str(LONG_MAX) if value is None else str(value)

    return {
        "cleanup.policy": ",".join(sorted(config.cleanup_policy & CLEANUP_POLICIES)),
        "retention.ms": limit(config.retention_ms),
        "retention.bytes": limit(config.retention_bytes),
        "segment.bytes": str(config.segment_bytes),
        "segment.ms": never(config.segment_ms),
        "max.message.bytes": str(config.max_message_bytes),
        "min.cleanable.dirty.ratio": repr(float(config.min_cleanable_dirty_ratio)),
        "min.compaction.lag.ms": str(config.min_compaction_lag_ms),
        "max.compaction.lag.ms": never(config.max_compaction_lag_ms),
        "delete.retention.ms": str(config.delete_retention_ms),
        "message.timestamp.type": config.message_timestamp_type,
    }


# -- IncrementalAlterConfigs ---------------------------------------------------------


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs operations, with Kafka's numbers."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_incremental(
    current: Mapping[str, str],
    defaults: Mapping[str, str],
    ops: Iterable[tuple[str, AlterOp, str | None]],
) -> dict[str, str]:
    """The overrides after applying ``ops`` to ``current`` (Kafka's semantics).

    SET replaces a value; DELETE drops the override (back to the broker default);
    APPEND and SUBTRACT, for list configs only, add the missing items of a
    comma-separated value to the current list (the override, else the broker default
    in ``defaults``) or remove them from it. Raises :class:`InvalidConfig` naming the key.
    """
    out = dict(current)
    for name, op, value in ops:
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if op is AlterOp.DELETE:
            out.pop(name, None)
            continue
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic configs: {name}")
        if op is AlterOp.SET:
            out[name] = validate(name, value)
            continue
        if definition.type is not ConfigType.LIST:
            verb = "append" if op is AlterOp.APPEND else "subtract"
            raise InvalidConfig(f"Config value {verb} is not allowed for config key: {name}")
        base = out.get(name, defaults.get(name, definition.default))
        items = [v.strip() for v in base.split(",") if v.strip()]
        given = [v.strip() for v in value.split(",") if v.strip()]
        if op is AlterOp.APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        out[name] = validate(name, ",".join(items))
    return out
