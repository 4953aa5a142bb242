"""The transaction state machine (brokerd.kafka.txn.state): the transition table pair by
pair, the transitions the coordinator makes, the InitProducerId epoch rules and the
conversion to and from the transaction log's record."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.fsm import InvalidTransition
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.txn.state import (
    MAX_EPOCH,
    NO_EPOCH,
    VALID_PREVIOUS_STATES,
    TxnMetadata,
    TxnState,
    bump_epoch,
    epoch_exhausted,
    from_stored,
)
from brokerd.kafka.txn.types import TxnOffset
from brokerd.storage.stores.txn_log import STORED_STATES

E = TxnState.EMPTY
O = TxnState.ONGOING  # noqa: E741
PC = TxnState.PREPARE_COMMIT
PA = TxnState.PREPARE_ABORT
CC = TxnState.COMPLETE_COMMIT
CA = TxnState.COMPLETE_ABORT
D = TxnState.DEAD
PF = TxnState.PREPARE_EPOCH_FENCE

#: Every allowed (from, to) pair, written out independently of the module's table.
ALLOWED = {
    (E, E), (CC, E), (CA, E),
    (E, O), (O, O), (CC, O), (CA, O),
    (O, PC),
    (O, PA), (PF, PA),
    (E, PA), (CC, PA), (CA, PA),  # KIP-890 part 2: the abort of an empty transaction
    (PC, CC),
    (PA, CA),
    (E, D), (CC, D), (CA, D),
    (O, PF),
}  # fmt: skip


def meta(state: TxnState = E, **kw: object) -> TxnMetadata:
    fields: dict[str, object] = {
        "transactional_id": "t",
        "producer_id": 7,
        "producer_epoch": 3,
        "timeout_ms": 60_000,
        "state": state,
    }
    fields.update(kw)
    return TxnMetadata(**fields)  # type: ignore[arg-type]


class TransitionTableTests(SynchronousTestCase):
    def test_every_pair_follows_the_table(self) -> None:
        for old in TxnState:
            for new in TxnState:
                m = meta(old)
                if (old, new) in ALLOWED:
                    moved = m.transition(new, 5)
                    self.assertIs(moved.state, new)
                    self.assertEqual(moved.last_update_ms, 5)
                else:
                    self.assertRaises(InvalidTransition, m.transition, new, 5)
                # Immutable: the original never changes.
                self.assertIs(m.state, old)
        allowed = {(old, new) for new, olds in VALID_PREVIOUS_STATES.items() for old in olds}
        self.assertEqual(allowed, ALLOWED)

    def test_names_are_kafkas(self) -> None:
        self.assertEqual([s.value for s in TxnState], [
            "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
            "CompleteAbort", "Dead", "PrepareEpochFence",
        ])
        # Every state but the two transient ones can be stored.
        self.assertEqual(set(STORED_STATES), {s.value for s in TxnState} - {"Dead", PF.value})

    def test_nothing_leaves_dead(self) -> None:
        for new in TxnState:
            self.assertRaises(InvalidTransition, meta(D).transition, new, 1)


class TransitionMethodTests(SynchronousTestCase):
    def test_prepare_bumped_carries_the_next_epoch(self) -> None:
        m = meta(O, partitions=frozenset({("x", 0)})).prepare_bumped(True, 9)
        self.assertEqual((m.state, m.producer_epoch, m.last_producer_epoch), (PC, 4, 3))
        self.assertEqual(m.partitions, {("x", 0)})
        empty = meta(CC, partitions=frozenset({("x", 0)})).prepare_bumped(False, 9)
        self.assertEqual((empty.state, empty.producer_epoch, empty.partitions), (PA, 4, set()))
        self.assertRaises(InvalidTransition, meta(E).prepare_bumped, True, 9)

    def test_rotated_keeps_the_old_id_for_a_retry(self) -> None:
        m = meta(CC, producer_epoch=32766, last_producer_epoch=32765).rotated(99, 9)
        self.assertEqual(
            (m.state, m.producer_id, m.producer_epoch, m.last_producer_id,
             m.last_producer_epoch),
            (CC, 99, 0, 7, 32765),
        )

    def test_add_partitions_starts_a_transaction(self) -> None:
        m = meta(CC, offsets={"g": {("a", 0): TxnOffset(1)}}).add_partitions([("x", 0)], 100)
        self.assertIs(m.state, O)
        self.assertEqual(m.partitions, {("x", 0)})
        self.assertEqual(m.offsets, {})
        self.assertEqual(m.start_time_ms, 100)

    def test_add_partitions_to_ongoing_keeps_start_and_adds(self) -> None:
        m = meta(E).add_partitions([("x", 0)], 100).add_partitions([("y", 1)], 200)
        self.assertEqual(m.partitions, {("x", 0), ("y", 1)})
        self.assertEqual(m.start_time_ms, 100)
        self.assertEqual(m.last_update_ms, 200)

    def test_add_group_and_offsets(self) -> None:
        m = meta(E).add_group("g", 10)
        self.assertIs(m.state, O)
        self.assertEqual(m.start_time_ms, 10)
        self.assertEqual(m.offsets, {"g": {}})
        m2 = m.with_offsets("g", {("a", 0): TxnOffset(5)}, 11)
        m3 = m2.with_offsets("g", {("a", 0): TxnOffset(6), ("a", 1): TxnOffset(1)}, 12)
        self.assertEqual(m3.offsets["g"], {("a", 0): TxnOffset(6), ("a", 1): TxnOffset(1)})
        # Earlier values are untouched (no shared mutable maps).
        self.assertEqual(m2.offsets["g"], {("a", 0): TxnOffset(5)})
        self.assertEqual(m.offsets["g"], {})
        self.assertEqual(m3.add_group("g", 13).offsets["g"], m3.offsets["g"])

    def test_prepare_and_complete(self) -> None:
        m = meta(E).add_partitions([("x", 0)], 1).with_offsets("g", {("a", 0): TxnOffset(2)}, 2)
        pc = m.prepare(True, 3)
        self.assertIs(pc.state, PC)
        self.assertEqual(pc.partitions, {("x", 0)})
        done = pc.complete(4)
        self.assertIs(done.state, CC)
        self.assertEqual((done.partitions, done.offsets, done.start_time_ms), (frozenset(), {}, -1))
        self.assertIs(m.prepare(False, 3).complete(4).state, CA)
        self.assertRaises(InvalidTransition, meta(E).prepare, True, 1)
        self.assertRaises(InvalidTransition, meta(E).complete, 1)

    def test_fence_bumps_epoch_then_aborts(self) -> None:
        m = meta(O, last_producer_epoch=2).fence(5)
        self.assertIs(m.state, PF)
        self.assertEqual((m.producer_epoch, m.last_producer_epoch), (4, NO_EPOCH))
        self.assertIs(m.prepare_fenced_abort(6).state, PA)
        self.assertEqual(meta(O, producer_epoch=MAX_EPOCH).fence(1).producer_epoch, MAX_EPOCH)
        self.assertRaises(InvalidTransition, meta(E).fence, 1)

    def test_reinit(self) -> None:
        m = meta(CA).reinit(9, 1000, producer_id=8, epoch=0, last_producer_id=7, last_epoch=3)
        self.assertEqual(
            (m.state, m.producer_id, m.producer_epoch, m.last_producer_id, m.timeout_ms),
            (E, 8, 0, 7, 1000),
        )
        self.assertRaises(InvalidTransition, meta(O).reinit, 1, 1, 1, 1, 1, 1)


class EpochTests(SynchronousTestCase):
    def test_bump_without_expectation(self) -> None:
        self.assertEqual(bump_epoch(3, 1, None), (4, NO_EPOCH))
        self.assertEqual(bump_epoch(NO_EPOCH, NO_EPOCH, None), (0, NO_EPOCH))

    def test_kip360_rules(self) -> None:
        self.assertEqual(bump_epoch(3, 1, 3), (4, 3))  # the current epoch bumps
        self.assertEqual(bump_epoch(NO_EPOCH, NO_EPOCH, 9), (0, NO_EPOCH))  # fresh id
        self.assertEqual(bump_epoch(4, 3, 3), (4, 3))  # retry of a lost answer
        self.assertEqual(bump_epoch(4, 3, 1), ErrorCode.PRODUCER_FENCED)
        self.assertEqual(bump_epoch(4, 3, 5), ErrorCode.PRODUCER_FENCED)

    def test_exhaustion(self) -> None:
        self.assertFalse(epoch_exhausted(MAX_EPOCH - 2))
        self.assertTrue(epoch_exhausted(MAX_EPOCH - 1))
        self.assertTrue(epoch_exhausted(MAX_EPOCH))


class StoredTests(SynchronousTestCase):
    def test_round_trip_in_every_stored_state(self) -> None:
        m = (
            meta(E, last_producer_id=5, last_producer_epoch=2)
            .add_partitions([("x", 0), ("y", 3)], 100)
            .with_offsets("g", {("a", 0): TxnOffset(5, 2, "m"), ("a", 1): TxnOffset(6)}, 101)
        )
        for value in (m, m.prepare(True, 102), m.prepare(False, 102), meta(CC), meta(CA)):
            self.assertEqual(from_stored(value.to_stored()), value)

    def test_transient_states_are_refused(self) -> None:
        stored = meta(O).to_stored()
        import attrs

        for name in ("Dead", "PrepareEpochFence"):
            self.assertRaises(ValueError, from_stored, attrs.evolve(stored, state=name))
