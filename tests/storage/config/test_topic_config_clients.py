"""Every Kafka 4.x topic config through real clients against a real ``twistd broker``
(``--fsync never``, so that syncs come only from topics that ask for them):
confluent-kafka's AdminClient creates a topic with every config, describes it back with
sources and synonyms, alters it incrementally and is refused invalid values with Kafka's
messages; kafka-python does the same through its own admin client. Then what the
configs do, seen from outside: the stored batch's codec after ``compression.type``, a
record out of the timestamp window refused with INVALID_TIMESTAMP, the syncs
``flush.messages`` asks for (the broker's fsync counter on /metrics), and the segment
files ``segment.index.bytes`` makes."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

from brokerd.kafka.server.handlers.configs import BUILTIN_DEFAULTS
from brokerd.storage.config.topic_config import LONG_MAX, TOPIC_CONFIGS
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.header import scan_batches

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
INVALID_CONFIG = 40

#: A valid value other than Kafka's default for every topic config.
EVERY = {
    "segment.bytes": "8388608",
    "segment.ms": "3600000",
    "segment.jitter.ms": "1000",
    "segment.index.bytes": "65536",
    "flush.messages": "10000",
    "flush.ms": "60000",
    "retention.bytes": "100000000",
    "retention.ms": "86400000",
    "max.message.bytes": "2097152",
    "index.interval.bytes": "8192",
    "delete.retention.ms": "3600000",
    "min.compaction.lag.ms": "1000",
    "max.compaction.lag.ms": "86400000",
    "file.delete.delay.ms": "1000",
    "min.cleanable.dirty.ratio": "0.25",
    "cleanup.policy": "compact,delete",
    "unclean.leader.election.enable": "true",
    "min.insync.replicas": "2",
    "compression.type": "zstd",
    "compression.gzip.level": "6",
    "compression.lz4.level": "12",
    "compression.zstd.level": "9",
    "preallocate": "true",
    "message.format.version": "2.8-IV1",
    "message.timestamp.type": "LogAppendTime",
    "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.after.max.ms": "60000",
    "leader.replication.throttled.replicas": "0:0",
    "follower.replication.throttled.replicas": "*",
    "remote.storage.enable": "false",
    "local.retention.ms": "3600000",
    "local.retention.bytes": "1000000",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "errors.deadletterqueue.group.enable": "true",
    "confluent.key.schema.validation": "false",
    "confluent.value.schema.validation": "true",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "topicconf", "--fsync", "never")


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.kafka_bootstrap})


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: f.result(WAIT) for key, f in futures.items()}


def describe(client: AdminClient, name: str) -> dict[str, Any]:
    (entries,) = results(
        client.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    ).values()
    return dict(entries)


def create(broker: BrokerProcess, name: str, config: dict[str, str]) -> None:
    client = admin(broker)  # held until the answer: a dropped client cancels its futures
    results(client.create_topics([NewTopic(name, 1, 1, config=config)]))


def test_every_config_is_created_and_described_with_source_and_synonyms(
    broker: BrokerProcess,
) -> None:
    assert set(EVERY) == set(TOPIC_CONFIGS)
    client = admin(broker)
    results(client.create_topics([NewTopic("every", 1, 1, config=EVERY)]))
    configs = describe(client, "every")
    for name, value in EVERY.items():
        entry = configs[name]
        assert (entry.value, entry.source) == (value, DYNAMIC_TOPIC_CONFIG), name
        synonyms = [(s.name, s.value, s.source) for s in entry.synonyms.values()]
        definition = TOPIC_CONFIGS[name]
        expected = [(name, value, DYNAMIC_TOPIC_CONFIG)]
        if definition.broker_name is not None:
            expected.append((definition.broker_name, BUILTIN_DEFAULTS[name], DEFAULT_CONFIG))
        # confluent-kafka keys synonyms by name: a broker config spelled like the topic
        # config (min.insync.replicas, compression.type, ...) shows as one entry.
        by_name = {n: (n, v, src) for n, v, src in expected}
        assert synonyms == list(by_name.values()), name
    # A topic without overrides: Kafka 4.x's defaults, and where they come from.
    create(broker, "plain", {})
    plain = describe(client, "plain")
    assert plain["message.timestamp.after.max.ms"].value == "3600000"
    assert plain["compression.type"].value == "producer"
    assert plain["min.insync.replicas"].source == DEFAULT_CONFIG
    # --fsync never: the operator's change from brokerd's default (a sync per append,
    # flush.messages=1), a static broker config.
    flush = plain["flush.messages"]
    assert (flush.value, flush.source) == (str(LONG_MAX), STATIC_BROKER_CONFIG)
    assert not flush.is_default
    assert plain["segment.ms"].value == "604800000" and plain["segment.ms"].is_default
    assert plain["remote.storage.enable"].synonyms == {}


def test_incremental_alter_of_the_new_configs(broker: BrokerProcess) -> None:
    client = admin(broker)
    create(broker, "alter-new", {"min.insync.replicas": "2"})
    ops = [
        ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.insync.replicas", None,
                    incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("leader.replication.throttled.replicas", "0:0",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("unclean.leader.election.enable", "TRUE",
                    incremental_operation=AlterConfigOpType.SET),
    ]
    results(client.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "alter-new", incremental_configs=ops)]
    ))
    configs = describe(client, "alter-new")
    assert configs["compression.type"].value == "lz4"
    assert configs["min.insync.replicas"].source == DEFAULT_CONFIG
    assert configs["leader.replication.throttled.replicas"].value == "0:0"
    assert configs["unclean.leader.election.enable"].value == "true"


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("message.format.version", "9.9", "is not a valid version"),
        ("remote.storage.enable", "true", "Tiered Storage functionality is disabled"),
        ("message.downconversion.enable", "true",
         "Unknown topic config name: message.downconversion.enable"),
    ],
)
def test_invalid_values_are_refused(
    broker: BrokerProcess, name: str, value: str, text: str
) -> None:
    client = admin(broker)
    with pytest.raises(KafkaException) as info:
        results(client.create_topics([NewTopic("refused", 1, 1, config={name: value})]))
    error = info.value.args[0]
    assert error.code() == INVALID_CONFIG and text in error.str()
    create(broker, f"refused-{name}", {})
    op = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)]
    with pytest.raises(KafkaException) as info:
        results(client.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, f"refused-{name}", incremental_configs=op)]
        ))
    assert info.value.args[0].code() == INVALID_CONFIG


def test_kafka_python_creates_and_describes_the_new_configs(broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpTopic
    from kafka.errors import InvalidConfigurationError

    wanted = {"compression.type": "gzip", "flush.ms": "1000", "min.insync.replicas": "2",
              "message.format.version": "3.0-IV1", "segment.index.bytes": "4096"}
    client = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
    try:
        client.create_topics([KpTopic("kp-new", 1, 1, topic_configs=wanted)])
        got = client.describe_configs([KpResource(ConfigResourceType.TOPIC, "kp-new")])
        assert {k: v["value"] for k, v in got["topic"]["kp-new"].items()} == wanted
        with pytest.raises(InvalidConfigurationError):
            client.create_topics([KpTopic("kp-bad", 1, 1, topic_configs={
                "compression.lz4.level": "0"})])
    finally:
        client.close()


# -- what the configs do --------------------------------------------------------------


def stored_batches(broker: BrokerProcess, topic: str) -> list[Any]:
    """Headers of every batch in the partition's segment files, as stored on disk."""
    headers: list[Any] = []
    for path in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        scanned = scan_batches(path.read_bytes())
        assert scanned.reason is None, scanned.reason
        headers.extend(header for _pos, header in scanned.batches)
    return headers


def produce(broker: BrokerProcess, topic: str, values: list[bytes], **config: Any) -> list[Any]:
    """Produce one value per request, each flushed before the next; the delivery errors."""
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 0,
                         **config})
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(WAIT)
    return errors


def consume(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value() or b"")
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize(
    ("producer_codec", "topic_codec", "stored"),
    [
        ("gzip", "zstd", Compression.ZSTD),
        ("none", "lz4", Compression.LZ4),
        ("snappy", "uncompressed", Compression.NONE),
        ("lz4", "producer", Compression.LZ4),
    ],
)
def test_compression_type_recompresses_on_the_broker(
    broker: BrokerProcess, producer_codec: str, topic_codec: str, stored: Compression
) -> None:
    topic = f"codec-{producer_codec}-{topic_codec}"
    create(broker, topic, {"compression.type": topic_codec})
    values = [b"record %d " % i * 50 for i in range(3)]
    assert produce(broker, topic, values, **{"compression.type": producer_codec}) == [None] * 3
    headers = stored_batches(broker, topic)
    assert [h.compression for h in headers] == [stored] * 3
    assert consume(broker, topic, 3) == values


def test_records_outside_the_timestamp_window_are_refused(broker: BrokerProcess) -> None:
    create(broker, "stamps", {"message.timestamp.before.max.ms": "86400000"})
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 0})
    now = int(time.time() * 1000)
    outcomes: dict[str, Any] = {}
    for label, ts in (("now", now), ("two days old", now - 2 * 86_400_000),
                      ("two hours ahead", now + 2 * 3_600_000)):
        producer.produce("stamps", label.encode(), timestamp=ts,
                         on_delivery=lambda err, _m, k=label: outcomes.__setitem__(k, err))
        producer.flush(WAIT)
    assert outcomes["now"] is None
    # Too old for the topic's window; too far ahead for Kafka 4.x's default of one hour.
    for label in ("two days old", "two hours ahead"):
        assert outcomes[label].code() == KafkaError.INVALID_TIMESTAMP, label
    assert consume(broker, "stamps", 1) == [b"now"]


def fsyncs(broker: BrokerProcess) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics",
                                timeout=WAIT) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "brokerd_fsync_duration_seconds_count":
                return sample.value
    raise AssertionError("no fsync counter")


def test_flush_messages_gives_a_topic_its_own_durability(broker: BrokerProcess) -> None:
    create(broker, "durable", {"flush.messages": "1"})
    create(broker, "every-third", {"flush.messages": "3"})
    create(broker, "lazy", {})
    before = fsyncs(broker)
    assert produce(broker, "lazy", [b"a", b"b", b"c"]) == [None] * 3
    assert fsyncs(broker) == before, "--fsync never: a topic without flush.* never syncs"
    assert produce(broker, "durable", [b"a", b"b", b"c"]) == [None] * 3
    assert fsyncs(broker) == before + 3
    assert produce(broker, "every-third", [b"%d" % i for i in range(6)]) == [None] * 6
    assert fsyncs(broker) == before + 5


def test_segment_index_bytes_rolls_segments(broker: BrokerProcess) -> None:
    create(broker, "small-index", {"segment.index.bytes": "24", "index.interval.bytes": "0"})
    assert produce(broker, "small-index", [b"%d" % i for i in range(7)]) == [None] * 7
    logs = sorted(p.name for p in (broker.data_dir / "small-index-0").glob("*.log"))
    assert logs == [f"{base:020d}.log" for base in (0, 3, 6)]
    assert consume(broker, "small-index", 7) == [b"%d" % i for i in range(7)]
