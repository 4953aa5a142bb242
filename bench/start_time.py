"""Start time: from spawning a broker process to its first acknowledged produce, the
wait every test that starts its own broker pays.

brokerd is started as the pytest plugin starts it (:class:`brokerd.testing.LaunchedBroker`:
test mode, free ports, the ready file); Apache Kafka as the bench's peer
(:class:`bench.kafka_peer.KafkaPeer`, a single KRaft node, its storage formatted before
the clock starts). On each, a confluent-kafka producer (``acks=all``) sends one record as
soon as the process is spawned (it retries while the broker is not up yet); the figure is
the median over several fresh starts, each over an empty data directory, from bytecode
(as an installed package starts). brokerd's row also notes the CPU time its process used
(spawn to exit after the clean stop): on a shared machine the wall time moves with the
load, the CPU time much less.

A second brokerd row is the wait of a test whose fixture's broker is forked by the
launcher's fork server (one process per test process that imported the broker once;
the plugin's fixtures use it): the server is started, and has finished its imports,
before the first start of the row, as in a test session after its first broker; its
import time is noted in the row. The two brokerd kinds alternate, start by start, so
that both see the same load.
"""

from __future__ import annotations

import resource
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import Results, Row
from bench.kafka_peer import SYSTEM, KafkaPeer
from bench.resources import SECTION, _compiled
from brokerd.testing import LaunchedBroker
from brokerd.testing.launcher import (
    START_TIMEOUT_SECONDS,
    close_fork_server,
    prepare_fork_server,
)

WHAT = "spawn to first acknowledged produce (fresh data directory)"
WHAT_FORKED = "fixture start, forked, to first acknowledged produce (fresh data directory)"
#: Kafka's starts are slower and each formats storage first: fewer of them.
KAFKA_STARTS = 3


def _first_produce(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 120_000})
    producer.produce("start-time", b"first")
    if producer.flush(120) != 0:
        raise RuntimeError(f"the first produce to {bootstrap} was not acknowledged")


def _children_cpu() -> float:
    """User and system CPU seconds of this process's reaped children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _median(starts: int, once: Callable[[int], float]) -> tuple[float, list[float]]:
    times = [once(i) for i in range(starts)]
    return statistics.median(times), times


def measure(results: Results, root: Path, starts: int, *, kafka_why: str) -> None:
    """The brokerd row (median of ``starts``) and Kafka's (``kafka_why``: why it cannot
    run, "" when it can)."""

    # As pip leaves an installed package: without bytecode (PYTHONDONTWRITEBYTECODE)
    # each start would compile brokerd from source, a cost no installed broker has.
    _compiled()

    cpu: list[float] = []

    def brokerd_once(i: int, *, forked: bool) -> float:
        directory = root / f"brokerd-{'forked' if forked else 'cold'}-{i}"
        broker = LaunchedBroker(directory / "data", fork_server=forked)
        before = _children_cpu()
        begin = time.perf_counter()
        broker.start()
        try:
            _first_produce(broker.bootstrap_servers)
            return time.perf_counter() - begin
        finally:
            broker.stop()  # reaps the child: its CPU time is in the children's now
            if not forked:
                cpu.append(_children_cpu() - before)
            shutil.rmtree(directory, ignore_errors=True)

    began = time.perf_counter()
    prepare_fork_server().wait_ready(START_TIMEOUT_SECONDS)
    server_import = time.perf_counter() - began
    cold: list[float] = []
    warm: list[float] = []
    for i in range(starts):
        cold.append(brokerd_once(i, forked=False))
        warm.append(brokerd_once(i, forked=True))
    close_fork_server()
    results.add(Row(SECTION, "brokerd", WHAT, "test mode (fsync never)",
                    statistics.median(cold), "s",
                    f"median of {starts}: " + ", ".join(f"{t:.2f}" for t in cold)
                    + f"; broker CPU median {statistics.median(cpu):.2f} s"))
    results.add(Row(SECTION, "brokerd", WHAT_FORKED, "test mode, plugin's fork server",
                    statistics.median(warm), "s",
                    f"median of {starts}, alternating with the cold row: "
                    + ", ".join(f"{t:.2f}" for t in warm)
                    + f"; the server's import, once per test process: {server_import:.2f} s"))
    if kafka_why:
        results.add(Row(SECTION, SYSTEM, WHAT, "default", None, "s", kafka_why))
        return

    def kafka_once(i: int) -> float:
        peer = KafkaPeer(root / f"kafka-{i}")
        peer.format()
        begin = time.perf_counter()
        peer.spawn()
        try:
            _first_produce(peer.kafka_bootstrap)
            return time.perf_counter() - begin
        finally:
            peer.kill()
            shutil.rmtree(root / f"kafka-{i}", ignore_errors=True)

    median, times = _median(min(starts, KAFKA_STARTS), kafka_once)
    results.add(Row(SECTION, SYSTEM, WHAT, "default", median, "s",
                    f"median of {len(times)}: " + ", ".join(f"{t:.2f}" for t in times)))
