"""Time kcat reading one partition from a local brokerd: the Kafka fetch path's probe.

For each case (by default 1,000,000 x 100 B and 300,000 x 1,000 B records), a broker of
this checkout is started on a fresh data directory, the records are produced to
partition 0 of a one-partition topic with confluent-kafka, and then

    kcat -C -b HOST:PORT -t TOPIC -p 0 -o beginning -e -q -f ''

is timed ``--repeat`` times (kcat decodes every record and prints nothing). The report
gives the best run, the spread (worst - best), MB/s of record values, and the CPU time
the broker process spent serving each run (least, and its spread): kcat itself, which
decodes every record, shares the machine and often bounds the wall time. So each case
is also read ``--repeat`` times by a minimal Python client (:func:`raw_fetch`) that
decodes only batch headers: there the broker's fetch path is the bound. With
``--verify`` one more kcat run prints every offset and the count and last offset are
checked. With ``--redis``, redis-benchmark's ``XRANGE s - + COUNT 1000`` is run on a
stream of the same value size in the same run (as ``make bench`` does: ``-c 50``, Redis
without persistence, ``--repeat`` rounds), and the report gives kcat's ratio to it. Each
kcat run's own CPU time (user + system) is recorded too: when it is far below the wall
time, kcat is waiting, not decoding. With ``--profile DIR``, ``py-spy record --gil``
samples the broker's Python work during three more kcat runs and writes the raw
collapsed stacks plus a summary (self time per function, and time under each of the
fetch path's stages) there (py-spy must be installed in the venv:
``.venv/bin/pip install py-spy``). With ``--against CHECKOUT`` (another brokerd checkout
with its own ``.venv``, e.g. the main branch), the produced data directory is copied, a
broker of that checkout serves the copy beside this one's (both restarted, one warm-up
read each so every byte has been checked once), and ``--repeat`` kcat reads alternate
between the two: a side-by-side comparison in the same minutes (median, range, broker
CPU), which is what a shared machine needs.

Every process it starts is stopped by its own PID. It prints one line per step.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.brokerproc import BrokerProcess  # noqa: E402

#: (records, value bytes) of the default cases.
DEFAULT_CASES = ((1_000_000, 100), (300_000, 1_000))
TOPIC = "fetchprobe"
#: Partition bytes a raw-client fetch asks for (librdkafka's default per partition).
RAW_FETCH_BYTES = 1024 * 1024
#: py-spy samples per second, and kcat runs sampled, for ``--profile``.
PROFILE_RATE = 1000
PROFILE_RUNS = 3
#: Seconds one kcat run may take before the probe gives up on it.
KCAT_TIMEOUT = 600.0


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def produce(bootstrap: str, records: int, size: int) -> float:
    """Produce ``records`` values of ``size`` bytes to partition 0; returns seconds."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
            "acks": "all",
        }
    )
    value = b"v" * size
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kcat(bootstrap: str, fmt: str = "") -> tuple[float, bytes]:
    seconds, out, _cpu = kcat_timed(bootstrap, fmt)
    return seconds, out


def kcat_timed(bootstrap: str, fmt: str = "") -> tuple[float, bytes, float]:
    """One kcat read of the partition: wall seconds, its output, and the CPU seconds
    (user + system) kcat itself used."""
    command = [
        "kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0",
        "-o", "beginning", "-e", "-q", "-f", fmt,
    ]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"kcat failed with status {proc.returncode}")
        out.seek(0)
        return seconds, out.read(), usage.ru_utime + usage.ru_stime


#: redis-benchmark's XRANGE as ``make bench`` runs it (bench/peers.py).
XRANGE_COUNT = 1000
XRANGE_CALLS = 2000
XRANGE_ENTRIES = 20_000


def redis_xrange(size: int, repeat: int) -> list[float]:
    """Records/s of ``redis-benchmark -c 50 XRANGE s - + COUNT 1000`` on a stream of
    ``size``-byte values (Redis without persistence), ``repeat`` rounds."""
    from bench.peers import _redis_benchmark, _server

    from tests.brokerproc import free_port

    server, bench = shutil.which("redis-server"), shutil.which("redis-benchmark")
    if server is None or bench is None:
        raise RuntimeError("redis-server or redis-benchmark missing (make bench-deps)")
    with tempfile.TemporaryDirectory(prefix="fetchprobe-redis-") as tmp:
        port = free_port()
        command = [server, "--bind", "127.0.0.1", "--port", str(port), "--dir", tmp,
                   "--appendonly", "no", "--save", ""]
        with _server(command, port):
            _redis_benchmark(bench, port, ["-n", str(XRANGE_ENTRIES), "-c", "50", "-P", "100",
                                           "XADD", "s", "*", "f", "v" * size])
            return [
                XRANGE_COUNT * _redis_benchmark(
                    bench, port, ["-n", str(XRANGE_CALLS), "-c", "50",
                                  "XRANGE", "s", "-", "+", "COUNT", str(XRANGE_COUNT)])
                for _ in range(repeat)
            ]


def raw_fetch(bootstrap: str, records: int, partition_max_bytes: int = RAW_FETCH_BYTES) -> float:
    """Seconds for a minimal Python client to fetch every record of partition 0 with
    sequential Fetch v4 requests (``partition_max_bytes`` each, as librdkafka asks by
    default). It reads every byte but decodes only batch headers: the broker's side of
    the fetch path bounds it, not record decoding."""
    import socket
    import struct

    from brokerd.kafka.wire.codec import ApiKey, RequestHeader
    from brokerd.kafka.wire.requests import apis
    from brokerd.storage.record.header import BATCH_HEADER_SIZE, LOG_OVERHEAD, read_header

    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))

    def recv_exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 4 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    offset = 0
    correlation = 0
    start = time.perf_counter()
    try:
        while offset < records:
            correlation += 1
            body = apis.FetchRequest(
                max_wait_ms=500, min_bytes=1, max_bytes=50 * 1024 * 1024,
                topics=(apis.FetchTopic(topic=TOPIC, partitions=(apis.FetchPartition(
                    partition=0, fetch_offset=offset,
                    partition_max_bytes=partition_max_bytes),)),),
            )
            sock.sendall(apis.encode_request(
                RequestHeader(int(ApiKey.FETCH), 4, correlation, "fetch-probe"), body))
            (size,) = struct.unpack(">i", recv_exactly(4))
            _, response = apis.decode_response(ApiKey.FETCH, 4, recv_exactly(size))
            part = response.responses[0].partitions[0]
            if part.error_code:
                raise RuntimeError(f"fetch at {offset}: error {part.error_code}")
            data = part.records or b""
            pos = 0
            while len(data) - pos >= BATCH_HEADER_SIZE:
                header = read_header(data, pos)
                if pos + LOG_OVERHEAD + header.batch_length > len(data):
                    break  # a trailing partial batch: fetched again next time
                offset = header.base_offset + header.last_offset_delta + 1
                pos += LOG_OVERHEAD + header.batch_length
    finally:
        sock.close()
    return time.perf_counter() - start


def verify(bootstrap: str, records: int) -> None:
    _, out = kcat(bootstrap, "%o\n")
    offsets = out.split()
    if len(offsets) != records or int(offsets[-1]) != records - 1:
        raise RuntimeError(
            f"kcat read {len(offsets)} records (last {offsets[-1:]}); expected {records}"
        )
    log(f"  verified: {records} records, offsets 0..{records - 1}")


def profile(proc: BrokerProcess, bootstrap: str, out_dir: Path, label: str) -> None:
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        log("  py-spy is not installed in the venv; no profile")
        return
    assert proc.proc is not None
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / f"{label}.collapsed"
    spy = subprocess.Popen(
        # --gil: only the thread holding the GIL, i.e. Python work, not waits (epoll,
        # the read pool's idle workers, sendfile and pread release the GIL).
        [str(py_spy), "record", "--pid", str(proc.proc.pid), "--rate", str(PROFILE_RATE),
         "--format", "raw", "--output", str(raw), "--nonblocking", "--gil"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)  # py-spy attaches
        for _ in range(PROFILE_RUNS):
            kcat(bootstrap)
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        spy.wait(30)
    if raw.exists():
        summary = out_dir / f"{label}.top.txt"
        summary.write_text(summarize(raw))
        log(f"  profile: {raw} and {summary}")


#: Stages of the fetch path: time under any frame whose name contains the key.
STAGES = {
    "decode request": "KafkaDecoder.next_request",
    "handler (fetch, long poll)": "FetchHandler.fetch",
    "read (index, pread, CRC), in the pool": "_by_reference",
    "CRC check": "verify_run",
    "read-pool threads (their side of the hop, and the read)": "_threadworker",
    "encode response": "encode_response",
    "send (transport write / sendfile)": "RequestConnection.write",
    "sendfile producer": "SpliceSender.resumeProducing",
    "Twisted socket write": "FileDescriptor.doWrite",
}


def summarize(raw: Path, top: int = 20) -> str:
    """Self time per function (the leaf frame of each sample), most first; then the
    share of samples under each of :data:`STAGES`."""
    leaf: collections.Counter[str] = collections.Counter()
    under: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf[frames[-1]] += n
        for stage, key in STAGES.items():
            if any(key in frame for frame in frames):
                under[stage] += n
    share = lambda n: f"{100.0 * n / max(total, 1):5.1f}%"  # noqa: E731
    lines = [f"{total} samples (1 ms each, GIL held); self time by function"]
    lines += [f"{share(n)}  {name}" for name, n in leaf.most_common(top)]
    lines.append("")
    lines.append("time under each stage of the fetch path")
    lines += [f"{share(under[stage])}  {stage}" for stage in STAGES]
    return "\n".join(lines) + "\n"


def _start_checkout(checkout: Path, data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A ``twistd broker`` of another checkout (its own venv) on ``data_dir``."""
    from tests.brokerproc import free_port, wait_for_port

    kafka, native, http = free_port(), free_port(), free_port()
    environ = dict(os.environ)
    environ["PYTHONPATH"] = str(checkout)
    command = [
        str(checkout / ".venv" / "bin" / "twistd"), "--nodaemon", "--pidfile=",
        f"--logfile={data_dir}-twistd.log", "broker", f"--data-dir={data_dir}",
        f"--native=tcp:{native}:interface=127.0.0.1",
        f"--kafka=tcp:{kafka}:interface=127.0.0.1",
        f"--http=tcp:{http}:interface=127.0.0.1",
    ]
    options = checkout / "brokerd" / "app" / "options.py"
    if "schema-registry" in options.read_text():
        # A checkout with the schema registry: on a free port, never 8081.
        command.append(f"--schema-registry=tcp:{free_port()}:interface=127.0.0.1")
    if "http-proxy" in options.read_text():
        # Never the REST Proxy's default port (a developer's broker may hold it).
        command.append(f"--http-proxy=tcp:{free_port()}:interface=127.0.0.1")
    proc = subprocess.Popen(command, env=environ, cwd=data_dir.parent)
    if not wait_for_port(kafka, time.monotonic() + 30) or proc.poll() is not None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the broker of {checkout} did not start")
    return proc, f"127.0.0.1:{kafka}"


def side_by_side(args: argparse.Namespace, proc: BrokerProcess, records: int, size: int) -> str:
    """Alternate kcat reads between this checkout's broker and ``--against``'s, each on
    a copy of the same data (see the module docstring); one summary line per broker."""
    proc.stop()
    copy = proc.data_dir.parent / "against-data"
    shutil.copytree(proc.data_dir, copy)
    proc.start()
    other, other_bootstrap = _start_checkout(Path(args.against).resolve(), copy)
    assert proc.proc is not None
    brokers = {"this": (proc.proc.pid, proc.kafka_bootstrap), "against": (other.pid,
                                                                          other_bootstrap)}
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in brokers}
    try:
        for _pid, bootstrap in brokers.values():
            kcat(bootstrap)  # warm-up: the first read after a start checks every CRC
        for i in range(args.repeat):
            order = list(brokers) if i % 2 == 0 else list(reversed(brokers))
            for name in order:
                pid, bootstrap = brokers[name]
                before = cpu_seconds(pid)
                t, _, own = kcat_timed(bootstrap)
                runs[name].append((t, cpu_seconds(pid) - before, own))
    finally:
        other.send_signal(signal.SIGTERM)
        other.wait(30)
    lines = []
    for name, label in (("against", f"{args.against}"), ("this", "this checkout")):
        walls = sorted(r[0] for r in runs[name])
        mid = statistics.median(walls)
        lines.append(
            f"  side by side, {label}: median {mid:.3f} s ({records * size / 1e6 / mid:,.0f}"
            f" MB/s), range {walls[0]:.3f}-{walls[-1]:.3f} s, broker CPU median "
            f"{statistics.median(r[1] for r in runs[name]):.3f} s, kcat CPU median "
            f"{statistics.median(r[2] for r in runs[name]):.3f} s"
        )
    return "\n".join(lines)


def run_case(args: argparse.Namespace, records: int, size: int) -> str:
    with tempfile.TemporaryDirectory(prefix="brokerd-fetchprobe-") as tmp:
        proc = BrokerProcess(Path(tmp) / "data", args=tuple(args.broker_arg)).start()
        try:
            bootstrap = proc.kafka_bootstrap
            seconds = produce(bootstrap, records, size)
            log(f"{records:,} x {size} B: produced in {seconds:.1f}s")
            times: list[float] = []
            cpus: list[float] = []
            kcat_cpus: list[float] = []
            assert proc.proc is not None
            for i in range(args.repeat):
                before = cpu_seconds(proc.proc.pid)
                t, _, own = kcat_timed(bootstrap)
                cpu = cpu_seconds(proc.proc.pid) - before
                times.append(t)
                cpus.append(cpu)
                kcat_cpus.append(own)
                log(f"  kcat run {i + 1}: {t:.2f}s (broker CPU {cpu:.2f}s, kcat CPU {own:.2f}s)")
            raws: list[float] = []
            for i in range(args.repeat):
                before = cpu_seconds(proc.proc.pid)
                t = raw_fetch(bootstrap, records)
                raws.append(t)
                log(f"  raw client run {i + 1}: {t:.2f}s "
                    f"(broker CPU {cpu_seconds(proc.proc.pid) - before:.2f}s)")
            if args.verify:
                verify(bootstrap, records)
            if args.profile:
                profile(proc, bootstrap, Path(args.profile), f"{records}x{size}")
            if args.against:
                log(side_by_side(args, proc, records, size))
        finally:
            proc.stop()
    redis = ""
    if args.redis:
        rates = redis_xrange(size, args.repeat)
        log(f"  redis XRANGE: {', '.join(f'{r:,.0f}' for r in rates)} rec/s")
        redis = (f" {max(rates):,.0f} rec/s ({max(rates) - min(rates):,.0f}) | "
                 f"{records / min(times) / max(rates):.2f} |")
    best, worst = min(times), max(times)
    mb = records * size / 1e6
    return (
        f"| {records:,} x {size} B | {best:.2f} s | {worst - best:.2f} s | "
        f"{records / best:,.0f} rec/s | {mb / best:,.1f} MB/s | "
        f"{min(cpus):.2f} s ({max(cpus) - min(cpus):.2f}) | "
        f"{min(kcat_cpus):.2f} s ({max(kcat_cpus) - min(kcat_cpus):.2f}) | "
        f"{min(raws):.2f} s ({max(raws) - min(raws):.2f}), {mb / min(raws):,.0f} MB/s |"
        + redis
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=[], metavar="RECORDSxBYTES",
                        help="e.g. 1000000x100 (repeatable; default: the two standard cases)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--verify", action="store_true", help="check every offset arrived")
    parser.add_argument("--profile", metavar="DIR", help="py-spy the broker into DIR")
    parser.add_argument("--redis", action="store_true",
                        help="also time redis-benchmark XRANGE COUNT 1000 (the target's peer)")
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="also read side by side with a broker of another checkout")
    parser.add_argument("--broker-arg", action="append", default=[],
                        help="extra twistd broker option (repeatable)")
    args = parser.parse_args(argv)
    if shutil.which("kcat") is None:
        print("fetch_probe: kcat is not installed (Debian package kcat)", file=sys.stderr)
        return 2
    cases = [tuple(int(x) for x in c.split("x")) for c in args.case] or list(DEFAULT_CASES)
    rows = [run_case(args, records, size) for records, size in cases]
    print()
    redis = " Redis XRANGE, best (spread) | kcat / Redis |" if args.redis else ""
    print(f"| records | kcat, best of {args.repeat} | spread | records/s | value MB/s "
          "| broker CPU under kcat, least (spread) | kcat's own CPU, least (spread) "
          "| raw client, best (spread), MB/s |" + redis)
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if args.redis else ""))
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
