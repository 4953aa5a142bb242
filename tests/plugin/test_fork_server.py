"""The launcher's fork server (brokerd/testing/fork_server.py): it holds no reactor,
thread or socket and exits at end of file, a forked start imports no brokerd module,
and a forked broker is the broker a cold start runs (ready file of its own pid, twistd's
log file, SIGKILL through its handle, restart on the same ports over the same data, exit
status); back-to-back starts are all forked."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.testing import launcher
from brokerd.testing.launcher import ForkServer, LaunchedBroker, child_environment

confluent_kafka = pytest.importorskip("confluent_kafka")

#: Generous: the server imports everything a start does, on a shared machine.
READY_SECONDS = 120.0

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def no_server_left() -> Iterator[None]:
    """The launcher's fork server, shared by the module's tests, closed after them."""
    yield
    launcher.close_fork_server()


def produce(bootstrap: str, value: bytes) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce("spare", value=value)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "spare-reader",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe(["spare"])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(30)
            assert message is not None, f"only {values} in 30 s"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def held_descriptors(pid: int) -> list[str]:
    proc_dir = Path(f"/proc/{pid}")
    return [str((proc_dir / "fd" / fd).readlink()) for fd in os.listdir(proc_dir / "fd")]


def test_the_server_holds_no_reactor_and_exits_at_end_of_file(tmp_path: Path) -> None:
    server = ForkServer(child_environment())
    assert server.wait_ready(READY_SECONDS)
    # Imported, it holds one thread, no socket and no poller (the reactor, with its
    # epoll descriptor, is each child's own).
    assert len(list(Path(f"/proc/{server.proc.pid}/task").iterdir())) == 1
    held = held_descriptors(server.proc.pid)
    assert not [t for t in held if t.startswith("socket:") or "eventpoll" in t], held
    # A forked child holds none of the server's pipes (only its own reactor's).
    child = server.fork(["--version"], cwd=tmp_path, env=child_environment())
    assert child is not None and child.wait(READY_SECONDS) == 0
    server.close()
    assert server.proc.returncode == 0


def brokerd_imports(importtime_lines: list[str]) -> list[str]:
    """The brokerd modules named in ``-X importtime`` report lines."""
    names = [line.rpartition("|")[2].strip() for line in importtime_lines]
    return [name for name in names if name == "brokerd" or name.startswith("brokerd.")]


def test_a_forked_start_imports_no_brokerd_module(tmp_path: Path) -> None:
    broker = LaunchedBroker(tmp_path / "data")
    timings = tmp_path / "imports.txt"
    with timings.open("wb") as stderr:
        server = ForkServer(child_environment(), python_options=("-X", "importtime"), stderr=stderr)
        try:
            assert server.wait_ready(READY_SECONDS)
            before = len(timings.read_text().splitlines())
            assert brokerd_imports(timings.read_text().splitlines())
            child = server.fork(broker.twistd_args(), cwd=tmp_path, env=child_environment())
            assert child is not None
            broker.proc = child
            broker.addresses = launcher.wait_until_ready(child, broker.ready_path, broker.log)
            # The child's descriptors: none of the server's pipes to the launcher.
            pipes = {t for t in held_descriptors(server.proc.pid) if t.startswith("pipe:")}
            assert not pipes & set(held_descriptors(child.pid))
            produce(broker.bootstrap_servers, b"after")
        finally:
            broker.stop()
            server.close()
    assert brokerd_imports(timings.read_text().splitlines()[before:]) == []


def log_shape(text: str, directory: Path) -> set[str]:
    """A twistd log's lines without their timestamps, data directory, numbers and
    object addresses."""
    import re

    lines = [line.partition(" ")[2] for line in text.replace(str(directory), "DIR").splitlines()]
    return {re.sub(r"0x[0-9a-f]+|\d+", "N", line) for line in lines}


def test_a_forked_broker_is_a_cold_broker(tmp_path: Path, no_server_left: None) -> None:
    cold = LaunchedBroker(tmp_path / "cold" / "data")
    cold.start()
    cold_status = cold.stop()
    cold_log = cold.log()

    broker = LaunchedBroker(tmp_path / "warm" / "data", fork_server=True)
    try:
        broker.start()
        assert broker.forked
        ready = json.loads(broker.ready_path.read_text())
        assert ready["pid"] == broker.pid
        assert set(broker.addresses) == set(cold.addresses)
        produce(broker.bootstrap_servers, b"before")
        address = broker.bootstrap_servers

        broker.kill()
        assert broker.proc is not None and broker.proc.returncode == -9
        broker.restart()
        assert broker.forked
        assert broker.bootstrap_servers == address
        produce(broker.bootstrap_servers, b"after")
        assert read_all(broker.bootstrap_servers, 2) == [b"before", b"after"]
    finally:
        status = broker.stop()
    assert status == cold_status
    # twistd's log file: what the cold start and stop said, the forked broker said too
    # (and it was started twice: the first start's log was appended to).
    warm_log = broker.log()
    assert log_shape(cold_log, tmp_path / "cold") <= log_shape(warm_log, tmp_path / "warm")
    assert warm_log.count(" starting up.") == 2


def test_back_to_back_starts_are_all_forked(tmp_path: Path, no_server_left: None) -> None:
    server = launcher.prepare_fork_server()
    pids = []
    for i in range(3):
        broker = LaunchedBroker(tmp_path / f"b{i}" / "data", fork_server=True)
        broker.start()
        try:
            assert broker.forked
            produce(broker.bootstrap_servers, b"x")
            pids.append(broker.pid)
        finally:
            broker.stop()
    assert launcher.current_fork_server() is server and server.alive
    assert len(set(pids)) == 3


def test_an_environment_the_server_was_not_imported_under_is_spawned_cold(
    tmp_path: Path, no_server_left: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = launcher.prepare_fork_server()
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    assert not server.fits(child_environment())
    # Another variable is handed over in the order; twistd runs with the arguments.
    monkeypatch.delenv("PYTHONHASHSEED")
    monkeypatch.setenv("BROKERD_FORK_CHECK", "handed over")
    assert server.fits(child_environment())
    child = launcher.fork_broker(["--version"], cwd=tmp_path)
    assert child is not None
    assert child.wait(READY_SECONDS) == 0
    assert launcher.current_fork_server() is server


def test_a_line_that_is_no_order_is_refused_and_the_server_serves_on(
    tmp_path: Path, no_server_left: None
) -> None:
    server = launcher.prepare_fork_server()
    assert server.wait_ready(READY_SECONDS)
    answer = server.exchange(b'{"argv": "not a list"}')
    assert answer is not None and "argv list" in str(answer["error"])
    assert server.exchange(b"[") is not None  # not JSON at all: refused as well
    child = server.fork(["--version"], cwd=tmp_path, env=child_environment())
    assert child is not None and child.wait(READY_SECONDS) == 0
