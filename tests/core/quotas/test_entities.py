"""Quota entities as Kafka resolves and describes them: the eight-step precedence per
key, the share a quota is measured over, DescribeClientQuotas filters, and what an
alteration may not do."""

from __future__ import annotations

import pytest

from brokerd.core.quotas.entities import (
    DEFAULT,
    Component,
    InvalidQuota,
    MatchType,
    QuotaConfigs,
    QuotaEntity,
    describe,
)

P = "producer_byte_rate"
C = "consumer_byte_rate"

#: Kafka's documented order, highest first, with a distinct value each.
LEVELS = [
    (QuotaEntity("alice", "app"), 1.0, ("alice", "app")),
    (QuotaEntity("alice", DEFAULT), 2.0, ("alice", "app")),
    (QuotaEntity("alice", None), 3.0, ("alice", "")),
    (QuotaEntity(DEFAULT, "app"), 4.0, ("alice", "app")),
    (QuotaEntity(DEFAULT, DEFAULT), 5.0, ("alice", "app")),
    (QuotaEntity(DEFAULT, None), 6.0, ("alice", "")),
    (QuotaEntity(None, "app"), 7.0, ("", "app")),
    (QuotaEntity(None, DEFAULT), 8.0, ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_highest_configured_level_applies(level: int) -> None:
    configs = QuotaConfigs({entity: {P: value} for entity, value, _ in LEVELS[level:]})
    applied = configs.resolve(P, "alice", "app")
    entity, value, share = LEVELS[level]
    assert applied is not None
    assert (applied.entity, applied.bound, applied.share) == (entity, value, share)


def test_each_key_resolves_on_its_own() -> None:
    configs = QuotaConfigs({
        QuotaEntity("alice", None): {P: 100.0},
        QuotaEntity(None, DEFAULT): {C: 200.0, P: 999.0},
    })
    assert configs.resolve(P, "alice", "x").bound == 100.0  # type: ignore[union-attr]
    assert configs.resolve(C, "alice", "x").bound == 200.0  # type: ignore[union-attr]
    assert configs.resolve(P, "bob", "x").bound == 999.0  # type: ignore[union-attr]
    assert configs.resolve("request_percentage", "alice", "x") is None


def _configs() -> QuotaConfigs:
    return QuotaConfigs({
        QuotaEntity("alice", None): {P: 1.0},
        QuotaEntity("alice", "app"): {P: 2.0},
        QuotaEntity(DEFAULT, None): {P: 3.0},
        QuotaEntity(None, "app"): {C: 4.0},
        QuotaEntity(None, DEFAULT): {C: 5.0},
    })


def _labels(components: list[Component], strict: bool) -> list[str]:
    return [e.label() for e, _ in describe(_configs(), components, strict)]


def test_describe_filters_as_kafka() -> None:
    user_alice = Component("user", MatchType.EXACT, "alice")
    assert _labels([user_alice], strict=False) == ["user=alice", "user=alice,client-id=app"]
    assert _labels([user_alice], strict=True) == ["user=alice"]
    assert _labels([Component("user", MatchType.DEFAULT, None)], strict=False) == [
        "user=<default>"]
    assert _labels([Component("client-id", MatchType.SPECIFIED, None)], strict=True) == [
        "client-id=<default>", "client-id=app"]
    assert len(_labels([], strict=False)) == 5
    assert _labels([], strict=True) == []


@pytest.mark.parametrize("components", [
    [Component("user", MatchType.EXACT, None)],
    [Component("user", MatchType.DEFAULT, "x")],
    [Component("user", MatchType.SPECIFIED, "x")],
    [Component("user", 7, None)],
    [Component("", MatchType.DEFAULT, None)],
    [Component("user", MatchType.DEFAULT, None), Component("user", MatchType.SPECIFIED, None)],
    [Component("ip", MatchType.DEFAULT, None), Component("user", MatchType.SPECIFIED, None)],
])
def test_describe_refuses_a_bad_filter(components: list[Component]) -> None:
    with pytest.raises(InvalidQuota):
        describe(_configs(), components, False)


@pytest.mark.parametrize(("parts", "ops", "why"), [
    ([], [(P, 1.0, False)], "empty"),
    ([("user", "a"), ("user", "b")], [(P, 1.0, False)], "more than once"),
    ([("ip", "1.2.3.4")], [(P, 1.0, False)], "ip"),
    ([("group", "g")], [(P, 1.0, False)], "Unknown entity type"),
    ([("user", "a")], [("bogus", 1.0, False)], "Invalid configuration key"),
    ([("user", "a")], [(P, 1.5, False)], "must be a Long value"),
    ([("user", "a")], [(P, 0.0, False)], "positive"),
    ([("user", "a")], [(P, 1.0, False), (P, 2.0, False)], "Duplicate"),
])
def test_an_alteration_kafka_refuses_fails_alone(
    parts: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]], why: str
) -> None:
    configs = QuotaConfigs()
    bad, good = configs.check([(parts, ops), ([("client-id", None)], [(C, 10.0, False)])])
    assert isinstance(bad, InvalidQuota) and why in str(bad)
    assert not isinstance(good, InvalidQuota)
    configs.apply([good])
    assert configs.entities() == {QuotaEntity(None, DEFAULT): {C: 10.0}}
    assert configs.keys_set == {C}


def test_removing_the_last_key_forgets_the_entity() -> None:
    configs = QuotaConfigs({QuotaEntity("a", None): {P: 1.0, "request_percentage": 12.5}})
    (change,) = configs.check([([("user", "a")], [(P, 0.0, True)])])
    assert not isinstance(change, InvalidQuota)
    configs.apply([change])
    assert configs.keys_set == {"request_percentage"}
    (change,) = configs.check([([("user", "a")], [("request_percentage", 0.0, True)])])
    assert not isinstance(change, InvalidQuota)
    configs.apply([change])
    assert configs.entities() == {}
    assert configs.keys_set == frozenset()
