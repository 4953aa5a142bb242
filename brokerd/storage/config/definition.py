"""One Kafka config's definition: its type, default, bounds and extra check, and how a
value string is checked and brought to normal form (Kafka's ``ConfigDef`` rules).

Kafka parses every value by its type first (``Not a number of type LONG``, ``Expected
value to be either true or false``), then applies the config's validator (``Value must
be at least 1``, ``String must be one of: ...``); the messages here use Kafka's wording,
naming the key and the value, so an operator who knows Kafka's errors knows these.
Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

from brokerd.errors import InvalidConfig

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "ConfigDef",
    "ConfigType",
    "Parsed",
    "invalid",
]

#: Kafka's ``Long.MAX_VALUE``: what it spells "never" with (``segment.ms``, ``flush.ms``).
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)


class ConfigType(enum.IntEnum):
    """Kafka's config types, with the numbers DescribeConfigs v3 uses for them."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


Parsed = bool | int | float | str | tuple[str, ...]

#: An extra check of a parsed value: None when valid, else the reason (Kafka's text).
Check = Callable[[Parsed], str | None]


def invalid(name: str, value: str | None, why: str) -> InvalidConfig:
    """Kafka's ``ConfigException`` wording."""
    return InvalidConfig(f"Invalid value {value} for configuration {name}: {why}")


_BOUNDS: dict[ConfigType, tuple[int, int]] = {
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


@attrs.frozen
class ConfigDef:
    """One config of a resource type: a topic's or a client-metrics subscription's.

    ``synonyms`` are the broker-level configs that set its default, most specific first
    (Kafka's ``ServerTopicConfigSynonyms``; empty when Kafka has none). ``effect`` says
    what it does on brokerd: empty when brokerd applies it as Kafka does, else why it
    has no effect on a single node (docs/kafka.md, "Topic configs").
    """

    name: str
    synonyms: tuple[str, ...]
    type: ConfigType
    default: str
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    check: Check | None = None
    effect: str = ""

    @property
    def broker_name(self) -> str | None:
        """The broker config whose value a topic without an override takes."""
        return self.synonyms[0] if self.synonyms else None

    @property
    def applied(self) -> bool:
        return not self.effect

    @property
    def documentation(self) -> str:
        """The line DescribeConfigs documents it with (v3), with its effect on brokerd."""
        return self.doc if self.applied else f"{self.doc} No effect on brokerd: {self.effect}."

    def parse(self, value: str) -> Parsed:
        """``value`` checked and converted (raises :class:`InvalidConfig`)."""
        parsed = self._parse_type(value)
        if self.check is not None:
            why = self.check(parsed)
            if why is not None:
                raise invalid(self.name, value, why)
        return parsed

    def _parse_type(self, value: str) -> Parsed:
        text = value.strip()
        if self.type is ConfigType.BOOLEAN:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise invalid(self.name, value, "Expected value to be either true or false")
            return lowered == "true"
        if self.type is ConfigType.LIST:
            items = tuple(v.strip() for v in text.split(",")) if text else ()
            if self.choices and (not items or any(v not in self.choices for v in items)):
                raise self._not_one_of(value)
            return items
        if self.type is ConfigType.STRING:
            if self.choices and text not in self.choices:
                raise self._not_one_of(value)
            return text
        return self._parse_number(value, text)

    def _parse_number(self, value: str, text: str) -> int | float:
        number: int | float
        try:
            number = float(text) if self.type is ConfigType.DOUBLE else int(text, 10)
        except ValueError:
            raise invalid(self.name, value, f"Not a number of type {self.type.name}") from None
        if self.type is ConfigType.DOUBLE and number != number:  # NaN
            raise invalid(self.name, value, "Not a number of type DOUBLE")
        low, high = _BOUNDS.get(self.type, (None, None))
        if (low is not None and number < low) or (high is not None and number > high):
            raise invalid(self.name, value, f"Not a number of type {self.type.name}")
        if self.minimum is not None and number < self.minimum:
            raise invalid(self.name, value, f"Value must be at least {self.minimum}")
        if self.maximum is not None and number > self.maximum:
            raise invalid(self.name, value, f"Value must be no more than {self.maximum}")
        return number

    def _not_one_of(self, value: str) -> InvalidConfig:
        return invalid(self.name, value, "String must be one of: " + ", ".join(self.choices))

    def normal(self, value: str) -> str:
        """The stored spelling of a valid ``value`` (trimmed, lists without blanks,
        booleans in lower case)."""
        parsed = self.parse(value)
        if isinstance(parsed, bool):
            return "true" if parsed else "false"
        if isinstance(parsed, tuple):
            return ",".join(parsed)
        return repr(parsed) if isinstance(parsed, float) else str(parsed)
