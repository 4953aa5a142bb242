"""Completing a decided transaction: the follow-up work between its two logged phases.

A transaction in PrepareCommit or PrepareAbort has its decision durably logged. Before
CompleteCommit or CompleteAbort may be logged (:func:`~brokerd.kafka.txn.operations.completed`,
through the coordinator runtime), :class:`TxnCompleter` (1) asks the core to append a
COMMIT or ABORT marker, with the transaction's producer id and epoch, to every partition
of the transaction; (2) on commit, hands the offsets of every group added with
AddOffsetsToTxn to the group coordinator, which stores them durably (OffsetFetch sees
them from then on). Each step runs only after the previous one succeeded. Any failure
stops there and leaves the Prepare* state in place: the coordinator retries the
completion later (on its timer and after a restart). A retry skips the steps that
already succeeded for that decision (remembered in memory until :meth:`TxnCompleter.done`):
the markers, and each group's offsets, so that offsets another transaction committed
since are not overwritten by a retry of this one. After a restart everything is redone
once, which is safe because a repeated marker only ends an already ended transaction and
a repeated offset commit stores the same values.

What this module does not do: validate requests, decide anything, write the transaction
log, choose when to complete, or retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd.core.api import CoreTransactions
from brokerd.kafka.txn.deps import OffsetEntry
from brokerd.kafka.txn.state import TxnMetadata, TxnState
from brokerd.storage.write_errors import RateLimitedLog

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator

__all__ = ["TxnCompleter"]


class TxnCompleter:
    """Runs the markers and offsets of Prepare* transactions. Reactor thread only.

    :param now_ms: wall-clock milliseconds (for the rate of its warnings).
    """

    _log = Logger()

    def __init__(
        self,
        *,
        core: CoreTransactions,
        groups: GroupCoordinator,
        now_ms: Callable[[], int],
    ) -> None:
        self._core = core
        self._groups = groups
        # A full disk fails every retry (once a second per transaction): one line per
        # 10 s for all of them, with a count.
        self._warnings = RateLimitedLog(
            "transaction coordinator",
            lambda: now_ms() / 1000.0,
            suppressed_noun="completion failures",
            emit=lambda line: self._log.warn("{line}", line=line),
        )
        #: Steps already done per decision being completed: "markers", or a group id.
        self._done: dict[tuple[str, int, int, TxnState], set[str]] = {}

    def markers_and_offsets(self, meta: TxnMetadata) -> Deferred[bool]:
        """Write ``meta``'s markers and (on commit) hand its offsets over (``meta`` is
        PrepareCommit or PrepareAbort, already durable). Fires with True once both are
        done, False if a step failed (logged, at a bounded rate). Never errbacks."""
        return Deferred.fromCoroutine(self._side_effects(meta))

    def done(self, meta: TxnMetadata) -> None:
        """``meta``'s Complete* value is durable: forget its steps."""
        self._done.pop(_key(meta), None)
        self._log.debug("transaction {tid!r} completed", tid=meta.transactional_id)

    async def _side_effects(self, meta: TxnMetadata) -> bool:
        commit = meta.state is TxnState.PREPARE_COMMIT
        tid = meta.transactional_id
        done = self._done.setdefault(_key(meta), set())
        if meta.partitions and "markers" not in done:
            try:
                await self._core.write_txn_markers(
                    sorted(meta.partitions), meta.producer_id, meta.producer_epoch, commit=commit
                )
            except Exception as exc:
                kind = "COMMIT" if commit else "ABORT"
                self._warnings.error(
                    f"transaction {tid!r}: writing {kind} markers failed ({exc}); will retry"
                )
                return False
            done.add("markers")
        return not commit or await self._hand_over_offsets(meta, done)

    async def _hand_over_offsets(self, meta: TxnMetadata, done: set[str]) -> bool:
        for group_id, offsets in sorted(meta.offsets.items()):
            if not offsets or group_id in done:
                continue
            entries: list[OffsetEntry] = [
                (topic, partition, o.offset, o.leader_epoch, o.metadata)
                for (topic, partition), o in sorted(offsets.items())
            ]
            try:
                results = await self._groups.commit_txn_offsets(group_id, entries)
            except Exception as exc:
                why: object = exc
            else:
                failed = {key: code for key, code in results.items() if code != 0}
                if not failed:
                    done.add(group_id)
                    continue
                why = failed
            self._warnings.error(
                f"transaction {meta.transactional_id!r}: storing offsets of group"
                f" {group_id!r} failed ({why}); will retry"
            )
            return False
        return True


def _key(meta: TxnMetadata) -> tuple[str, int, int, TxnState]:
    return (meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.state)
