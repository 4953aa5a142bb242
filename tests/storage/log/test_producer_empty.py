"""A clean start skips replaying the producer state of partitions that had none at the
clean close (brokerd/storage/log/producer_empty.py), and replays every other one: the file's
format and removal, and real brokers stopped cleanly or killed with -9."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.storage.checkpoints import encode_checkpoint, parse_checkpoint
from brokerd.storage.log.producer_empty import (
    EMPTY_PRODUCERS_FILE,
    take_empty_ends,
    write_empty_ends,
)
from brokerd.storage.log.producer_state import SNAPSHOT_NAME
from brokerd.storage.record.encode import encode_batch

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import RawKafka, small_values


class EmptyEndsFileTests(SynchronousTestCase):
    def setUp(self) -> None:
        # trial's mktemp() would create directories under the current directory.
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-empty-ends-")
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def test_written_then_taken_once(self) -> None:
        self.assertTrue(write_empty_ends(str(self.dir), [("a", 0, 10), ("b", 3, 0)]))
        self.assertEqual(take_empty_ends(str(self.dir), trust=True), {("a", 0): 10, ("b", 3): 0})
        self.assertFalse((self.dir / EMPTY_PRODUCERS_FILE).exists())
        self.assertEqual(take_empty_ends(str(self.dir), trust=True), {})

    def test_not_trusted_after_an_unclean_shutdown_but_removed(self) -> None:
        write_empty_ends(str(self.dir), [("a", 0, 10)])
        self.assertEqual(take_empty_ends(str(self.dir), trust=False), {})
        self.assertFalse((self.dir / EMPTY_PRODUCERS_FILE).exists())

    def test_a_corrupt_file_is_ignored_and_removed(self) -> None:
        (self.dir / EMPTY_PRODUCERS_FILE).write_bytes(b"0\n2\na 0 10\n")
        self.assertEqual(take_empty_ends(str(self.dir), trust=True), {})
        self.assertFalse((self.dir / EMPTY_PRODUCERS_FILE).exists())

    def test_an_unwritable_directory_is_reported_not_raised(self) -> None:
        self.assertFalse(write_empty_ends(str(self.dir / "missing"), [("a", 0, 1)]))


PRODUCE_VERSION = 8
TOPIC = "pe"


def _produce(conn: RawKafka, partition: int, records: bytes) -> tuple[int, int]:
    request = apis.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=(
            apis.ProduceTopicData(
                name=TOPIC,
                partition_data=(apis.ProducePartitionData(index=partition, records=records),),
            ),
        ),
    )
    response = conn.call(ApiKey.PRODUCE, PRODUCE_VERSION, request)
    [topic] = response.responses
    [part] = topic.partition_responses
    return part.error_code, part.base_offset


def _idempotent_batch(conn: RawKafka) -> bytes:
    answer = conn.call(
        ApiKey.INIT_PRODUCER_ID, 1, apis.InitProducerIdRequest(transactional_id=None)
    )
    assert answer.error_code == 0, answer
    return encode_batch(
        small_values("idem", 3),
        timestamp_ms=int(time.time() * 1000),
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
        base_sequence=0,
    )


@pytest.fixture
def broker(tmp_path: Path) -> BrokerProcess:
    proc = BrokerProcess(tmp_path / "data", args=("--fsync=always",)).start()
    with proc.client() as client:
        client.create_topic(TOPIC, 2)
        client.produce(TOPIC, 0, small_values("plain", 5))
        client.produce(TOPIC, 1, small_values("plain", 2))
    return proc


def _retry_is_deduplicated(proc: BrokerProcess, batch: bytes) -> bool:
    """Resends the batch first stored at offset 2 of partition 1: True if the broker
    answers with the stored copy (it knows the producer), False if it appended it."""
    with RawKafka(proc) as conn:
        error, base = _produce(conn, 1, batch)
    assert error == 0
    return base == 2


def test_clean_close_lists_only_partitions_without_producers(broker: BrokerProcess) -> None:
    try:
        with RawKafka(broker) as conn:
            batch = _idempotent_batch(conn)
            assert _produce(conn, 1, batch) == (0, 2)
        broker.stop()
        listed = parse_checkpoint((broker.data_dir / EMPTY_PRODUCERS_FILE).read_bytes())
        assert listed == {(TOPIC, 0): 5}
        broker.start()
        assert _retry_is_deduplicated(broker, batch)
        # Taken at the start, before the first request is served (the port accepts
        # connections a little earlier): no later start can use it.
        assert not (broker.data_dir / EMPTY_PRODUCERS_FILE).exists()
        with broker.client() as client:
            assert client.list_offsets(TOPIC, 0)[1] == 5
            client.produce(TOPIC, 0, small_values("after", 1))
            assert client.list_offsets(TOPIC, 0)[1] == 6
    finally:
        broker.stop()


def _stop_without_snapshot(broker: BrokerProcess) -> bytes:
    """Stores an idempotent batch in partition 1, stops cleanly and removes partition
    1's snapshot, so only a replay of its batches can restore the producer."""
    with RawKafka(broker) as conn:
        batch = _idempotent_batch(conn)
        assert _produce(conn, 1, batch) == (0, 2)
    broker.stop()
    (broker.data_dir / f"{TOPIC}-1" / SNAPSHOT_NAME).unlink()
    return batch


def test_an_entry_at_another_end_is_replayed(broker: BrokerProcess) -> None:
    try:
        batch = _stop_without_snapshot(broker)
        # An entry whose end is not the log's end (a list older than the log).
        (broker.data_dir / EMPTY_PRODUCERS_FILE).write_bytes(encode_checkpoint([(TOPIC, 1, 2)]))
        broker.start()
        assert _retry_is_deduplicated(broker, batch)
    finally:
        broker.stop()


def test_the_list_is_not_used_after_a_crash(broker: BrokerProcess) -> None:
    try:
        batch = _stop_without_snapshot(broker)
        (broker.data_dir / EMPTY_PRODUCERS_FILE).write_bytes(encode_checkpoint([(TOPIC, 1, 5)]))
        (broker.data_dir / ".clean_shutdown").unlink()
        broker.start()
        assert "not clean" in broker.log()
        assert _retry_is_deduplicated(broker, batch)
    finally:
        broker.stop()


def test_an_entry_at_the_log_end_skips_the_replay(broker: BrokerProcess) -> None:
    """What the list saves, shown by planting a false entry: the producer the replay
    would have found stays unknown, and the resent batch is appended again."""
    try:
        batch = _stop_without_snapshot(broker)
        (broker.data_dir / EMPTY_PRODUCERS_FILE).write_bytes(encode_checkpoint([(TOPIC, 1, 5)]))
        broker.start()
        assert not _retry_is_deduplicated(broker, batch)
    finally:
        broker.stop()
