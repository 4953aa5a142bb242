"""The write job and the partition writer (:mod:`brokerd.core.writer`): what a job
stores (log-append-time stamping, the topic's codec after recompression) on a real
partition log, and the per-topic flush rule (``flush.messages`` / ``flush.ms`` against
``--fsync``) counted on the core's sync calls under a fake clock."""

from __future__ import annotations

from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.appends import BatchesAppend
from brokerd.core.writer import write_job
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import to_log_config
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.prepared_append import PreparedBatches
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches, read_header

from tests.core.test_broker import make
from tests.read_specs import BYTES, COMMITTED_RECORDS

NOW = 1_700_000_000_000
BIG = 1 << 20


def test_write_job_stamps_log_append_time_topics_only(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    plog = PartitionLog.open(str(tmp_path / "t-0"), config, recovery_point=None)
    data = encode_batch([b"x"], timestamp_ms=5)
    append = BatchesAppend(PreparedBatches(data, tuple(parse_batches(data, max_batch_bytes=BIG))))
    result = write_job(plog, [append], sync=False, retention=False, wall_clock=lambda: 42.0)
    (info,) = result.outcomes
    assert info.log_append_time == 42_000  # type: ignore[union-attr]
    stored = read_header(plog.read(0, BIG, BYTES).records)
    assert stored.log_append_time and stored.max_timestamp == 42_000
    plog.reconfigure(LogConfig())
    result = write_job(plog, [append], sync=False, retention=False, wall_clock=lambda: 43.0)
    assert result.outcomes[0].log_append_time == -1  # type: ignore[union-attr]
    plog.close()


def test_stored_batch_attributes_after_recompression(tmp_path: Path) -> None:
    """The write job stores the recompressed batch (what a fetch then serves)."""
    config = to_log_config(LogConfig(), {"compression.type": "zstd"})
    plog = PartitionLog.open(str(tmp_path / "t-0"), config, recovery_point=None)
    try:
        data = encode_batch(
            [b"value-%d" % i * 20 for i in range(5)], timestamp_ms=NOW,
            compression=Compression.GZIP,
        ) + encode_batch([b"second"], timestamp_ms=NOW + 5, compression=Compression.GZIP)
        headers = tuple(parse_batches(data, max_batch_bytes=len(data)))
        append = BatchesAppend(PreparedBatches(data, headers))
        write_job(plog, [append], sync=True, retention=False, wall_clock=lambda: NOW / 1000)
        stored = plog.read(0, 1 << 20, BYTES).records
        assert read_header(stored).compression == Compression.ZSTD
        assert [r.value for r in plog.read(0, 1 << 20, COMMITTED_RECORDS).decoded][:2] == [
            b"value-0" * 20, b"value-1" * 20]
    finally:
        plog.close()


class FlushOverrideTests(SynchronousTestCase):
    """The broker core's syncs of one partition (its ``flush`` calls), by topic rule."""

    def test_flush_messages_one_syncs_every_append_under_fsync_never(self) -> None:
        broker, logdir, _ = make("never")
        log = logdir.parts[("t", 0)]
        log.config = LogConfig(flush_messages=1)
        for value in (b"a", b"b", b"c"):
            self.successResultOf(broker.produce_values("t", 0, [value]))
        self.assertEqual(log.flushes, 3)
        self.assertEqual(log.calls[:3], ["append", "flush", "publish"])

    def test_flush_messages_counts_records(self) -> None:
        broker, logdir, _ = make("never")
        log = logdir.parts[("t", 0)]
        log.config = LogConfig(flush_messages=3)
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        self.successResultOf(broker.produce_values("t", 0, [b"b"]))
        self.assertEqual(log.flushes, 0)
        self.successResultOf(broker.produce_values("t", 0, [b"c"]))
        self.assertEqual(log.flushes, 1)
        self.successResultOf(broker.produce_values("t", 0, [b"d", b"e"]))
        self.assertEqual(log.flushes, 1)
        self.successResultOf(broker.produce_values("t", 0, [b"f", b"g", b"h", b"i"]))
        self.assertEqual(log.flushes, 2)

    def test_a_topic_override_weakens_fsync_always(self) -> None:
        broker, logdir, _ = make("always")
        log = logdir.parts[("t", 0)]
        log.config = LogConfig(flush_messages=1000)
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        self.assertEqual(log.flushes, 0)

    def test_flush_ms_syncs_that_long_after_the_first_unsynced_append(self) -> None:
        broker, logdir, clock = make("never")
        log = logdir.parts[("t", 0)]
        log.config = LogConfig(flush_ms=500)
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        clock.advance(0.3)
        self.successResultOf(broker.produce_values("t", 0, [b"b"]))
        self.assertEqual(log.flushes, 0)
        clock.advance(0.2)
        self.assertEqual(log.flushes, 1)
        clock.advance(5)
        self.assertEqual(log.flushes, 1, "nothing new: no sync, no timer")
        self.successResultOf(broker.produce_values("t", 0, [b"c"]))
        clock.advance(0.5)
        self.assertEqual(log.flushes, 2)

    def test_a_topic_flush_ms_replaces_the_interval_timer(self) -> None:
        broker, logdir, clock = make("interval:100")
        log = logdir.parts[("t", 0)]
        log.config = LogConfig(flush_ms=1000)
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        clock.advance(0.5)
        self.assertEqual(log.flushes, 0)
        clock.advance(0.5)
        self.assertEqual(log.flushes, 1)

    def test_stopping_cancels_the_flush_timer(self) -> None:
        broker, logdir, clock = make("never")
        logdir.parts[("t", 0)].config = LogConfig(flush_ms=500)
        self.successResultOf(broker.produce_values("t", 0, [b"a"]))
        self.successResultOf(broker.stopService())
        self.assertEqual(clock.getDelayedCalls(), [])
