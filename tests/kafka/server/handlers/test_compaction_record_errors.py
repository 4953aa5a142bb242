"""Produce's ``record_errors`` names every refused record: a batch with keyless records
sent to a compacted topic, answered by a real broker to hand-made requests (each index,
every codec, the answer before Produce v8) and to confluent-kafka, which then fails the
keyless records with INVALID_RECORD and the others of the batch as collateral, exactly
as against Kafka."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import RawKafka, module_broker

pytestmark = pytest.mark.broker

#: Of 100 records, these have no key (10 of them).
KEYLESS = frozenset(range(3, 100, 10))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "record-errors")


def create_compacted(kafka: RawKafka, name: str) -> None:
    answer = kafka.call(ApiKey.CREATE_TOPICS, 4, apis.CreateTopicsRequest(topics=(
        apis.CreatableTopic(name=name, num_partitions=1, replication_factor=1, configs=(
            apis.CreatableTopicConfig(name="cleanup.policy", value="compact"),)),)))
    assert answer.topics[0].error_code == 0, answer


def hundred_records(compression: Compression = Compression.NONE) -> bytes:
    keys = [None if i in KEYLESS else b"k%d" % i for i in range(100)]
    return encode_batch([b"v%d" % i for i in range(100)], keys=keys, timestamp_ms=1,
                        compression=compression)


def produce(
    kafka: RawKafka, topic: str, data: bytes, version: int
) -> apis.ProducePartitionResponse:
    answer = kafka.call(ApiKey.PRODUCE, version, apis.ProduceRequest(
        acks=1, timeout_ms=10000, topic_data=(apis.ProduceTopicData(name=topic, partition_data=(
            apis.ProducePartitionData(index=0, records=data),)),)))
    part: apis.ProducePartitionResponse = answer.responses[0].partition_responses[0]
    return part


def high_watermark(kafka: RawKafka, topic: str) -> int:
    answer = kafka.call(ApiKey.LIST_OFFSETS, 1, apis.ListOffsetsRequest(
        replica_id=-1, topics=(apis.ListOffsetsTopic(name=topic, partitions=(
            apis.ListOffsetsPartition(partition_index=0, timestamp=-1),)),)))
    offset: int = answer.topics[0].partitions[0].offset
    return offset


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD, Compression.GZIP])
def test_every_keyless_record_is_named(broker: BrokerProcess, codec: Compression) -> None:
    topic = f"compacted-{codec.name.lower()}"
    with RawKafka(broker) as kafka:
        create_compacted(kafka, topic)
        part = produce(kafka, topic, hundred_records(codec), 8)
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in part.record_errors] == sorted(KEYLESS)
        assert {e.batch_index_error_message for e in part.record_errors} == {
            f"Compacted topic cannot accept message without key in topic partition {topic}-0."}
        assert part.error_message is not None and part.error_message.startswith(
            "10 record(s) refused (batch index 3, 13, 23, ...)")
        assert high_watermark(kafka, topic) == 0  # nothing of the batch was appended
        keyed = encode_batch([b"v"], keys=[b"k"], timestamp_ms=1, compression=codec)
        assert produce(kafka, topic, keyed, 8).error_code == 0


def test_before_v8_the_batch_is_refused_without_record_errors(broker: BrokerProcess) -> None:
    with RawKafka(broker) as kafka:
        create_compacted(kafka, "compacted-v7")
        part = produce(kafka, "compacted-v7", hundred_records(), 7)
        assert part.error_code == ErrorCode.CORRUPT_MESSAGE
        assert high_watermark(kafka, "compacted-v7") == 0


def test_confluent_fails_exactly_the_keyless_records(broker: BrokerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    for future in admin.create_topics(
        [NewTopic("compacted-ck", 1, 1, config={"cleanup.policy": "compact"})]
    ).values():
        future.result(10)
    # One batch of all 100: linger long enough, and batch.num.messages to match.
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 5000,
                            "batch.num.messages": 100, "message.timeout.ms": 30000})
    reports: dict[int, int | None] = {}

    def report(index: int):  # type: ignore[no-untyped-def]
        def on_delivery(err: object, _msg: object) -> None:
            reports[index] = None if err is None else err.code()  # type: ignore[attr-defined]
        return on_delivery

    for i in range(100):
        producer.produce("compacted-ck", value=b"v%d" % i, partition=0,
                         key=None if i in KEYLESS else b"k%d" % i, on_delivery=report(i))
    assert producer.flush(30) == 0
    assert len(reports) == 100
    failed = {i for i, code in reports.items() if code == ck.KafkaError.INVALID_RECORD}
    assert failed == KEYLESS
    # librdkafka fails the rest of the batch too, with its own code saying another record
    # caused it (what it does against Kafka): nothing of the batch is stored.
    assert Counter(reports.values()) == {
        ck.KafkaError.INVALID_RECORD: 10, ck.KafkaError._INVALID_DIFFERENT_RECORD: 90}
