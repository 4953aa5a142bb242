"""Group configs: the GROUP config resource (DescribeConfigs / IncrementalAlterConfigs
resource type 32), Kafka's per-group overrides of the group coordinator's broker configs.

:data:`GROUP_CONFIG_TABLE` lists every group config brokerd knows, each with its
type, the broker setting that is its default, and the broker bounds a value must stay
within (Kafka's ``group.consumer.min/max.*`` configs); other group types add their rows
to it. A group's overrides are validated as Kafka's ``GroupConfig`` validates them (an
integer within its bounds, the heartbeat interval below the session timeout), kept in
memory and made durable in the offsets journal before an alteration is answered; they
outlive the group (as in Kafka, they may be set before the group exists).

What this module does not do: wire encoding (the config handlers'), ACLs, or act on a
value (the consumer coordinator reads :meth:`GroupConfigs.consumer_settings`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence

import attrs
from twisted.internet import defer
from twisted.internet.defer import Deferred

from brokerd.kafka.groups.consumer.coordinator import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    GroupSettings,
)
from brokerd.kafka.groups.streams.coordinator import StreamsSettings

#: Kafka's group-level names (``GroupConfig``); each defaults to its broker config,
#: ``group.`` and the same name (:attr:`GroupConfigDef.broker_name`).
SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
STREAMS_SESSION_TIMEOUT = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBYS = "streams.num.standby.replicas"


class GroupConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs' operations (APPEND and SUBTRACT are for lists, which no
    group config is)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen
class GroupConfigDef:
    """One group config: its Kafka default, the broker bounds (Kafka's names for them)
    and what it does."""

    name: str
    kafka_default: int
    minimum: int
    maximum: int
    min_name: str
    max_name: str
    doc: str

    @property
    def broker_name(self) -> str:
        """The broker config whose value is the group's default."""
        return f"group.{self.name}"


#: Every group config brokerd answers, by name (Kafka's bounds: the min/max broker configs'
#: defaults). Share- and streams-group configs are further rows of the same table.
GROUP_CONFIG_TABLE: dict[str, GroupConfigDef] = {
    SESSION_TIMEOUT: GroupConfigDef(
        SESSION_TIMEOUT, DEFAULT_SESSION_TIMEOUT_MS, 45_000, 60_000,
        "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    HEARTBEAT_INTERVAL: GroupConfigDef(
        HEARTBEAT_INTERVAL, DEFAULT_HEARTBEAT_INTERVAL_MS, 5_000, 15_000,
        "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a consumer group.",
    ),
    STREAMS_SESSION_TIMEOUT: GroupConfigDef(
        STREAMS_SESSION_TIMEOUT, 45_000, 45_000, 60_000,
        "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms",
        "The timeout to detect client failures when using the streams group protocol.",
    ),
    STREAMS_HEARTBEAT_INTERVAL: GroupConfigDef(
        STREAMS_HEARTBEAT_INTERVAL, 5_000, 5_000, 15_000,
        "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a streams group.",
    ),
    STREAMS_NUM_STANDBYS: GroupConfigDef(
        STREAMS_NUM_STANDBYS, 0, 0, 2,
        "group.streams.min.standby.replicas", "group.streams.max.standby.replicas",
        "The number of standby replicas for each task of a streams group.",
    ),
}

#: Each group type's (session timeout, heartbeat interval) pair: the interval must stay
#: below the timeout.
_TIMING_PAIRS = ((SESSION_TIMEOUT, HEARTBEAT_INTERVAL),
                 (STREAMS_SESSION_TIMEOUT, STREAMS_HEARTBEAT_INTERVAL))


class InvalidGroupConfig(ValueError):
    """A group config alteration Kafka would refuse (INVALID_CONFIG)."""


@attrs.frozen
class DescribedGroupConfig:
    name: str
    value: str
    #: True when the group overrides it (Kafka's GROUP_CONFIG source).
    overridden: bool
    #: The broker's value (its default for the group).
    broker_value: str
    kafka_default: str
    doc: str


def _op_name(op: int) -> str:
    try:
        return GroupConfigOp(op).name
    except ValueError:
        return str(op)


class GroupConfigs:
    """Every group's config overrides.

    :param broker_values: the broker's value of each config (its command line); a
        broker value outside Kafka's bounds widens them, so a broker run with a short
        heartbeat interval accepts groups set as short.
    :param stored: the overrides read back from the journal.
    :param write: ``write(group_id, configs) -> Deferred[int]`` makes a group's whole
        set of overrides durable (0, or an error code).
    """

    def __init__(
        self,
        *,
        broker_values: Mapping[str, int],
        stored: Mapping[str, Mapping[str, str]],
        write: Callable[[str, dict[str, str]], Deferred[int]],
    ) -> None:
        self._broker = {
            name: broker_values.get(name, d.kafka_default) for name, d in GROUP_CONFIG_TABLE.items()
        }
        self._overrides: dict[str, dict[str, str]] = {
            g: {n: v for n, v in c.items() if n in GROUP_CONFIG_TABLE} for g, c in stored.items()
        }
        self._write = write

    def configured(self) -> list[str]:
        """The groups that have an override (ListConfigResources lists them)."""
        return sorted(g for g, c in self._overrides.items() if c)

    def bounds(self, name: str) -> tuple[int, int]:
        d = GROUP_CONFIG_TABLE[name]
        broker = self._broker[name]
        return min(d.minimum, broker), max(d.maximum, broker)

    def value(self, group_id: str, name: str) -> int:
        override = self._overrides.get(group_id, {}).get(name)
        return self._broker[name] if override is None else int(override)

    def consumer_settings(self, group_id: str) -> GroupSettings:
        return GroupSettings(
            session_timeout_ms=self.value(group_id, SESSION_TIMEOUT),
            heartbeat_interval_ms=self.value(group_id, HEARTBEAT_INTERVAL),
        )

    def streams_settings(self, group_id: str) -> StreamsSettings:
        return StreamsSettings(
            session_timeout_ms=self.value(group_id, STREAMS_SESSION_TIMEOUT),
            heartbeat_interval_ms=self.value(group_id, STREAMS_HEARTBEAT_INTERVAL),
            num_standby_replicas=self.value(group_id, STREAMS_NUM_STANDBYS),
        )

    def describe(
        self, group_id: str, names: Sequence[str] | None = None
    ) -> list[DescribedGroupConfig]:
        """The group's configs (all, or those of ``names`` that exist), by name."""
        overrides = self._overrides.get(group_id, {})
        wanted = sorted(GROUP_CONFIG_TABLE) if names is None else [
            n for n in names if n in GROUP_CONFIG_TABLE
        ]
        return [
            DescribedGroupConfig(
                name,
                overrides.get(name, str(self._broker[name])),
                name in overrides,
                str(self._broker[name]),
                str(GROUP_CONFIG_TABLE[name].kafka_default),
                GROUP_CONFIG_TABLE[name].doc,
            )
            for name in wanted
        ]

    def alter(
        self,
        group_id: str,
        ops: Sequence[tuple[str, int, str | None]],
        *,
        validate_only: bool,
    ) -> Deferred[int]:
        """Apply ``(name, operation, value)`` alterations at once. Raises
        :class:`InvalidGroupConfig` (nothing changed) for an unknown name, a list
        operation, a value that is no integer or out of bounds, or a heartbeat interval
        not below the session timeout. Fires with 0 once durable (or an error code)."""
        current = dict(self._overrides.get(group_id, {}))
        for name, op, value in ops:
            if name not in GROUP_CONFIG_TABLE:
                raise InvalidGroupConfig(f"Unknown group config name: {name}")
            if op == GroupConfigOp.DELETE:
                current.pop(name, None)
                continue
            if op != GroupConfigOp.SET:
                raise InvalidGroupConfig(
                    f"Config {name} of type INT does not support operation {_op_name(op)}"
                )
            current[name] = str(self._checked(name, value))
        for session_name, heartbeat_name in _TIMING_PAIRS:
            session = int(current.get(session_name, self._broker[session_name]))
            heartbeat = int(current.get(heartbeat_name, self._broker[heartbeat_name]))
            if heartbeat >= session:
                raise InvalidGroupConfig(f"{heartbeat_name} must be less than {session_name}")
        if validate_only:
            return defer.succeed(0)
        d = self._write(group_id, current)

        def written(code: int) -> int:
            if code == 0:
                if current:
                    self._overrides[group_id] = current
                else:
                    self._overrides.pop(group_id, None)
            return code

        return d.addCallback(written)

    def _checked(self, name: str, value: str | None) -> int:
        try:
            number = int((value or "").strip())
        except ValueError:
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {name}: Not a number of type INT"
            ) from None
        low, high = self.bounds(name)
        d = GROUP_CONFIG_TABLE[name]
        if number < low:
            raise InvalidGroupConfig(f"{name} must be greater than or equal to {d.min_name} {low}")
        if number > high:
            raise InvalidGroupConfig(f"{name} must be less than or equal to {d.max_name} {high}")
        return number


__all__ = [
    "GROUP_CONFIG_TABLE",
    "HEARTBEAT_INTERVAL",
    "SESSION_TIMEOUT",
    "STREAMS_HEARTBEAT_INTERVAL",
    "STREAMS_NUM_STANDBYS",
    "STREAMS_SESSION_TIMEOUT",
    "DescribedGroupConfig",
    "GroupConfigDef",
    "GroupConfigOp",
    "GroupConfigs",
    "InvalidGroupConfig",
]
