"""Quota enforcement per share with a fake clock (times in ms passed in): what is measured
together, the throttle time Kafka would answer, the fetch cap, the controller mutation
bucket, bounded sensors (the durable file: tests/core/quotas/test_store.py)."""

from __future__ import annotations

import pytest

from brokerd.core.quotas import manager as manager_module
from brokerd.core.quotas.entities import DEFAULT, QuotaConfigs, QuotaEntity
from brokerd.core.quotas.manager import QuotaManager

P = "producer_byte_rate"


def _manager(quotas: dict[QuotaEntity, dict[str, float]]) -> QuotaManager:
    return QuotaManager(QuotaConfigs(quotas))


def test_within_the_quota_nothing_is_throttled_then_kafkas_delay() -> None:
    quotas = _manager({QuotaEntity(None, "app"): {P: 1000.0}})
    # 10 windows of 1000 bytes/s are allowed in a first burst.
    assert quotas.record(P, "ANONYMOUS", "app", 10_000, 0) == 0
    # 20000 bytes over 10 s = 2000/s, twice the bound: 10 s to come back to it.
    assert quotas.record(P, "ANONYMOUS", "app", 10_000, 0) == 10_000
    (view,) = quotas.sensors(0, 10)
    assert (view.key, view.user, view.client_id, view.throttled) == (P, "", "app", 1)


def test_a_user_quota_is_shared_by_its_clients_a_default_one_is_not() -> None:
    quotas = _manager({
        QuotaEntity("alice", None): {P: 1000.0},
        QuotaEntity(None, DEFAULT): {P: 1000.0},
    })
    assert quotas.record(P, "alice", "one", 10_000, 0) == 0
    assert quotas.record(P, "alice", "two", 10_000, 0) > 0  # the same share
    assert quotas.record(P, "bob", "one", 10_000, 0) == 0
    assert quotas.record(P, "bob", "two", 10_000, 0) == 0  # each client its own
    shares = {(v.user, v.client_id) for v in quotas.sensors(0, 10)}
    assert shares == {("alice", ""), ("", "one"), ("", "two")}


def test_no_quota_no_sensor() -> None:
    quotas = _manager({QuotaEntity("alice", None): {P: 1000.0}})
    assert quotas.record(P, "bob", "x", 10**9, 0) == 0
    assert quotas.sensors(0, 10) == []


def test_a_changed_quota_applies_to_the_next_use() -> None:
    quotas = _manager({QuotaEntity(None, "app"): {P: 1000.0}})
    assert quotas.record(P, "u", "app", 15_000, 0) > 0
    (change,) = quotas.configs.check([([("client-id", "app")], [(P, 100_000.0, False)])])
    quotas.apply([change])  # type: ignore[list-item]
    assert quotas.record(P, "u", "app", 1, 0) == 0


def test_request_time_throttle_is_capped_at_one_window() -> None:
    quotas = _manager({QuotaEntity(None, "app"): {"request_percentage": 1.0}})
    # 5 s of reactor time at once: 500 percent-seconds over 10 s, 50x the bound.
    assert quotas.record("request_percentage", "u", "app", 500.0, 0) == 1000


def test_fetch_cap_and_unrecord() -> None:
    quotas = _manager({QuotaEntity(None, DEFAULT): {"consumer_byte_rate": 1000.0}})
    assert quotas.window_bytes("u", "c") == 10_000
    assert quotas.window_bytes("u", "c") is not None
    assert quotas.record("consumer_byte_rate", "u", "c", 20_000, 0) > 0
    quotas.unrecord("consumer_byte_rate", "u", "c", 20_000, 0)
    assert quotas.record("consumer_byte_rate", "u", "c", 1, 0) == 0


def test_controller_mutations_drain_and_refill_the_bucket() -> None:
    quotas = _manager({QuotaEntity("u", None): {"controller_mutation_rate": 1.0}})
    assert quotas.mutation_throttle("u", "c", 0) == 0
    assert quotas.record_mutations("u", "c", 15, 0) == 4000  # burst 11, 4 over at 1/s
    assert quotas.mutation_throttle("u", "c", 2000) == 2000
    assert quotas.mutation_throttle("u", "c", 4000) == 0


def test_sensors_are_bounded_and_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager_module, "MAX_SENSORS", 3)
    quotas = _manager({QuotaEntity(None, DEFAULT): {P: 1000.0}})
    for i in range(5):
        quotas.record(P, "u", f"c{i}", 1, 0)
    assert [v.client_id for v in quotas.sensors(0, 10)] == ["c4", "c3", "c2"]
    later = manager_module.SENSOR_EXPIRY_MS
    quotas.record(P, "u", "c9", 1, later)
    assert [v.client_id for v in quotas.sensors(later, 10)] == ["c9"]
