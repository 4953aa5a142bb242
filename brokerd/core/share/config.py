# -*- test-case-name: tests.core.share.test_config -*-
"""A share group's settings: Kafka's group configs of share groups, parsed and checked.

Kafka sets these per group (ConfigResource type GROUP) with broker-wide defaults (its
``group.share.*`` broker configs, here command-line options: :func:`broker_defaults`);
the names, defaults and bounds are Kafka 4.2's. :func:`parse_group_configs` turns the
stored overrides (name -> text) over the broker's defaults into a :class:`ShareConfig`;
:func:`validate` checks one update and raises :class:`InvalidShareConfig` with Kafka's
kind of message. Pure.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

import attrs

from brokerd.storage.types import Isolation

__all__ = [
    "BROKER_LEVEL",
    "DEFAULTS",
    "DLQ_COPY_RECORD",
    "DLQ_TOPIC",
    "ISOLATION_CONFIG_VALUES",
    "AutoOffsetReset",
    "InvalidShareConfig",
    "ShareConfig",
    "broker_defaults",
    "broker_name",
    "is_group_config",
    "parse_group_configs",
    "parse_offset_reset",
    "validate",
]

LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SESSION_TIMEOUT = "share.session.timeout.ms"
MAX_RECORD_LOCKS = "share.partition.max.record.locks"
#: KIP-1191: the topic a share group's archived (rejected, or out of deliveries) records
#: are written to; blank means none.
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
#: KIP-1191: whether the dead-letter record carries the original key and value, or only
#: the context headers.
DLQ_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
#: Kafka's reserved prefix of internal topics, refused as a dead-letter topic.
_INTERNAL_PREFIX = "__"

#: Kafka's defaults of the broker-wide configs (``group.share.*``) each group config
#: falls back to.
DEFAULTS: Mapping[str, str] = {
    AUTO_OFFSET_RESET: "latest",
    DELIVERY_COUNT_LIMIT: "5",
    HEARTBEAT_INTERVAL: "5000",
    ISOLATION_LEVEL: "read_uncommitted",
    LOCK_DURATION: "30000",
    MAX_RECORD_LOCKS: "2000",
    SESSION_TIMEOUT: "45000",
    DLQ_TOPIC: "",
    DLQ_COPY_RECORD: "false",
}

#: The group configs that have a broker config of their own (``group.`` + name) in Kafka;
#: ``share.auto.offset.reset`` and ``share.isolation.level`` are per group only.
BROKER_LEVEL = frozenset(
    {LOCK_DURATION, DELIVERY_COUNT_LIMIT, HEARTBEAT_INTERVAL, SESSION_TIMEOUT, MAX_RECORD_LOCKS}
)

#: Kafka's bounds (``group.share.min/max.*``) of the integer configs.
_BOUNDS: Mapping[str, tuple[int, int]] = {
    LOCK_DURATION: (1000, 3_600_000),
    DELIVERY_COUNT_LIMIT: (2, 10),
    HEARTBEAT_INTERVAL: (1000, 15000),
    SESSION_TIMEOUT: (1000, 60000),
    MAX_RECORD_LOCKS: (100, 10000),
}


class AutoOffsetReset(enum.Enum):
    """Where a share-partition starts when the group first reads it: the log's end, its
    start, or the first record of the last duration (``by_duration:<ISO-8601>``)."""

    LATEST = "latest"
    EARLIEST = "earliest"
    BY_DURATION = "by_duration"


_BY_DURATION_PREFIX = AutoOffsetReset.BY_DURATION.value + ":"

# An ISO-8601 duration as Java's ``Duration.parse`` reads it: an optional sign, days,
# then after ``T`` hours, minutes and seconds with up to nine decimals, each part signed
# on its own; case-insensitive.
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)
_NANOS = {"D": 86_400 * 10**9, "H": 3_600 * 10**9, "M": 60 * 10**9, "S": 10**9}


def parse_offset_reset(text: str) -> tuple[AutoOffsetReset, int]:
    """``share.auto.offset.reset``'s value as (strategy, duration in ms; 0 but for
    by_duration). Names are lower case, as in Kafka.

    :raises ValueError: not ``latest``, ``earliest`` or ``by_duration:`` and a
        non-negative ISO-8601 duration.
    """
    if text in (AutoOffsetReset.LATEST.value, AutoOffsetReset.EARLIEST.value):
        return AutoOffsetReset(text), 0
    if not text.startswith(_BY_DURATION_PREFIX):
        raise ValueError(f"unknown strategy {text!r}")
    found = _ISO_DURATION.fullmatch(text[len(_BY_DURATION_PREFIX):])
    if found is None:
        raise ValueError("not an ISO-8601 duration")
    sign, days, t_part, hours, minutes, seconds, fraction = found.groups()
    if (days, t_part) == (None, None) or (t_part is not None and len(t_part) == 1):
        raise ValueError("an ISO-8601 duration needs at least one part")
    nanos = sum(
        int(value) * _NANOS[unit]
        for value, unit in ((days, "D"), (hours, "H"), (minutes, "M"), (seconds, "S"))
        if value is not None
    )
    if fraction:
        part = int(fraction.ljust(9, "0"))
        nanos += -part if seconds is not None and seconds.startswith("-") else part
    if sign == "-":
        nanos = -nanos
    if nanos < 0:
        raise ValueError("a negative duration")
    return AutoOffsetReset.BY_DURATION, nanos // 10**6


#: ``share.isolation.level``'s config strings and the read isolation each names.
ISOLATION_CONFIG_VALUES: Mapping[str, Isolation] = {
    "read_committed": Isolation.READ_COMMITTED,
    "read_uncommitted": Isolation.READ_UNCOMMITTED,
}


def is_group_config(name: str) -> bool:
    """Whether ``name`` is one of the share groups' configs (``share.*`` and KIP-1191's
    ``errors.deadletterqueue.*``), kept in the share-state journal."""
    return name.startswith("share.") or name in (DLQ_TOPIC, DLQ_COPY_RECORD)


class InvalidShareConfig(ValueError):
    """An update Kafka would refuse (INVALID_CONFIG); ``name``: the config at fault,
    when one is (:func:`broker_defaults` says which)."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


@attrs.frozen
class ShareConfig:
    lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    auto_offset_reset: AutoOffsetReset = AutoOffsetReset.LATEST
    #: How far back ``by_duration`` starts; 0 for the other strategies.
    reset_duration_ms: int = 0
    isolation_level: Isolation = Isolation.READ_UNCOMMITTED
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    #: Most records of a share-partition acquired at once.
    max_record_locks: int = 2000
    #: The dead-letter topic (KIP-1191), or "" for none.
    dlq_topic: str = ""
    #: Whether dead-letter records copy the original key and value.
    dlq_copy_record: bool = False


def validate(name: str, value: str) -> None:
    """Check one config value. :raises InvalidShareConfig: unknown name or bad value."""
    if name not in DEFAULTS:
        raise InvalidShareConfig(f"Unknown group config name: {name}")
    if name == AUTO_OFFSET_RESET:
        try:
            parse_offset_reset(value)
        except ValueError:
            raise InvalidShareConfig(
                f"Invalid value {value} for configuration {name}: The value must be either "
                "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
            ) from None
        return
    if name == ISOLATION_LEVEL:
        if value not in ISOLATION_CONFIG_VALUES:
            raise InvalidShareConfig(
                f"Invalid value {value} for configuration {name}: "
                "String must be one of: read_committed, read_uncommitted"
            )
        return
    if name == DLQ_TOPIC:
        if value.startswith(_INTERNAL_PREFIX):
            raise InvalidShareConfig(
                f"{name}: DLQ topic name must not start with '{_INTERNAL_PREFIX}'"
            )
        return
    if name == DLQ_COPY_RECORD:
        if value.strip().lower() not in ("true", "false"):
            raise InvalidShareConfig(
                f"Invalid value {value} for configuration {name}: "
                "Expected value to be either true or false"
            )
        return
    try:
        number = int(value)
    except ValueError:
        raise InvalidShareConfig(
            f"Invalid value {value} for configuration {name}: Not a number of type INT"
        ) from None
    low, high = _BOUNDS[name]
    if not low <= number <= high:
        raise InvalidShareConfig(
            f"Invalid value {value} for configuration {name}: "
            f"Value must be in the range [{low}, {high}]"
        )


def broker_name(name: str) -> str:
    """The broker config a group config defaults to (``group.`` and its name)."""
    return f"group.{name}"


def broker_defaults(values: Mapping[str, str]) -> dict[str, str]:
    """The broker's defaults: ``values`` (group config name -> text) over Kafka's.

    :raises InvalidShareConfig: a value out of Kafka's bounds, or a heartbeat interval
        not below the session timeout (Kafka refuses such a broker config at start).
    """
    for name, value in values.items():
        try:
            validate(name, value)
        except InvalidShareConfig as e:
            raise InvalidShareConfig(str(e), name) from None
    merged = {**DEFAULTS, **values}
    if int(merged[HEARTBEAT_INTERVAL]) >= int(merged[SESSION_TIMEOUT]):
        raise InvalidShareConfig(
            f"{broker_name(HEARTBEAT_INTERVAL)} must be less than "
            f"{broker_name(SESSION_TIMEOUT)}",
            SESSION_TIMEOUT,
        )
    return merged


def parse_group_configs(
    overrides: Mapping[str, str], defaults: Mapping[str, str] = DEFAULTS
) -> ShareConfig:
    """The effective settings: ``overrides`` (already validated) over ``defaults`` (the
    broker's: :func:`broker_defaults`)."""
    merged = {**defaults, **overrides}
    reset, duration_ms = parse_offset_reset(merged[AUTO_OFFSET_RESET])
    return ShareConfig(
        lock_duration_ms=int(merged[LOCK_DURATION]),
        delivery_count_limit=int(merged[DELIVERY_COUNT_LIMIT]),
        auto_offset_reset=reset,
        reset_duration_ms=duration_ms,
        isolation_level=ISOLATION_CONFIG_VALUES[merged[ISOLATION_LEVEL]],
        heartbeat_interval_ms=int(merged[HEARTBEAT_INTERVAL]),
        session_timeout_ms=int(merged[SESSION_TIMEOUT]),
        max_record_locks=int(merged[MAX_RECORD_LOCKS]),
        dlq_topic=merged[DLQ_TOPIC],
        dlq_copy_record=merged[DLQ_COPY_RECORD].strip().lower() == "true",
    )
