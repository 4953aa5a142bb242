"""brokerd.kafka.groups.state: the classic group's transition table (every (from, to)
pair allowed or refused as the table says) and the timers a transition cancels. The
coordinator driving the table is tests/kafka/groups/test_rebalance.py's."""

from __future__ import annotations

from twisted.internet import task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.fsm import InvalidTransition
from brokerd.kafka.groups.state import VALID_PREVIOUS_STATES, GroupMetadata, GroupState

E = GroupState.EMPTY
PR = GroupState.PREPARING_REBALANCE
CR = GroupState.COMPLETING_REBALANCE
ST = GroupState.STABLE
DEAD = GroupState.DEAD


class TransitionTableTests(SynchronousTestCase):
    def test_every_pair_follows_the_table(self) -> None:
        for old in GroupState:
            for new in GroupState:
                group = GroupMetadata("g", state=old)
                if old in VALID_PREVIOUS_STATES[new]:
                    group.transition_to(new)
                    self.assertIs(group.state, new)
                else:
                    self.assertRaises(InvalidTransition, group.transition_to, new)
                    self.assertIs(group.state, old)

    def test_table_is_kafkas_plus_direct_empty(self) -> None:
        self.assertEqual(VALID_PREVIOUS_STATES[CR], {PR})
        self.assertEqual(VALID_PREVIOUS_STATES[ST], {CR})
        self.assertEqual(VALID_PREVIOUS_STATES[PR], {E, CR, ST})
        self.assertEqual(VALID_PREVIOUS_STATES[E], {PR, CR, ST})
        self.assertEqual(VALID_PREVIOUS_STATES[DEAD], {E, PR, CR, ST, DEAD})

    def test_transition_cancels_the_timers_of_the_phase_left(self) -> None:
        clock = task.Clock()
        group = GroupMetadata("g", state=PR)
        group.rebalance_timer = clock.callLater(1, lambda: None)
        group.transition_to(CR)
        self.assertIsNone(group.rebalance_timer)
        group.sync_timer = clock.callLater(1, lambda: None)
        group.pending_sync = {"m"}
        group.transition_to(ST)  # the generation's SyncGroup deadline carries on
        self.assertTrue(group.sync_timer is not None and group.sync_timer.active())
        group.transition_to(PR)
        self.assertIsNone(group.sync_timer)
        self.assertEqual(group.pending_sync, set())
        self.assertEqual(clock.getDelayedCalls(), [])
