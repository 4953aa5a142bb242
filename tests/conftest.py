"""Shared fixtures: a real ``twistd broker`` process on loopback; the property tests'
settings."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.brokerproc import BrokerProcess

# ``pytester`` runs the plugin's own tests (tests/plugin) in a child pytest; pytest takes
# plugin lists only from this top-level conftest. The pytest plugin (fixture ``brokerd``)
# comes through its entry point once the project is installed; a checkout on PYTHONPATH
# beside an older install loads it by name.
pytest_plugins = ["pytester"]
if not any(
    ep.value == "brokerd.testing.pytest_plugin"
    for ep in importlib.metadata.entry_points(group="pytest11")
):
    pytest_plugins.append("brokerd.testing.pytest_plugin")

# Property tests draw new inputs each run; a failure prints the blob that replays it
# (``@reproduce_failure``), since a fresh checkout keeps no example database.
settings.register_profile("brokerd", print_blob=True)
settings.load_profile("brokerd")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A started broker with both listeners, fsync always, data under ``tmp_path``."""
    proc = BrokerProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[object]:
    """Factory for brokers with extra options; all are killed at teardown."""
    started: list[BrokerProcess] = []

    def make(*args: str, kafka: bool = True, name: str = "data") -> BrokerProcess:
        proc = BrokerProcess(tmp_path / name, kafka=kafka, args=args)
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()
