"""brokerd.core.share.config: share groups' configs checked as Kafka checks them, the
broker's defaults merged, ``share.auto.offset.reset`` parsed."""

from __future__ import annotations

import re

import pytest

from brokerd.core.share.config import (
    DEFAULTS,
    DLQ_COPY_RECORD,
    DLQ_TOPIC,
    AutoOffsetReset,
    InvalidShareConfig,
    ShareConfig,
    broker_defaults,
    broker_name,
    is_group_config,
    parse_group_configs,
    parse_offset_reset,
    validate,
)
from brokerd.storage.types import Isolation


def test_configs() -> None:
    assert parse_group_configs({}) == ShareConfig()
    assert parse_group_configs({"share.delivery.count.limit": "3"}).delivery_count_limit == 3
    validate("share.auto.offset.reset", "earliest")
    validate("share.auto.offset.reset", "by_duration:PT1H")
    for name, value in (
        ("share.auto.offset.reset", "nope"),
        ("share.auto.offset.reset", "by_duration:-PT1H"),
        ("share.record.lock.duration.ms", "10"),
        ("share.delivery.count.limit", "x"),
        ("share.nothing", "1"),
    ):
        with pytest.raises(InvalidShareConfig):
            validate(name, value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("latest", (AutoOffsetReset.LATEST, 0)),
        ("earliest", (AutoOffsetReset.EARLIEST, 0)),
        ("by_duration:PT1H", (AutoOffsetReset.BY_DURATION, 3_600_000)),
        ("by_duration:P2D", (AutoOffsetReset.BY_DURATION, 172_800_000)),
        ("by_duration:P1DT1H30M", (AutoOffsetReset.BY_DURATION, 91_800_000)),
        ("by_duration:pt1.5s", (AutoOffsetReset.BY_DURATION, 1_500)),
        ("by_duration:PT0S", (AutoOffsetReset.BY_DURATION, 0)),
        ("by_duration:-PT-1S", (AutoOffsetReset.BY_DURATION, 1_000)),
    ],
)
def test_offset_reset_reads_kafkas_strategies(
    text: str, expected: tuple[AutoOffsetReset, int]
) -> None:
    assert parse_offset_reset(text) == expected


@pytest.mark.parametrize(
    "text",
    ["by_duration", "by_duration:", "by_duration:P", "by_duration:PT", "by_duration:PT-1H",
     "by_duration:-PT1H", "by_duration:PT-0.5S", "by_duration:1H", "by_duration:PT1H ",
     "LATEST", "none", ""],
)
def test_offset_reset_refuses_what_kafka_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_offset_reset(text)
    with pytest.raises(InvalidShareConfig, match=re.escape("by_duration:<PnDTnHnMn.nS>")):
        validate("share.auto.offset.reset", text)


def test_broker_defaults_merge_check_and_name_the_culprit() -> None:
    merged = broker_defaults({"share.delivery.count.limit": "7"})
    assert merged == {**DEFAULTS, "share.delivery.count.limit": "7"}
    with pytest.raises(InvalidShareConfig) as bad:
        broker_defaults({"share.record.lock.duration.ms": "5"})
    assert bad.value.name == "share.record.lock.duration.ms"
    assert "[1000, 3600000]" in str(bad.value)
    with pytest.raises(InvalidShareConfig) as order:
        broker_defaults({"share.heartbeat.interval.ms": "10000",
                         "share.session.timeout.ms": "10000"})
    assert order.value.name == "share.session.timeout.ms"
    assert str(order.value) == (
        "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
    assert broker_name("share.session.timeout.ms") == "group.share.session.timeout.ms"


def test_parse_group_configs_overrides_over_defaults() -> None:
    defaults = {**DEFAULTS, "share.session.timeout.ms": "30000"}
    config = parse_group_configs(
        {"share.isolation.level": "read_committed",
         "share.auto.offset.reset": "by_duration:PT2S"}, defaults)
    assert config == ShareConfig(
        auto_offset_reset=AutoOffsetReset.BY_DURATION, reset_duration_ms=2000,
        isolation_level=Isolation.READ_COMMITTED, session_timeout_ms=30000)


def test_which_names_are_group_configs_and_their_other_checks() -> None:
    assert is_group_config("share.anything")
    assert is_group_config(DLQ_TOPIC) and is_group_config(DLQ_COPY_RECORD)
    assert not is_group_config("consumer.session.timeout.ms")
    validate(DLQ_TOPIC, "dead")
    validate(DLQ_COPY_RECORD, " True ")
    for name, value, said in (
        (DLQ_TOPIC, "__internal", "must not start with '__'"),
        (DLQ_COPY_RECORD, "yes", "either true or false"),
        ("share.isolation.level", "serializable", "read_committed, read_uncommitted"),
        ("share.delivery.count.limit", "11", "[2, 10]"),
    ):
        with pytest.raises(InvalidShareConfig, match=re.escape(said)):
            validate(name, value)
