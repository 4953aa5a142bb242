"""One prepare, one append: ``prepared_append.prepare_batches`` and
``PartitionLog.append_prepared`` with the producer state checked and updated inside the
log, on a real partition directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import (
    CorruptBatch,
    InvalidProducerEpoch,
    InvalidTimestamp,
    OutOfOrderSequence,
    RecordTooLarge,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.prepared_append import PreparedBatches, prepare_batches
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches, read_header
from brokerd.storage.types import AppendInfo

from tests.read_specs import BYTES

BIG = 1 << 20
NOW_MS = 1_700_000_000_000


def batch(pid: int = 7, epoch: int = 0, seq: int = 0, n: int = 2, **kw: object) -> bytes:
    return encode_batch(
        [b"v%d" % i for i in range(n)],
        timestamp_ms=NOW_MS,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        **kw,  # type: ignore[arg-type]
    )


def prepared(data: bytes, config: LogConfig | None = None) -> PreparedBatches:
    return prepare_batches(
        config or LogConfig(),
        data,
        parse_batches(data, max_batch_bytes=BIG),
        topic="t",
        partition=0,
        now_ms=NOW_MS,
    )


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), recovery_point=None)
    yield log  # type: ignore[misc]
    log.close()


def test_a_retry_answers_the_stored_offsets_and_appends_nothing(plog: PartitionLog) -> None:
    first = plog.append_prepared(prepared(batch(seq=0)), now_ms=NOW_MS)
    assert (first.base_offset, first.last_offset, first.duplicate) == (0, 1, False)
    again = plog.append_prepared(prepared(batch(seq=0)), now_ms=NOW_MS)
    assert again == first and again.duplicate
    assert plog.log_end_offset == 2
    nxt = plog.append_prepared(prepared(batch(seq=2)), now_ms=NOW_MS)
    assert nxt.base_offset == 2


def test_gaps_and_old_epochs_are_refused_before_anything_is_written(plog: PartitionLog) -> None:
    plog.append_prepared(prepared(batch(epoch=1, seq=0)), now_ms=NOW_MS)
    with pytest.raises(OutOfOrderSequence):
        plog.append_prepared(prepared(batch(epoch=1, seq=5)), now_ms=NOW_MS)
    with pytest.raises(InvalidProducerEpoch):
        plog.append_prepared(prepared(batch(epoch=0, seq=2)), now_ms=NOW_MS)
    assert plog.log_end_offset == 2


def test_a_failed_append_leaves_no_producer_state(tmp_path: Path) -> None:
    # The topic recompresses; a batch whose records section does not decompress fails
    # in the stored-form step, after the producer check: nothing is recorded, so the
    # producer's good resend of those sequences is appended.
    config = LogConfig(compression_type="lz4")
    log = PartitionLog.open(str(tmp_path / "t-0"), config, recovery_point=None)
    try:
        good = batch(seq=0, compression=Compression.GZIP)
        bad = bytearray(good)
        bad[61:] = b"\x00" * (len(bad) - 61)  # not gzip any more; the CRC is made right below
        import crc32c

        from brokerd.storage.record.header import CRC_START

        bad[17:21] = int(crc32c.crc32c(bytes(bad[CRC_START:]))).to_bytes(4, "big")
        with pytest.raises(CorruptBatch):
            log.append_prepared(prepared(bytes(bad), config), now_ms=NOW_MS)
        assert not log.producers
        info = log.append_prepared(prepared(good, config), now_ms=NOW_MS)
        assert (info.base_offset, info.duplicate) == (0, False)
        log.publish()
        assert read_header(log.read(0, BIG, BYTES).records).compression == Compression.LZ4
    finally:
        log.close()


def test_a_retry_on_a_log_append_time_topic_gets_the_first_append_time(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = PartitionLog.open(str(tmp_path / "t-0"), config, recovery_point=None)
    try:
        first = log.append_prepared(prepared(batch(), config), now_ms=NOW_MS + 5)
        assert first.log_append_time == NOW_MS + 5
        again = log.append_prepared(prepared(batch(), config), now_ms=NOW_MS + 9)
        assert again.log_append_time == NOW_MS + 5 and again.duplicate
    finally:
        log.close()


def test_a_marker_fences_the_producer_in_the_log(plog: PartitionLog) -> None:
    plog.append_prepared(prepared(batch(epoch=2, seq=0, transactional=True)), now_ms=NOW_MS)
    assert plog.describe_producers()[0][1] == 0  # its open transaction starts at 0
    plog.append_marker(7, 3, commit=False, coordinator_epoch=0, timestamp_ms=NOW_MS)
    with pytest.raises(InvalidProducerEpoch):
        plog.append_prepared(prepared(batch(epoch=2, seq=2)), now_ms=NOW_MS)
    ((producer, first_offset),) = plog.describe_producers()
    assert (producer.producer_id, producer.epoch, producer.marked, first_offset) == (
        7, 3, True, -1
    )


def test_producer_snapshot_pairs_the_state_with_the_log_end(plog: PartitionLog) -> None:
    plog.append_prepared(prepared(batch(seq=0, transactional=True)), now_ms=NOW_MS)
    end, producers, (txn_end, ongoing) = plog.producer_snapshot()
    assert (end, txn_end, ongoing) == (2, 2, {7: 0})
    assert producers[7]["batches"] == [[0, 1, 0, 1]]


def test_prepare_applies_the_topic_configs() -> None:
    data = batch(pid=-1, epoch=-1, seq=-1)
    with pytest.raises(RecordTooLarge):
        prepared(data, LogConfig(max_message_bytes=len(data) - 1))
    with pytest.raises(InvalidTimestamp):
        prepare_batches(
            LogConfig(message_timestamp_after_max_ms=0),
            data,
            parse_batches(data, max_batch_bytes=BIG),
            topic="t",
            partition=0,
            now_ms=NOW_MS - 1,
        )
    ready = prepared(data)
    assert (ready.producer_id, ready.transactional) == (-1, False)
    assert AppendInfo(0, 0, 0) == AppendInfo(0, 0, 0, duplicate=True)  # not in equality
