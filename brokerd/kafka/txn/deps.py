"""What the transaction coordinator needs of the group coordinator, typed as a Protocol
so that the coordinator is tested with small fakes (what it needs of the broker core is
the core's face, :class:`brokerd.core.api.CoreTransactions`):

- :class:`TxnGroups`: ``commit_txn_offsets`` stores a committed transaction's offsets
  through the group coordinator's durable commit queue (no membership checks: the
  transaction was checked when TxnOffsetCommit arrived), and ``check_txn_member`` is
  TxnOffsetCommit v3's membership check (:class:`brokerd.kafka.groups.coordinator.GroupCoordinator`
  implements both).

No behaviour.
"""

from __future__ import annotations

from typing import Protocol

from twisted.internet.defer import Deferred

from brokerd.kafka.errors import ErrorCode

#: ``(topic, partition, offset, leader_epoch, metadata)`` as the group coordinator takes it.
OffsetEntry = tuple[str, int, int, int, str | None]


class TxnGroups(Protocol):
    def commit_txn_offsets(
        self, group_id: str, offsets: list[OffsetEntry]
    ) -> Deferred[dict[tuple[str, int], int]]:
        """Fires with a Kafka error code per partition once the offsets are durable."""
        ...

    def check_txn_member(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """TxnOffsetCommit's group check (NONE: the commit may be remembered)."""
        ...


__all__ = ["OffsetEntry", "TxnGroups"]
