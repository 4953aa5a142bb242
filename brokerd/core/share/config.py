# -*- test-case-name: tests.core.share.test_partition -*-
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
from collections.abc import Mapping

import attrs

__all__ = [
    "BROKER_LEVEL",
    "DEFAULTS",
    "AutoOffsetReset",
    "InvalidShareConfig",
    "IsolationLevel",
    "ShareConfig",
    "broker_defaults",
    "broker_name",
    "parse_group_configs",
    "validate",
]

LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SESSION_TIMEOUT = "share.session.timeout.ms"

#: Kafka's defaults of the broker-wide configs (``group.share.*``) each group config
#: falls back to.
DEFAULTS: Mapping[str, str] = {
    AUTO_OFFSET_RESET: "latest",
    DELIVERY_COUNT_LIMIT: "5",
    HEARTBEAT_INTERVAL: "5000",
    ISOLATION_LEVEL: "read_committed",
    LOCK_DURATION: "30000",
    SESSION_TIMEOUT: "45000",
}

#: The group configs that have a broker config of their own (``group.`` + name) in Kafka;
#: ``share.auto.offset.reset`` and ``share.isolation.level`` are per group only.
BROKER_LEVEL = frozenset({LOCK_DURATION, DELIVERY_COUNT_LIMIT, HEARTBEAT_INTERVAL, SESSION_TIMEOUT})

#: Kafka's bounds (``group.share.min/max.*``) of the integer configs.
_BOUNDS: Mapping[str, tuple[int, int]] = {
    LOCK_DURATION: (1000, 3_600_000),
    DELIVERY_COUNT_LIMIT: (2, 10),
    HEARTBEAT_INTERVAL: (1000, 15000),
    SESSION_TIMEOUT: (1000, 60000),
}


class AutoOffsetReset(enum.Enum):
    LATEST = "latest"
    EARLIEST = "earliest"


class IsolationLevel(enum.Enum):
    READ_COMMITTED = "read_committed"
    READ_UNCOMMITTED = "read_uncommitted"


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
    isolation_level: IsolationLevel = IsolationLevel.READ_COMMITTED
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000


def validate(name: str, value: str) -> None:
    """Check one config value. :raises InvalidShareConfig: unknown name or bad value."""
    if name not in DEFAULTS:
        raise InvalidShareConfig(f"Unknown group config name: {name}")
    if name == AUTO_OFFSET_RESET:
        if value not in {m.value for m in AutoOffsetReset}:
            raise InvalidShareConfig(
                f"Invalid value {value} for configuration {name}: "
                "String must be one of: latest, earliest"
            )
        return
    if name == ISOLATION_LEVEL:
        if value not in {m.value for m in IsolationLevel}:
            raise InvalidShareConfig(
                f"Invalid value {value} for configuration {name}: "
                "String must be one of: read_committed, read_uncommitted"
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
    return ShareConfig(
        lock_duration_ms=int(merged[LOCK_DURATION]),
        delivery_count_limit=int(merged[DELIVERY_COUNT_LIMIT]),
        auto_offset_reset=AutoOffsetReset(merged[AUTO_OFFSET_RESET]),
        isolation_level=IsolationLevel(merged[ISOLATION_LEVEL]),
        heartbeat_interval_ms=int(merged[HEARTBEAT_INTERVAL]),
        session_timeout_ms=int(merged[SESSION_TIMEOUT]),
    )
