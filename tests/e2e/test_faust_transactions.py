"""Faust exactly-once processing, unmodified, against a real ``twistd broker``.

The app (tests/apps/faust_eos.py, ``processing_guarantee="exactly_once"``) copies every
record of ``eos-in`` to ``eos-out`` inside Kafka transactions that also carry its input
offsets. The worker is killed with SIGKILL while records are flowing and started again;
the verdict is read with a read_committed consumer: every input has exactly one output,
nothing is missing, nothing is doubled. (A read_uncommitted reader may see the outputs of
the killed worker's unfinished transaction as well: that is what transactions hide.)

The inputs are keyed: Faust sends an agent's output inside the transaction of the
source partition only when it can tell the output's partition from its key (an unkeyed
output goes out through the plain producer, outside any transaction). The test also
checks, from the log files, that the outputs really were written transactionally.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import REPO, BrokerProcess, free_port
from tests.control_plane_helpers import create_topic
from tests.faust_process import FaustProcess
from tests.kafka_helpers import WAIT, stored_batches
from tests.txn_helpers import conf, confluent, produce_values, read_values

pytestmark = [pytest.mark.clients, pytest.mark.broker]

APP = REPO / "tests" / "apps" / "faust_eos.py"
#: RecordBatch attributes bits: part of a transaction; a control batch (marker).
TRANSACTIONAL, CONTROL = 0x10, 0x20
#: Time the app spends per record: 400 records take it seconds, so the kill lands while
#: a transaction is open.
DELAY_MS = 5
#: A worker's start (group join, topic checks) plus its catching up.
PROCESS_WAIT = 90.0


class EosWorker(FaustProcess):
    """``faust_eos.py worker`` as a child process, logging to a file."""

    def __init__(self, broker: BrokerProcess, workdir: Path) -> None:
        super().__init__(
            APP, broker, workdir, "brokerd-eos", log_name="faust-eos.log",
            env={"FAUST_EOS_DELAY_MS": str(DELAY_MS)},
        )

    def start(self) -> EosWorker:
        self.web_port = free_port()  # each start serves on a port of its own
        super().start()
        return self

    def log_tail(self, lines: int = 60) -> str:
        return super().log_tail(lines)

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def eos(tmp_path: Path) -> Iterator[tuple[BrokerProcess, EosWorker]]:
    if importlib.util.find_spec("faust") is None:
        pytest.skip("faust-streaming is not installed (a test extra: `make install`)")
    confluent()
    broker = BrokerProcess(tmp_path / "data").start()
    workdir = tmp_path / "faust"
    workdir.mkdir()
    worker = EosWorker(broker, workdir)
    try:
        yield broker, worker
    finally:
        with contextlib.suppress(Exception):
            worker.kill()
        broker.kill()


def inputs(start: int, count: int) -> list[tuple[int, bytes]]:
    return [(0, f"e-{i:05d}".encode()) for i in range(start, start + count)]


def wait_outputs(broker: BrokerProcess, worker: EosWorker, want: int, what: str) -> list[bytes]:
    """The read_committed outputs once there are at least ``want``; fails with the
    worker's log if it exits or takes longer than :data:`PROCESS_WAIT`."""
    deadline = time.monotonic() + PROCESS_WAIT
    while True:
        got = read_values(broker, "eos-out", [0], committed=True)
        if len(got) >= want:
            return got
        if not worker.alive():
            raise AssertionError(f"{what}: the Faust worker exited; log:\n{worker.log_tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: {len(got)} of {want} outputs after {PROCESS_WAIT:.0f}s; "
                f"log:\n{worker.log_tail()}"
            )
        time.sleep(0.3)


def test_faust_exactly_once_survives_a_killed_worker(
    eos: tuple[BrokerProcess, EosWorker],
) -> None:
    broker, worker = eos
    create_topic(broker, "eos-in", 1)
    create_topic(broker, "eos-out", 1)
    producer = confluent().Producer(conf(broker, acks="all", **{"linger.ms": 5}))
    produce_values(producer, "eos-in", inputs(0, 100), keyed=True)
    worker.start()
    wait_outputs(broker, worker, 100, "first inputs copied")

    # Records are flowing (Faust commits every 50 records or 0.5 s) when the worker dies.
    produce_values(producer, "eos-in", inputs(100, 400), flush=False, keyed=True)
    producer.flush(WAIT)
    wait_outputs(broker, worker, 150, "copying the second lot")
    time.sleep(0.3)  # into the next transaction
    worker.kill()
    produce_values(producer, "eos-in", inputs(500, 100), keyed=True)
    worker.start()
    got = wait_outputs(broker, worker, 600, "every input copied after the restart")

    # Let the restarted worker run a couple of commit intervals more: nothing may follow.
    time.sleep(2.0)
    got = read_values(broker, "eos-out", [0], committed=True)
    worker.stop()
    counts = collections.Counter(got)
    doubled = sorted(v for v, n in counts.items() if n > 1)
    assert not doubled, f"{len(doubled)} outputs committed twice, e.g. {doubled[:5]}"
    assert sorted(counts) == sorted(b"out:" + v for _, v in inputs(0, 600))
    everything = read_values(broker, "eos-out", [0], committed=False)
    batches = stored_batches(broker, "eos-out", 0)
    markers = [h for h in batches if h.attributes & CONTROL]
    plain = [h for h in batches if not h.attributes & TRANSACTIONAL]
    assert not plain, f"outputs written outside a transaction: {plain[:3]}"
    assert markers, "no transaction markers in the output partition"
    assert len(everything) >= 600
    print(
        f"faust eos: 600 inputs, 600 committed outputs, {len(everything)} stored in all "
        f"({len(everything) - 600} in aborted transactions), {len(markers)} markers"
    )
