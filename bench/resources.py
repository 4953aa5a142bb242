"""What the broker process costs: resident memory with many partitions and idle
connections, and the time a restart takes with a large log directory.

RSS is read from /proc of the twistd process: empty, after creating the partitions, and
after opening the idle native connections (each checked to be accepted). For 10,000
connections the file-descriptor limit is raised in this process (the broker inherits it;
``prlimit`` raises it on the broker too if it did not). Restart time is measured from the
start of ``twistd`` until both listeners answer a request (native ListTopics, Kafka
ApiVersions), after a ``kill -9`` (the recovery path) and after a clean SIGTERM shutdown;
afterwards every record produced must still be there.
"""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import time

from bench.common import (
    Brokers,
    Curve,
    Results,
    Row,
    kafka_answers,
    native_answers,
    rss_bytes,
    spawn,
    tool,
    value,
)
from brokerd.native import client_codec, messages

from tests.brokerproc import BrokerProcess

SECTION = "resources"
MIB = 1024 * 1024
RESTART_SIZE = 1000
RESTART_DEPTH = 8
ANSWER_TIMEOUT = 600.0
# Descriptors beyond the connections: partitions' open segment files and the rest.
FDS_PER_PARTITION = 4
FD_SLACK = 4096


def raise_nofile(needed: int) -> int:
    """Raise this process's descriptor limit to at least ``needed`` if allowed; the new
    soft limit. Children started afterwards inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY or hard >= needed else hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(needed, hard)))
        return needed
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target


def _broker_nofile(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return 0


def _ensure_broker_nofile(pid: int, needed: int) -> None:
    prlimit = tool("prlimit")
    if _broker_nofile(pid) < needed and prlimit is not None:
        subprocess.run([prlimit, f"--pid={pid}", f"--nofile={needed}:{needed}"], check=False)


def _settled_rss(pid: int) -> float:
    time.sleep(1.0)
    return rss_bytes(pid) / MIB


def rss(results: Results, brokers: Brokers, levels: list[int]) -> None:
    """RSS with ``n`` partitions, then ``n`` idle connections too, for each ``n``."""
    top = max(levels)
    limit = raise_nofile(top + top * FDS_PER_PARTITION + FD_SLACK)
    curve = Curve("Broker RSS", "partitions (and idle connections)", "RSS (MiB)", logx=True)
    sockets: list[socket.socket] = []
    with brokers.fresh("--max-connections=0", "--fsync=never") as proc:
        assert proc.proc is not None
        pid = proc.proc.pid
        _ensure_broker_nofile(pid, limit)
        empty = _settled_rss(pid)
        results.add(Row(SECTION, "brokerd", "RSS, empty broker", "", empty, "MiB"))
        partitions = 0
        try:
            for n in sorted(levels):
                with proc.client(timeout=600) as client:
                    client.create_topic(f"rss-{n}", n - partitions)
                partitions = n
                after_partitions = _settled_rss(pid)
                curve.series.setdefault("partitions only", []).append((n, after_partitions))
                results.add(Row(SECTION, "brokerd", f"RSS with {n:,} partitions", "",
                                after_partitions, "MiB",
                                f"{(after_partitions - empty) * 1024 / n:,.1f} KiB/partition"))
                while len(sockets) < n:
                    sockets.append(socket.create_connection(("127.0.0.1", proc.native_port)))
                if not native_answers(proc, timeout=60):
                    raise RuntimeError("the broker stopped answering with idle connections open")
                after_connections = _settled_rss(pid)
                curve.series.setdefault("+ the same number of idle connections", []).append(
                    (n, after_connections)
                )
                per = (after_connections - after_partitions) * 1024 / n
                results.add(Row(SECTION, "brokerd",
                                f"RSS with {n:,} partitions + {n:,} idle connections", "",
                                after_connections, "MiB", f"{per:,.1f} KiB/connection"))
        finally:
            for sock in sockets:
                sock.close()
    results.curves["rss"] = curve


def _fill(proc: BrokerProcess, topic: str, partitions: int, total_bytes: int) -> int:
    """Write about ``total_bytes`` of 1,000-byte values spread evenly; records written."""
    per_partition = max(1, total_bytes // partitions // RESTART_SIZE)
    per_request = min(1000, per_partition)
    rounds = max(1, per_partition // per_request)
    frames = [
        client_codec.encode_produce(topic, p, [value(RESTART_SIZE)] * per_request)
        for p in range(partitions)
    ]
    requests = [(messages.RequestType.PRODUCE, f) for _ in range(rounds) for f in frames]
    with proc.client(timeout=600) as client:
        for i in range(0, len(requests), RESTART_DEPTH):
            for r in client.call_many(requests[i : i + RESTART_DEPTH]):
                if not isinstance(r, messages.ProduceResponse):
                    raise RuntimeError(f"produce answered {r!r}")
    return len(requests) * per_request


def _stored(proc: BrokerProcess, topic: str, partitions: int) -> int:
    with proc.client(timeout=60) as client:
        return sum(client.list_offsets(topic, p)[1] for p in range(partitions))


def _start_timed(proc: BrokerProcess) -> float:
    """Seconds from spawning twistd until both listeners answer."""
    start = time.perf_counter()
    spawn(proc)
    assert proc.proc is not None and proc.kafka_port is not None
    deadline = start + ANSWER_TIMEOUT
    while time.perf_counter() < deadline:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"the broker exited while starting; log:\n{proc.log()[-2000:]}")
        if native_answers(proc, timeout=1.0) and kafka_answers(proc.kafka_port):
            return time.perf_counter() - start
        time.sleep(0.02)
    raise RuntimeError("the broker did not answer in time after a restart")


def _stop_timed(proc: BrokerProcess) -> float:
    """Seconds from SIGTERM to exit (the clean stop syncs what ``--fsync never`` left)."""
    assert proc.proc is not None
    begin = time.perf_counter()
    proc.proc.send_signal(signal.SIGTERM)
    try:
        code = proc.proc.wait(ANSWER_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError("the broker did not stop on SIGTERM") from None
    seconds = time.perf_counter() - begin
    # twistd re-raises SIGTERM after its clean shutdown (so systemd sees it): -15 is clean.
    if code not in (0, -signal.SIGTERM) or not (proc.data_dir / ".clean_shutdown").exists():
        raise RuntimeError(f"the broker exited with {code} on SIGTERM, not cleanly")
    return seconds


def restart(results: Results, brokers: Brokers, partitions: int, total_bytes: int) -> None:
    curve = Curve(f"Restart time, {partitions:,} partitions, {total_bytes / 1e9:.2f} GB",
                  "", "seconds")
    where = f"{partitions:,} partitions, {total_bytes / 1e9:,.2f} GB"
    with brokers.fresh("--fsync=never") as proc:
        with proc.client(timeout=600) as client:
            client.create_topic("restart", partitions)
        written = _fill(proc, "restart", partitions, total_bytes)
        proc.kill()
        unclean = _start_timed(proc)
        after_crash = _stored(proc, "restart", partitions)
        shutdown = _stop_timed(proc)
        clean = _start_timed(proc)
        after_clean = _stored(proc, "restart", partitions)
    kept = f"{after_crash:,} of {written:,} records kept"
    if after_crash != written or after_clean != written:
        raise RuntimeError(f"records lost over restarts: {kept}, then {after_clean:,}")
    results.add(Row(SECTION, "brokerd", f"start after kill -9 until both listeners answer, "
                    f"{where}", "fsync never", unclean, "s", kept))
    results.add(Row(SECTION, "brokerd", f"clean shutdown (SIGTERM to exit), {where}",
                    "fsync never", shutdown, "s"))
    results.add(Row(SECTION, "brokerd", f"start after a clean shutdown until both listeners "
                    f"answer, {where}", "fsync never", clean, "s"))
    curve.series["seconds"] = [(0, unclean), (1, shutdown), (2, clean)]
    results.curves["restart"] = curve
