"""The consumer-offsets journal and the transaction log recover like partitions, on a real
``twistd broker`` with real Kafka clients (confluent-kafka):

- a full disk (a real tmpfs, filled with a file) fails commits with a retriable error,
  logged at a bounded rate without tracebacks; once the filler is deleted, commits
  succeed again without a restart, and what was committed survives kill -9;
- the same for the transaction log (InitProducerId and a transaction commit);
- a failed fsync (a test double of ``os.fdatasync`` in the broker process, armed by a
  trigger file: a failing disk is the one thing that cannot be real here) takes the
  store offline, ``/readyz`` says so, and the background reopen brings it back; for the
  share-state journal, the acknowledgement whose sync failed is undone.

Skipped when a tmpfs cannot be mounted (not root).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeError
from brokerd.native.messages import ErrorCode
from brokerd.native.queue_messages import AckKind

from tests import paths
from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.tmpfs import mounted_tmpfs

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.broker

#: Each commit carries this much metadata, so every journal record needs a fresh page
#: of the tmpfs (a record that fits the last page's slack would not see the full disk).
META = "m" * 4000
#: A transactional id this long makes each transaction-log record span a page as well.
LONG_TID = "tx-" + "x" * 5000
WAIT = 30.0
#: Broker log lines that report a store fault.
STORE_LINES = ("consumer offsets store", "transaction log /")
FSYNC_LAUNCHER = paths.TESTS / "fsync_fault_broker.py"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path, "24m") as mnt:
        yield mnt


def fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with one file; returns it (delete it to free)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0")
    finally:
        os.close(fd)
    return filler


def fault_lines(proc: BrokerProcess) -> list[str]:
    return [line for line in proc.log().splitlines() if any(s in line for s in STORE_LINES)]


def consumer(proc: BrokerProcess, group: str = "g") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": proc.kafka_bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "socket.timeout.ms": 10000,
        }
    )


def commit(c: Consumer, offset: int) -> str | None:
    """Commit ``offset`` of t-0 synchronously; None if it was stored, else the error."""
    try:
        c.commit(offsets=[TopicPartition("t", 0, offset, metadata=META)], asynchronous=False)
    except KafkaException as exc:
        return exc.args[0].name()
    return None


def committed(c: Consumer) -> int:
    (tp,) = c.committed([TopicPartition("t", 0)], timeout=WAIT)
    return int(tp.offset)


def test_offset_commits_recover_once_space_returns(disk: Path) -> None:
    proc = BrokerProcess(disk / "data").start()
    with proc.client() as native:
        native.create_topic("t")
    c = consumer(proc)
    try:
        assert commit(c, 1) is None
        filler = fill(disk)
        started = time.monotonic()
        errors = [commit(c, 100 + i) for i in range(10)]
        full_for = time.monotonic() - started
        failed = [e for e in errors if e is not None]
        assert len(failed) == 10, errors
        # Retriable, as Kafka answers a storage error on its offsets log.
        assert set(failed) <= {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"}, failed
        assert committed(c) == 1
        filler.unlink()
        ok = [commit(c, 200 + i) is None for i in range(10)]
        assert all(ok), ok
        assert committed(c) == 209
        time.sleep(0.5)  # the log file is written by the broker's own thread
        lines = fault_lines(proc)
        # At most one line per 10 s of faults (and one to spare for the window edge).
        assert 1 <= len(lines) <= 2 + int(full_for / 10), lines
        assert "Traceback" not in proc.log()
        record(
            "commits after ENOSPC once space returns",
            f"commits while full: {len(failed)} failed ({failed[0]}), log lines: {len(lines)};"
            f" after freeing: {sum(ok)}/10 ok, no restart",
        )
        c.close()
        proc.kill()  # durability: every answered commit is on disk
        proc.start()
        c = consumer(proc)
        assert committed(c) == 209
    finally:
        c.close()
        proc.kill()


def transactional(proc: BrokerProcess, tid: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": proc.kafka_bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 60000,
            "socket.timeout.ms": 10000,
        }
    )


def run_transaction(p: Producer, values: list[bytes]) -> None:
    p.begin_transaction()
    for value in values:
        p.produce("txt", value, partition=0)
    p.commit_transaction(WAIT)


def read_committed(proc: BrokerProcess, count: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": proc.kafka_bootstrap,
            "group.id": "reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition("txt", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        c.close()
    return got


def test_transaction_log_recovers_once_space_returns(disk: Path) -> None:
    proc = BrokerProcess(disk / "data").start()
    with proc.client() as native:
        native.create_topic("txt")
    try:
        first = transactional(proc, "tx-first")
        first.init_transactions(WAIT)  # reserves a block of producer ids
        run_transaction(first, [b"a"])
        filler = fill(disk)
        p = transactional(proc, LONG_TID)
        with pytest.raises(KafkaException) as failure:
            p.init_transactions(5)
        assert failure.value.args[0].retriable(), failure.value
        filler.unlink()
        p.init_transactions(WAIT)
        run_transaction(p, [b"b", b"c"])
        time.sleep(0.5)
        lines = fault_lines(proc)
        assert 1 <= len(lines) <= 3, lines
        assert "Traceback" not in proc.log()
        proc.kill()
        proc.start()
        assert read_committed(proc, 3) == [b"a", b"b", b"c"]
        # The id's state survived: a new incarnation is fenced in, and commits.
        again = transactional(proc, LONG_TID)
        again.init_transactions(WAIT)
        run_transaction(again, [b"d"])
    finally:
        proc.kill()


class FsyncFaultBroker(BrokerProcess):
    """A broker whose ``os.fdatasync`` fails with EIO on files named in the trigger file
    ``<data-dir>/../fail-fsync`` (one name a line) while that file exists."""

    @property
    def trigger(self) -> Path:
        return self.data_dir.parent / "fail-fsync"

    def command(self) -> list[str]:
        real = super().command()
        return [sys.executable, str(FSYNC_LAUNCHER), str(self.trigger), *real[1:]]


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_failed_fsync_takes_the_store_offline_until_reopened(tmp_path: Path) -> None:
    proc = FsyncFaultBroker(tmp_path / "data")
    (tmp_path / "data").mkdir()
    proc.start()
    with proc.client() as native:
        native.create_topic("t")
    c = consumer(proc)
    try:
        wait_until(lambda: http_get(proc.http_port, "/readyz")[0] == 200, "ready")
        assert commit(c, 1) is None
        proc.trigger.write_text("consumer-offsets.log\n")
        assert commit(c, 2) is not None  # the sync failed: not acknowledged
        proc.trigger.unlink()  # the disk works again, but the store stays latched ...
        status, body = http_get(proc.http_port, "/readyz")
        assert status == 503, body
        assert "consumer offsets store offline" in body and "fdatasync failed" in body
        metrics = http_get(proc.http_port, "/metrics")[1]
        assert 'brokerd_store_offline{store="consumer offsets store"} 1.0' in metrics
        assert commit(c, 3) is not None  # ... until its reopen from disk
        # The first reopen is due 5 s after the failure (polled every 5 s).
        wait_until(lambda: http_get(proc.http_port, "/readyz")[0] == 200, "the reopen")
        assert commit(c, 4) is None
        assert committed(c) == 4
        assert "is back online" in proc.log()
        assert "Traceback" not in proc.log()
        c.close()
        proc.kill()
        proc.start()
        c = consumer(proc)
        assert committed(c) == 4
    finally:
        c.close()
        proc.kill()


def test_a_failed_share_acknowledgement_did_not_happen(tmp_path: Path) -> None:
    """The share-state journal on a failing fdatasync, with native queue consumers: the
    acknowledgement whose sync failed is answered with an error and undone (its records
    go back to the group, delivered again with a higher count), the records the journal
    holds as acquired stay with their consumer, and after the reopen every record ends
    accepted once, across a kill -9."""
    proc = FsyncFaultBroker(tmp_path / "data")
    (tmp_path / "data").mkdir()
    proc.start()
    a, b = proc.client(), proc.client()
    try:
        a.create_topic("jobs", 1)
        assert a.queue_fetch("crew", "jobs", 0, max_records=1, max_wait_ms=0) == []
        a.produce("jobs", 0, [b"job-%d" % i for i in range(10)])
        got = a.queue_fetch("crew", "jobs", 0, max_records=10, max_wait_ms=1000)
        assert [(r.offset, r.delivery_count) for r in got] == [(i, 1) for i in range(10)]
        proc.trigger.write_text("share-state.log\n")
        with pytest.raises(NativeError) as refused:
            a.queue_acknowledge("crew", "jobs", 0, [(0, 4, AckKind.ACCEPT)])
        assert refused.value.code == ErrorCode.STORAGE_ERROR
        proc.trigger.unlink()
        wait_until(lambda: http_get(proc.http_port, "/readyz")[0] == 200, "the reopen")
        # a still holds 5-9 (their acquisition is in the journal); 0-4 are the group's.
        a.queue_acknowledge("crew", "jobs", 0, [(5, 9, AckKind.ACCEPT)])
        again = b.queue_fetch("crew", "jobs", 0, max_records=10, max_wait_ms=1000)
        assert [(r.offset, r.delivery_count) for r in again] == [(i, 2) for i in range(5)]
        with pytest.raises(NativeError):  # a's hold on 0-4 ended with the failed write
            a.queue_acknowledge("crew", "jobs", 0, [(0, 4, AckKind.ACCEPT)])
        b.queue_acknowledge("crew", "jobs", 0, [(0, 4, AckKind.ACCEPT)])
    finally:
        a.close()
        b.close()
    proc.kill()
    proc.start()
    try:
        with proc.client() as c:
            (part,) = c.describe_share_group("crew")["partitions"]  # type: ignore[misc]
            assert (part["start_offset"], part["backlog"], part["in_flight"]) == (10, 0, 0)
            assert c.queue_fetch("crew", "jobs", 0, max_records=10, max_wait_ms=0) == []
        assert "Traceback" not in proc.log()
    finally:
        proc.kill()
