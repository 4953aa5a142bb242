"""The shape in which the transaction coordinator hands committed offsets to the group
coordinator (:class:`brokerd.kafka.groups.coordinator.GroupCoordinator`, whose
``commit_txn_offsets`` stores a committed transaction's offsets through its durable commit
queue, and whose ``check_txn_member`` is TxnOffsetCommit v3's membership check).

No behaviour.
"""

from __future__ import annotations

#: ``(topic, partition, offset, leader_epoch, metadata)`` as the group coordinator takes it.
OffsetEntry = tuple[str, int, int, int, str | None]


__all__ = ["OffsetEntry"]
