"""The launcher's spare (brokerd/testing/spare.py): it exits at end of file before its
order, a start after its imports imports no brokerd module, and a broker started from
it is the broker a cold start runs (ready file of its own pid, twistd's log file,
SIGKILL, restart on the same ports over the same data, exit status)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.testing import launcher
from brokerd.testing.launcher import LaunchedBroker, Spare, child_environment

confluent_kafka = pytest.importorskip("confluent_kafka")

#: Generous: the spare imports everything a start does, on a shared machine.
READY_SECONDS = 120.0


@pytest.fixture
def no_spare_left() -> Iterator[None]:
    yield
    launcher.discard_spare()


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


def test_a_spare_exits_at_end_of_file_before_an_order() -> None:
    spare = Spare(child_environment())
    assert spare.wait_ready(READY_SECONDS)
    # Imported, it holds nothing but its pipes and the reactor's own descriptors.
    proc_dir = Path(f"/proc/{spare.proc.pid}")
    assert len(list((proc_dir / "task").iterdir())) == 1
    held = [str((proc_dir / "fd" / fd).readlink()) for fd in os.listdir(proc_dir / "fd")]
    assert not [target for target in held if target.startswith("socket:")], held
    spare.discard()
    began = time.monotonic()
    assert spare.proc.wait(10) == 0
    assert time.monotonic() - began < 5


def brokerd_imports(importtime_lines: list[str]) -> list[str]:
    """The brokerd modules named in ``-X importtime`` report lines."""
    names = [line.rpartition("|")[2].strip() for line in importtime_lines]
    return [name for name in names if name == "brokerd" or name.startswith("brokerd.")]


def test_a_start_from_a_spare_imports_no_brokerd_module(tmp_path: Path) -> None:
    broker = LaunchedBroker(tmp_path / "data")
    timings = tmp_path / "imports.txt"
    with timings.open("wb") as stderr:
        spare = Spare(child_environment(), python_options=("-X", "importtime"), stderr=stderr)
        try:
            assert spare.wait_ready(READY_SECONDS)
            before = len(timings.read_text().splitlines())
            assert brokerd_imports(timings.read_text().splitlines())
            assert spare.order(broker.twistd_args(), cwd=tmp_path, env=child_environment())
            broker.proc = spare.proc
            broker.addresses = launcher.wait_until_ready(spare.proc, broker.ready_path, broker.log)
            produce(broker.bootstrap_servers, b"after")
        finally:
            broker.stop()
    assert brokerd_imports(timings.read_text().splitlines()[before:]) == []


def log_shape(text: str, directory: Path) -> set[str]:
    """A twistd log's lines without their timestamps, data directory, numbers and
    object addresses."""
    import re

    lines = [line.partition(" ")[2] for line in text.replace(str(directory), "DIR").splitlines()]
    return {re.sub(r"0x[0-9a-f]+|\d+", "N", line) for line in lines}


def test_a_broker_from_a_spare_is_a_cold_broker(tmp_path: Path, no_spare_left: None) -> None:
    cold = LaunchedBroker(tmp_path / "cold" / "data")
    cold.start()
    cold_status = cold.stop()
    cold_log = cold.log()

    launcher.prepare_spare().wait_ready(READY_SECONDS)
    broker = LaunchedBroker(tmp_path / "warm" / "data", spare=True)
    try:
        broker.start()
        assert broker.from_spare
        ready = json.loads(broker.ready_path.read_text())
        assert ready["pid"] == broker.pid
        assert set(broker.addresses) == set(cold.addresses)
        produce(broker.bootstrap_servers, b"before")
        address = broker.bootstrap_servers

        broker.kill()
        assert broker.proc is not None and broker.proc.returncode == -9
        broker.restart()  # from the spare the first start left waiting
        assert broker.from_spare
        assert broker.bootstrap_servers == address
        produce(broker.bootstrap_servers, b"after")
        assert read_all(broker.bootstrap_servers, 2) == [b"before", b"after"]
    finally:
        status = broker.stop()
    assert status == cold_status
    # twistd's log file: what the cold start and stop said, the broker from a spare
    # said too (and it was started twice: the first start's log was appended to).
    warm_log = broker.log()
    assert log_shape(cold_log, tmp_path / "cold") <= log_shape(warm_log, tmp_path / "warm")
    assert warm_log.count(" starting up.") == 2


def test_an_environment_a_spare_was_not_imported_under_is_spawned_cold(
    tmp_path: Path, no_spare_left: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spare = launcher.prepare_spare()
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    assert launcher.take_spare(["--version"], cwd=tmp_path) is None
    # Another variable is handed over in the order; twistd runs with the arguments.
    monkeypatch.delenv("PYTHONHASHSEED")
    monkeypatch.setenv("BROKERD_SPARE_CHECK", "handed over")
    assert spare.fits(child_environment())
    proc = launcher.take_spare(["--version"], cwd=tmp_path)
    assert proc is spare.proc
    assert proc.wait(READY_SECONDS) == 0
    assert launcher.current_spare() is None
