"""Client quota series computed at scrape time
(:class:`~brokerd.metrics.quotas.QuotasCollector`)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from brokerd.core.quotas.entities import DEFAULT, QuotaConfigs, QuotaEntity
from brokerd.core.quotas.manager import QuotaManager
from brokerd.metrics import quotas as quotas_module
from brokerd.metrics.quotas import QuotasCollector

from tests.metrics.test_collectors import samples

P = "producer_byte_rate"


def _scrape(
    quotas: QuotaManager, seconds: float = 0.0
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(QuotasCollector(quotas, lambda: seconds))
    return samples(registry)


def test_a_throttled_share_has_its_bound_rate_and_throttle() -> None:
    quotas = QuotaManager(QuotaConfigs({QuotaEntity(None, "app"): {P: 1000.0}}))
    assert quotas.record(P, "u", "app", 10_000, 0) == 0
    delay = quotas.record(P, "u", "app", 10_000, 0)
    assert delay > 0
    got = _scrape(quotas)
    labels = (("client_id", "app"), ("quota", P), ("user", ""))
    assert got[("brokerd_client_quota_entities", ())] == 1
    assert got[("brokerd_client_quota_bound", labels)] == 1000.0
    assert got[("brokerd_client_quota_rate", labels)] > 1000.0
    assert got[("brokerd_client_quota_throttled_requests_total", labels)] == 1
    assert got[("brokerd_client_quota_throttle_time_ms_total", labels)] == delay


def test_no_measured_share_no_series_but_the_entity_count() -> None:
    quotas = QuotaManager(QuotaConfigs({
        QuotaEntity(None, "app"): {P: 1000.0}, QuotaEntity(None, DEFAULT): {P: 5.0}}))
    got = _scrape(quotas)
    assert got[("brokerd_client_quota_entities", ())] == 2
    assert not [k for k in got if k[0] == "brokerd_client_quota_bound"]


def test_the_shares_reported_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quotas_module, "MAX_SERIES_SHARES", 2)
    quotas = QuotaManager(QuotaConfigs({QuotaEntity(None, DEFAULT): {P: 1000.0}}))
    for n in range(5):
        quotas.record(P, "u", f"client-{n}", 10, n)
    got = _scrape(quotas, seconds=0.005)
    shares = [k for k in got if k[0] == "brokerd_client_quota_bound"]
    assert len(shares) == 2
