"""CreatePartitions, DeleteRecords and DescribeLogDirs with real admin clients
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient) against a real
``twistd broker``: new partitions take produces and consumers, deleted records are gone
for consumers starting from the earliest offset (also after kill -9), and the log
directory reports sizes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_drivers import Confluent, KafkaPython
from tests.kafka_helpers import WAIT, crash_and_restart, small_values, wait_until

pytestmark = pytest.mark.clients


@pytest.fixture
def confluent(broker: BrokerProcess) -> Iterator[Confluent]:
    Confluent.require()
    with Confluent(broker) as driver:
        yield driver


@pytest.fixture
def kafka_python(broker: BrokerProcess) -> Iterator[KafkaPython]:
    KafkaPython.require()
    with KafkaPython(broker) as driver:
        yield driver


# -- confluent-kafka -------------------------------------------------------------------


def test_confluent_create_partitions_then_produce_and_consume(confluent: Confluent) -> None:
    admin_mod, ck = confluent.admin_mod, confluent.ck
    confluent.create_topic("cf-grow", 1)
    admin = confluent._admin()
    futures = admin.create_partitions([admin_mod.NewPartitions("cf-grow", 3)])
    assert futures["cf-grow"].result(WAIT) is None
    wait_until(lambda: confluent.topic_partitions("cf-grow") == [0, 1, 2], "3 partitions")
    values = small_values("new", 3)
    producer = confluent.producer()
    assert [r[0] for r in producer.send("cf-grow", 2, values)] == [2, 2, 2]
    assert confluent.read("cf-grow", 2, None) == [(2, i, v) for i, v in enumerate(values)]
    # Not an increase, and validate_only leaves the topic alone.
    again = admin.create_partitions([admin_mod.NewPartitions("cf-grow", 3)])
    with pytest.raises(ck.KafkaException) as exc:
        again["cf-grow"].result(WAIT)
    assert exc.value.args[0].code() == ck.KafkaError.INVALID_PARTITIONS
    dry = admin.create_partitions([admin_mod.NewPartitions("cf-grow", 8)], validate_only=True)
    assert dry["cf-grow"].result(WAIT) is None
    assert confluent.topic_partitions("cf-grow") == [0, 1, 2]
    unknown = admin.create_partitions([admin_mod.NewPartitions("cf-nosuch", 2)])
    with pytest.raises(ck.KafkaException) as exc:
        unknown["cf-nosuch"].result(WAIT)
    assert exc.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_group_picks_up_new_partitions(confluent: Confluent) -> None:
    confluent.create_topic("cf-rebalance", 1)
    member = confluent.member("cf-rebalance-group", "cf-rebalance", "m1")
    wait_until(lambda: member.assignment() == {0}, "the first assignment")
    admin = confluent._admin()
    futures = admin.create_partitions([confluent.admin_mod.NewPartitions("cf-rebalance", 2)])
    futures["cf-rebalance"].result(WAIT)
    wait_until(lambda: member.assignment() == {0, 1}, "the new partition assigned")
    confluent.producer().send("cf-rebalance", 1, [b"on-the-new-partition"])
    got: list[Any] = []
    wait_until(lambda: got.extend(member.records()) or got, "the record")
    assert got == [(1, 0, b"on-the-new-partition")]


def test_confluent_delete_records_survives_kill(
    confluent: Confluent, broker: BrokerProcess
) -> None:
    ck = confluent.ck
    confluent.create_topic("cf-trim", 2)
    values = small_values("trim", 10)
    confluent.producer().send("cf-trim", 0, values)
    admin = confluent._admin()
    futures = admin.delete_records([ck.TopicPartition("cf-trim", 0, 4)])
    [(tp, future)] = futures.items()
    assert tp.partition == 0
    assert future.result(WAIT).low_watermark == 4
    assert confluent.read("cf-trim", 0, None) == [(0, i, values[i]) for i in range(4, 10)]
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    beyond = admin.delete_records([ck.TopicPartition("cf-trim", 0, 11)])
    with pytest.raises(ck.KafkaException) as exc:
        next(iter(beyond.values())).result(WAIT)
    assert exc.value.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE
    confluent.close()
    crash_and_restart(broker)
    with Confluent(broker) as again:
        assert again.read("cf-trim", 0, None) == [(0, i, values[i]) for i in range(4, 10)]
        earliest = again._admin().list_offsets(
            {ck.TopicPartition("cf-trim", 0): again.admin_mod.OffsetSpec.earliest()}
        )
        assert next(iter(earliest.values())).result(WAIT).offset == 4


#: Record timestamps (ms before now) with the largest, twice, at offsets 1 and 3.
STAMPS_AGO = (50_000, 10_000, 30_000, 10_000, 40_000)


def test_confluent_list_offsets_max_timestamp(confluent: Confluent) -> None:
    """OffsetSpec.max_timestamp() (ListOffsets v7+): the first record with the largest
    timestamp, with that timestamp."""
    ck, admin_mod = confluent.ck, confluent.admin_mod
    confluent.create_topic("cf-max-ts", 1)
    now = int(time.time() * 1000)
    producer = ck.Producer(confluent.conf())
    for i, ago in enumerate(STAMPS_AGO):
        producer.produce("cf-max-ts", b"v%d" % i, partition=0, timestamp=now - ago)
    assert producer.flush(WAIT) == 0
    tp = ck.TopicPartition("cf-max-ts", 0)
    specs = {
        "max": admin_mod.OffsetSpec.max_timestamp(),
        "earliest": admin_mod.OffsetSpec.earliest(),
        "latest": admin_mod.OffsetSpec.latest(),
    }
    got = {
        name: next(iter(confluent._admin().list_offsets({tp: spec}).values())).result(WAIT)
        for name, spec in specs.items()
    }
    assert (got["max"].offset, got["max"].timestamp) == (1, now - 10_000)
    assert (got["earliest"].offset, got["latest"].offset) == (0, 5)


# -- kafka-python ----------------------------------------------------------------------


def test_kafka_python_offset_specs_of_v7_to_v9(kafka_python: KafkaPython) -> None:
    """Max timestamp (v7), earliest local (v8: the log start, nothing is tiered) and
    latest tiered (v9: none, -1) through kafka-python's admin client."""
    kp = kafka_python
    spec, tp = kp.kafka.protocol.consumer.offsets.OffsetSpec, kp.kafka.TopicPartition
    kp.create_topic("kp-specs", 1)
    now = int(time.time() * 1000)
    producer = kp.kafka.KafkaProducer(bootstrap_servers=kp.broker.kafka_bootstrap, **kp.COMMON)
    try:
        for i, ago in enumerate(STAMPS_AGO):
            producer.send("kp-specs", b"v%d" % i, partition=0, timestamp_ms=now - ago)
        producer.flush(WAIT)
    finally:
        producer.close()
    kp._admin(lambda a: a.delete_records({tp("kp-specs", 0): 2}))

    def listed(which: Any) -> tuple[int, int]:
        got = kp._admin(lambda a: a.list_partition_offsets({tp("kp-specs", 0): which}))
        found = got[tp("kp-specs", 0)]
        return found.offset, found.timestamp

    # As Kafka's, the answer names the record even below a moved log start.
    assert listed(spec.MAX_TIMESTAMP) == (1, now - 10_000)
    assert listed(spec.EARLIEST_LOCAL) == (2, -1)
    assert listed(spec.LATEST_TIERED) == (-1, -1)
    assert listed(spec.EARLIEST) == (2, -1)


def test_kafka_python_log_dir_volume_bytes(kafka_python: KafkaPython) -> None:
    """DescribeLogDirs v4: the size and usable space of the data directory's volume."""
    kp = kafka_python
    kp.create_topic("kp-volume", 1)
    [broker_entry] = kp._admin(lambda a: a.describe_log_dirs())
    [log_dir] = broker_entry["log_dirs"]
    fs = os.statvfs(kp.broker.data_dir)
    assert log_dir["total_bytes"] == fs.f_blocks * fs.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert abs(log_dir["usable_bytes"] - fs.f_bavail * fs.f_frsize) < 64 << 20



def test_kafka_python_partition_admin(kafka_python: KafkaPython) -> None:
    kp = kafka_python
    tp = kp.kafka.TopicPartition
    kp.create_topic("kp-admin", 1)
    kp._admin(lambda a: a.create_partitions({"kp-admin": 3}))
    wait_until(lambda: kp.topic_partitions("kp-admin") == [0, 1, 2], "3 partitions")
    values = small_values("kp", 6)
    kp.producer().send("kp-admin", 2, values)
    assert kp.read("kp-admin", 2, None) == [(2, i, v) for i, v in enumerate(values)]
    with pytest.raises(kp.errors.InvalidPartitionsError):
        kp._admin(lambda a: a.create_partitions({"kp-admin": 2}))

    deleted = kp._admin(lambda a: a.delete_records({tp("kp-admin", 2): 5}))
    assert deleted[tp("kp-admin", 2)]["low_watermark"] == 5
    assert kp.read("kp-admin", 2, None) == [(2, 5, values[5])]
    with pytest.raises(kp.errors.OffsetOutOfRangeError):
        kp._admin(lambda a: a.delete_records({tp("kp-admin", 2): 99}))

    described = kp._admin(lambda a: a.describe_log_dirs())
    [(broker_entry)] = described
    [log_dir] = broker_entry["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(kp.broker.data_dir.resolve())
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for t in log_dir["topics"]
        for p in t["partitions"]
    }
    assert sizes[("kp-admin", 2)] > 0
    assert sizes[("kp-admin", 0)] == 0
    filtered = kp._admin(lambda a: a.describe_log_dirs({"kp-admin": [2]}))
    topics = filtered[0]["log_dirs"][0]["topics"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in topics] == [
        ("kp-admin", [2])
    ]
