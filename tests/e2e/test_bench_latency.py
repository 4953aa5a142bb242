"""bench/latency.py against a real broker: the consumer in its own process still sees
every record, with latencies measured on the one monotonic clock; and the floor's
plain server answers every message."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests import paths
from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.broker

REPO = paths.REPO
RATE = 200
SECONDS = 0.5


def _latency() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_latency", REPO / "bench" / "latency.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_latency"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    proc = BrokerProcess(tmp_path_factory.mktemp("latency") / "data").start()
    yield proc  # type: ignore[misc]
    proc.stop()


def _plausible(samples: list[float]) -> None:
    assert len(samples) == int(RATE * SECONDS)
    # Positive (the consumer's clock is the producer's) and far below a second.
    assert all(0 < s < 5.0 for s in samples), (min(samples), max(samples))


def test_native_consumer_process_sees_every_record(broker: BrokerProcess) -> None:
    lat = _latency()
    spans: list[float] = []
    received, acked = lat.native(broker, RATE, SECONDS, spans)
    _plausible(received)
    _plausible(acked)
    assert len(spans) == 1 and spans[0] >= SECONDS * 0.9


def test_kafka_consumer_process_and_delivery_reports(broker: BrokerProcess) -> None:
    pytest.importorskip("confluent_kafka")
    lat = _latency()
    received, acked = lat.kafka(broker, RATE, SECONDS)
    _plausible(received)
    _plausible(acked)


def test_floor_round_trips_with_and_without_fdatasync() -> None:
    lat = _latency()
    for sync in (False, True):
        _plausible(lat.floor(RATE, SECONDS, sync=sync))
