"""Bit rot under a live broker (real process, real files): the scenario of an
acknowledged record after damage below the recovery point, across a clean start and a
kill -9; and how clients are told about a corrupt stored batch: CORRUPT_RECORD (13) on the
native protocol, CORRUPT_MESSAGE (2) surfaced by librdkafka to the application."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeError
from brokerd.native.messages import ErrorCode
from brokerd.storage.record.header import scan_batches

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.broker

TOPIC = "rot"
#: Seconds a Kafka consumer may take to surface the corrupt batch.
SURFACE_SECONDS = 20.0


def flip_in_batch(data_dir: Path, index: int) -> None:
    log_file = sorted((data_dir / f"{TOPIC}-0").glob("*.log"))[-1]
    data = bytearray(log_file.read_bytes())
    pos, header = scan_batches(bytes(data)).batches[index]
    data[pos + header.size - 4] ^= 0x20
    log_file.write_bytes(bytes(data))


@pytest.fixture
def rotted(tmp_path: Path) -> Iterator[BrokerProcess]:
    """1,000 records in 200 batches of 5, clean stop, one byte flipped in batch 100,
    clean start (no rescan), one more record acknowledged at offset 1000, kill -9,
    restart."""
    proc = BrokerProcess(tmp_path / "data", args=("--fsync", "always")).start()
    try:
        with proc.client() as client:
            client.create_topic(TOPIC, 1)
            for b in range(200):
                client.produce(TOPIC, 0, [b"v%04d" % (b * 5 + i) for i in range(5)])
        proc.stop()
        flip_in_batch(proc.data_dir, 100)
        proc.start()
        with proc.client() as client:
            assert client.produce(TOPIC, 0, [b"acknowledged"]) == 1000
        proc.kill()
        proc.start()
        yield proc
    finally:
        proc.kill()


def test_acknowledged_record_survives_and_native_reads_say_corrupt(
    rotted: BrokerProcess,
) -> None:
    with rotted.client() as client:
        assert client.list_offsets(TOPIC, 0)[1] == 1001
        assert client.fetch(TOPIC, 0, 1000) == [b"acknowledged"]
        assert client.fetch(TOPIC, 0, 505)[0] == b"v0505"
        assert client.fetch(TOPIC, 0, 499)[-1] == b"v0499"
        with pytest.raises(NativeError) as err:
            client.fetch(TOPIC, 0, 500)
        assert err.value.code == ErrorCode.CORRUPT_RECORD
    log = rotted.log()
    assert "quarantined" in log and "00000000000000000000.log" in log


def test_kafka_consumer_gets_corrupt_message_error(rotted: BrokerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": rotted.kafka_bootstrap,
            "group.id": "rot-reader",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, 500)])
        deadline = time.monotonic() + SURFACE_SECONDS
        error = None
        while time.monotonic() < deadline and error is None:
            try:
                msg = consumer.poll(0.5)
            except ck.KafkaException as exc:
                error = exc.args[0]
                break
            if msg is not None and msg.error() is not None:
                error = msg.error()
            elif msg is not None:
                pytest.fail(f"a record of the damaged batch was served: {msg.offset()}")
        assert error is not None, "the consumer never surfaced the corrupt batch"
        # librdkafka's name for Kafka's CORRUPT_MESSAGE (2) is INVALID_MSG.
        assert error.code() == 2, error
    finally:
        consumer.close()
