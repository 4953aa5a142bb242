"""Compaction and transactions beside plain produce: what each feature costs.

Rows: confluent-kafka keyed produce to a plain topic and to a compacted one
(``cleanup.policy=compact``); the idempotent producer beside transactional producers
(transactions of 10,000 and of 100 records, each committed before the next begins) and a
``read_committed`` consumer; and the log cleaner's pass rate in-process (storage level,
one partition compacted while a writer appends to it). All on ``--fsync always``.
"""

from __future__ import annotations

import threading
import time

from bench.brokerd_runs import QUEUE_MESSAGES, check_end, consume_partition, produce_all
from bench.common import TOOL_TIMEOUT, Results, Row, scratch, value

from tests.brokerproc import BrokerProcess

SECTION = "features"
SIZE = 100
KEYS = 1000
DURABILITY = "fsync always"


def compaction_produce(results: Results, proc: BrokerProcess, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": proc.kafka_bootstrap})
    topics = {"keyed-plain": {}, "keyed-compact": {"cleanup.policy": "compact"}}
    futures = admin.create_topics(
        [NewTopic(name, 1, 1, config=config) for name, config in topics.items()]
    )
    for future in futures.values():
        future.result(30)
    for name, config in topics.items():
        producer = Producer({
            "bootstrap.servers": proc.kafka_bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": QUEUE_MESSAGES,
        })
        start = time.perf_counter()
        for i in range(records):
            key = b"key-%d" % (i % KEYS)
            produce_all(producer, name, value(SIZE), 1, key=key)
        if producer.flush(TOOL_TIMEOUT) != 0:
            raise RuntimeError("confluent-kafka: records still undelivered after flush")
        seconds = time.perf_counter() - start
        check_end(proc, name, records)
        policy = config.get("cleanup.policy", "delete")
        results.add(Row(SECTION, "brokerd",
                        f"confluent-kafka keyed produce, cleanup.policy={policy}", DURABILITY,
                        records / seconds, "rec/s", f"{records:,} records, {KEYS:,} keys", SIZE))


def transactions(results: Results, proc: BrokerProcess, records: int) -> None:
    from confluent_kafka import Consumer, Producer

    base = {
        "bootstrap.servers": proc.kafka_bootstrap,
        "linger.ms": 5,
        "queue.buffering.max.messages": QUEUE_MESSAGES,
    }
    producer = Producer({**base, "enable.idempotence": True})
    start = time.perf_counter()
    produce_all(producer, "idem", value(SIZE), records)
    if producer.flush(TOOL_TIMEOUT) != 0:
        raise RuntimeError("idempotent producer: records undelivered after flush")
    results.add(Row(SECTION, "brokerd", "confluent-kafka idempotent produce, acks=all",
                    DURABILITY, records / (time.perf_counter() - start), "rec/s",
                    f"{records:,} records", SIZE))
    del producer
    # Transactions of 100 cost a commit round (markers, fsyncs) per 100 records: fewer
    # records keep that row's time in line with the others.
    for size, count in ((10_000, max(10_000, records)), (100, max(100, records // 10))):
        producer = Producer({**base, "transactional.id": f"bench-{size}"})
        producer.init_transactions(30)
        topic = f"txn{size}"
        txns = count // size
        start = time.perf_counter()
        for _ in range(txns):
            producer.begin_transaction()
            produce_all(producer, topic, value(SIZE), size)
            producer.commit_transaction(TOOL_TIMEOUT)
        seconds = time.perf_counter() - start
        results.add(Row(SECTION, "brokerd",
                        f"confluent-kafka transactional produce, {size:,} recs/txn", DURABILITY,
                        txns * size / seconds, "rec/s",
                        f"{txns:,} txns, {txns / seconds:,.0f} txn/s", SIZE))
        del producer
    consumer = Consumer({
        "bootstrap.servers": proc.kafka_bootstrap,
        "group.id": "bench-txn",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    expected = max(10_000, records) // 10_000 * 10_000
    got, seconds = consume_partition(consumer, "txn10000", expected, TOOL_TIMEOUT)
    if got != expected:
        raise RuntimeError(f"read_committed consumer read {got} of {expected} records")
    results.add(Row(SECTION, "brokerd", "confluent-kafka consume, read_committed",
                    "read (page cache)", got / seconds, "rec/s", f"{got:,} records", SIZE))


def cleaner(results: Results, records: int, keys: int = KEYS) -> None:
    """One cleaner pass over ``records`` keyed records, a writer appending meanwhile."""
    from brokerd.storage.cleaner.compactor import clean_log
    from brokerd.storage.cleaner.keymap import OffsetMap
    from brokerd.storage.config.log_config import LogConfig
    from brokerd.storage.log.partition_log import PartitionLog
    from brokerd.storage.record.encode import encode_batch
    from brokerd.storage.record.header import BatchHeader, parse_batches

    # attrs types the field by its converter, the generic frozenset: mypy cannot bind it.
    config = LogConfig(cleanup_policy={"compact"}, segment_bytes=1 << 20)  # type: ignore[arg-type]

    def batch(start: int) -> tuple[bytes, list[BatchHeader]]:
        ks = [b"key-%d" % ((start + i) % keys) for i in range(100)]
        data = encode_batch([value(SIZE)] * 100, keys=ks, timestamp_ms=int(time.time() * 1000))
        return data, parse_batches(data, max_batch_bytes=1 << 20)

    with scratch("bench-cleaner-") as tmp:
        log = PartitionLog.open(str(tmp), config, recovery_point=None)
        for start in range(0, records, 100):
            log.append(*batch(start))
        log.flush()
        log.publish()
        done: list[float] = []
        read: list[int] = []

        def clean() -> None:
            t0 = time.perf_counter()
            result = clean_log(log, None, now_ms=time.time() * 1000, key_map=OffsetMap(1 << 26))
            read.append(result.records_read if result is not None else 0)
            done.append(time.perf_counter() - t0)

        thread = threading.Thread(target=clean)
        thread.start()
        appended, t0 = 0, time.perf_counter()
        while thread.is_alive():
            log.append(*batch(appended))
            log.flush()
            log.publish()
            appended += 100
        thread.join()
        append_seconds = time.perf_counter() - t0
        log.close()
    if not done:
        raise RuntimeError("the cleaner pass failed")
    results.add(Row(SECTION, "brokerd", "log cleaner pass (storage level, in-process)",
                    "", read[0] / done[0], "rec/s", f"{records:,} records, {keys:,} keys", SIZE))
    results.add(Row(SECTION, "brokerd", "  appends meanwhile, a flush per 100 records",
                    "fsync each append", appended / append_seconds, "rec/s", "", SIZE))
