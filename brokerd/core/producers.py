# -*- test-case-name: tests.core.test_broker -*-
"""Producer-state snapshots on the reactor side: when each partition's is due, and writing
many in one write-pool job.

The producer state itself (epochs, sequences, ongoing transactions) is the log's
(:class:`~brokerd.storage.log.producer_state.ProducerStateManager`, checked and updated
under the log's write lock as each append is written). A :class:`ProducerSnapshots` keeps,
for one partition, the end offset its last snapshot covered, so that a partition with no
append since is skipped; :func:`write_snapshots` writes the due ones in one write-pool job.

It never appends, never reads the log, and never decides on a produce.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet import defer
from twisted.logger import Logger

from brokerd.core.interfaces import Runner
from brokerd.errors import BrokerError
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import write_snapshot

_log = Logger()


class ProducerSnapshots:
    """When one partition's producer state was last written to its snapshot file.

    :param log: the partition's log, whose ``producers`` are snapshotted.
    """

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        #: Log end offset the last snapshot covered; equal means nothing new to write.
        self.snapshot_end = -1

    def snapshot_due(self, acked_end: int) -> bool:
        # State changes only with appends, so an unmoved end means an unchanged state.
        return bool(self.log.producers) and acked_end != self.snapshot_end


def write_snapshots(
    due: Sequence[ProducerSnapshots], run_write: Runner
) -> defer.Deferred[None]:
    """Write each partition's producer state, taken with the log end it covers under the
    log's write lock, in one write-pool job. A failure is logged, not raised: a missing
    snapshot only means a longer replay at the next start."""

    def write_all() -> list[int | str]:
        outcomes: list[int | str] = []
        for snapshots in due:
            log = snapshots.log
            try:
                end, producers, txns = log.producer_snapshot()
                write_snapshot(log.path, end, producers, txns)
                outcomes.append(end)
            except (OSError, BrokerError) as e:
                outcomes.append(f"{log.path}: {e}")
        return outcomes

    def report(outcomes: list[int | str]) -> None:
        for snapshots, outcome in zip(due, outcomes, strict=True):
            if isinstance(outcome, int):
                snapshots.snapshot_end = outcome
            else:
                _log.warn("producer-state snapshot not written: {p}", p=outcome)

    return run_write(write_all).addCallback(report)
