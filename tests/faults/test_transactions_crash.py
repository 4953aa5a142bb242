"""Transactions under ``kill -9``: a consume-transform-produce driver
(tests/txn_crash_driver.py, confluent-kafka) commits and aborts transactions while the
broker is killed at random instants and restarted on the same data directory (and, now
and then, the driver is killed too). When every input has been processed, a read_committed
consumer checks what Kafka's exactly-once promises:

- every transaction whose commit returned is in the output whole;
- nothing of a transaction that was aborted, or never asked to commit, is there;
- a transaction whose commit was in flight at a crash is there whole or not at all;
- no record twice, and every input offset is covered by exactly one committed
  transaction (so the group's offsets moved with the outputs, never apart);
- the group's committed offset is the end of the input (the last committed transaction's).

``make test`` runs a few cycles; ``make test-long`` many more (``-m slow``). The figures
(cycles, transactions committed, aborted, in doubt, violations) are printed (``-s``).
"""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from tests.brokerproc import REPO, BrokerProcess
from tests.control_plane_helpers import create_topic
from tests.kafka_helpers import committed_offsets
from tests.txn_helpers import conf, confluent, produce_values, read_topic

pytestmark = [pytest.mark.clients, pytest.mark.broker]

DRIVER = REPO / "tests" / "txn_crash_driver.py"
SOURCE, SINK, GROUP, TXN_ID = "crash-in", "crash-out", "crash-group", "crash-txn"
SINK_PARTITIONS = 3
#: Longest a cycle may take to show progress after a restart (broker start-up, client
#: reconnection, coordinator recovery).
PROGRESS_WAIT = 60.0
#: Driver restarts allowed in the final run to the end of the input.
FINAL_RESTARTS = 10


@attrs.define
class Txn:
    first: int
    last: int
    steps: set[str] = attrs.field(factory=set)


def parse_log(path: Path) -> tuple[dict[int, Txn], int, int]:
    """The driver's transactions by number, and how many ``done`` and ``hung`` lines it
    wrote."""
    txns: dict[int, Txn] = {}
    done = hung = 0
    for line in path.read_text().splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "begin" and len(words) == 4:
            txns[int(words[1])] = Txn(int(words[2]), int(words[3]))
        elif words[0] in {"committing", "committed", "aborting", "aborted"} and len(words) == 2:
            txns[int(words[1])].steps.add(words[0])
        elif words[0] == "done":
            done += 1
        elif words[0] == "hung":
            hung += 1
    return txns, done, hung


class Driver:
    """tests/txn_crash_driver.py as a child process."""

    def __init__(self, broker: BrokerProcess, workdir: Path, inputs: int, seed: int) -> None:
        self.broker = broker
        self.log = workdir / "driver.log"
        self.stderr = workdir / "driver.stderr"
        self.inputs = inputs
        self.seed = seed
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.starts += 1
        command = [sys.executable, str(DRIVER), "--bootstrap", self.broker.kafka_bootstrap]
        command += ["--source", SOURCE, "--sink", SINK, "--partitions", str(SINK_PARTITIONS)]
        command += ["--inputs", str(self.inputs), "--group", GROUP, "--txn-id", TXN_ID]
        command += ["--log", str(self.log), "--seed", str(self.seed * 1000 + self.starts)]
        with self.stderr.open("ab") as err:
            self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def ensure_running(self) -> None:
        if self.exited() is not None:
            self.start()

    def ended(self) -> int:
        """Transactions that reached commit or abort (either way) so far."""
        if not self.log.exists():
            return 0
        txns, _, _ = parse_log(self.log)
        return sum(1 for t in txns.values() if t.steps & {"committed", "aborted"})

    def dump_stacks(self) -> None:
        """Have a running driver write its threads' stacks to its stderr."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text() if self.log.exists() else ""
        err = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        # librdkafka's connection chatter (the broker was down) drowns the rest.
        err = "\n".join(line for line in err.splitlines() if "|FAIL|" not in line)
        return "\n".join(text.splitlines()[-lines:]) + "\n--- stderr:\n" + err[-4000:]


@attrs.frozen
class Figures:
    cycles: int
    driver_starts: int
    committed: int
    aborted: int
    in_doubt_present: int
    in_doubt_absent: int
    never_committed: int
    client_hangs: int
    output_records: int
    violations: tuple[str, ...]


def verify(broker: BrokerProcess, log: Path, inputs: int, cycles: int, starts: int) -> Figures:
    txns, _, hung = parse_log(log)
    records = read_topic(broker, SINK, list(range(SINK_PARTITIONS)), committed=True)
    violations: list[str] = []
    seen: dict[int, collections.Counter[tuple[int, int]]] = collections.defaultdict(
        collections.Counter
    )
    for partition, _offset, value in records:
        txn, source_offset, target = value.decode().split(":")
        if int(target[1:]) != partition:
            violations.append(f"{value!r} stored in partition {partition}")
        seen[int(txn[1:])][(int(source_offset[2:]), partition)] += 1

    for n in sorted(seen):
        txn = txns.get(n)
        if txn is None:
            violations.append(f"transaction {n} in the output but never begun in the log")
            continue
        want = {(o, p) for o in range(txn.first, txn.last + 1) for p in range(SINK_PARTITIONS)}
        got = seen[n]
        if set(got) != want:
            missing = sorted(want - set(got))[:5]
            violations.append(f"transaction {n} partial: missing {missing}")
        doubled = sorted(k for k, c in got.items() if c > 1)
        if doubled:
            violations.append(f"transaction {n} has duplicates {doubled[:5]}")
        if "aborted" in txn.steps:
            violations.append(f"aborted transaction {n} is visible")
        elif "committing" not in txn.steps:
            violations.append(f"transaction {n} is visible but never asked to commit")
    committed = [n for n, t in txns.items() if "committed" in t.steps]
    violations += [f"committed transaction {n} is missing" for n in committed if n not in seen]

    # Exactly once: the visible transactions' inputs are the whole input, each once, and
    # in order (each resumed from the previous one's offsets).
    covered = [o for n in sorted(seen) if n in txns for o in range(txns[n].first, txns[n].last + 1)]
    if covered != list(range(inputs)):
        twice = sorted(o for o, c in collections.Counter(covered).items() if c > 1)
        violations.append(
            f"inputs not covered exactly once in order: {len(covered)} covered for {inputs}, "
            f"twice: {twice[:10]}, missing: {sorted(set(range(inputs)) - set(covered))[:10]}"
        )
    group = committed_offsets(broker, GROUP, SOURCE, [0])
    if group != {0: inputs}:
        violations.append(f"group offset {group}, want {{0: {inputs}}}")

    in_doubt = [
        n for n, t in txns.items() if t.steps & {"committing"} and "committed" not in t.steps
    ]
    return Figures(
        cycles=cycles,
        driver_starts=starts,
        committed=len(committed),
        aborted=sum(1 for t in txns.values() if "aborted" in t.steps),
        in_doubt_present=sum(1 for n in in_doubt if n in seen),
        in_doubt_absent=sum(1 for n in in_doubt if n not in seen),
        never_committed=sum(1 for t in txns.values() if not t.steps & {"committing", "aborted"}),
        client_hangs=hung,
        output_records=len(records),
        violations=tuple(violations),
    )


def wait_progress(driver: Driver, since: int, what: str) -> None:
    """Until the driver ends another transaction; restarts it when it exits (a crash
    makes its calls fail)."""
    deadline = time.monotonic() + PROGRESS_WAIT
    while driver.ended() <= since:
        if driver.exited() == 0:
            return  # done: every input was processed
        driver.ensure_running()
        if time.monotonic() > deadline:
            driver.dump_stacks()
            raise AssertionError(
                f"{what}: no progress in {PROGRESS_WAIT:.0f}s\n{driver.log_tail()}"
            )
        time.sleep(0.1)


def crash_loop(tmp_path: Path, *, cycles: int, inputs: int, seed: int) -> Figures:
    ck = confluent()
    rng = random.Random(seed)
    broker = BrokerProcess(tmp_path / "data").start()
    driver = Driver(broker, tmp_path, inputs, seed)
    try:
        create_topic(broker, SOURCE, 1)
        create_topic(broker, SINK, SINK_PARTITIONS)
        source = [(0, f"in-{i}".encode()) for i in range(inputs)]
        produce_values(ck.Producer(conf(broker, acks="all")), SOURCE, source)
        driver.start()
        for cycle in range(cycles):
            wait_progress(driver, driver.ended(), f"cycle {cycle} start")
            time.sleep(rng.uniform(0.05, 1.0))
            broker.kill()
            if cycle % 3 == 1 or rng.random() < 0.2:
                driver.kill()  # in the middle of whatever it was doing too
            time.sleep(rng.uniform(0.0, 0.3))
            broker.start()
            driver.ensure_running()
        for _ in range(FINAL_RESTARTS):
            deadline = time.monotonic() + PROGRESS_WAIT * 2
            while driver.exited() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if driver.exited() == 0:
                break
            driver.kill()
            driver.start()
        assert driver.exited() == 0, f"the driver never finished:\n{driver.log_tail()}"
        figures = verify(broker, driver.log, inputs, cycles, driver.starts)
    finally:
        driver.kill()
        broker.kill()
    print(f"\ntransactions crash test, seed {seed}: {figures}")
    assert not figures.violations, f"{figures}\n{driver.log_tail()}"
    assert figures.committed > 0 and figures.aborted > 0, figures
    return figures


def test_transactions_survive_broker_kills(tmp_path: Path) -> None:
    crash_loop(tmp_path, cycles=3, inputs=60, seed=11)


@pytest.mark.slow
def test_transactions_survive_many_broker_kills(tmp_path: Path) -> None:
    crash_loop(tmp_path, cycles=30, inputs=600, seed=int(time.time()))
