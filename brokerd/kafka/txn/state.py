"""One transactional id's state as the transaction coordinator keeps it, and its state machine.

A transactional id is in one of Kafka's transaction states (:class:`TxnState`). Every
change goes through :meth:`TxnMetadata.transition`, which checks it against
:data:`VALID_PREVIOUS_STATES` and returns a *new* :class:`TxnMetadata` (the values are
immutable): the coordinator writes the new value to the transaction log and installs it
in memory only once the write is durable, so a failed write leaves the old value in
place with nothing to undo. An invalid transition raises :class:`brokerd.fsm.InvalidTransition`,
which is a coordinator bug, never a client error.

The life of a transaction::

    Empty/Complete* --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit/Abort
    PrepareCommit --markers, offsets--> CompleteCommit
    PrepareAbort --markers--> CompleteAbort
    Ongoing --InitProducerId or timeout--> PrepareEpochFence --> PrepareAbort (epoch + 1)

PrepareEpochFence is never written to the log: the PrepareAbort that follows it carries
the bumped epoch. Dead is an id being forgotten (expired).

Also here: the epoch rules of InitProducerId (:func:`bump_epoch`, Kafka's KIP-360 rules
for a producer that gives its current id and epoch) and the conversion to and from the
log's record (:class:`~brokerd.storage.stores.txn_log.StoredTxn`).

What this module does not do: I/O, timers, answering requests, or deciding which
transition a request asks for (``transactions.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from brokerd.fsm import from_previous, step
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.txn.types import TopicPartition, TxnOffset
from brokerd.storage.stores.txn_log import StoredOffset, StoredTxn

__all__ = [
    "MAX_EPOCH",
    "NO_EPOCH",
    "NO_PRODUCER_ID",
    "PREPARED",
    "VALID_PREVIOUS_STATES",
    "EpochBump",
    "TxnMetadata",
    "TxnState",
    "bump_epoch",
    "epoch_exhausted",
    "from_stored",
]

#: Kafka's producer epoch is an int16.
MAX_EPOCH = 32767
NO_EPOCH = -1
NO_PRODUCER_ID = -1


class TxnState(enum.Enum):
    """A transaction's state, with the names DescribeTransactions and ListTransactions use."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


_E = TxnState.EMPTY
_O = TxnState.ONGOING
_PC = TxnState.PREPARE_COMMIT
_PA = TxnState.PREPARE_ABORT
_CC = TxnState.COMPLETE_COMMIT
_CA = TxnState.COMPLETE_ABORT
_D = TxnState.DEAD
_PF = TxnState.PREPARE_EPOCH_FENCE

#: For each state, the states a transactional id may enter it from, as Kafka's. PrepareAbort
#: from Empty or Complete* is KIP-890 part 2's abort of an empty transaction (EndTxn v5,
#: which bumps the epoch even when nothing was written).
VALID_PREVIOUS_STATES: Mapping[TxnState, frozenset[TxnState]] = {
    _E: frozenset({_E, _CC, _CA}),
    _O: frozenset({_O, _E, _CC, _CA}),
    _PC: frozenset({_O}),
    _PA: frozenset({_O, _PF, _E, _CC, _CA}),
    _CC: frozenset({_PC}),
    _CA: frozenset({_PA}),
    _D: frozenset({_E, _CC, _CA}),
    _PF: frozenset({_O}),
}

_TABLE = from_previous(VALID_PREVIOUS_STATES)

#: States in which the transaction's outcome is decided and its markers are due.
PREPARED = frozenset({_PC, _PA})


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's rule: an epoch this high leaves no room for one more bump plus the fence
    bump that aborting an ongoing transaction needs, so the id is rotated instead."""
    return epoch >= MAX_EPOCH - 1


#: ``(epoch, last_epoch)`` after an InitProducerId bump, or the error for the request.
EpochBump = tuple[int, int] | ErrorCode


def bump_epoch(epoch: int, last_epoch: int, expected_epoch: int | None) -> EpochBump:
    """Kafka's epoch bump of InitProducerId on an idle transactional id (the caller has
    already rotated an exhausted one). ``expected_epoch`` is v3+'s current epoch of the
    caller (None when it gave none): the current epoch bumps; the last one is a retry of
    a bump whose answer was lost and gets the same epoch again; anything else is fenced."""
    bumped = epoch + 1
    if expected_epoch is None:
        return bumped, NO_EPOCH
    if epoch == NO_EPOCH or expected_epoch == epoch:
        return bumped, epoch
    if expected_epoch == last_epoch:
        return epoch, last_epoch
    return ErrorCode.PRODUCER_FENCED


def _freeze_offsets(
    offsets: Mapping[str, Mapping[TopicPartition, TxnOffset]],
) -> dict[str, dict[TopicPartition, TxnOffset]]:
    return {group: dict(entries) for group, entries in offsets.items()}


@attrs.frozen
class TxnMetadata:
    """One transactional id. Immutable: :meth:`transition` and :meth:`evolve` return new
    values (collections are copied, never shared for mutation)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    #: The id and epoch before the last rotation or bump (KIP-360 retries), -1 if none.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH
    partitions: frozenset[TopicPartition] = frozenset()
    #: Groups added with AddOffsetsToTxn, each with the offsets TxnOffsetCommit gave it
    #: (latest per partition), stored only if the transaction commits.
    offsets: Mapping[str, Mapping[TopicPartition, TxnOffset]] = attrs.field(
        factory=dict, converter=_freeze_offsets
    )
    #: Wall-clock ms when the transaction became Ongoing (-1 when none is ongoing).
    start_time_ms: int = -1
    #: Wall-clock ms of the last change.
    last_update_ms: int = -1

    def transition(self, new: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        """This value in state ``new`` with ``changes`` applied and ``last_update_ms`` set.
        Raises :class:`~brokerd.fsm.InvalidTransition` if the table does not allow it."""
        step(_TABLE, self.state, new, f"transactional id {self.transactional_id!r}")
        return attrs.evolve(self, state=new, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    # -- the transitions the coordinator makes ------------------------------------------

    def add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int) -> TxnMetadata:
        """AddPartitionsToTxn: Ongoing with ``partitions`` added (a new transaction
        starts its clock and forgets the previous one's partitions and offsets)."""
        if self.state is TxnState.ONGOING:
            return self.transition(_O, now_ms, partitions=self.partitions | frozenset(partitions))
        return self.transition(
            _O, now_ms, partitions=frozenset(partitions), offsets={}, start_time_ms=now_ms
        )

    def add_group(self, group_id: str, now_ms: int) -> TxnMetadata:
        """AddOffsetsToTxn: Ongoing with ``group_id`` among the groups whose offsets
        this transaction may commit."""
        base = self if self.state is TxnState.ONGOING else self.add_partitions((), now_ms)
        offsets = dict(base.offsets)
        offsets.setdefault(group_id, {})
        return base.transition(_O, now_ms, offsets=offsets)

    def with_offsets(
        self, group_id: str, entries: Mapping[TopicPartition, TxnOffset], now_ms: int
    ) -> TxnMetadata:
        """TxnOffsetCommit: ``entries`` remembered for ``group_id`` (must be Ongoing)."""
        offsets = {g: dict(e) for g, e in self.offsets.items()}
        offsets.setdefault(group_id, {}).update(entries)
        return self.transition(_O, now_ms, offsets=offsets)

    def prepare(self, commit: bool, now_ms: int) -> TxnMetadata:
        """EndTxn from the producer: the decision, to be written before any marker."""
        return self.transition(_PC if commit else _PA, now_ms)

    def prepare_bumped(self, commit: bool, now_ms: int) -> TxnMetadata:
        """EndTxn v5 (KIP-890 part 2): the decision with the epoch bumped, so that the
        markers carry the new epoch and the producer's next transaction uses it; the
        epoch it ended with is kept as ``last_producer_epoch`` for a retry. From Empty
        or Complete* (an abort of an empty transaction) the partitions and offsets of
        the last transaction are dropped: there is nothing to mark."""
        changes: dict[str, object] = {
            "producer_epoch": min(self.producer_epoch + 1, MAX_EPOCH),
            "last_producer_epoch": self.producer_epoch,
        }
        if self.state is not TxnState.ONGOING:
            changes.update(partitions=frozenset(), offsets={})
        return self.transition(_PC if commit else _PA, now_ms, **changes)

    def rotated(self, producer_id: int, now_ms: int) -> TxnMetadata:
        """A Complete* id whose epoch is exhausted, moved to a fresh producer id at epoch
        0 (KIP-890 part 2 does this at the end of a transaction); the old id and the
        epoch the producer ended with stay known for a retry of that EndTxn."""
        return attrs.evolve(
            self,
            producer_id=producer_id,
            producer_epoch=0,
            last_producer_id=self.producer_id,
            last_update_ms=now_ms,
        )

    def fence(self, now_ms: int) -> TxnMetadata:
        """An Ongoing transaction's producer is being replaced (InitProducerId) or timed
        out: the epoch goes up so the old producer's requests are refused from now on."""
        epoch = min(self.producer_epoch + 1, MAX_EPOCH)
        return self.transition(_PF, now_ms, producer_epoch=epoch, last_producer_epoch=NO_EPOCH)

    def prepare_fenced_abort(self, now_ms: int) -> TxnMetadata:
        """After :meth:`fence`: abort with the bumped epoch."""
        return self.transition(_PA, now_ms)

    def complete(self, now_ms: int) -> TxnMetadata:
        """The markers (and, on commit, the offsets) are written: forget the partitions
        and offsets; the decision stays so that a retried EndTxn is answered."""
        new = _CC if self.state is TxnState.PREPARE_COMMIT else _CA
        return self.transition(new, now_ms, partitions=frozenset(), offsets={}, start_time_ms=-1)

    def reinit(
        self,
        now_ms: int,
        timeout_ms: int,
        producer_id: int,
        epoch: int,
        last_producer_id: int,
        last_epoch: int,
    ) -> TxnMetadata:
        """InitProducerId on an idle id: Empty with the new id/epoch and timeout."""
        return self.transition(
            _E,
            now_ms,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_id=last_producer_id,
            last_producer_epoch=last_epoch,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            offsets={},
            start_time_ms=-1,
        )

    # -- the log record -----------------------------------------------------------------

    def to_stored(self) -> StoredTxn:
        return StoredTxn(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_id=self.last_producer_id,
            last_producer_epoch=self.last_producer_epoch,
            timeout_ms=self.timeout_ms,
            state=self.state.value,
            partitions=tuple(sorted(self.partitions)),
            offsets=tuple(
                (
                    group,
                    tuple(
                        StoredOffset(t, p, v.offset, v.leader_epoch, v.metadata)
                        for (t, p), v in sorted(entries.items())
                    ),
                )
                for group, entries in sorted(self.offsets.items())
            ),
            start_time_ms=self.start_time_ms,
            last_update_ms=self.last_update_ms,
        )


def from_stored(stored: StoredTxn) -> TxnMetadata:
    """The metadata a log record holds. Raises ValueError for a state a record may not
    hold (PrepareEpochFence and Dead are never written)."""
    state = TxnState(stored.state)
    if state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
        raise ValueError(f"state {state.value} is never stored")
    return TxnMetadata(
        transactional_id=stored.transactional_id,
        producer_id=stored.producer_id,
        producer_epoch=stored.producer_epoch,
        timeout_ms=stored.timeout_ms,
        state=state,
        last_producer_id=stored.last_producer_id,
        last_producer_epoch=stored.last_producer_epoch,
        partitions=frozenset(stored.partitions),
        offsets={
            group: {
                (o.topic, o.partition): TxnOffset(o.offset, o.leader_epoch, o.metadata)
                for o in entries
            }
            for group, entries in stored.offsets
        },
        start_time_ms=stored.start_time_ms,
        last_update_ms=stored.last_update_ms,
    )
