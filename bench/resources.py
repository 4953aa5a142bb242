"""What the broker process costs: resident memory with many partitions and idle
connections, and the time a restart takes with a large log directory.

RSS is read from /proc of the twistd process: empty, after creating the partitions, and
after opening the idle native connections (each checked to be accepted), with the
descriptors the broker holds then. For 10,000 connections the file-descriptor limit is
raised in this process as far as the hard limit allows (the broker inherits it;
``prlimit`` raises it on the broker too if it did not). The broker keeps at most a
budget of segment files open (``brokerd/storage/segment/fd_cache.py``, sized from that limit), so
a level needs about ``min(partitions, budget)`` descriptors for files plus one per
connection. Restart time is measured from the
start of ``twistd`` until both listeners answer a request (native ListTopics, Kafka
ApiVersions): after a ``kill -9`` right after writing the data unsynced (``--fsync
never``: recovery checks what lies past the recovery point), then, with a tenth more
written, the clean SIGTERM stop (which syncs it) and the start after it. Every record
produced must still be there. The broker's modules are compiled to bytecode first, as
an installed package's are.
"""

from __future__ import annotations

import compileall
import os
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
from brokerd.storage.segment.fd_cache import DESCRIPTOR_RESERVE, default_budget

from tests.brokerproc import REPO, BrokerProcess

SECTION = "resources"
MIB = 1024 * 1024
RESTART_SIZE = 1000
RESTART_DEPTH = 8
ANSWER_TIMEOUT = 600.0
# Before the clean stop, this share of the data is written again (unsynced).
REFILL_SHARE = 10
# Descriptors a partition holds (its segment's log file, while the budget allows), before
# the first level measures it; and those beyond segment files and connections (listeners,
# journal, offsets, pools: the broker's own reserve).
FDS_PER_PARTITION = 1
FD_SLACK = DESCRIPTOR_RESERVE
RSS_SETTLE_SECONDS = 1.0


def raise_nofile(needed: int) -> int:
    """Raise this process's descriptor limit towards ``needed`` as far as allowed (the hard
    limit, unless the process may raise that too); the new soft limit. Children started
    afterwards inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(needed, hard)))
        return needed
    except (ValueError, OSError):
        # Raising the hard limit needs CAP_SYS_RESOURCE.
        target = hard if hard != resource.RLIM_INFINITY else needed
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target


def _broker_nofile(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return 0


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _settled_rss(pid: int) -> float:
    time.sleep(RSS_SETTLE_SECONDS)
    return rss_bytes(pid) / MIB


def _connect(proc: BrokerProcess, sockets: list[socket.socket], total: int) -> None:
    """Open idle native connections until ``total`` are open; the broker must still answer."""
    while len(sockets) < total:
        sockets.append(socket.create_connection(("127.0.0.1", proc.native_port)))
    if not native_answers(proc, timeout=60):
        raise RuntimeError("the broker stopped answering with idle connections open")


def rss(results: Results, brokers: Brokers, levels: list[int]) -> None:
    """RSS with ``n`` partitions, then ``n`` idle connections too, for each ``n``. A level
    the descriptor limit cannot hold gives rows that say so."""
    top = max(levels)
    wanted = top * (FDS_PER_PARTITION + 1) + FD_SLACK
    limit = raise_nofile(wanted)
    curve = Curve("Broker RSS", "partitions (and idle connections)", "RSS (MiB)", logx=True)
    results.curves["rss"] = curve
    sockets: list[socket.socket] = []
    with brokers.fresh("--max-connections=0", "--fsync=never") as proc:
        assert proc.proc is not None
        pid = proc.proc.pid
        prlimit = tool("prlimit")
        if _broker_nofile(pid) < limit and prlimit is not None:
            subprocess.run([prlimit, f"--pid={pid}", f"--nofile={limit}:{limit}"], check=False)
        limit = _broker_nofile(pid)
        budget = default_budget(limit)
        empty = _settled_rss(pid)
        results.add(Row(SECTION, "brokerd", "RSS, empty broker", "", empty, "MiB"))
        partitions = 0
        per_partition = float(FDS_PER_PARTITION)
        try:
            for n in sorted(levels):
                connections = f"RSS with {n:,} partitions + {n:,} idle connections"
                needed = int(min(n * per_partition, budget) + n + FD_SLACK)
                if needed > limit:
                    why = (f"needs about {needed:,} descriptors ({per_partition:.1f} per "
                           f"partition up to {budget:,} files, 1 per connection); "
                           f"RLIMIT_NOFILE here is {limit:,} and could not be raised (that "
                           "needs CAP_SYS_RESOURCE)")
                    for what in (f"RSS with {n:,} partitions", connections):
                        results.add(Row(SECTION, "brokerd", what, "", None, "MiB", why))
                    # The connections alone may still fit beside the partitions already made.
                    held = min(partitions * per_partition, budget)
                    if partitions and held + n + FD_SLACK <= limit:
                        base, added = _settled_rss(pid), n - len(sockets)
                        _connect(proc, sockets, n)
                        after = _settled_rss(pid)
                        results.add(Row(
                            SECTION, "brokerd",
                            f"RSS with {partitions:,} partitions + {n:,} idle connections", "",
                            after, "MiB",
                            f"{(after - base) * 1024 / added:,.1f} KiB/connection",
                        ))
                    continue
                before = _open_fds(pid)
                with proc.client(timeout=600) as client:
                    client.create_topic(f"rss-{n}", n - partitions)
                fds = _open_fds(pid)
                if fds - before < budget:
                    per_partition = max(per_partition, (fds - before) / (n - partitions))
                partitions = n
                after_partitions = _settled_rss(pid)
                curve.series.setdefault("brokerd, partitions only", []).append(
                    (n, after_partitions)
                )
                results.add(Row(SECTION, "brokerd", f"RSS with {n:,} partitions", "",
                                after_partitions, "MiB",
                                f"{(after_partitions - empty) * 1024 / n:,.1f} KiB/partition, "
                                f"{fds:,} descriptors open"))
                _connect(proc, sockets, n)
                after_connections = _settled_rss(pid)
                curve.series.setdefault(
                    "brokerd + the same number of idle connections", []
                ).append((n, after_connections))
                per = (after_connections - after_partitions) * 1024 / n
                results.add(Row(SECTION, "brokerd", connections, "", after_connections, "MiB",
                                f"{per:,.1f} KiB/connection, {_open_fds(pid):,} of "
                                f"{limit:,} descriptors open"))
        finally:
            for sock in sockets:
                sock.close()


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


def _compiled() -> None:
    """Bytecode for the broker's modules, as an installed package has (pip compiles it
    at install). Without it, under ``PYTHONDONTWRITEBYTECODE`` (set on this machine and
    in many CI images) every start compiles brokerd from source: 0.3-0.5 s of each
    start measured here, which no deployed broker pays."""
    compileall.compile_dir(str(REPO / "brokerd"), quiet=1)


#: Clean starts timed in the restart step (each after a clean stop); the fastest stands.
CLEAN_STARTS = 3


def restart_whats(partitions: int, total_bytes: int) -> tuple[str, str, str]:
    """The restart rows' names (start after kill -9, clean stop, start after it), the same
    for every broker measured."""
    where = f"{partitions:,} partitions, {total_bytes / 1e9:,.2f} GB"
    return (f"start after kill -9 until both listeners answer, {where}",
            f"clean shutdown (SIGTERM to exit), {where}",
            f"start after a clean shutdown until both listeners answer, {where}")


def restart(results: Results, brokers: Brokers, partitions: int, total_bytes: int) -> None:
    _compiled()
    curve = Curve(f"Restart time, {partitions:,} partitions, {total_bytes / 1e9:.2f} GB",
                  "", "seconds")
    unclean_what, shutdown_what, clean_what = restart_whats(partitions, total_bytes)
    with brokers.fresh("--fsync=never") as proc:
        with proc.client(timeout=600) as client:
            client.create_topic("restart", partitions)
        written = _fill(proc, "restart", partitions, total_bytes)
        proc.kill()
        unclean = _start_timed(proc)
        after_crash = _stored(proc, "restart", partitions)
        # Unsynced data for the clean stop to sync, as a running broker would have.
        more = _fill(proc, "restart", partitions, total_bytes // REFILL_SHARE)
        shutdown = _stop_timed(proc)
        clean = _start_timed(proc)
        # The first clean start may meet the kernel still writing back the fill; the
        # fastest of a few stands (each after its own clean stop, nothing left to sync).
        for _ in range(CLEAN_STARTS - 1):
            _stop_timed(proc)
            clean = min(clean, _start_timed(proc))
        after_clean = _stored(proc, "restart", partitions)
    kept = f"{after_crash:,} of {written:,} records kept"
    if after_crash != written or after_clean != written + more:
        raise RuntimeError(f"records lost over restarts: {kept}, then {after_clean:,} of "
                           f"{written + more:,}")
    results.add(Row(SECTION, "brokerd", unclean_what, "fsync never", unclean, "s", kept))
    results.add(Row(SECTION, "brokerd", shutdown_what, "fsync never", shutdown, "s",
                    f"{more:,} records written since the start left to sync"))
    results.add(Row(SECTION, "brokerd", clean_what, "fsync never", clean, "s",
                    f"fastest of {CLEAN_STARTS} clean starts"))
    curve.series["seconds"] = [(0, unclean), (1, shutdown), (2, clean)]
    results.curves["restart"] = curve
