"""The broker core's side of transactions, over a real log directory with synchronous
pools and a fake clock: transactional produce admission (verifier, then idempotence),
markers through the partition writer (fencing, waking parked fetches), read_committed
fetch and ListOffsets, offsets(), committed-only native fetch, and restart."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, TypeVar

from twisted.internet import defer, task
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core import Broker, FsyncPolicy
from brokerd.errors import (
    BrokerError,
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OffsetOutOfRange,
    OutOfOrderSequence,
    UnknownTopicOrPartition,
)
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import read_header
from brokerd.storage.types import AbortedTxn, LogRead, PartitionOffsets

from tests.read_specs import BYTES, COMMITTED, COMMITTED_RECORDS

T = TypeVar("T")
T0 = 1_700_000_000_000


def txn(pid: int, seq: int, *values: bytes, epoch: int = 0, transactional: bool = True) -> bytes:
    return encode_batch(
        list(values),
        timestamp_ms=T0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


def batch_offsets(data: bytes) -> list[int]:
    out, pos = [], 0
    while len(data) - pos >= 61:
        header = read_header(data, pos)
        out.append(header.base_offset)
        pos += header.size
    return out


class Verifier:
    """The coordinator's check, as a table of (topic, partition, pid) -> current epoch."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, int, int], int] = {}
        self.calls: list[tuple[str, int, int, int]] = []

    def __call__(self, topic: str, partition: int, pid: int, epoch: int) -> None:
        self.calls.append((topic, partition, pid, epoch))
        current = self.open.get((topic, partition, pid))
        if current is None:
            raise InvalidTxnState(f"producer {pid} has no transaction on {topic}-{partition}")
        if epoch < current:
            raise InvalidProducerEpoch(f"epoch {epoch} < {current}")


class BrokerTxnTests(SynchronousTestCase):
    def setUp(self) -> None:
        # trial's mktemp() would create directories under the current directory.
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-txn-")
        self.addCleanup(tmp.cleanup)
        self.path = Path(tmp.name) / "data"
        self.clock = task.Clock()
        self.start()

    def start(self) -> None:
        self.logdir = LogDirectory.open(str(self.path), default_partitions=1)
        self.broker = Broker(
            self.logdir,
            reactor=self.clock,
            fsync=FsyncPolicy("always"),
            run_read=defer.maybeDeferred,
            run_write=defer.maybeDeferred,
            retention_check_seconds=0,
            checkpoint_seconds=0,
        )
        self.broker.startService()
        self.verifier = Verifier()
        self.broker.transactions.set_txn_verifier(self.verifier)

    def stop(self) -> None:
        self.successResultOf(self.broker.stopService())

    def tearDown(self) -> None:
        if self.broker.running:
            self.stop()

    def ok(self, d: defer.Deferred[T]) -> T:
        return self.successResultOf(d)

    def fetch(self, *args: Any) -> defer.Deferred[LogRead]:
        """The core's read, as a Deferred whether it answered at once or not."""
        return defer.maybeDeferred(self.broker.reads.read, *args)

    def fails(self, d: defer.Deferred[Any], kind: type[BaseException]) -> Failure:
        failure = self.failureResultOf(d)
        self.assertIsInstance(failure.value, kind)
        return failure

    def begin(self, pid: int, topic: str = "t", partition: int = 0, epoch: int = 0) -> None:
        self.verifier.open[(topic, partition, pid)] = epoch

    def produce(self, data: bytes, topic: str = "t", partition: int = 0) -> int:
        return self.ok(self.broker.produce_batches(topic, partition, data)).base_offset

    def markers(self, pid: int, *, commit: bool, epoch: int = 0, parts: Any = None) -> None:
        self.ok(
            self.broker.transactions.write_txn_markers(
                parts or [("t", 0)], pid, epoch, commit=commit, coordinator_epoch=1
            )
        )

    # --- admission ----------------------------------------------------------------------

    def test_transactional_produce_goes_through_the_verifier(self) -> None:
        self.ok(self.broker.create_topic("t", 1))
        self.fails(self.broker.produce_batches("t", 0, txn(5, 0, b"a")), InvalidTxnState)
        self.begin(5)
        self.assertEqual(self.produce(txn(5, 0, b"a")), 0)
        self.assertEqual(self.verifier.calls[-1], ("t", 0, 5, 0))
        # Then the idempotence rules as usual.
        self.fails(self.broker.produce_batches("t", 0, txn(5, 7, b"b")), OutOfOrderSequence)
        self.assertEqual(self.produce(txn(5, 0, b"a")), 0)  # a retry: the stored copy
        self.begin(5, epoch=2)
        self.fails(self.broker.produce_batches("t", 0, txn(5, 1, b"c")), InvalidProducerEpoch)

    def test_no_verifier_refuses_transactional_batches(self) -> None:
        self.broker.transactions.set_txn_verifier(None)
        self.fails(self.broker.produce_batches("t", 0, txn(5, 0, b"a")), InvalidTxnState)
        # Idempotent, non-transactional produce is unaffected.
        self.assertEqual(self.produce(txn(5, 0, b"a", transactional=False)), 0)

    def test_mixed_and_control_batches_are_refused(self) -> None:
        self.begin(5)
        mixed = txn(5, 0, b"a") + txn(5, 1, b"b", transactional=False)
        self.fails(self.broker.produce_batches("t", 0, mixed), InvalidRecord)
        from brokerd.storage.record.control import encode_marker

        control = encode_marker(5, 0, commit=True, coordinator_epoch=0, timestamp_ms=T0)
        self.fails(self.broker.produce_batches("t", 0, control), InvalidRecord)

    # --- markers, LSO, reads ------------------------------------------------------------

    def test_commit_makes_data_readable_committed(self) -> None:
        self.begin(5)
        self.produce(txn(5, 0, b"a", b"b"))
        self.produce(encode_batch([b"plain"], timestamp_ms=T0))
        self.assertEqual(self.ok(self.broker.reads.offsets("t", 0)), PartitionOffsets(0, 3, 0))
        self.assertEqual(self.ok(self.broker.reads.list_offsets("t", 0)), (0, 3))
        committed = self.broker.reads.list_offsets("t", 0, read_committed=True)
        self.assertEqual(self.ok(committed), (0, 0))
        committed = self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED))
        self.assertEqual((committed.records, committed.last_stable_offset), (b"", 0))
        self.assertEqual(committed.high_watermark, 3)
        uncommitted = self.ok(self.fetch("t", 0, 0, 1 << 20, BYTES))
        self.assertEqual(batch_offsets(uncommitted.records), [0, 2])
        self.assertEqual(uncommitted.last_stable_offset, 0)
        # Offsets in [LSO, HW] are valid for read_committed; past HW is out of range.
        self.ok(self.fetch("t", 0, 2, 1 << 20, COMMITTED))
        self.fails(self.fetch("t", 0, 4, 1 << 20, COMMITTED), OffsetOutOfRange)
        # The native fetch sees nothing yet.
        self.assertEqual(self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED_RECORDS)).decoded, ())
        self.markers(5, commit=True)
        self.assertEqual(self.ok(self.broker.reads.offsets("t", 0)), PartitionOffsets(0, 4, 4))
        committed = self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED))
        self.assertEqual(batch_offsets(committed.records), [0, 2, 3])
        self.assertEqual(committed.aborted, ())
        records = self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED_RECORDS)).decoded
        self.assertEqual(
            [(r.offset, r.value) for r in records], [(0, b"a"), (1, b"b"), (2, b"plain")]
        )

    def test_abort_lists_the_transaction_and_native_skips_it(self) -> None:
        self.begin(5)
        self.produce(txn(5, 0, b"x"))
        self.produce(encode_batch([b"kept"], timestamp_ms=T0))
        self.markers(5, commit=False)
        result: LogRead = self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED))
        self.assertEqual(result.aborted, (AbortedTxn(5, 0),))
        self.assertEqual(self.ok(self.fetch("t", 0, 0, 1 << 20, BYTES)).aborted, ())
        records: LogRead = self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED_RECORDS))
        self.assertEqual([r.value for r in records.decoded], [b"kept"])

    def test_marker_fences_the_old_epoch(self) -> None:
        self.begin(5)
        self.produce(txn(5, 0, b"x"))
        self.markers(5, commit=False, epoch=1)  # the coordinator fenced a zombie
        self.fails(self.broker.produce_batches("t", 0, txn(5, 1, b"late")), InvalidProducerEpoch)
        self.begin(5, epoch=1)
        self.assertEqual(self.produce(txn(5, 0, b"new", epoch=1)), 2)

    def test_describe_producers_reports_the_table_and_open_transactions(self) -> None:
        from brokerd.storage.log.producer_state import ActiveProducer

        self.begin(5)
        self.produce(encode_batch([b"p"], timestamp_ms=T0 + 7, producer_id=9,
                                  producer_epoch=2, base_sequence=0))
        self.produce(txn(5, 0, b"a", b"b"))
        self.assertEqual(self.ok(self.broker.transactions.describe_producers("t", 0)), [
            (ActiveProducer(5, 0, 1, T0, marked=False), 1),
            (ActiveProducer(9, 2, 0, T0 + 7, marked=False), -1),
        ])
        self.markers(5, commit=True, epoch=1)
        self.assertEqual(self.ok(self.broker.transactions.describe_producers("t", 0))[0],
                         (ActiveProducer(5, 1, -1, T0, marked=True), -1))
        self.fails(self.broker.transactions.describe_producers("t", 3), UnknownTopicOrPartition)

    def test_markers_to_several_partitions_and_deleted_topics(self) -> None:
        self.ok(self.broker.create_topic("u", 2))
        for partition in (0, 1):
            self.begin(5, "u", partition)
            self.produce(txn(5, partition, b"v"), "u", partition)
        self.markers(5, commit=True, parts=[("u", 0), ("u", 1), ("gone", 0)])
        for partition in (0, 1):
            offsets = self.ok(self.broker.reads.offsets("u", partition))
            self.assertEqual(offsets, PartitionOffsets(0, 2, 2))

    def test_marker_to_a_partition_that_no_longer_exists_is_skipped(self) -> None:
        # The topic was deleted and created again with fewer partitions while the
        # transaction ran: failing would leave the coordinator retrying for ever (its
        # transactional id stuck in PrepareCommit), and there is nothing to end there.
        self.ok(self.broker.create_topic("u", 1))
        self.markers(5, commit=True, parts=[("u", 0), ("u", 3)])
        self.assertEqual(self.ok(self.broker.reads.offsets("u", 0)).high_watermark, 1)

    def test_other_marker_failures_errback_after_every_partition_was_tried(self) -> None:
        self.ok(self.broker.create_topic("u", 2))
        self.ok(self.broker.produce_batches("u", 1, txn(-1, 0, b"x", transactional=False)))
        self.logdir.logs()[("u", 1)].close()
        d = self.broker.transactions.write_txn_markers([("u", 0), ("u", 1)], 5, 0, commit=True)
        self.assertIsInstance(self.failureResultOf(d).value, BrokerError)
        # The good partition got its marker all the same.
        self.assertEqual(self.ok(self.broker.reads.offsets("u", 0)).high_watermark, 1)

    def test_marker_wakes_parked_fetches(self) -> None:
        self.begin(5)
        self.produce(txn(5, 0, b"x" * 10))
        hw = self.ok(self.broker.reads.offsets("t", 0)).high_watermark
        woke = self.broker.wait_for_data(
            [("t", 0, 0)], min_bytes=1 << 20, max_wait_ms=10_000, seen={("t", 0): hw}
        )
        self.assertNoResult(woke)
        self.markers(5, commit=True)
        self.ok(woke)
        # The native long poll on committed data answers once the commit lands.
        poll = self.broker.wait_records(
            "t", 0, 2, max_value_bytes=1 << 20, min_bytes=1, max_wait_ms=10_000
        )
        self.assertNoResult(poll)
        self.begin(6)
        self.produce(txn(6, 0, b"y"))
        self.assertNoResult(poll)  # not committed yet: read again, nothing, park again
        self.markers(6, commit=True)
        records = self.ok(poll).decoded
        self.assertEqual([r.value for r in records], [b"y"])

    def test_restart_keeps_open_transactions_and_producer_fencing(self) -> None:
        self.begin(5)
        self.produce(txn(5, 0, b"a"))
        self.markers(5, commit=False, epoch=1)
        self.begin(6)
        self.produce(txn(6, 0, b"b"))
        self.stop()
        self.start()
        self.assertEqual(self.ok(self.broker.reads.offsets("t", 0)), PartitionOffsets(0, 3, 2))
        self.begin(5)
        self.fails(self.broker.produce_batches("t", 0, txn(5, 1, b"z")), InvalidProducerEpoch)
        self.markers(6, commit=True)
        result = self.ok(self.fetch("t", 0, 0, 1 << 20, COMMITTED))
        self.assertEqual(result.aborted, (AbortedTxn(5, 0),))
        self.assertEqual(result.last_stable_offset, 4)


class MarkerDurabilityTests(BrokerTxnTests):
    """With ``--fsync interval`` a marker is still on disk when write_txn_markers fires:
    the coordinator then logs the transaction complete (fsynced), and a marker lost in
    a power failure after that would leave the transaction open on the partition for
    ever, holding its LSO back."""

    def start(self) -> None:
        self.logdir = LogDirectory.open(str(self.path), default_partitions=1)
        self.broker = Broker(
            self.logdir,
            reactor=self.clock,
            fsync=FsyncPolicy("interval", 60_000),
            run_read=defer.maybeDeferred,
            run_write=defer.maybeDeferred,
            retention_check_seconds=0,
            checkpoint_seconds=0,
        )
        self.broker.startService()
        self.verifier = Verifier()
        self.broker.transactions.set_txn_verifier(self.verifier)

    def test_marker_is_synced_before_it_is_reported_written(self) -> None:
        self.begin(5)
        self.produce(txn(5, 0, b"x"))
        log = self.logdir.logs()[("t", 0)]
        self.assertEqual(log.recovery_point, 0)  # interval mode: the data is not synced yet
        self.markers(5, commit=True)
        self.assertEqual(log.recovery_point, 2)  # the data and its marker
