"""Fetch v12-18 against a real ``twistd broker`` on loopback: records a real client
(confluent-kafka) produced are fetched by topic ID at the highest version over a plain
socket (the zero-copy path), an unknown or deleted topic's ID is UNKNOWN_TOPIC_ID, an
incremental fetch is refused as a session the broker does not have, a confluent-kafka
consumer (librdkafka fetches by topic ID once Metadata gives it the IDs) reads the records
back, and fetches parked on a topic deleted and created again are answered at once and
leave the new topic fresh.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import attrs
import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.header import read_header

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import admin, confluent
from tests.figures import record
from tests.kafka_helpers import WAIT, RawKafka, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

VALUES = [b"value-%03d-" % i + b"x" * (i * 37 % 500) for i in range(200)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "fetch-versions")


def _produce(broker: BrokerProcess, topic: str) -> None:
    ck = confluent()
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 5})
    for value in VALUES:
        producer.produce(topic, value)
    assert producer.flush(WAIT) == 0


def _topic_id(conn: RawKafka, topic: str) -> uuid.UUID:
    meta = conn.call(ApiKey.METADATA, 12, apis.MetadataRequest(
        topics=(apis.MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False))
    [found] = meta.topics
    assert found.error_code == 0, found
    topic_id: uuid.UUID = found.topic_id
    return topic_id


def _fetch(topic_id: uuid.UUID, offset: int, **fields: object) -> apis.FetchRequest:
    return attrs.evolve(apis.FetchRequest(
        max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
        topics=(apis.FetchTopic(topic_id=topic_id, partitions=(apis.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=64 * 1024),)),),
    ), **fields)


def _values(records: bytes) -> tuple[list[bytes | None], int]:
    """The values of the whole batches in ``records`` and the offset after the last."""
    values: list[bytes | None] = []
    pos, next_offset = 0, 0
    while pos + 61 <= len(records):
        header = read_header(records, pos)
        if pos + header.size > len(records):
            break  # a partial trailing batch (the partition's byte limit)
        batch = records[pos : pos + header.size]
        values.extend(r.value for r in decode_records(batch, max_uncompressed=1 << 24))
        next_offset = header.last_offset + 1
        pos += header.size
    return values, next_offset


def test_fetch_by_topic_id_at_every_new_version(broker: BrokerProcess) -> None:
    _produce(broker, "by-id")
    with RawKafka(broker) as conn:
        topic_id = _topic_id(conn, "by-id")
        for version in (12, 13, 16, 18):
            request = _fetch(topic_id, 0)
            if version == 12:
                request = attrs.evolve(request, topics=(attrs.evolve(
                    request.topics[0], topic="by-id", topic_id=uuid.UUID(int=0)),))
            got: list[bytes | None] = []
            offset = 0
            while offset < len(VALUES):
                answer = conn.call(ApiKey.FETCH, version, attrs.evolve(
                    request, topics=(attrs.evolve(request.topics[0], partitions=(
                        attrs.evolve(request.topics[0].partitions[0], fetch_offset=offset),
                    )),)))
                assert (answer.error_code, answer.session_id) == (0, 0)
                [topic] = answer.responses
                assert topic.topic_id == (topic_id if version >= 13 else uuid.UUID(int=0))
                [part] = topic.partitions
                assert (part.error_code, part.high_watermark, part.aborted_transactions) == (
                    0, len(VALUES), ())
                values, offset = _values(part.records)
                assert values, (version, offset)
                got.extend(values)
            assert got == VALUES, version


def test_unknown_ids_and_incremental_fetches(broker: BrokerProcess) -> None:
    confluent()
    from confluent_kafka.admin import NewTopic

    client = admin(broker)
    for future in client.create_topics([NewTopic("doomed", 1, 1)]).values():
        future.result(WAIT)
    with RawKafka(broker) as conn:
        old_id = _topic_id(conn, "doomed")
        for future in client.delete_topics(["doomed"]).values():
            future.result(WAIT)
        for topic_id in (old_id, uuid.uuid4(), uuid.UUID(int=0)):
            answer = conn.call(ApiKey.FETCH, 18, _fetch(topic_id, 0))
            [topic] = answer.responses
            assert topic.topic_id == topic_id
            assert [p.error_code for p in topic.partitions] == [ErrorCode.UNKNOWN_TOPIC_ID]
        started = time.monotonic()
        answer = conn.call(ApiKey.FETCH, 18, _fetch(uuid.uuid4(), 0, session_id=7,
                                                    session_epoch=3, max_wait_ms=5000))
        assert (answer.error_code, answer.session_id, answer.responses) == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, ())
        assert time.monotonic() - started < 2  # answered at once, not after MaxWaitMs


def test_a_librdkafka_consumer_reads_back_by_topic_id(broker: BrokerProcess) -> None:
    _produce(broker, "consumed")
    ck = confluent()
    consumer = ck.Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": "fetch-versions",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    try:
        consumer.subscribe(["consumed"])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(VALUES) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message.value())
    finally:
        consumer.close()
    assert got == VALUES


def test_a_topic_deleted_and_created_again_under_parked_fetches(broker: BrokerProcess) -> None:
    """Fetches parked on a topic (one by name, one by topic ID) are answered at once when
    it is deleted; the topic created again under the same name starts empty for every
    connection and takes a real producer's records (the deleted log's end is out of
    range, offset 0 is readable)."""
    confluent()
    from confluent_kafka.admin import NewTopic

    client = admin(broker)
    for future in client.create_topics([NewTopic("recreated", 1, 1)]).values():
        future.result(WAIT)
    _produce(broker, "recreated")
    end = len(VALUES)
    with RawKafka(broker, timeout=WAIT) as by_name, RawKafka(broker, timeout=WAIT) as by_id:
        old_id = _topic_id(by_id, "recreated")
        named = _fetch(uuid.UUID(int=0), end, max_wait_ms=60_000)
        named = attrs.evolve(named, topics=(attrs.evolve(named.topics[0], topic="recreated"),))
        by_name.send(ApiKey.FETCH, 12, named)
        by_id.send(ApiKey.FETCH, 18, _fetch(old_id, end, max_wait_ms=60_000))
        time.sleep(0.5)  # both parked (nothing can answer them for a minute)
        started = time.monotonic()
        for future in client.delete_topics(["recreated"]).values():
            future.result(WAIT)
        [[part]] = [t.partitions for t in by_name.receive().responses]
        assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        [topic] = by_id.receive().responses
        assert topic.topic_id == old_id
        assert [p.error_code for p in topic.partitions] == [ErrorCode.UNKNOWN_TOPIC_ID]
        answered = time.monotonic() - started
        assert answered < WAIT  # answered by the deletion, not after MaxWaitMs (60 s)
        record("parked fetches answered after the topic's deletion",
               f"{answered * 1000:.0f} ms from DeleteTopics sent (MaxWaitMs 60,000)")

    for future in client.create_topics([NewTopic("recreated", 1, 1)]).values():
        future.result(WAIT)
    ck = confluent()
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap})
    producer.produce("recreated", b"after")
    assert producer.flush(WAIT) == 0
    with RawKafka(broker) as conn:
        new_id = _topic_id(conn, "recreated")
        assert new_id != old_id
        answer = conn.call(ApiKey.FETCH, 18, _fetch(new_id, end))
        [[stale]] = [t.partitions for t in answer.responses]
        assert stale.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        answer = conn.call(ApiKey.FETCH, 18, _fetch(new_id, 0))
        [[fresh]] = [t.partitions for t in answer.responses]
        assert (fresh.error_code, fresh.high_watermark) == (0, 1)
        assert _values(fresh.records) == ([b"after"], 1)
