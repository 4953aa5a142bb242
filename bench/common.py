"""What every ``make bench`` module shares: result rows, sizes, brokers started for a run.

Rows are plain data (the report module renders them); a figure of ``None`` is a row that
could not be measured, and its ``note`` says why, so that a report always lists every row.
This module starts no peer servers and measures nothing itself.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.brokerproc import BrokerProcess, env  # noqa: E402

if TYPE_CHECKING:
    from bench.workloads import WorkloadRun

SIZES = (100, 1000)
MB = 1_000_000
# The native protocol's largest produce payload is 1 MiB: 1,000 values of 1,000 B fit.
NATIVE_BATCH = 1000
NATIVE_DEPTH = 8
# A subprocess that outlives this is stuck: it is killed and its row says so.
TOOL_TIMEOUT = 300.0


def value(size: int) -> bytes:
    return b"x" * size


@dataclass(frozen=True)
class Row:
    """One measured figure: ``value`` in ``unit`` (None: not measured, ``note`` says why)."""

    section: str
    system: str
    what: str
    durability: str
    value: float | None
    unit: str
    note: str = ""
    # Records of ``size`` bytes: throughput rows also show MB/s of values.
    size: int = 0

    @property
    def mb_per_s(self) -> float | None:
        if self.value is None or self.unit != "rec/s" or not self.size:
            return None
        return self.value * self.size / MB


@dataclass(frozen=True)
class Latency:
    """Percentiles of one latency distribution, in milliseconds."""

    what: str
    durability: str
    n: int
    p50: float
    p99: float
    p999: float
    max: float
    system: str = "brokerd"


@dataclass
class Curve:
    """One scaling curve: ``y`` against ``x`` for each named series."""

    title: str
    xlabel: str
    ylabel: str
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    logx: bool = False


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    latencies: list[Latency] = field(default_factory=list)
    curves: dict[str, Curve] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    # (step, seconds, status) in run order; status is "ok" or why the step fell short.
    steps: list[tuple[str, float, str]] = field(default_factory=list)
    # The workload matrix (bench/workloads.py), brokerd's and Apache Kafka's runs.
    workloads: list[WorkloadRun] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)


def percentiles(what: str, durability: str, seconds: list[float]) -> Latency:
    """Nearest-rank percentiles of ``seconds`` (empty: zeros with n=0)."""
    if not seconds:
        return Latency(what, durability, 0, 0.0, 0.0, 0.0, 0.0)
    s = sorted(seconds)

    def pick(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))] * 1000

    return Latency(what, durability, len(s), pick(0.5), pick(0.99), pick(0.999), s[-1] * 1000)


class Brokers:
    """Brokers shared by the steps of one run, by option set, each in its own directory.

    Sharing keeps the run short (a start and a clean stop cost seconds); steps that
    measure the process itself (RSS, restarts) start their own with ``fresh``.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._shared: dict[tuple[str, ...], BrokerProcess] = {}
        self._count = 0

    def shared(self, *args: str) -> BrokerProcess:
        if args not in self._shared:
            self._shared[args] = self._start(args)
        return self._shared[args]

    @contextmanager
    def fresh(self, *args: str) -> Iterator[BrokerProcess]:
        proc = self._start(args)
        try:
            yield proc
        finally:
            stop_quietly(proc)
            shutil.rmtree(proc.data_dir, ignore_errors=True)

    def _start(self, args: tuple[str, ...]) -> BrokerProcess:
        self._count += 1
        home = self.root / f"broker{self._count}"
        home.mkdir(parents=True, exist_ok=True)
        return BrokerProcess(home / "data", args=args).start()

    def close(self) -> None:
        # Killed, not stopped: their data is scratch, and a clean stop of a broker holding
        # gigabytes unsynced (--fsync never) would spend the run's time syncing it.
        for proc in self._shared.values():
            proc.kill()
        self._shared.clear()


def stop_quietly(proc: BrokerProcess) -> None:
    try:
        proc.stop()
    except RuntimeError:
        proc.kill()


def spawn(proc: BrokerProcess) -> None:
    """Start ``proc``'s twistd without waiting (restart timing does its own waiting)."""
    proc.data_dir.parent.mkdir(parents=True, exist_ok=True)
    proc.proc = subprocess.Popen(proc.command(), env=env(), cwd=proc.data_dir.parent)


_API_VERSIONS_V0 = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 5) + b"bench"


def kafka_answers(port: int, timeout: float = 1.0) -> bool:
    """True when the Kafka listener answers an ApiVersions v0 request."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
            head = sock.recv(4)
            return len(head) == 4 and struct.unpack(">i", head)[0] > 0
    except OSError:
        return False


def native_answers(proc: BrokerProcess, timeout: float = 1.0) -> bool:
    """True when the native listener answers a ListTopics request."""
    try:
        with proc.client(timeout=timeout) as client:
            client.list_topics()
            return True
    except (OSError, ConnectionError):
        return False


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` from /proc (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for d in ("/usr/sbin", "/sbin") if os.access(p := f"{d}/{name}", os.X_OK)), None
    )


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


def elapsed(start: float) -> float:
    return time.perf_counter() - start
