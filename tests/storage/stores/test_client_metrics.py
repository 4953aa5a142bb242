"""The client metrics resources' file (KIP-714): durable across a reopen, removed when empty,
untouched by a refused change, refused when damaged."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.kafka.telemetry.resources import (
    ClientMetricsResources,
    InvalidClientMetricsConfig,
)
from brokerd.storage.stores.client_metrics import (
    ClientMetricsFileError,
    ClientMetricsStore,
)

from tests.deferreds import result_of
from tests.kafka.telemetry.test_resources import DELETE, SET


def test_durable_across_reopen_and_deleted_when_empty(tmp_path: Path) -> None:
    store = ClientMetricsStore.in_directory(str(tmp_path))
    resources = ClientMetricsResources(store)
    result_of(resources.alter("r", [("metrics", SET, "x."), ("match", SET, "client_id=a")],
                        validate_only=False))
    result_of(resources.alter("dry", [("metrics", SET, "y.")], validate_only=True))
    assert resources.version == 1
    reopened = ClientMetricsResources(ClientMetricsStore.in_directory(str(tmp_path)))
    assert reopened.names() == ["r"]
    assert reopened.configs("r") == {"metrics": "x.", "match": "client_id=a"}
    (sub,) = reopened.subscriptions()
    assert sub.metrics == ("x.",)
    result_of(reopened.alter("r", [("metrics", DELETE, None), ("match", DELETE, None)],
                       validate_only=False))
    assert ClientMetricsResources(ClientMetricsStore.in_directory(str(tmp_path))).names() == []


def test_refused_change_stores_nothing(tmp_path: Path) -> None:
    resources = ClientMetricsResources(ClientMetricsStore.in_directory(str(tmp_path)))
    with pytest.raises(InvalidClientMetricsConfig):
        result_of(resources.alter("r", [("interval.ms", SET, "1")], validate_only=False))
    assert resources.names() == [] and resources.version == 0
    assert not (tmp_path / "client-metrics.json").exists()


def test_a_damaged_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "client-metrics.json").write_text('{"version": 1, "resources": {"r": 5}}')
    with pytest.raises(ClientMetricsFileError):
        ClientMetricsStore.in_directory(str(tmp_path)).load()
