"""The peers measured beside brokerd: iperf3 (the loopback ceiling), Redis Streams through
``redis-benchmark`` (C) and NATS JetStream through nats-py.

Every server is started here on a free loopback port in a scratch directory and stopped by
its own PID. A peer whose server or client is missing gives rows that say so instead of
figures. nats-py is a Python asyncio client, so its rows measure the client as much as
the server ("client-bound"); no C client for JetStream ships in Debian or PyPI.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.common import MB, TOOL_TIMEOUT, Results, Row, scratch, tool, value

from tests.brokerproc import free_port, wait_for_port

SERVER_START_SECONDS = 10.0
XRANGE_COUNT = 1000
NATS_CLIENT_BOUND = "client-bound (Python client)"
XADD_WHAT = "XADD, redis-benchmark -P 100 -c 50"
XRANGE_WHAT = f"XRANGE s - + COUNT {XRANGE_COUNT}, redis-benchmark -c 50"
REDIS_MODES = (
    ("AOF everysec", ("--appendonly", "yes", "--appendfsync", "everysec", "--save", "")),
    ("no persistence", ("--appendonly", "no", "--save", "")),
)


@contextmanager
def _server(command: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_port(port, time.monotonic() + SERVER_START_SECONDS):
            raise RuntimeError(f"{command[0]} did not listen on {port}")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


#: Tries of the iperf3 client before its row says why it is missing.
IPERF3_ATTEMPTS = 4


def iperf3(results: Results, seconds: int) -> None:
    what = f"iperf3 TCP loopback, 1 stream, {seconds} s"
    binary = tool("iperf3")
    if binary is None:
        results.add(Row("ceilings", "iperf3", what, "", None, "MB/s", "iperf3 missing"))
        return
    port = free_port()
    server = [binary, "-s", "-B", "127.0.0.1", "-p", str(port)]
    client = [binary, "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"]
    with _server(server, port):
        # The readiness probe is a connection the server takes for a client's: until it
        # has dropped it, a test is refused ("the server is busy"), so a refusal is tried
        # again a few times before the row says why it is missing.
        for _ in range(IPERF3_ATTEMPTS):
            done = subprocess.run(client, capture_output=True, timeout=seconds + 30)
            answer = json.loads(done.stdout or b"{}")
            if "sum_received" in answer.get("end", {}):
                break
            time.sleep(0.5)
        else:
            why = f"iperf3 failed: {answer.get('error', done.stderr.decode()[-200:])}"
            results.add(Row("ceilings", "iperf3", what, "memory only", None, "MB/s", why))
            return
    bits = answer["end"]["sum_received"]["bits_per_second"]
    results.add(Row("ceilings", "iperf3", what, "memory only", bits / 8 / MB, "MB/s"))


def _redis_benchmark(binary: str, port: int, args: list[str]) -> float:
    """Requests per second reported by ``redis-benchmark --csv``."""
    out = subprocess.run(
        [binary, "-h", "127.0.0.1", "-p", str(port), "--csv", *args],
        capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=True,
    ).stdout
    rows = [r for r in csv.reader(io.StringIO(out)) if len(r) >= 2]
    for row in reversed(rows):
        try:
            return float(row[1])
        except ValueError:
            continue
    raise RuntimeError(f"no figure in redis-benchmark output: {out[:200]!r}")


def redis(results: Results, *, records: dict[int, int], xrange_requests: int) -> None:
    server, bench = tool("redis-server"), tool("redis-benchmark")
    if server is None or bench is None:
        for size in records:
            for mode, _ in REDIS_MODES:
                for what in (XADD_WHAT, XRANGE_WHAT):
                    results.add(Row(f"throughput {size} B", "Redis", what, mode, None, "rec/s",
                                    "redis-server or redis-benchmark missing", size))
        return
    for mode, options in REDIS_MODES:
        for size, count in records.items():
            section = f"throughput {size} B"
            with scratch("bench-redis-") as tmp:
                port = free_port()
                command = [server, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(tmp)]
                with _server([*command, *options], port):
                    payload = value(size).decode()
                    xadd = _redis_benchmark(
                        bench, port,
                        ["-n", str(count), "-c", "50", "-P", "100", "XADD", "s", "*", "f", payload],
                    )
                    results.add(Row(section, "Redis", XADD_WHAT, mode, xadd, "rec/s",
                                    f"{count:,} entries", size))
                    calls = _redis_benchmark(
                        bench, port,
                        ["-n", str(xrange_requests), "-c", "50",
                         "XRANGE", "s", "-", "+", "COUNT", str(XRANGE_COUNT)],
                    )
                    results.add(Row(
                        section, "Redis", XRANGE_WHAT, mode,
                        calls * XRANGE_COUNT, "rec/s",
                        f"{xrange_requests:,} calls x {XRANGE_COUNT:,} entries (the same first "
                        "entries each call)", size,
                    ))


def nats(results: Results, *, records: dict[int, int]) -> None:
    server = tool("nats-server")
    try:
        import nats as nats_py  # noqa: F401
    except ImportError:
        missing = "nats-py missing"
    else:
        missing = "" if server is not None else "nats-server missing"
    for size, count in records.items():
        section = f"throughput {size} B"
        if missing or server is None:
            for what in ("JetStream publish_async, acks awaited", "JetStream pull fetch(1000)"):
                results.add(Row(section, "NATS", what, "JetStream defaults (file)", None,
                                "rec/s", missing, size))
            continue
        with scratch("bench-nats-") as tmp:
            port = free_port()
            command = [server, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp)]
            with _server(command, port):
                produced, consumed = asyncio.run(
                    asyncio.wait_for(_nats(port, count, value(size)), TOOL_TIMEOUT)
                )
        note = f"{count:,} msgs, {NATS_CLIENT_BOUND}"
        results.add(Row(section, "NATS", "JetStream publish_async, acks awaited",
                        "JetStream defaults (file)", produced, "rec/s", note, size))
        results.add(Row(section, "NATS", "JetStream pull fetch(1000)",
                        "JetStream defaults (file)", consumed, "rec/s", note, size))


async def _nats(port: int, records: int, payload: bytes) -> tuple[float, float]:
    import nats as nats_py
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats_py.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        await js.add_stream(name="bench", subjects=["bench"])
        start = time.perf_counter()
        pending = []
        for _ in range(records):
            pending.append(await js.publish_async("bench", payload))
            if len(pending) >= 4000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        produced = records / (time.perf_counter() - start)
        # AckPolicy.ALL: acking a batch's last message acks the batch (with the default
        # explicit policy, 1,000 unacked messages stop delivery).
        sub = await js.pull_subscribe(
            "bench", "reader", config=ConsumerConfig(ack_policy=AckPolicy.ALL)
        )
        start = time.perf_counter()
        got = 0
        while got < records:
            msgs = await sub.fetch(1000, timeout=5)
            got += len(msgs)
            await msgs[-1].ack()
        consumed = got / (time.perf_counter() - start)
    finally:
        await nc.close()
    return produced, consumed


# The first version-looking number of a ``--version`` banner ("v=7.0.15", "v2.9.10", ...).
_VERSION = re.compile(r"(?:Version |v=|v|iperf |benchmark )(\d+\.\d+(?:\.\d+)?)")
_LIBRDKAFKA = re.compile(r"librdkafka (\d+\.\d+(?:\.\d+)?)")


def versions() -> dict[str, str]:
    """Versions of the peer programs and clients (absent ones are left out)."""
    found: dict[str, str] = {}
    for name, args in (
        ("redis-server", ["--version"]),
        ("redis-benchmark", ["--version"]),
        ("iperf3", ["--version"]),
        ("nats-server", ["--version"]),
        ("kcat", ["-V"]),
    ):
        binary = tool(name)
        if binary is None:
            continue
        try:
            out = subprocess.run([binary, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = out.stdout or out.stderr
        number = _VERSION.search(text)
        if number is not None:
            found[name] = number.group(1)
            linked = _LIBRDKAFKA.search(text)
            if linked is not None:
                found[name] += f" (librdkafka {linked.group(1)})"
    return found

