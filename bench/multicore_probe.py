"""The per-byte work of a produce, and whether threads would run it on other cores.

``python bench/multicore_probe.py`` times what brokerd does to every byte a produce brings
(docs/performance.md, "The one-core ceiling"): the CRC-32C of each record batch
(``crc32c``, as ``brokerd/storage/record/header.py`` checks it) and, for a compressed
batch, decompressing it (``cramjam``, as ``brokerd/storage/record/compression.py`` does:
LZ4 frames, zstd). Each is timed on batches of 1,000 records of 100 and 1,000 bytes,
first on this thread, then with the same total work split over two threads: if the
library releases the GIL during the call, two threads take about half the wall time on
two idle cores (a speed-up near 2x); if it does not, about the same (1x). The values are
words drawn from a small vocabulary (compressible like text, unlike ``b"x" * n``).

It prints one Markdown table: ns per byte, µs per 1,000-record batch and per record, and
the two-thread speed-up. Compare the per-record figures with the broker CPU per record of
``make bench`` (its cost rows).

``--brokers`` measures what a user with more cores can do today: the same produce load
(kcat producers, 100-byte values, ``acks=all``, one partition each, ``--fsync never``;
``--batch`` caps the records per request)
against one broker, then split over two independent brokers (two processes, each with its
own data directory and half the topics). It prints the aggregate rate and each broker's
CPU per record, the best of ``--tries`` runs of each.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RECORDS = 1000
# Bytes of framing each record adds in a v2 batch (length, attributes, deltas, key and
# header counts as varints): about 8 for a small keyless record.
RECORD_OVERHEAD = 8
WORDS = [f"w{i:03d}{'abcdefgh'[i % 8] * (i % 7)}" for i in range(400)]


def batch_payload(size: int, seed: int = 1) -> bytes:
    """The records section of a 1,000-record batch of ``size``-byte values."""
    rng = random.Random(seed)
    out = bytearray()
    for _ in range(RECORDS):
        value = bytearray()
        while len(value) < size:
            value += rng.choice(WORDS).encode() + b" "
        out += bytes(RECORD_OVERHEAD) + value[:size]
    return bytes(out)


def timed(work: Callable[[], object], repeat: int, threads: int) -> float:
    """Wall seconds for ``repeat`` calls of ``work`` split over ``threads`` threads."""
    share = repeat // threads

    def run() -> None:
        for _ in range(share):
            work()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def best(work: Callable[[], object], repeat: int, threads: int, tries: int) -> float:
    return min(timed(work, repeat, threads) for _ in range(tries))


def probes(size: int) -> list[tuple[str, int, Callable[[], object]]]:
    """(what, bytes handled per call, the call) for one value size."""
    import cramjam
    import crc32c

    raw = batch_payload(size)
    lz4 = bytes(cramjam.lz4.compress(raw))
    zstd = bytes(cramjam.zstd.compress(raw))
    return [
        ("crc32c of the batch", len(raw), lambda: crc32c.crc32c(raw)),
        (f"lz4 frame decompress ({len(raw) / len(lz4):.1f}:1)", len(raw),
         lambda: cramjam.lz4.decompress(lz4)),
        (f"zstd decompress ({len(raw) / len(zstd):.1f}:1)", len(raw),
         lambda: cramjam.zstd.decompress(zstd)),
        ("lz4 frame compress (a fetch that recompresses)", len(raw),
         lambda: cramjam.lz4.compress(raw)),
    ]


def _kcat_load(bootstraps: list[str], producers: int, records: int, root: Path,
               batch: int) -> float:
    """Wall seconds for ``producers`` kcat processes (round-robin over ``bootstraps``),
    each producing ``records`` values to a topic of its own."""
    import subprocess

    from bench.common import tool, value

    kcat = tool("kcat")
    if kcat is None:
        raise SystemExit("kcat is not installed")
    path = root / "values.txt"
    if not path.exists():
        path.write_bytes((value(100) + b"\n") * records)
    topic_base = f"t{time.monotonic_ns()}"
    procs = []
    start = time.perf_counter()
    for i in range(producers):
        bootstrap = bootstraps[i % len(bootstraps)]
        procs.append(subprocess.Popen(
            [kcat, "-P", "-b", bootstrap, "-t", f"{topic_base}-{i}", "-p", "0",
             "-X", "acks=all", "-X", f"batch.num.messages={batch}", "-l", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for proc in procs:
        if proc.wait(600) != 0:
            raise RuntimeError("kcat failed")
    return time.perf_counter() - start


def brokers_probe(producers: int, records: int, tries: int, batch: int) -> None:
    from bench.common import Brokers, scratch
    from bench.cost import cpu_seconds

    print("| brokers | kcat producers | records per request (at most) | records "
          "| aggregate rec/s (best) | broker CPU µs/rec (each) |")
    print("|---|---|---|---|---|---|")
    with scratch("multicore-") as root:
        for count in (1, 2):
            brokers = Brokers(root / f"b{count}")
            with ExitStack() as stack:
                procs = [stack.enter_context(brokers.fresh("--fsync=never"))
                         for _ in range(count)]
                pids = [p.proc.pid for p in procs if p.proc is not None]
                best_rate, costs = 0.0, [0.0] * count
                for _ in range(tries):
                    before = [cpu_seconds(pid) for pid in pids]
                    seconds = _kcat_load([p.kafka_bootstrap for p in procs], producers,
                                         records, root, batch)
                    rate = producers * records / seconds
                    if rate > best_rate:
                        best_rate = rate
                        share = producers * records / count
                        costs = [(cpu_seconds(pid) - b) * 1e6 / share
                                 for pid, b in zip(pids, before, strict=True)]
                print(f"| {count} | {producers} | {batch:,} | {producers * records:,} | "
                      f"{best_rate:,.0f} | {', '.join(f'{c:.2f}' for c in costs)} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=400, help="calls per timing")
    parser.add_argument("--tries", type=int, default=5, help="timings; the best stands")
    parser.add_argument("--brokers", action="store_true",
                        help="the one-broker / two-broker produce probe instead")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--records", type=int, default=200_000, help="per producer")
    parser.add_argument("--batch", type=int, default=10_000,
                        help="kcat's batch.num.messages: records per request at most "
                             "(16 makes many small requests, as a Java producer's 16 KiB "
                             "batches of 1,000 B would)")
    args = parser.parse_args(argv)
    if args.brokers:
        brokers_probe(args.producers, args.records, args.tries, args.batch)
        return
    print("| value size | work | ns/byte | µs per 1,000-record batch | µs per record "
          "| 2 threads: speed-up |")
    print("|---|---|---|---|---|---|")
    for size in (100, 1000):
        for what, nbytes, work in probes(size):
            one = best(work, args.repeat, 1, args.tries)
            two = best(work, args.repeat, 2, args.tries)
            per_call = one / args.repeat
            print(f"| {size:,} B | {what} | {per_call * 1e9 / nbytes:.3f} | "
                  f"{per_call * 1e6:,.1f} | {per_call * 1e6 / RECORDS:.3f} | "
                  f"{one / two:.2f}x |")


if __name__ == "__main__":
    main()
