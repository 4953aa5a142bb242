# -*- test-case-name: tests.core.test_txn_markers -*-
"""The broker core's side of transactions: markers, transactional admission, producers.

:class:`TxnMarkers` is one part the :class:`~brokerd.core.broker.Broker` holds (its
``transactions``, the :class:`~brokerd.core.api.CoreTransactions` role of its face),
given the partitions, the write pool and the broker's stop latch:

- :meth:`~TxnMarkers.write_txn_markers` appends a COMMIT or ABORT marker to each
  partition through its writer (ordered with the partition's other appends, and fsynced
  whatever the fsync mode: see ``writer.py``). The log fences the producer on that
  partition (its epoch becomes at least the marker's), so a zombie's later produce is
  refused. A marker wakes every fetch parked on its partition
  (:class:`~brokerd.core.appends.MarkerAppend`).
- :meth:`~TxnMarkers.admit_transactional` is the check of a transactional
  produce before the idempotence rules: every batch transactional, and the transaction
  coordinator's verifier (:meth:`~TxnMarkers.set_txn_verifier`) confirms the
  producer has an ongoing transaction holding the partition (without a verifier
  transactional batches are refused), so no transaction "hangs" holding the LSO back.
- :meth:`~TxnMarkers.describe_producers` is a partition's producer table with
  each producer's open transaction (DescribeProducers).

What it does not do: the transaction state machine (the coordinator), reads
(``reads.py``), anything on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.core.appends import MarkerAppend
from brokerd.core.interfaces import Runner
from brokerd.core.roles import TxnVerifier
from brokerd.core.stopping import StopLatch, refused_when_stopping
from brokerd.core.topics import Partition, TopicRegistry
from brokerd.errors import InvalidRecord, InvalidTxnState, UnknownTopicOrPartition
from brokerd.storage.log.producer_state import ActiveProducer
from brokerd.storage.record.header import BatchHeader
from brokerd.storage.types import AppendInfo

_log = Logger()


class TxnMarkers:
    """Markers and transactional admission (see the module docstring).

    :param partitions: the broker's open partitions.
    :param run_write: the write pool (a partition's open transactions are read there).
    :param stop_latch: the broker's; set, it refuses new markers.
    """

    def __init__(
        self, partitions: TopicRegistry, *, run_write: Runner, stop_latch: StopLatch
    ) -> None:
        self._partitions = partitions
        self._run_write = run_write
        self.stop_latch = stop_latch
        self._txn_verifier: TxnVerifier | None = None

    def set_txn_verifier(self, verify: TxnVerifier | None) -> None:
        """Install (or with None remove) the transaction coordinator's check of
        transactional produces; it is called in the reactor thread."""
        self._txn_verifier = verify

    def admit_transactional(self, part: Partition, headers: Sequence[BatchHeader]) -> None:
        """Raise unless a produce of transactional ``headers`` may be appended to
        ``part`` (the caller then applies the idempotence rules)."""
        if not all(h.is_transactional for h in headers):
            raise InvalidRecord("a produce mixes transactional and other batches")
        verify = self._txn_verifier
        if verify is None:
            raise InvalidTxnState("this broker takes no transactional writes")
        first = headers[0]
        verify(part.topic, part.index, first.producer_id, first.producer_epoch)

    def describe_producers(
        self, topic: str, partition: int
    ) -> defer.Deferred[list[tuple[ActiveProducer, int]]]:
        """Each producer of the partition with the first offset of its open transaction
        there (-1 when none); errbacks UnknownTopicOrPartition for a partition that does
        not exist."""

        def describe(part: Partition) -> defer.Deferred[list[tuple[ActiveProducer, int]]]:
            # The producer state is the log's, read under its write lock in the write pool.
            return self._run_write(part.log.describe_producers)

        return self._partitions.open(topic, partition, create=False).addCallback(describe)

    @refused_when_stopping
    def write_txn_markers(
        self,
        partitions: Sequence[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
    ) -> defer.Deferred[None]:
        """Append one marker per partition; fires when all are written. Partitions that
        no longer exist are skipped; any other failure errbacks (after every
        partition was tried: the coordinator retries, and a repeated marker is
        harmless)."""
        marker = MarkerAppend(producer_id, producer_epoch, commit, coordinator_epoch)

        def submit(part: Partition) -> defer.Deferred[AppendInfo]:
            # The log fences the producer as it appends the marker (append_marker); a
            # produce queued behind the marker is checked after it.
            return part.writer.submit(marker)

        def gone(failure: Failure, topic: str, index: int) -> None:
            # The topic was deleted, or deleted and created again with fewer partitions:
            # nothing is left to end there, and failing would have the coordinator retry
            # for ever.
            info = self._partitions.topics().get(topic)
            if failure.check(UnknownTopicOrPartition) and (
                info is None or not 0 <= index < info.partitions
            ):
                _log.info(
                    "transaction marker for deleted partition {topic}-{index} skipped",
                    topic=topic,
                    index=index,
                )
                return None
            failure.raiseException()

        ds: list[defer.Deferred[None]] = []
        for topic, index in partitions:
            d = self._partitions.open(topic, index, create=False).addCallback(submit)
            ds.append(d.addCallbacks(lambda _info: None, gone, errbackArgs=(topic, index)))

        def settled(results: list[tuple[bool, None]]) -> None:
            for ok, value in results:
                if not ok:
                    assert isinstance(value, Failure)
                    value.raiseException()

        done: defer.Deferred[None] = defer.DeferredList(ds, consumeErrors=True).addCallback(settled)
        return done
