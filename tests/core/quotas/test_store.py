"""The client quotas' file: it round-trips, and refuses what it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.core.quotas.entities import DEFAULT, QuotaEntity
from brokerd.core.quotas.store import QuotaFileError, QuotaStore


def test_the_store_round_trips_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    store = QuotaStore.in_directory(str(tmp_path))
    assert store.load() == {}
    quotas = {
        QuotaEntity("alice", DEFAULT): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        QuotaEntity(None, "app"): {"controller_mutation_rate": 2.0},
    }
    store.save(quotas)
    assert store.load() == quotas
    Path(store.path).write_text('{"version": 1, "quotas": [{"entity": {}, "values": {}}]}')
    with pytest.raises(QuotaFileError, match="empty client quota entity"):
        store.load()
    Path(store.path).write_text("{")
    with pytest.raises(QuotaFileError, match="not JSON"):
        store.load()
