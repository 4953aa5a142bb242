"""brokerd.app.wiring: the service tree built from the typed settings, whatever the
listeners are; and real brokers started by twistd with listeners off."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.application.internet import StreamServerEndpointService
from twisted.internet.testing import MemoryReactorClock

from brokerd.app.options import Options
from brokerd.app.wiring import BrokerServices, build_services
from brokerd.core.cleaner_service import CleanerService
from brokerd.core.store_recovery import StoreRecovery
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.group_service import GroupStateService
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.txn.coordinator import TransactionCoordinator
from brokerd.kafka.txn.txn_service import TxnStateService
from brokerd.native.protocol import NativeFactory
from brokerd.proxy.site import InstancesService
from brokerd.registry.service import SchemaRegistry
from brokerd.sdnotify import ReadyNotifier
from brokerd.web.console import ConsoleSampler

from tests.brokerproc import BrokerProcess


def build(tmp_path: Path, *args: str) -> tuple[BrokerServices, MemoryReactorClock]:
    options = Options()
    options.parseOptions(["--data-dir", str(tmp_path / "data"), *args])
    reactor = MemoryReactorClock()
    return build_services(options.settings, reactor), reactor


def listeners(services: BrokerServices) -> list[type]:
    return [
        type(child.factory)
        for child in services.top
        if isinstance(child, StreamServerEndpointService)
    ]


def test_the_tree_in_its_shutdown_order(tmp_path: Path) -> None:
    services, reactor = build(tmp_path)
    top = list(services.top)
    assert top[0] is services.broker
    assert [type(c) for c in top[1:]] == [
        StreamServerEndpointService,
        StreamServerEndpointService,
        SchemaRegistry,
        ConsoleSampler,
        StreamServerEndpointService,
        InstancesService,
        StreamServerEndpointService,
        StreamServerEndpointService,
        ReadyNotifier,
    ]
    assert listeners(services)[:2] == [NativeFactory, KafkaFactory]
    assert [type(c).__name__ for c in services.broker] == [
        "WorkerPools",
        "LogDirectoryService",
        CleanerService.__name__,
        GroupStateService.__name__,
        TxnStateService.__name__,
        "ShareStateService",
        StoreRecovery.__name__,
    ]
    assert services.metrics is not None
    assert len(reactor.whenRunningHooks) == 1  # the collector's resume


@pytest.mark.parametrize(
    "off",
    [
        ("--kafka", "none"),
        ("--kafka", "none", "--http", "none"),
        ("--kafka", "none", "--native", "none", "--http", "none"),
    ],
)
def test_group_and_txn_state_whatever_the_listeners(tmp_path: Path, off: tuple[str, ...]) -> None:
    services, _ = build(tmp_path, *off)
    assert KafkaFactory not in listeners(services)
    assert isinstance(services.coordinators.groups, GroupCoordinator)
    assert isinstance(services.coordinators.transactions, TransactionCoordinator)
    kinds = [type(c) for c in services.broker]
    assert GroupStateService in kinds and TxnStateService in kinds and StoreRecovery in kinds
    # The core's share role is the share groups' records service the coordinators use.
    assert services.broker.share is services.coordinators.shares.service
    # The admin views read the same groups: the inspector is built over the coordinator.
    assert services.inspector.groups() == []


def test_listeners_off_are_not_built(tmp_path: Path) -> None:
    services, _ = build(tmp_path, "--kafka", "none", "--native", "none", "--http", "none",
                        "--schema-registry", "none", "--http-proxy", "none")
    assert listeners(services) == []
    assert services.metrics is None
    assert [type(c) for c in services.top][1:] == [ReadyNotifier]


def test_no_cleaner_without_threads(tmp_path: Path) -> None:
    services, _ = build(tmp_path, "--cleaner-threads", "0")
    assert CleanerService not in [type(c) for c in services.broker]


# -- real brokers -----------------------------------------------------------------------


@pytest.fixture
def native_only(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", kafka=False).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.mark.broker
def test_a_native_only_broker_has_groups_and_transactions(native_only: BrokerProcess) -> None:
    with native_only.client() as client:
        client.create_topic("t", 1)
        assert client.list_groups() == []
    url = f"http://127.0.0.1:{native_only.http_port}"
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    assert "brokerd_transactional_ids" in metrics
    with urllib.request.urlopen(f"{url}/readyz", timeout=10) as answer:
        assert answer.status == 200
    native_only.stop()
    assert "Kafka listener" not in native_only.log()
    native_only.start()  # the groups' state closed cleanly: the next start reads it back
    with native_only.client() as client:
        assert client.list_groups() == []


@pytest.mark.broker
def test_a_broker_restarts_with_its_settings(tmp_path: Path) -> None:
    proc = BrokerProcess(
        tmp_path / "data", args=("--default-partitions", "2", "--fsync", "interval:20")
    ).start()
    try:
        with proc.client() as client:
            client.produce("auto", 0, [b"a", b"b"])
            [topic] = [t for t in client.list_topics() if t.name == "auto"]
            assert topic.partitions == 2
        proc.restart()
        with proc.client() as client:
            assert client.fetch("auto", 0, 0) == [b"a", b"b"]
        assert "fsync interval:20" in proc.log()
        assert proc.log().count("previous shutdown was clean") == 2  # the restart: SIGTERM
    finally:
        proc.kill()
    assert json.loads((tmp_path / "data" / "topics.json").read_text())


def test_readiness_waits_for_the_schema_registry(tmp_path: Path) -> None:
    services, _ = build(tmp_path)
    problems = services.readiness.problems()
    assert "schema registry: reading _schemas" in problems
    assert "schema registry listener: not bound yet" in problems


def test_the_fork_server_preloads_every_module_but_those_never_started() -> None:
    """start_modules() is found on disk: every module of brokerd (the ones a start
    imports among them), none of the packages a test-mode broker never builds, no
    ``__main__`` script (importing one runs it)."""
    import importlib.util

    from brokerd.app.wiring import NOT_STARTED, start_modules

    names = start_modules()
    assert len(names) == len(set(names))
    assert {"brokerd.core.broker", "brokerd.kafka.listener.protocol", "brokerd.web.health",
            "brokerd.storage.logdir.log_directory", "brokerd.tap"} <= set(names)
    assert [n for n in names if n.partition(".")[0] != "brokerd"] == []
    assert [n for n in names if any(n == p or n.startswith(p + ".") for p in NOT_STARTED)] == []
    assert [n for n in names if n.endswith("__main__")] == []
    assert [name for name in names if importlib.util.find_spec(name) is None] == []
