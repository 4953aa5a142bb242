"""Crash loops against a real broker: ``kill -9`` at a random instant under produce load,
restart, and check the Jepsen-style anomalies a log must never show (lost acknowledged
writes, duplicates, inconsistent offsets, reordering). Plus a garbage tail written into
the active segment while the broker is down.

``make test`` runs a few cycles; ``make test-long`` runs many more (``-m slow``).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from brokerd.client import NativeClient

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.broker

TOPIC = "crash"
PRODUCERS = 2


def _producer(
    proc: BrokerProcess, pid: int, start: int, acked: dict[int, bytes], stop: threading.Event
) -> None:
    seq = start
    try:
        with NativeClient("127.0.0.1", proc.native_port, timeout=5) as client:
            while not stop.is_set():
                values = [b"p%d-%08d" % (pid, seq + i) for i in range(10)]
                base = client.produce(TOPIC, 0, values)
                for i, value in enumerate(values):
                    acked[base + i] = value
                seq += len(values)
    except (OSError, ConnectionError):
        pass  # the broker was killed: sends in flight are indeterminate


def _read_all(proc: BrokerProcess) -> list[bytes]:
    out: list[bytes] = []
    with proc.client() as client:
        while True:
            values = client.fetch(TOPIC, 0, len(out))
            if not values:
                return out
            out.extend(values)


def crash_loop(tmp_path: Path, cycles: int, seed: int) -> None:
    rng = random.Random(seed)
    proc = BrokerProcess(tmp_path / "data", kafka=False).start()
    acked: dict[int, bytes] = {}
    next_seq = [0] * PRODUCERS
    try:
        with proc.client() as client:
            client.create_topic(TOPIC, 1)
        for _cycle in range(cycles):
            stop = threading.Event()
            threads = [
                threading.Thread(target=_producer, args=(proc, p, next_seq[p], acked, stop))
                for p in range(PRODUCERS)
            ]
            for t in threads:
                t.start()
            stop.wait(rng.uniform(0.2, 0.8))
            proc.kill()
            stop.set()
            for t in threads:
                t.join(10)
            proc.start()
            log = _read_all(proc)
            lost = [o for o, v in acked.items() if o >= len(log) or log[o] != v]
            assert not lost, f"{len(lost)} acknowledged records lost or changed, first {lost[:5]}"
            assert len(set(log)) == len(log), "a value appears at two offsets"
            for p in range(PRODUCERS):
                mine = [int(v.split(b"-")[1]) for v in log if v.startswith(b"p%d-" % p)]
                assert mine == sorted(mine), f"producer {p} records out of order"
                next_seq[p] = (mine[-1] + 1) if mine else next_seq[p]
        assert len(acked) > 0
    finally:
        proc.kill()


def test_crash_loop_short(tmp_path: Path) -> None:
    crash_loop(tmp_path, cycles=4, seed=1)


@pytest.mark.slow
def test_crash_loop_long(tmp_path: Path) -> None:
    crash_loop(tmp_path, cycles=60, seed=2)


def test_garbage_tail_after_a_crash_is_truncated(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", kafka=False).start()
    try:
        with proc.client() as client:
            client.produce("torn", 0, [b"a", b"b", b"c"])
        proc.kill()
        segment = proc.data_dir / "torn-0" / ("0" * 20 + ".log")
        size = segment.stat().st_size
        with segment.open("ab") as f:
            f.write(random.Random(3).randbytes(333))
        proc.start()
        with proc.client() as client:
            assert client.fetch("torn", 0, 0) == [b"a", b"b", b"c"]
            assert client.produce("torn", 0, [b"d"]) == 3
            assert client.fetch("torn", 0, 0) == [b"a", b"b", b"c", b"d"]
        assert segment.stat().st_size > size
    finally:
        proc.kill()
