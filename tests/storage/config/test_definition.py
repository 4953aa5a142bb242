"""One config's definition: parsing by type, Kafka's bounds and messages, the normal
spelling, and what DescribeConfigs documents."""

from __future__ import annotations

import pytest

from brokerd.errors import InvalidConfig
from brokerd.storage.config.definition import INT_MAX, LONG_MAX, ConfigDef, ConfigType


def config(kind: ConfigType, **kw: object) -> ConfigDef:
    return ConfigDef("x.y", ("broker.x.y",), kind, "0", "Doc.", **kw)  # type: ignore[arg-type]


def test_numbers_parse_within_their_type_and_bounds() -> None:
    assert config(ConfigType.INT).parse(" 42 ") == 42
    assert config(ConfigType.LONG).parse(str(LONG_MAX)) == LONG_MAX
    assert config(ConfigType.DOUBLE).parse("0.5") == 0.5
    for kind, value in (
        (ConfigType.INT, str(INT_MAX + 1)),
        (ConfigType.LONG, str(LONG_MAX + 1)),
        (ConfigType.INT, "1.5"),
        (ConfigType.DOUBLE, "nan"),
    ):
        with pytest.raises(InvalidConfig, match=f"Not a number of type {kind.name}"):
            config(kind).parse(value)
    bounded = config(ConfigType.INT, minimum=1, maximum=9)
    with pytest.raises(
        InvalidConfig, match=r"Invalid value 0 for configuration x\.y: Value must be at least 1"
    ):
        bounded.parse("0")
    with pytest.raises(InvalidConfig, match="Value must be no more than 9"):
        bounded.parse("10")


def test_booleans_strings_and_lists_follow_kafkas_rules() -> None:
    assert config(ConfigType.BOOLEAN).parse("TRUE") is True
    with pytest.raises(InvalidConfig, match="either true or false"):
        config(ConfigType.BOOLEAN).parse("yes")
    choice = config(ConfigType.STRING, choices=("a", "b"))
    assert choice.parse(" a ") == "a"
    with pytest.raises(InvalidConfig, match="String must be one of: a, b"):
        choice.parse("c")
    listed = config(ConfigType.LIST, choices=("a", "b"))
    assert listed.parse("a, b") == ("a", "b")
    for bad in ("", "a,c"):
        with pytest.raises(InvalidConfig, match="String must be one of"):
            listed.parse(bad)
    assert config(ConfigType.LIST).parse("") == ()


def test_the_extra_check_runs_after_the_type() -> None:
    def odd(value: object) -> str | None:
        return None if isinstance(value, int) and value % 2 == 0 else "must be even"

    even = config(ConfigType.INT, check=odd)
    assert even.parse("4") == 4
    why = r"Invalid value 3 for configuration x\.y: must be even"
    with pytest.raises(InvalidConfig, match=why):
        even.parse("3")


def test_normal_spelling() -> None:
    assert config(ConfigType.BOOLEAN).normal(" True ") == "true"
    assert config(ConfigType.LIST).normal(" a , b ") == "a,b"
    assert config(ConfigType.DOUBLE).normal("1") == "1.0"
    assert config(ConfigType.INT).normal(" 007 ") == "7"


def test_the_broker_name_and_documentation_say_the_effect() -> None:
    applied = config(ConfigType.INT)
    assert (applied.broker_name, applied.applied, applied.documentation) == (
        "broker.x.y", True, "Doc."
    )
    ignored = ConfigDef("z", (), ConfigType.INT, "0", "Doc.", effect="one node")
    assert ignored.broker_name is None and not ignored.applied
    assert ignored.documentation == "Doc. No effect on brokerd: one node."
