"""``make bench``: brokerd's throughput beside its peers, all measured in one invocation.

Everything runs on 127.0.0.1 in temporary directories; every server is started here and
stopped by its own PID. Peers (Redis Streams, NATS JetStream) are measured when their
servers and Python clients are installed (``make bench-deps``) and skipped otherwise.

Figures are records per second (100-byte values unless said otherwise). Client and
server share the machine's cores, so every figure is "client + server on this box".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from brokerd.native import client_codec, messages  # noqa: E402

from tests.brokerproc import BrokerProcess, free_port, wait_for_port  # noqa: E402

VALUE = b"x" * 100
Row = tuple[str, str, str]


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f} rec/s"


@contextmanager
def brokerd(*args: str, kafka: bool = True) -> Iterator[BrokerProcess]:
    with tempfile.TemporaryDirectory(prefix="brokerd-bench-") as tmp:
        proc = BrokerProcess(Path(tmp) / "data", kafka=kafka, args=args).start()
        try:
            yield proc
        finally:
            proc.stop()


def native_produce(proc: BrokerProcess, topic: str, records: int, batch: int, depth: int) -> float:
    """Seconds to produce ``records`` in requests of ``batch`` values, ``depth`` in flight."""
    frame = client_codec.encode_produce(topic, 0, [VALUE] * batch)
    requests = records // batch
    with proc.client(timeout=60) as client:
        start = time.perf_counter()
        sent = 0
        while sent < requests:
            n = min(depth, requests - sent)
            for r in client.call_many([(messages.RequestType.PRODUCE, frame)] * n):
                assert isinstance(r, messages.ProduceResponse), r
            sent += n
        return time.perf_counter() - start


def native_read_all(proc: BrokerProcess, topic: str) -> tuple[int, float]:
    with proc.client(timeout=60) as client:
        start = time.perf_counter()
        offset = 0
        while True:
            values = client.fetch(topic, 0, offset)
            if not values:
                break
            offset += len(values)
        return offset, time.perf_counter() - start


def lookup_times(proc: BrokerProcess, topic: str, offsets: list[int], rounds: int) -> list[float]:
    """Median seconds of a one-record long-poll fetch (no wait) at each offset."""
    medians = []
    with proc.client() as client:
        for offset in offsets:
            samples = []
            for _ in range(rounds):
                t = time.perf_counter()
                r = client.poll(topic, 0, offset, max_wait_ms=0, min_bytes=0, max_bytes=1)
                samples.append(time.perf_counter() - t)
                assert r.records and r.records[0].offset == offset
            medians.append(statistics.median(samples))
    return medians


def bench_native(records: int, rows: list[Row]) -> None:
    for fsync in ("always", "never"):
        with brokerd(f"--fsync={fsync}", kafka=False) as proc:
            for depth in (1, 8):
                seconds = native_produce(proc, f"p{depth}", records, 1000, depth)
                rows.append(
                    (
                        f"brokerd native produce, 1000 x 100 B/request, {depth} in flight",
                        f"fsync {fsync}",
                        rate(records, seconds),
                    )
                )
            if fsync == "always":
                n, seconds = native_read_all(proc, "p1")
                rows.append(("brokerd native fetch (type 2), read back", "", rate(n, seconds)))


def bench_lookup(rows: list[Row], total: int = 1_000_000) -> None:
    with brokerd("--fsync=never", "--segment-bytes=67108864", kafka=False) as proc:
        native_produce(proc, "big", total, 1000, 8)
        # The last batch's first and last record: within a batch, records are walked.
        offsets = [0, total // 2, total - 1000, total - 1]
        times = lookup_times(proc, "big", offsets, 200)
        for offset, seconds in zip(offsets, times, strict=True):
            rows.append(
                (
                    f"brokerd one-record fetch at offset {offset:,} of {total:,}",
                    "median of 200",
                    f"{seconds * 1e6:,.0f} us",
                )
            )


def bench_kafka(records: int, rows: list[Row]) -> None:
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
    except ImportError:
        rows.append(("confluent-kafka", "not installed", "skipped"))
        return
    with brokerd() as proc:
        producer = Producer(
            {
                "bootstrap.servers": proc.kafka_bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "queue.buffering.max.messages": 2_000_000,
            }
        )
        start = time.perf_counter()
        for i in range(records):
            while True:
                try:
                    producer.produce("kbench", VALUE)
                    break
                except BufferError:
                    producer.poll(0.01)
            if i % 10000 == 0:
                producer.poll(0)
        assert producer.flush(120) == 0
        seconds = time.perf_counter() - start
        rows.append(
            ("confluent-kafka produce to brokerd, acks=all", "fsync always", rate(records, seconds))
        )
        consumer = Consumer(
            {
                "bootstrap.servers": proc.kafka_bootstrap,
                "group.id": "bench",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition("kbench", 0, 0)])
        got = 0
        start = time.perf_counter()
        deadline = start + 300
        while got < records and time.perf_counter() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if msg.error() is None:
                    got += 1
        seconds = time.perf_counter() - start
        consumer.close()
        rows.append(
            ("confluent-kafka consume from brokerd", f"{got:,} records", rate(got, seconds))
        )
        del producer
        kcat = shutil.which("kcat")
        if kcat is not None:
            # librdkafka without the Python layer: what the broker itself serves.
            start = time.perf_counter()
            command = [kcat, "-b", proc.kafka_bootstrap, "-C", "-t", "kbench"]
            command += ["-o", "beginning", "-e", "-q", "-f", "\\n"]
            out = subprocess.run(command, capture_output=True, timeout=300, check=True).stdout
            n = out.count(b"\n")
            seconds = time.perf_counter() - start
            rows.append(("kcat consume from brokerd", f"{n:,} records", rate(n, seconds)))


def _produce_all(producer: Any, topic: str, count: int) -> None:
    """Queue ``count`` records, serving delivery reports whenever the local queue is full."""
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)


def bench_transactions(records: int, rows: list[Row]) -> None:
    """confluent-kafka's idempotent producer beside its transactional one (transactions of
    10,000 and of 100 records, each committed before the next begins), acks=all and
    fsync always; then a read_committed consumer reading the transactional topic back."""
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
    except ImportError:
        rows.append(("confluent-kafka transactions", "not installed", "skipped"))
        return
    with brokerd() as proc:
        base = {
            "bootstrap.servers": proc.kafka_bootstrap,
            "linger.ms": 5,
            "queue.buffering.max.messages": 2_000_000,
        }
        producer = Producer({**base, "enable.idempotence": True})
        start = time.perf_counter()
        _produce_all(producer, "idem", records)
        assert producer.flush(120) == 0
        rows.append(
            (
                "confluent-kafka idempotent produce, acks=all",
                f"{records:,} recs",
                rate(records, time.perf_counter() - start),
            )
        )
        del producer
        # Transactions of 100 cost a commit round (markers, fsyncs) per 100 records:
        # fewer records keep the row's time in line with the others.
        for size, count in ((10_000, records), (100, max(100, records // 10))):
            producer = Producer({**base, "transactional.id": f"bench-{size}"})
            producer.init_transactions(30)
            topic = f"txn{size}"
            start = time.perf_counter()
            for _ in range(count // size):
                producer.begin_transaction()
                _produce_all(producer, topic, size)
                producer.commit_transaction(120)
            seconds = time.perf_counter() - start
            txns = count // size
            rows.append(
                (
                    f"confluent-kafka transactional produce, {size:,} recs/txn",
                    f"{txns:,} txns, {txns / seconds:,.0f} txn/s",
                    rate(count - count % size, seconds),
                )
            )
            del producer
        consumer = Consumer(
            {
                "bootstrap.servers": proc.kafka_bootstrap,
                "group.id": "bench-txn",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.assign([TopicPartition("txn10000", 0, 0)])
        got, start = 0, time.perf_counter()
        deadline = start + 300
        while got < records and time.perf_counter() < deadline:
            got += sum(1 for m in consumer.consume(10000, 1.0) if m.error() is None)
        seconds = time.perf_counter() - start
        consumer.close()
        rows.append(
            ("confluent-kafka consume, read_committed", f"{got:,} records", rate(got, seconds))
        )


def bench_redis(records: int, rows: list[Row]) -> None:
    server = shutil.which("redis-server")
    try:
        import redis
    except ImportError:
        redis = None
    if server is None or redis is None:
        rows.append(("Redis Streams", "redis-server or redis-py missing", "skipped"))
        return
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = subprocess.Popen(
            [
                server,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                tmp,
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port, time.monotonic() + 10)
            r = redis.Redis(port=port)
            start = time.perf_counter()
            for _ in range(records // 1000):
                pipe = r.pipeline(transaction=False)
                for _ in range(1000):
                    pipe.xadd("s", {"f": VALUE})
                pipe.execute()
            rows.append(
                (
                    "Redis Streams XADD, pipelines of 1000",
                    "AOF everysec",
                    rate(records, time.perf_counter() - start),
                )
            )
            start = time.perf_counter()
            last, got = "-", 0
            while True:
                batch = r.xrange("s", min=last if last == "-" else f"({last}", count=1000)
                if not batch:
                    break
                got += len(batch)
                last = batch[-1][0].decode()
            rows.append(
                (
                    "Redis Streams XRANGE read-back, 1000 per call",
                    "",
                    rate(got, time.perf_counter() - start),
                )
            )
        finally:
            proc.terminate()
            proc.wait()


def bench_nats(records: int, rows: list[Row]) -> None:
    server = shutil.which("nats-server")
    try:
        import nats
    except ImportError:
        nats = None
    if server is None or nats is None:
        rows.append(("NATS JetStream", "nats-server or nats-py missing", "skipped"))
        return
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = subprocess.Popen(
            [server, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", tmp],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port, time.monotonic() + 10)
            # Bounded: a stuck client must not hang the whole bench.
            produced, consumed = asyncio.run(asyncio.wait_for(_nats(port, records), 300))
            rows.append(("NATS JetStream publish_async, acks awaited", "file storage", produced))
            rows.append(("NATS JetStream pull consumer, fetch(1000)", "", consumed))
        finally:
            proc.terminate()
            proc.wait()


async def _nats(port: int, records: int) -> tuple[str, str]:
    import nats

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    await js.add_stream(name="bench", subjects=["bench"])
    start = time.perf_counter()
    futures = []
    for _i in range(records):
        futures.append(await js.publish_async("bench", VALUE))
        if len(futures) >= 4000:
            await asyncio.gather(*futures)
            futures.clear()
    await asyncio.gather(*futures)
    produced = rate(records, time.perf_counter() - start)
    from nats.js.api import AckPolicy, ConsumerConfig

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
    consumed = rate(got, time.perf_counter() - start)
    await nc.close()
    return produced, consumed


def bench_cleaner(rows: list[Row], records: int = 200_000, keys: int = 1_000) -> None:
    """The log cleaner in-process (storage level): records/s compacted by one pass, and
    the append rate (batches of 100, flushed each) of a writer running meanwhile."""
    import threading

    from brokerd.storage.batch import encode_batch, parse_batches
    from brokerd.storage.cleaner import clean_log
    from brokerd.storage.keymap import OffsetMap
    from brokerd.storage.log import LogConfig, PartitionLog

    config = LogConfig(cleanup_policy={"compact"}, segment_bytes=1 << 20)

    def batch(start: int) -> tuple[bytes, list]:  # type: ignore[type-arg]
        ks = [b"key-%d" % ((start + i) % keys) for i in range(100)]
        data = encode_batch([VALUE] * 100, keys=ks, timestamp_ms=int(time.time() * 1000))
        return data, parse_batches(data, max_batch_bytes=1 << 20)

    with tempfile.TemporaryDirectory(prefix="brokerd-bench-") as tmp:
        log = PartitionLog.open(tmp, config, recovery_point=None)
        for start in range(0, records, 100):
            log.append(*batch(start))
        log.flush()
        log.publish()
        done: list[float] = []
        result: list[object] = []

        def clean() -> None:
            t0 = time.perf_counter()
            now_ms = time.time() * 1000
            result.append(clean_log(log, None, now_ms=now_ms, key_map=OffsetMap(1 << 26)))
            done.append(time.perf_counter() - t0)

        thread = threading.Thread(target=clean)
        thread.start()
        appended, t0 = 0, time.perf_counter()
        while not done:
            log.append(*batch(appended))
            log.flush()
            log.publish()
            appended += 100
        thread.join()
        produce_seconds = time.perf_counter() - t0
        log.close()
    pass_result = result[0]
    read = getattr(pass_result, "records_read", 0)
    how = f"{records:,} recs/{keys:,} keys"
    rows.append(("log cleaner pass (storage)", how, rate(read, done[0])))
    rows.append(("  appends meanwhile, fsync each 100", "", rate(appended, produce_seconds)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="records per produce test")
    parser.add_argument("--kafka-records", type=int, default=1_000_000)
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        help="native, lookup, cleaner, kafka, txn, redis or nats",
    )
    args = parser.parse_args()
    rows: list[Row] = []
    steps: list[tuple[str, Callable[[], None]]] = [
        ("native", lambda: bench_native(args.records, rows)),
        ("lookup", lambda: bench_lookup(rows)),
        ("cleaner", lambda: bench_cleaner(rows)),
        ("kafka", lambda: bench_kafka(args.kafka_records, rows)),
        ("txn", lambda: bench_transactions(args.records, rows)),
        ("redis", lambda: bench_redis(args.records, rows)),
        ("nats", lambda: bench_nats(args.records, rows)),
    ]
    print(f"brokerd bench on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}")
    for name, step in steps:
        if name not in args.skip:
            print(f"... {name}", file=sys.stderr, flush=True)
            step()
    width = max(len(r[0]) for r in rows)
    for what, how, figure in rows:
        print(f"{what:<{width}}  {how:<22} {figure:>16}")


if __name__ == "__main__":
    main()
