"""What the transaction coordinator needs of the broker core and of the group coordinator.

Typed as Protocols so that the coordinator is tested with small fakes and so that the
two façades it relies on are stated in one place:

- :class:`TxnCore`: ``write_txn_markers`` appends one COMMIT or ABORT control batch to
  each partition of a transaction (fires when all are written and fsynced; a repeated
  marker is harmless), and ``set_txn_verifier`` installs the check the
  core runs before admitting a transactional produce (:class:`brokerd.core.Broker`
  implements both).
- :class:`TxnGroups`: ``commit_txn_offsets`` stores a committed transaction's offsets
  through the group coordinator's durable commit queue (no membership checks: the
  transaction was checked when TxnOffsetCommit arrived), and ``check_txn_member`` is
  TxnOffsetCommit v3's membership check (:class:`brokerd.kafka.groups.coordinator.GroupCoordinator`
  implements both).

No behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from twisted.internet.defer import Deferred

from brokerd.kafka.errors import ErrorCode

#: ``verify(topic, partition, producer_id, producer_epoch)``: returns if the producer has
#: an ongoing transaction including the partition, else raises ``InvalidTxnState`` (or
#: ``InvalidProducerEpoch`` for a fenced, older epoch).
TxnVerifier = Callable[[str, int, int, int], None]

#: ``(topic, partition, offset, leader_epoch, metadata)`` as the group coordinator takes it.
OffsetEntry = tuple[str, int, int, int, str | None]


class TxnCore(Protocol):
    def write_txn_markers(
        self,
        partitions: Sequence[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
    ) -> Deferred[None]: ...

    def set_txn_verifier(self, verify: TxnVerifier | None) -> None: ...


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


__all__ = ["OffsetEntry", "TxnCore", "TxnGroups", "TxnVerifier"]
