"""The transaction APIs' newer versions against the real broker over a real socket, driven
by hand (tests/kafka_helpers.py ``RawKafka``): no client installed here sends them (Kafka's
and franz-go's producers use EndTxn v5 and TxnOffsetCommit v5 only when the cluster
finalizes ``transaction.version`` 2, which brokerd does not). What a KIP-890 part 2
client relies on is checked end to end: the bumped epoch in EndTxn v5's answer, markers
a read_committed consumer honours, the next transaction at the new epoch starting at
sequence 0, the old epoch fenced; TxnOffsetCommit v5 without AddOffsetsToTxn; and the
brokers' AddPartitionsToTxn v4 VerifyOnly and DescribeProducers on a live partition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import producers as producer_apis
from brokerd.kafka.wire.messages import txn as txn_apis
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.encode import encode_batch

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import create_topic
from tests.kafka_helpers import RawKafka, module_broker
from tests.txn_helpers import read_values

pytestmark = [pytest.mark.clients, pytest.mark.broker]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "txn-wire")


def unique(tag: str) -> str:
    return f"{tag}-{time.monotonic_ns()}"


def records(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    return encode_batch(list(values), timestamp_ms=int(time.time() * 1000), producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=True)


class Producer:
    """A transactional producer spoken by hand."""

    def __init__(self, conn: RawKafka, tid: str, topic: str) -> None:
        self.conn, self.tid, self.topic = conn, tid, topic
        got = conn.call(ApiKey.INIT_PRODUCER_ID, 5, apis.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=60_000))
        assert got.error_code == 0, got
        self.pid, self.epoch = got.producer_id, got.producer_epoch

    def add(self, partition: int = 0) -> int:
        got = self.conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, apis.AddPartitionsToTxnRequest(
            transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch,
            topics=(apis.AddPartitionsToTxnTopic(name=self.topic, partitions=(partition,)),)))
        code: int = got.results_by_topic[0].results_by_partition[0].partition_error_code
        return code

    def produce(self, seq: int, *values: bytes, epoch: int | None = None) -> int:
        data = records(self.pid, self.epoch if epoch is None else epoch, seq, *values)
        got = self.conn.call(ApiKey.PRODUCE, 8, apis.ProduceRequest(
            transactional_id=self.tid, acks=-1, timeout_ms=10_000,
            topic_data=(apis.ProduceTopicData(name=self.topic, partition_data=(
                apis.ProducePartitionData(index=0, records=data),)),)))
        code: int = got.responses[0].partition_responses[0].error_code
        return code

    def end(self, commit: bool, *, epoch: int | None = None) -> Any:
        return self.conn.call(ApiKey.END_TXN, 5, apis.EndTxnRequest(
            transactional_id=self.tid, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit))


def test_end_txn_v5_bumps_the_epoch_for_the_next_transaction(broker: BrokerProcess) -> None:
    topic = unique("kip890")
    create_topic(broker, topic)
    with RawKafka(broker) as conn:
        p = Producer(conn, unique("tx"), topic)
        first = p.epoch
        assert p.add() == 0
        assert p.produce(0, b"one", b"two") == 0
        ended = p.end(True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            0, p.pid, first + 1)
        # A retry with the epoch it was sent with gets the same answer.
        again = p.end(True, epoch=first)
        assert (again.error_code, again.producer_epoch) == (0, first + 1)
        assert read_values(broker, topic, [0], committed=True) == [b"one", b"two"]

        # The old epoch is fenced from now on; the new one starts over at sequence 0.
        assert p.produce(2, b"zombie", epoch=first) == ErrorCode.INVALID_PRODUCER_EPOCH
        p.epoch = ended.producer_epoch
        assert p.add() == 0
        assert p.produce(0, b"aborted") == 0
        aborted = p.end(False)
        assert (aborted.error_code, aborted.producer_epoch) == (0, first + 2)
        assert read_values(broker, topic, [0], committed=True) == [b"one", b"two"]
        # An abort with nothing ongoing is accepted (and bumps), a commit is not.
        p.epoch = aborted.producer_epoch
        assert p.end(True).error_code == ErrorCode.INVALID_TXN_STATE
        assert p.end(False).producer_epoch == first + 3


def test_txn_offset_commit_v5_needs_no_add_offsets(broker: BrokerProcess) -> None:
    topic, group = unique("kip890-offsets"), unique("g")
    create_topic(broker, topic)
    with RawKafka(broker) as conn:
        p = Producer(conn, unique("tx"), topic)
        got = conn.call(ApiKey.TXN_OFFSET_COMMIT, 5, apis.TxnOffsetCommitRequest(
            transactional_id=p.tid, group_id=group, producer_id=p.pid, producer_epoch=p.epoch,
            topics=(apis.TxnOffsetCommitRequestTopic(name=topic, partitions=(
                apis.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=17),
            )),)))
        assert got.topics[0].partitions[0].error_code == 0
        assert p.end(True).error_code == 0
        fetched = conn.call(ApiKey.OFFSET_FETCH, 7, apis.OffsetFetchRequest(
            group_id=group, topics=(apis.OffsetFetchTopic(name=topic, partition_indexes=(0,)),),
            require_stable=True))
        assert fetched.topics[0].partitions[0].committed_offset == 17


def test_verify_only_and_describe_producers_on_an_open_transaction(
    broker: BrokerProcess,
) -> None:
    topic = unique("verify")
    create_topic(broker, topic, 2)
    with RawKafka(broker) as conn:
        p = Producer(conn, unique("tx"), topic)
        assert p.add(0) == 0
        assert p.produce(0, b"open") == 0

        got = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, apis.AddPartitionsToTxnRequest(
            transactions=(txn_apis.AddPartitionsToTxnTransaction(
                transactional_id=p.tid, producer_id=p.pid, producer_epoch=p.epoch,
                verify_only=True,
                topics=(apis.AddPartitionsToTxnTopic(name=topic, partitions=(0, 1)),)),)))
        assert got.error_code == 0
        (result,) = got.results_by_transaction
        codes = [(r.partition_index, r.partition_error_code)
                 for r in result.topic_results[0].results_by_partition]
        assert codes == [(0, 0), (1, ErrorCode.INVALID_TXN_STATE)]

        described = conn.call(ApiKey.DESCRIBE_PRODUCERS, 0, producer_apis.DescribeProducersRequest(
            topics=(producer_apis.DescribeProducersTopicRequest(
                name=topic, partition_indexes=(0, 1, 2)),)))
        zero, one, two = described.topics[0].partitions
        (producer,) = zero.active_producers
        assert (producer.producer_id, producer.producer_epoch, producer.last_sequence,
                producer.current_txn_start_offset) == (p.pid, p.epoch, 0, 0)
        assert producer.last_timestamp > 0
        assert (one.error_code, one.active_producers) == (0, ())
        assert two.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert p.end(False).error_code == 0


def test_list_transactions_v2_pattern(broker: BrokerProcess) -> None:
    prefix = unique("listed")
    with RawKafka(broker) as conn:
        for name in ("a", "b"):
            Producer(conn, f"{prefix}-{name}", "unused")
        got = conn.call(ApiKey.LIST_TRANSACTIONS, 2, apis.ListTransactionsRequest(
            transactional_id_pattern=f"{prefix}-[b-z]"))
        assert [t.transactional_id for t in got.transaction_states] == [f"{prefix}-b"]
        # A back-reference: RE2 (and so Kafka's RE2/J) has none. ``(x+)+`` is accepted
        # now: RE2 matches it in linear time.
        bad = conn.call(ApiKey.LIST_TRANSACTIONS, 2, apis.ListTransactionsRequest(
            transactional_id_pattern="(x)\\1"))
        assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
