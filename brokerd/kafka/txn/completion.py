"""Completing a decided transaction: markers, then (on commit) offsets, then the Complete*
record.

A transaction in PrepareCommit or PrepareAbort has its decision durably logged. To
complete it, :class:`TxnCompleter` (1) asks the core to append a COMMIT or ABORT marker,
with the transaction's producer id and epoch, to every partition of the transaction;
(2) on commit, hands the offsets of every group added with AddOffsetsToTxn to the group
coordinator, which stores them durably (OffsetFetch sees them from then on); (3) logs
CompleteCommit or CompleteAbort. Each step runs only after the previous one succeeded.
Any failure stops there and leaves the Prepare* state in place: the coordinator retries
the completion later (on its timer and after a restart). A retry skips the steps that
already succeeded for that decision (remembered in memory): the markers, and each group's
offsets, so that offsets another transaction committed since are not overwritten by a
retry of this one. After a restart everything is redone once, which is safe because a
repeated marker only ends an already ended transaction and a repeated offset commit
stores the same values.

What this module does not do: validate requests, choose when to complete, or retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd.core.api import CoreTransactions
from brokerd.errors import StorageError
from brokerd.kafka.txn.deps import OffsetEntry
from brokerd.kafka.txn.state import TxnMetadata, TxnState
from brokerd.kafka.txn.table import TxnTable
from brokerd.storage.write_errors import RateLimitedLog

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator

__all__ = ["TxnCompleter"]


class TxnCompleter:
    """Runs the completion of Prepare* transactions. Reactor thread only.

    :param now_ms: wall-clock milliseconds (for the Complete* record).
    """

    _log = Logger()

    def __init__(
        self,
        *,
        table: TxnTable,
        core: CoreTransactions,
        groups: GroupCoordinator,
        now_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self._core = core
        self._groups = groups
        self._now_ms = now_ms
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

    def complete(self, meta: TxnMetadata) -> Deferred[bool]:
        """Complete ``meta`` (PrepareCommit or PrepareAbort, already durable). Fires with
        True once CompleteCommit/CompleteAbort is durable, False if a step failed (logged;
        the state stays Prepare*). Never errbacks."""
        return Deferred.fromCoroutine(self._complete(meta))

    async def _complete(self, meta: TxnMetadata) -> bool:
        commit = meta.state is TxnState.PREPARE_COMMIT
        tid = meta.transactional_id
        key = (tid, meta.producer_id, meta.producer_epoch, meta.state)
        done = self._done.setdefault(key, set())
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
        if commit and not await self._hand_over_offsets(meta, done):
            return False
        try:
            await self._table.persist(meta.complete(self._now_ms()))
        except StorageError:
            return False  # the log reported it, at a bounded rate; retried on the timer
        except Exception as exc:
            self._warnings.error(
                f"transaction {tid!r}: logging its completion failed ({exc}); will retry"
            )
            return False
        self._done.pop(key, None)
        self._log.debug("transaction {tid!r} completed", tid=tid)
        return True

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
