"""Idempotent produce against a real ``twistd broker``: a retried batch is stored once.

The raw tests build RecordBatches with a producer id, epoch and sequence
(:func:`brokerd.storage.record.encode.encode_batch`), get the producer id from InitProducerId
and send Produce requests over a plain socket (the client side of
:mod:`brokerd.kafka.wire.requests.apis`), so each retry is exactly the same bytes, as a
real client's retry is. Then the real idempotent producers: kafka-python's default one,
and kcat, confluent-kafka and aiokafka with idempotence switched on, also retrying for
real: a proxy loses the answer to a Produce the broker handled and cuts the connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    WAIT,
    LosingProxy,
    RawKafka,
    kcat_produce,
    module_broker,
    native_records,
    need_kcat,
    small_values,
    stored_batches,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]

PRODUCE_VERSION = 8


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "idempotence")


def _init_producer_id(conn: RawKafka) -> tuple[int, int]:
    response = conn.call(
        ApiKey.INIT_PRODUCER_ID, 1, apis.InitProducerIdRequest(transactional_id=None)
    )
    assert response.error_code == 0, response
    assert response.producer_id >= 0
    return response.producer_id, response.producer_epoch


def _batch(
    values: list[bytes], pid: int, epoch: int, sequence: int, codec: Compression = Compression.NONE
) -> bytes:
    return encode_batch(
        values,
        timestamp_ms=int(time.time() * 1000),
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def _produce_request(topic: str, records: bytes, acks: int = -1) -> apis.ProduceRequest:
    return apis.ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        topic_data=(
            apis.ProduceTopicData(
                name=topic,
                partition_data=(apis.ProducePartitionData(index=0, records=records),),
            ),
        ),
    )


def _answer(response: apis.ProduceResponse) -> tuple[int, int]:
    """``(error_code, base_offset)`` of a one-partition Produce response."""
    [topic] = response.responses
    [part] = topic.partition_responses
    return part.error_code, part.base_offset


def _produce(conn: RawKafka, topic: str, records: bytes) -> tuple[int, int]:
    return _answer(conn.call(ApiKey.PRODUCE, PRODUCE_VERSION, _produce_request(topic, records)))


def _create(broker: BrokerProcess, topic: str) -> None:
    with broker.client() as client:
        client.create_topic(topic, 1)


def test_retried_batch_is_stored_once(kbroker: BrokerProcess) -> None:
    topic = "idem-retry"
    _create(kbroker, topic)
    first, second = small_values("first", 3), small_values("second", 2)
    with RawKafka(kbroker) as conn:
        pid, epoch = _init_producer_id(conn)
        batch0 = _batch(first, pid, epoch, 0, Compression.GZIP)
        batch1 = _batch(second, pid, epoch, 3)
        assert _produce(conn, topic, batch0) == (0, 0)
        # The retry (same bytes, as a client resends after a lost answer) gets the
        # offsets of the stored copy, and nothing is appended.
        assert _produce(conn, topic, batch0) == (0, 0)
        assert _produce(conn, topic, batch1) == (0, 3)
        # A retry of an older batch, still in the producer's recent history, too.
        assert _produce(conn, topic, batch0) == (0, 0)
        assert _produce(conn, topic, batch1) == (0, 3)
    # On a new connection, as after a client reconnects, still the same answer.
    with RawKafka(kbroker) as conn:
        assert _produce(conn, topic, batch1) == (0, 3)
    assert native_records(kbroker, topic, 0) == list(enumerate(first + second))
    stored = stored_batches(kbroker, topic, 0)
    assert [(h.base_offset, h.producer_id, h.base_sequence) for h in stored] == [
        (0, pid, 0),
        (3, pid, 3),
    ]


def test_retry_racing_the_original_is_stored_once(kbroker: BrokerProcess) -> None:
    """The retry arrives (on another connection) while the original is still being
    written: it waits for the original and gets its offsets."""
    topic = "idem-race"
    _create(kbroker, topic)
    values = small_values("race", 4)
    with RawKafka(kbroker) as c1, RawKafka(kbroker) as c2, RawKafka(kbroker) as c3:
        pid, epoch = _init_producer_id(c1)
        batch = _batch(values, pid, epoch, 0)
        request = _produce_request(topic, batch)
        for conn in (c1, c2, c3):
            conn.send(ApiKey.PRODUCE, PRODUCE_VERSION, request)
        answers = [_answer(conn.receive()) for conn in (c1, c2, c3)]
    assert answers == [(0, 0)] * 3
    assert native_records(kbroker, topic, 0) == list(enumerate(values))


def test_pipelined_batches_and_retries(kbroker: BrokerProcess) -> None:
    """Clients pipeline produces, and consecutive produces of a connection run together
    (docs/kafka.md): sequence checks, retries of batches still being written and a gap
    must come out as if the requests ran one by one; a Fetch behind them sees them all."""
    topic = "idem-pipelined"
    _create(kbroker, topic)
    with RawKafka(kbroker) as conn:
        pid, epoch = _init_producer_id(conn)
        b0 = _batch(small_values("p0", 3), pid, epoch, 0, Compression.LZ4)
        b1 = _batch(small_values("p1", 2), pid, epoch, 3)
        gap = _batch([b"gap"], pid, epoch, 9)
        b2 = _batch([b"p2"], pid, epoch, 5, Compression.ZSTD)
        for records in (b0, b1, b0, b1, gap, b2):
            conn.send(ApiKey.PRODUCE, PRODUCE_VERSION, _produce_request(topic, records))
        fetch = apis.FetchRequest(
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            topics=(apis.FetchTopic(topic=topic, partitions=(
                apis.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
            )),),
        )
        conn.send(ApiKey.FETCH, 11, fetch)
        answers = [_answer(conn.receive()) for _ in range(6)]
        fetched = conn.receive()
    assert answers[:4] == [(0, 0), (0, 3), (0, 0), (0, 3)]
    assert answers[4][0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert answers[5] == (0, 5)
    [part] = fetched.responses[0].partitions
    assert (part.error_code, part.high_watermark) == (0, 6)
    values = [*small_values("p0", 3), *small_values("p1", 2), b"p2"]
    assert native_records(kbroker, topic, 0) == list(enumerate(values))


def test_sequence_gap_is_refused(kbroker: BrokerProcess) -> None:
    topic = "idem-gap"
    _create(kbroker, topic)
    with RawKafka(kbroker) as conn:
        pid, epoch = _init_producer_id(conn)
        assert _produce(conn, topic, _batch([b"a", b"b"], pid, epoch, 0)) == (0, 0)
        # Sequence 2 is next; 4 leaves a gap (records 2-3 lost in between).
        code, _ = _produce(conn, topic, _batch([b"x"], pid, epoch, 4))
        assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # The refused batch was not stored, and the right sequence still goes through.
        assert _produce(conn, topic, _batch([b"c"], pid, epoch, 2)) == (0, 2)
        # A fenced (older) epoch is refused once a newer one wrote.
        assert _produce(conn, topic, _batch([b"d"], pid, epoch + 1, 0)) == (0, 3)
        code, _ = _produce(conn, topic, _batch([b"e"], pid, epoch, 3))
        assert code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert native_records(kbroker, topic, 0) == list(enumerate([b"a", b"b", b"c", b"d"]))


def test_acks_zero_retry_is_stored_once(kbroker: BrokerProcess) -> None:
    """acks=0 gets no answer, but the duplicate check applies all the same."""
    topic = "idem-acks0"
    _create(kbroker, topic)
    with RawKafka(kbroker) as conn:
        pid, epoch = _init_producer_id(conn)
        batch = _batch([b"once"], pid, epoch, 0)
        for _ in range(2):
            request = _produce_request(topic, batch, acks=0)
            conn.send(ApiKey.PRODUCE, PRODUCE_VERSION, request, answered=False)
        # A request that is answered proves both were handled (answers are in order).
        assert _produce(conn, topic, _batch([b"next"], pid, epoch, 1)) == (0, 1)
    assert native_records(kbroker, topic, 0) == [(0, b"once"), (1, b"next")]


def _check_idempotent_batches(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    """Every value stored once, in order, in batches of one producer whose sequences
    follow each other from 0."""
    assert native_records(broker, topic, 0) == list(enumerate(values))
    batches = stored_batches(broker, topic, 0)
    assert {h.producer_id for h in batches} != {-1}
    assert len({h.producer_id for h in batches}) == 1
    assert [h.base_sequence for h in batches] == [h.base_offset for h in batches]


def test_kafka_python_default_producer_is_idempotent(kbroker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    topic = "idem-kafka-python"
    values = small_values("kp", 30)
    # No options: kafka-python 3 defaults to enable_idempotence=True and acks=all, so
    # it sends InitProducerId first and numbers every batch.
    producer = kafka.KafkaProducer(bootstrap_servers=kbroker.kafka_bootstrap)
    try:
        futures = []
        for i, v in enumerate(values):
            futures.append(producer.send(topic, v, partition=0))
            if i % 7 == 6:
                producer.flush(WAIT)  # several batches, so sequences must chain
        assert [f.get(WAIT).offset for f in futures] == list(range(30))
    finally:
        producer.close(WAIT)
    _check_idempotent_batches(kbroker, topic, values)


def test_confluent_idempotent_producer(kbroker: BrokerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = "idem-confluent"
    values = small_values("cf", 30)
    producer = ck.Producer(
        {"bootstrap.servers": kbroker.kafka_bootstrap, "enable.idempotence": True}
    )
    errors: list[object] = []
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=0, on_delivery=lambda e, _m: e and errors.append(e))
        if i % 7 == 6:
            assert producer.flush(WAIT) == 0
    assert producer.flush(WAIT) == 0
    assert errors == []
    _check_idempotent_batches(kbroker, topic, values)


def test_aiokafka_idempotent_producer(kbroker: BrokerProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = "idem-aiokafka"
    values = small_values("ak", 30)

    async def main() -> list[int]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=kbroker.kafka_bootstrap, enable_idempotence=True
        )
        await producer.start()
        try:
            offsets = []
            for chunk in (values[i : i + 7] for i in range(0, 30, 7)):
                futures = [await producer.send(topic, v, partition=0) for v in chunk]
                offsets += [(await f).offset for f in futures]
            return offsets
        finally:
            await producer.stop()

    assert asyncio.run(main()) == list(range(30))
    _check_idempotent_batches(kbroker, topic, values)


def test_kcat_idempotent_producer(kbroker: BrokerProcess) -> None:
    need_kcat()
    topic = "idem-kcat"
    values = small_values("kc", 30)
    for i in range(0, 30, 10):  # three producer runs: three producer ids
        kcat_produce(kbroker, topic, 0, values[i : i + 10], "-X", "enable.idempotence=true")
    assert native_records(kbroker, topic, 0) == list(enumerate(values))
    batches = stored_batches(kbroker, topic, 0)
    assert -1 not in {h.producer_id for h in batches}
    assert len({h.producer_id for h in batches}) == 3
    # Each run numbers its batches from 0 on.
    first_of_run = {h.producer_id: h.base_sequence for h in reversed(batches)}
    assert set(first_of_run.values()) == {0}


# -- a real client's retry -----------------------------------------------------------
# Each function produces ``values`` to partition 0 of ``topic`` through ``bootstrap`` with
# an idempotent producer and returns the offsets the client was told (None: kcat does not
# say).


def _kcat_idempotent(bootstrap: str, topic: str, values: list[bytes]) -> list[int] | None:
    # -E: kcat would otherwise exit on the dropped connection instead of letting
    # librdkafka retry.
    kcat_produce(bootstrap, topic, 0, values, "-E", "-X", "enable.idempotence=true")
    return None


def _confluent_idempotent(bootstrap: str, topic: str, values: list[bytes]) -> list[int] | None:
    ck = pytest.importorskip("confluent_kafka")
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    reports: list[Any] = []
    for v in values:
        producer.produce(topic, v, partition=0,
                         on_delivery=lambda e, m: reports.append(e or m.offset()))
    assert producer.flush(WAIT) == 0
    return reports


def _kafka_python_idempotent(
    bootstrap: str, topic: str, values: list[bytes]
) -> list[int] | None:
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)  # idempotent by default
    try:
        futures = [producer.send(topic, v, partition=0) for v in values]
        return [f.get(WAIT).offset for f in futures]
    finally:
        producer.close(WAIT)


def _aiokafka_idempotent(bootstrap: str, topic: str, values: list[bytes]) -> list[int] | None:
    aiokafka = pytest.importorskip("aiokafka")

    async def main() -> list[int]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True
        )
        await producer.start()
        try:
            futures = [await producer.send(topic, v, partition=0) for v in values]
            return [(await f).offset for f in futures]
        finally:
            await producer.stop()

    return asyncio.run(main())


IDEMPOTENT_PRODUCERS = {
    "kcat": _kcat_idempotent,
    "confluent": _confluent_idempotent,
    "kafka-python": _kafka_python_idempotent,
    "aiokafka": _aiokafka_idempotent,
}


@pytest.mark.parametrize("client", sorted(IDEMPOTENT_PRODUCERS))
def test_client_retry_after_a_lost_answer_is_stored_once(
    kbroker: BrokerProcess, client: str
) -> None:
    """The broker stores a batch, its answer is lost and the connection drops (a proxy
    does it): the real client retries the same batch, which must not be stored twice."""
    if client == "kcat":
        need_kcat()
    topic = f"idem-lost-{client}"
    _create(kbroker, topic)
    values = small_values(client, 10)
    proxy = LosingProxy(kbroker, lose=1)
    try:
        offsets = IDEMPOTENT_PRODUCERS[client](proxy.bootstrap, topic, values)
    finally:
        proxy.close()
    assert len(proxy.lost) == 1
    batches = stored_batches(kbroker, topic, 0)
    assert proxy.produce_requests > len(batches), "the client did not retry"
    assert native_records(kbroker, topic, 0) == list(enumerate(values))
    if offsets is not None:
        assert offsets == list(range(10))  # the retry was answered with the stored offsets


def test_retry_after_a_restart_is_stored_once(make_broker: object) -> None:
    """The case idempotence exists for: the broker stored a batch but its answer was lost
    (here: the broker restarted), and the producer retries it. The producer state comes
    back from the snapshot written at shutdown."""
    broker: BrokerProcess = make_broker()  # type: ignore[operator]
    topic = "idem-restart"
    _create(broker, topic)
    with RawKafka(broker) as conn:
        pid, epoch = _init_producer_id(conn)
        batch = _batch([b"a", b"b"], pid, epoch, 0)
        assert _produce(conn, topic, batch) == (0, 0)
    broker.restart()
    with RawKafka(broker) as conn:
        assert _produce(conn, topic, batch) == (0, 0)
    assert native_records(broker, topic, 0) == [(0, b"a"), (1, b"b")]


def test_retry_after_a_crash_is_stored_once(make_broker: object) -> None:
    """As above, but the broker is killed: no fresh snapshot, so the state is replayed
    from the log's batch headers."""
    broker: BrokerProcess = make_broker()  # type: ignore[operator]
    topic = "idem-crash"
    _create(broker, topic)
    with RawKafka(broker) as conn:
        pid, epoch = _init_producer_id(conn)
        first = _batch([b"a", b"b"], pid, epoch, 0)
        second = _batch([b"c"], pid, epoch, 2)
        assert _produce(conn, topic, first) == (0, 0)
        assert _produce(conn, topic, second) == (0, 2)
    broker.kill()
    broker.start()
    with RawKafka(broker) as conn:
        assert _produce(conn, topic, second) == (0, 2)  # the retry: answered, not stored
        assert _produce(conn, topic, _batch([b"x"], pid, epoch, 9))[0] != 0  # a gap
        assert _produce(conn, topic, _batch([b"d"], pid, epoch, 3)) == (0, 3)
    assert native_records(broker, topic, 0) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
