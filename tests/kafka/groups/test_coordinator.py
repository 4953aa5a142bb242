"""Tests for brokerd.kafka.groups.coordinator: the classic consumer-group coordinator.

Everything runs synchronously: a ``task.Clock`` drives the timers and ``run_blocking`` is
a synchronous fake (or hands back Deferreds the test fires itself).
"""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet import defer, task
from twisted.internet.defer import CancelledError, Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import StorageError
from brokerd.kafka.groups.coordinator import (
    GroupCoordinator,
    GroupState,
    JoinResult,
    SyncResult,
)
from brokerd.storage.stores.offsets import OffsetStore

_T = TypeVar("_T")

SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 500
RANGE = ("range", b"meta-range")
ROUNDROBIN = ("roundrobin", b"meta-rr")


def synced_with(assignment: bytes) -> SyncResult:
    """A successful SyncGroup answer of the tests' "consumer" groups, protocol "range"."""
    return SyncResult(0, assignment, "consumer", RANGE[0])


class _Base(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        # trial's mktemp() would create directories under the current directory.
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-groups-")
        self.addCleanup(tmp.cleanup)
        self.store_path = os.path.join(tmp.name, "offsets.log")
        self.store = OffsetStore.open(self.store_path)
        self.addCleanup(lambda: self.store.close())
        self.coord = self.make_coordinator()

    def make_coordinator(self, **kw: Any) -> GroupCoordinator:
        kw.setdefault("initial_rebalance_delay_ms", DELAY_MS)
        kw.setdefault("run_blocking", defer.maybeDeferred)
        return GroupCoordinator(clock=self.clock, offsets=self.store, **kw)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        client_id: str = "client",
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session_timeout_ms: int = SESSION_MS,
        require_known: bool = False,
        instance_id: str | None = None,
    ) -> Deferred[JoinResult]:
        return self.coord.join(
            group,
            member_id,
            client_id=client_id,
            client_host="/127.0.0.1",
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=REBALANCE_MS,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else [RANGE],
            group_instance_id=instance_id,
            require_known_member_id=require_known,
        )

    def result(self, d: Deferred[_T]) -> _T:
        return self.successResultOf(d)

    def stable_single(self) -> JoinResult:
        """One member, generation 1, synced."""
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        joined = self.result(d)
        synced = self.result(self.coord.sync("g", 1, joined.member_id, []))
        self.assertEqual(synced.error_code, 0)
        return joined

    def stable_pair(self) -> tuple[str, str, int]:
        """Two members A (leader) and B, stable; returns (a, b, generation)."""
        a = self.stable_single().member_id
        d_b = self.join(client_id="b")
        self.assertNoResult(d_b)
        self.assertEqual(self.coord.heartbeat("g", 1, a), 27)
        d_a = self.join(a)
        ra, rb = self.result(d_a), self.result(d_b)
        self.assertEqual(ra.generation_id, 2)
        d_sync_b = self.coord.sync("g", 2, rb.member_id, [])
        self.result(self.coord.sync("g", 2, a, [(a, b"A"), (rb.member_id, b"B")]))
        self.assertEqual(self.result(d_sync_b).assignment, b"B")
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        return a, rb.member_id, 2


class JoinSyncTests(_Base):
    def test_single_member_becomes_leader_of_generation_1(self) -> None:
        d = self.join(protocols=[RANGE, ROUNDROBIN])
        # The first rebalance of an empty group waits for more joiners.
        self.assertNoResult(d)
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)
        self.clock.advance(DELAY_MS / 1000)
        joined = self.result(d)
        self.assertEqual(joined.error_code, 0)
        self.assertEqual(joined.generation_id, 1)
        self.assertEqual(joined.protocol_name, "range")
        self.assertEqual(joined.leader_id, joined.member_id)
        self.assertTrue(joined.member_id.startswith("client-"))
        self.assertEqual(joined.members, [(joined.member_id, None, b"meta-range")])
        self.assertEqual(self.coord.group_state("g"), GroupState.COMPLETING_REBALANCE)

        synced = self.result(self.coord.sync("g", 1, joined.member_id, [(joined.member_id, b"x")]))
        self.assertEqual(synced, synced_with(b"x"))
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        self.assertEqual(self.coord.heartbeat("g", 1, joined.member_id), 0)
        # A SyncGroup repeated in Stable returns the same assignment.
        again = self.result(self.coord.sync("g", 1, joined.member_id, []))
        self.assertEqual(again, synced_with(b"x"))

    def test_member_id_required_flow(self) -> None:
        first = self.result(self.join(require_known=True, client_id="rdkafka"))
        self.assertEqual(first.error_code, 79)
        self.assertTrue(first.member_id.startswith("rdkafka-"))
        self.assertEqual(first.generation_id, -1)
        # Not a member yet: heartbeats with the id are refused.
        self.assertEqual(self.coord.heartbeat("g", -1, first.member_id), 25)

        d = self.join(first.member_id, require_known=True, client_id="rdkafka")
        self.clock.advance(DELAY_MS / 1000)
        joined = self.result(d)
        self.assertEqual(joined.error_code, 0)
        self.assertEqual(joined.member_id, first.member_id)
        self.assertEqual(joined.leader_id, first.member_id)

    def test_member_id_required_id_expires_and_unknown_ids_are_refused(self) -> None:
        first = self.result(self.join(require_known=True))
        self.clock.advance(SESSION_MS / 1000)
        self.assertEqual(self.result(self.join(first.member_id)).error_code, 25)
        self.assertEqual(self.result(self.join("made-up")).error_code, 25)
        self.assertIsNone(self.coord.group_state("g"))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_static_member_gets_its_id_directly(self) -> None:
        d = self.join(require_known=True, instance_id="host-1")
        self.clock.advance(DELAY_MS / 1000)
        joined = self.result(d)
        self.assertEqual(joined.error_code, 0)
        self.assertEqual(joined.members, [(joined.member_id, "host-1", b"meta-range")])

    def test_two_members_rebalance_and_only_the_leader_gets_members(self) -> None:
        a = self.stable_single().member_id
        d_b = self.join(client_id="b", protocols=[ROUNDROBIN, RANGE])
        self.assertNoResult(d_b)
        # A learns about the rebalance through its heartbeat.
        self.assertEqual(self.coord.heartbeat("g", 1, a), 27)
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)
        d_a = self.join(a)
        ra, rb = self.result(d_a), self.result(d_b)
        self.assertEqual((ra.generation_id, rb.generation_id), (2, 2))
        self.assertEqual(ra.leader_id, a)
        self.assertEqual(rb.leader_id, a)
        # A votes range, B votes roundrobin; both support range; the tie goes to the
        # leader's preference.
        self.assertEqual(ra.protocol_name, "range")
        self.assertEqual(
            sorted(ra.members),
            sorted([(a, None, b"meta-range"), (rb.member_id, None, b"meta-range")]),
        )
        self.assertEqual(rb.members, [])

        # The follower's SyncGroup waits for the leader's.
        d_sync_b = self.coord.sync("g", 2, rb.member_id, [])
        self.assertNoResult(d_sync_b)
        self.assertEqual(self.coord.heartbeat("g", 2, rb.member_id), 0)
        sync_a = self.result(self.coord.sync("g", 2, a, [(a, b"A"), (rb.member_id, b"B")]))
        self.assertEqual(sync_a, synced_with(b"A"))
        self.assertEqual(self.result(d_sync_b), synced_with(b"B"))
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        self.assertEqual(self.coord.heartbeat("g", 1, a), 22)

    def test_missing_assignment_is_empty_bytes(self) -> None:
        a, b, gen = self.stable_pair()
        self.result(self.coord.leave("g", b))
        self.result(self.join(a))
        d = self.join(client_id="c")
        self.assertEqual(self.coord.heartbeat("g", gen + 1, a), 27)
        ra = self.result(self.join(a))
        rc = self.result(d)
        d_c = self.coord.sync("g", ra.generation_id, rc.member_id, [])
        self.result(self.coord.sync("g", ra.generation_id, a, [(a, b"all")]))
        self.assertEqual(self.result(d_c), synced_with(b""))

    def test_most_votes_wins(self) -> None:
        d1 = self.join(protocols=[ROUNDROBIN, RANGE])
        d2 = self.join(client_id="x", protocols=[ROUNDROBIN, RANGE])
        d3 = self.join(client_id="y", protocols=[RANGE, ROUNDROBIN])
        self.clock.advance(DELAY_MS / 1000)  # the joiners extended the initial delay
        self.assertNoResult(d1)
        self.clock.advance(DELAY_MS / 1000)
        names = {self.result(d).protocol_name for d in (d1, d2, d3)}
        self.assertEqual(names, {"roundrobin"})

    def test_initial_delay_is_extended_by_joiners_but_bounded(self) -> None:
        d = self.join()
        for i in range(200):  # a new joiner during every delay
            self.join(client_id=f"c{i}")
            self.clock.advance(DELAY_MS / 1000)
            if d.called:
                break
        joined = self.result(d)
        self.assertEqual(joined.error_code, 0)
        # Bounded by the rebalance timeout (plus the one delay in progress).
        self.assertLessEqual(self.clock.seconds(), (REBALANCE_MS + DELAY_MS) / 1000)
        self.assertGreater(self.clock.seconds(), 10)

    def test_rejoin_with_changed_metadata_triggers_rebalance(self) -> None:
        a, b, gen = self.stable_pair()
        d_b = self.join(b, protocols=[("range", b"new-subscription")])
        self.assertNoResult(d_b)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 27)
        ra = self.result(self.join(a))
        self.assertEqual(ra.generation_id, gen + 1)
        self.assertIn((b, None, b"new-subscription"), ra.members)
        self.assertEqual(self.result(d_b).generation_id, gen + 1)

    def test_follower_rejoin_with_same_metadata_in_stable_does_not_rebalance(self) -> None:
        a, b, gen = self.stable_pair()
        rb = self.result(self.join(b))
        self.assertEqual((rb.error_code, rb.generation_id, rb.members), (0, gen, []))
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 0)

    def test_leave_rebalances_the_rest(self) -> None:
        a, b, gen = self.stable_pair()
        self.assertEqual(self.result(self.coord.leave("g", b)), 0)
        self.assertEqual(self.result(self.coord.leave("g", b)), 25)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 27)
        ra = self.result(self.join(a))
        self.assertEqual(ra.generation_id, gen + 1)
        self.assertEqual(ra.members, [(a, None, b"meta-range")])
        self.assertEqual(
            self.result(self.coord.sync("g", gen + 1, a, [(a, b"all")])).assignment, b"all"
        )
        self.assertEqual(self.result(self.coord.leave("g", a)), 0)
        # Empty, but kept with its generation (which counts the Empty one too, as Kafka's).
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        self.assertEqual(self.result(d).generation_id, gen + 3)

    def test_batch_leave_answers_each_member_and_rebalances_the_rest(self) -> None:
        a, b, gen = self.stable_pair()
        pending = self.result(self.join(client_id="late", require_known=True)).member_id
        self.assertEqual(
            self.result(self.coord.leave_members("g", [
                (b, None, "done"), (pending, None, None), ("ghost", None, None), (b, None, None),
            ])),
            (0, [0, 0, 25, 25]),
        )
        self.assertEqual(self.coord.heartbeat("g", gen, a), 27)
        ra = self.result(self.join(a))
        self.assertEqual((ra.generation_id, ra.members), (gen + 1, [(a, None, b"meta-range")]))
        # The whole request fails for a group that does not exist, or a bad group id.
        for group_id, code in (("nope", 25), ("", 24)):
            self.assertEqual(
                self.result(self.coord.leave_members(group_id, [(a, None, None)])), (code, [])
            )

    def test_leader_leaving_releases_held_follower_sync(self) -> None:
        a, b, _gen = self.stable_pair()
        d_b = self.join(b, protocols=[RANGE, ROUNDROBIN])  # metadata change: rebalance
        self.result(self.join(a))
        rb = self.result(d_b)
        d_sync = self.coord.sync("g", rb.generation_id, b, [])
        self.assertNoResult(d_sync)
        self.result(self.coord.leave("g", a))
        self.assertEqual(self.result(d_sync).error_code, 27)
        rb2 = self.result(self.join(b))
        self.assertEqual(rb2.leader_id, b)

    def test_session_timeout_removes_member(self) -> None:
        a, b, gen = self.stable_pair()
        for _ in range(3):  # A keeps heartbeating, B is silent
            self.clock.advance(3)
            self.assertEqual(self.coord.heartbeat("g", gen, a), 0)
        self.clock.advance(1)  # 10 s: B's session is over
        self.assertEqual(self.coord.heartbeat("g", gen, b), 25)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 27)
        ra = self.result(self.join(a))
        self.assertEqual([m[0] for m in ra.members], [a])

    def test_session_timeout_of_last_member_empties_the_group(self) -> None:
        a = self.stable_single().member_id
        self.clock.advance(SESSION_MS / 1000)
        self.assertEqual(self.coord.heartbeat("g", 1, a), 25)
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_rebalance_timeout_drops_stragglers(self) -> None:
        a, b, gen = self.stable_pair()
        d_c = self.join(client_id="c")
        d_a = self.join(a)
        # B heartbeats (so its session stays alive) but never re-joins.
        for _ in range(REBALANCE_MS // 3000 - 1):
            self.clock.advance(3)
            self.assertEqual(self.coord.heartbeat("g", gen, b), 27)
            self.assertNoResult(d_a)
        self.clock.advance(3)
        ra, rc = self.result(d_a), self.result(d_c)
        self.assertEqual(ra.generation_id, gen + 1)
        self.assertEqual(sorted(m[0] for m in ra.members), sorted([a, rc.member_id]))
        self.assertEqual(self.coord.heartbeat("g", gen, b), 25)

    def test_sync_and_heartbeat_errors(self) -> None:
        a, _b, gen = self.stable_pair()
        self.assertEqual(self.result(self.coord.sync("g", gen - 1, a, [])).error_code, 22)
        self.assertEqual(self.result(self.coord.sync("g", gen, "nobody", [])).error_code, 25)
        self.assertEqual(self.result(self.coord.sync("other", gen, a, [])).error_code, 25)
        self.assertEqual(self.coord.heartbeat("g", gen, "nobody"), 25)
        self.assertEqual(self.coord.heartbeat("", gen, a), 24)
        self.join(client_id="c")  # PreparingRebalance now
        self.assertEqual(self.result(self.coord.sync("g", gen, a, [])).error_code, 27)

    def test_inconsistent_protocol_type_and_no_common_protocol(self) -> None:
        a = self.stable_single().member_id
        other_type = self.result(self.join(client_id="x", protocol_type="connect"))
        self.assertEqual(other_type.error_code, 23)
        no_common = self.result(self.join(client_id="x", protocols=[ROUNDROBIN]))
        self.assertEqual(no_common.error_code, 23)
        self.assertEqual(self.result(self.join(client_id="x", protocols=[])).error_code, 23)
        # The refused joins changed nothing.
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        self.assertEqual(self.coord.heartbeat("g", 1, a), 0)

    def test_invalid_group_id_and_session_timeout(self) -> None:
        self.assertEqual(self.result(self.join(group="")).error_code, 24)
        self.assertEqual(self.result(self.join(group="x" * 256)).error_code, 24)
        self.assertEqual(self.result(self.join(session_timeout_ms=5999)).error_code, 26)
        self.assertEqual(self.result(self.join(session_timeout_ms=1800001)).error_code, 26)
        self.assertEqual(self.coord.list_groups(), [])

    def test_cancelled_held_join_does_not_break_the_group(self) -> None:
        d_a = self.join(client_id="a")
        d_b = self.join(client_id="b")
        d_a.cancel()  # A's connection closed while its JoinGroup was held
        self.failureResultOf(d_a, CancelledError)
        self.clock.advance(DELAY_MS / 1000)  # B arrived during the delay: one more
        self.assertNoResult(d_b)
        self.clock.advance(DELAY_MS / 1000)
        # A still counts as joined (it may come back); it joined first, so it leads.
        rb = self.result(d_b)
        self.assertEqual((rb.error_code, rb.generation_id, rb.members), (0, 1, []))
        self.assertNotEqual(rb.leader_id, rb.member_id)
        d_sync = self.coord.sync("g", 1, rb.member_id, [])
        self.assertNoResult(d_sync)
        # A never comes back: its session expires, B's held SyncGroup learns of the
        # rebalance, and B carries on alone.
        self.clock.advance(SESSION_MS / 1000)
        self.assertEqual(self.result(d_sync).error_code, 27)
        rb2 = self.result(self.join(rb.member_id))
        self.assertEqual((rb2.generation_id, rb2.leader_id), (2, rb.member_id))
        self.assertEqual([m[0] for m in rb2.members], [rb.member_id])

    def test_cancelled_held_sync_is_harmless(self) -> None:
        a, b, _gen = self.stable_pair()
        d_b = self.join(b, protocols=[RANGE, ROUNDROBIN])
        ra = self.result(self.join(a))
        self.result(d_b)
        d_sync = self.coord.sync("g", ra.generation_id, b, [])
        d_sync.cancel()
        self.failureResultOf(d_sync, CancelledError)
        self.assertEqual(self.result(self.coord.sync("g", ra.generation_id, a, [])).error_code, 0)
        self.assertEqual(self.result(self.coord.sync("g", ra.generation_id, b, [])).error_code, 0)

    def test_duplicate_held_join_answers_the_first_with_27(self) -> None:
        a, b, gen = self.stable_pair()
        d_c = self.join(client_id="c")
        first = self.join(a)
        self.assertNoResult(first)
        # A's client reconnected and sent its JoinGroup again while the first was held.
        second = self.join(a)
        self.assertEqual(self.result(first).error_code, 27)
        self.assertNoResult(second)
        self.result(self.join(b))
        self.assertEqual(self.result(second).generation_id, gen + 1)
        self.assertEqual(self.result(d_c).generation_id, gen + 1)

    def test_stop_cancels_every_timer_and_answers_held_requests(self) -> None:
        a, _b, gen = self.stable_pair()
        d_c = self.join(client_id="c")
        self.result(self.join(require_known=True, group="h"))
        self.assertNotEqual(self.clock.getDelayedCalls(), [])
        self.coord.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.result(d_c).error_code, 15)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 15)
        self.assertEqual(self.result(self.join()).error_code, 15)
        self.assertEqual(self.coord.group_state("g"), GroupState.DEAD)
        committed = self.result(self.coord.commit_offsets("g", -1, "", [("t", 0, 1, 0, None)]))
        self.assertEqual(committed, {("t", 0): 15})


class OffsetTests(_Base):
    def commit(
        self, generation: int, member: str, offset: int = 1, group: str = "g"
    ) -> dict[tuple[str, int], int]:
        return self.result(
            self.coord.commit_offsets(group, generation, member, [("t", 0, offset, 0, "m")])
        )

    def test_generation_minus_one_on_empty_group_is_accepted(self) -> None:
        self.assertEqual(self.commit(-1, "", 42, group="simple"), {("t", 0): 0})
        self.assertEqual(
            self.coord.fetch_offsets("simple", [("t", 0), ("t", 1)]),
            [("t", 0, 42, 0, "m", 0), ("t", 1, -1, -1, "", 0)],
        )
        # Durable: a fresh store over the same file sees it.
        again = OffsetStore.open(self.store.path)
        self.addCleanup(again.close)
        self.assertEqual(again.fetch("simple", "t", 0), (42, 0, "m"))

    def test_fetch_offsets_without_commits_gives_minus_one(self) -> None:
        self.assertEqual(self.coord.fetch_offsets("g", [("t", 0)]), [("t", 0, -1, -1, "", 0)])
        self.assertEqual(self.coord.fetch_offsets("g", None), [])

    def test_fetch_all_committed_partitions(self) -> None:
        self.result(
            self.coord.commit_offsets(
                "g", -1, "", [("u", 1, 5, 0, None), ("t", 0, 3, 2, "x"), ("t", 1, 4, 0, "")]
            )
        )
        self.assertEqual(
            self.coord.fetch_offsets("g", None),
            [("t", 0, 3, 2, "x", 0), ("t", 1, 4, 0, "", 0), ("u", 1, 5, 0, "", 0)],
        )

    def test_commit_rules_by_group_state(self) -> None:
        a, b, gen = self.stable_pair()
        self.assertEqual(self.commit(gen, a, 1), {("t", 0): 0})
        self.assertEqual(self.commit(gen - 1, a), {("t", 0): 22})
        self.assertEqual(self.commit(gen, "nobody"), {("t", 0): 25})
        self.assertEqual(self.commit(-1, ""), {("t", 0): 25})  # the group has members
        self.assertEqual(self.commit(-1, a), {("t", 0): 25})

        d_c = self.join(client_id="c")  # PreparingRebalance
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)
        self.assertEqual(self.commit(gen, a, 2), {("t", 0): 0})
        self.assertEqual(self.coord.fetch_offsets("g", [("t", 0)])[0][2], 2)

        d_a = self.join(a)
        d_b = self.join(b)
        rc = self.result(d_c)
        self.result(d_a)
        self.result(d_b)
        self.assertEqual(self.coord.group_state("g"), GroupState.COMPLETING_REBALANCE)
        self.assertEqual(self.commit(gen + 1, a, 3), {("t", 0): 27})
        self.assertEqual(self.commit(gen, a, 3), {("t", 0): 22})
        self.result(self.coord.sync("g", gen + 1, a, []))
        self.assertEqual(self.commit(gen + 1, rc.member_id, 4), {("t", 0): 0})
        self.assertEqual(self.coord.fetch_offsets("g", [("t", 0)]), [("t", 0, 4, 0, "m", 0)])

    def test_commit_with_old_generation_after_group_emptied(self) -> None:
        a = self.stable_single().member_id
        self.result(self.coord.leave("g", a))
        self.assertEqual(self.commit(1, a), {("t", 0): 25})
        self.assertEqual(self.commit(-1, ""), {("t", 0): 0})

    def test_commit_resets_the_session(self) -> None:
        a = self.stable_single().member_id
        for _ in range(5):
            self.clock.advance(SESSION_MS / 2000)
            self.assertEqual(self.commit(1, a), {("t", 0): 0})
        self.assertEqual(self.coord.heartbeat("g", 1, a), 0)

    def test_per_partition_validation(self) -> None:
        got = self.result(
            self.coord.commit_offsets(
                "g",
                -1,
                "",
                [
                    ("t", 0, 1, 0, "m" * 5000),
                    ("bad/topic", 0, 1, 0, None),
                    ("t", -1, 1, 0, None),
                    ("t", 1, 7, 0, None),
                ],
            )
        )
        self.assertEqual(got, {("t", 0): 12, ("bad/topic", 0): 3, ("t", -1): 3, ("t", 1): 0})
        self.assertEqual(self.store.committed("g"), {("t", 1): (7, 0, None)})

    def test_commits_are_queued_in_order_and_batched(self) -> None:
        calls: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

        def manual(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            calls.append((f, args, d))
            return d

        self.coord = self.make_coordinator(run_blocking=manual)
        d1 = self.coord.commit_offsets("g", -1, "", [("t", 0, 1, 0, None)])
        d2 = self.coord.commit_offsets("g", -1, "", [("t", 0, 2, 0, None)])
        d3 = self.coord.commit_offsets("h", -1, "", [("t", 0, 3, 0, None)])
        self.assertEqual(len(calls), 1)  # one write at a time
        f, args, d = calls[0]
        f(*args)
        self.assertNoResult(d1)  # not answered before the write finished
        d.callback(None)
        self.assertEqual(self.result(d1), {("t", 0): 0})
        self.assertNoResult(d2)
        self.assertEqual(len(calls), 2)
        f, args, d = calls[1]
        self.assertEqual(len(args[0]), 2)  # the two queued commits share one fsync
        f(*args)
        d.callback(None)
        self.assertEqual(self.result(d2), {("t", 0): 0})
        self.assertEqual(self.result(d3), {("t", 0): 0})
        self.assertEqual(self.store.fetch("g", "t", 0), (2, 0, None))
        self.assertEqual(self.store.fetch("h", "t", 0), (3, 0, None))

    def test_store_failure_is_not_coordinator_without_a_traceback(self) -> None:
        """A failed journal write is answered as Kafka answers a storage error on its
        offsets log: NOT_COORDINATOR (retriable). The store logged it (rate-limited),
        so the coordinator logs no traceback of its own."""

        def failing(f: Any, *args: Any) -> Deferred[Any]:
            return defer.fail(StorageError("No space left on device"))

        self.coord = self.make_coordinator(run_blocking=failing)
        got = self.result(self.coord.commit_offsets("g", -1, "", [("t", 0, 1, 0, None)]))
        self.assertEqual(got, {("t", 0): 16})
        self.assertEqual(self.flushLoggedErrors(StorageError), [])
        self.assertEqual(self.coord.fetch_offsets("g", [("t", 0)]), [("t", 0, -1, -1, "", 0)])

    def test_sync_is_answered_after_its_record_and_a_failed_record_is_not_coordinator(
        self,
    ) -> None:
        """The Stable generation's record is written before SyncGroup is answered; when
        that write fails the members get NOT_COORDINATOR (retriable), and once the disk
        is back their next round is stored and answered."""
        failing = [True]

        def run(f: Any, *args: Any) -> Deferred[Any]:
            if failing[0]:
                return defer.fail(StorageError("No space left on device"))
            return defer.maybeDeferred(f, *args)

        self.coord = self.make_coordinator(run_blocking=run)
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        a = self.result(d).member_id
        self.assertEqual(self.result(self.coord.sync("g", 1, a, [(a, b"A")])), SyncResult(16))
        self.assertEqual(self.flushLoggedErrors(StorageError), [])
        self.assertEqual(self.store.groups_metadata(), {})
        failing[0] = False
        # The client looks the coordinator up again and re-joins: a new generation.
        again = self.result(self.join(a))
        self.assertEqual(again.generation_id, 2)
        self.assertEqual(self.result(self.coord.sync("g", 2, a, [(a, b"A")])), synced_with(b"A"))
        self.assertEqual(self.store.groups_metadata()["g"].generation, 2)

    def test_unexpected_store_failure_is_unknown_server_error(self) -> None:
        def failing(f: Any, *args: Any) -> Deferred[Any]:
            return defer.fail(RuntimeError("a bug"))

        self.coord = self.make_coordinator(run_blocking=failing)
        got = self.result(self.coord.commit_offsets("g", -1, "", [("t", 0, 1, 0, None)]))
        self.assertEqual(got, {("t", 0): -1})
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class MoreMembershipTests(_Base):
    def test_static_member_rejoin_fences_the_old_incarnation(self) -> None:
        d = self.join(instance_id="host-1")
        self.clock.advance(DELAY_MS / 1000)
        old = self.result(d).member_id
        self.result(self.coord.sync("g", 1, old, []))
        # The same instance restarts and joins without its member id.
        new = self.result(self.join(instance_id="host-1", protocols=[ROUNDROBIN]))
        self.assertEqual(new.error_code, 0)
        self.assertNotEqual(new.member_id, old)
        self.assertEqual(new.members, [(new.member_id, "host-1", b"meta-rr")])
        self.assertEqual(self.coord.heartbeat("g", new.generation_id, old), 25)

    def test_leader_rejoin_in_stable_triggers_rebalance(self) -> None:
        a, b, gen = self.stable_pair()
        d_a = self.join(a)
        self.assertNoResult(d_a)
        self.assertEqual(self.coord.heartbeat("g", gen, b), 27)
        self.result(self.join(b))
        self.assertEqual(self.result(d_a).generation_id, gen + 1)

    def test_member_that_heartbeats_but_never_syncs_is_removed(self) -> None:
        a, b, gen = self.stable_pair()
        d_b = self.join(b, protocols=[RANGE, ROUNDROBIN])
        self.result(self.join(a))
        self.result(d_b)
        d_sync = self.coord.sync("g", gen + 1, b, [])
        for _ in range(REBALANCE_MS // 3000 - 1):
            self.clock.advance(3)
            self.assertEqual(self.coord.heartbeat("g", gen + 1, a), 0)
            self.assertNoResult(d_sync)
        self.clock.advance(3)
        # The leader never sent its SyncGroup within the rebalance timeout.
        self.assertEqual(self.result(d_sync).error_code, 27)
        self.assertEqual(self.coord.heartbeat("g", gen + 1, a), 25)
        self.assertEqual(self.result(self.join(b)).leader_id, b)


def _subscription(*topics: str) -> bytes:
    """A consumer-protocol subscription (version 0) of ``topics``, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class StaticMembershipTests(_Base):
    """KIP-345: a restarted static member takes its place back without a rebalance."""

    def static_pair(self) -> tuple[str, str, int]:
        """Stable generation 1 with static leader A ("host-a") and static B ("host-b")."""
        d_a = self.join(instance_id="host-a")
        d_b = self.join(instance_id="host-b", client_id="b")
        for _ in range(2):  # B's arrival extended the initial delay once
            self.clock.advance(DELAY_MS / 1000)
        a, b = self.result(d_a).member_id, self.result(d_b).member_id
        d_sync_b = self.coord.sync("g", 1, b, [])
        self.result(self.coord.sync("g", 1, a, [(a, b"A"), (b, b"B")]))
        self.assertEqual(self.result(d_sync_b).assignment, b"B")
        return a, b, 1

    def test_follower_restart_keeps_assignment_without_rebalance(self) -> None:
        a, b, gen = self.static_pair()
        again = self.result(self.join(instance_id="host-b", client_id="b"))
        self.assertEqual(again.error_code, 0)
        self.assertNotEqual(again.member_id, b)
        self.assertEqual((again.generation_id, again.leader_id, again.members), (gen, a, []))
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 0)  # A sees no rebalance
        synced = self.result(self.coord.sync("g", gen, again.member_id, []))
        self.assertEqual(synced, synced_with(b"B"))
        # The old incarnation is fenced wherever it names its instance.
        self.assertEqual(self.coord.heartbeat("g", gen, b, group_instance_id="host-b"), 82)
        self.assertEqual(
            self.result(self.coord.sync("g", gen, b, [], group_instance_id="host-b")).error_code,
            82,
        )
        got = self.result(
            self.coord.commit_offsets(
                "g", gen, b, [("t", 0, 1, 0, None)], group_instance_id="host-b"
            )
        )
        self.assertEqual(got, {("t", 0): 82})
        self.assertEqual(self.result(self.join(b, instance_id="host-b")).error_code, 82)
        self.assertEqual(self.coord.heartbeat("g", gen, b), 25)  # no instance id: unknown
        # The replacement is what a restart restores.
        stored = self.store.groups_metadata()["g"]
        self.assertIn(again.member_id, [m.member_id for m in stored.members])

    def test_leader_restart_is_told_the_old_leader_id(self) -> None:
        a, b, gen = self.static_pair()
        again = self.result(self.join(instance_id="host-a"))
        # As Kafka: the answer names the previous leader id, so the restarted leader does
        # not compute an assignment that a Stable group would never hand out.
        self.assertEqual((again.generation_id, again.leader_id, again.members), (gen, a, []))
        self.assertEqual(self.coord.heartbeat("g", gen, b), 0)
        self.assertEqual(
            self.result(self.coord.sync("g", gen, again.member_id, [])), synced_with(b"A")
        )
        described = self.coord.admin.describe(["g"])[0]
        self.assertEqual(
            sorted(m.member_id for m in described.members), sorted([again.member_id, b])
        )

    def test_changed_protocols_rebalance(self) -> None:
        _a, _b, _gen = self.static_pair()
        d = self.join(instance_id="host-b", protocols=[ROUNDROBIN, RANGE])
        self.assertNoResult(d)
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)

    def test_restart_during_completing_rebalance_rebalances(self) -> None:
        a, b, gen = self.static_pair()
        d_a = self.join(a)  # the leader re-joins: generation 2 is being completed
        self.result(self.join(b, instance_id="host-b"))
        self.assertEqual(self.result(d_a).generation_id, gen + 1)
        d = self.join(instance_id="host-b")
        self.assertNoResult(d)
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)

    def test_held_join_of_the_old_incarnation_is_fenced(self) -> None:
        _a, b, _gen = self.static_pair()
        self.join(client_id="c")  # a new member: everybody must re-join
        held = self.join(b, instance_id="host-b")
        self.assertNoResult(held)
        d = self.join(instance_id="host-b")
        self.assertEqual(self.result(held).error_code, 82)
        self.assertNoResult(d)  # joins the round in the old incarnation's place

    def test_session_timeout_still_removes_a_static_member(self) -> None:
        a, b, gen = self.static_pair()
        for _ in range(SESSION_MS // 2000):
            self.clock.advance(2)
            self.coord.heartbeat("g", gen, a)
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)
        self.assertEqual(self.coord.heartbeat("g", gen, b, group_instance_id="host-b"), 25)


class RestoreTests(_Base):
    """Membership survives a coordinator restart on the same store (a broker restart)."""

    def restart(self) -> None:
        self.coord.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.coord = self.make_coordinator()

    def test_stable_group_is_stored_with_its_assignment(self) -> None:
        a, b, gen = self.stable_pair()
        stored = self.store.groups_metadata()["g"]
        self.assertEqual((stored.generation, stored.leader_id), (gen, a))
        self.assertEqual(stored.protocol_name, "range")
        self.assertEqual(
            [(m.member_id, m.metadata, m.assignment) for m in stored.members],
            [(a, b"meta-range", b"A"), (b, b"meta-range", b"B")],
        )

    def test_stop_waits_for_the_journal_then_the_group_is_restorable(self) -> None:
        held: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

        def run(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((f, args, d))
            return d

        self.coord = self.make_coordinator(run_blocking=run)
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        a = self.result(d).member_id
        synced = self.coord.sync("g", 1, a, [(a, b"A")])
        self.assertNoResult(synced)  # answered once the Stable generation is durable
        stopped = self.coord.stop()
        self.assertNoResult(stopped)  # the Stable generation's record is still being written
        while held:
            f, args, d = held.pop(0)
            d.callback(f(*args))
        self.assertEqual(self.result(synced), synced_with(b"A"))
        self.successResultOf(stopped)
        self.coord = self.make_coordinator()
        self.assertEqual(self.coord.heartbeat("g", 1, a), 0)

    def test_leave_is_answered_once_the_empty_group_is_durable(self) -> None:
        held: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

        def run(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((f, args, d))
            return d

        def finish() -> None:
            while held:
                f, args, d = held.pop(0)
                d.callback(f(*args))

        self.coord = self.make_coordinator(run_blocking=run)
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        a = self.result(d).member_id
        synced = self.coord.sync("g", 1, a, [(a, b"A")])
        finish()
        self.assertEqual(self.result(synced), synced_with(b"A"))
        left = self.coord.leave("g", a)
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)
        # The Empty record is being written: until it is in the journal, a crash brings
        # the member back, so the member is not told it has left.
        self.assertEqual(len(held), 1)
        self.assertNoResult(left)
        self.assertEqual(self.store.groups_metadata()["g"].generation, 1)
        finish()
        self.assertEqual(self.result(left), 0)
        # The broker dies (no orderly stop) and comes back on what the journal holds.
        self.store.close()
        self.store = OffsetStore.open(self.store_path)
        self.coord = self.make_coordinator()
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)
        self.assertEqual(self.store.groups_metadata()["g"].generation, 2)
        self.assertEqual(self.coord.heartbeat("g", 1, a), 25)

    def test_leave_whose_record_is_lost_is_answered_retriable(self) -> None:
        writes_work = [True]

        def run(f: Any, *args: Any) -> Deferred[Any]:
            if f == self.store.write_batch and not writes_work[0]:
                return defer.fail(StorageError("disk full"))
            return defer.maybeDeferred(f, *args)

        self.coord = self.make_coordinator(run_blocking=run)
        a = self.stable_single().member_id
        writes_work[0] = False
        self.assertEqual(
            self.result(self.coord.leave_members("g", [(a, None, None)])),
            (16, []),  # NOT_COORDINATOR: the client retries
        )

    def test_members_carry_on_with_their_generation(self) -> None:
        a, b, gen = self.stable_pair()
        self.restart()
        self.assertEqual(self.coord.group_state("g"), GroupState.STABLE)
        self.assertEqual(self.coord.list_groups(), [("g", "consumer")])
        self.assertEqual(self.coord.heartbeat("g", gen, a), 0)
        self.assertEqual(self.coord.heartbeat("g", gen, b), 0)
        self.assertEqual(self.coord.heartbeat("g", gen - 1, b), 22)
        # A SyncGroup retried across the restart still gets the member's assignment.
        self.assertEqual(self.result(self.coord.sync("g", gen, b, [])), synced_with(b"B"))
        got = self.result(self.coord.commit_offsets("g", gen, a, [("t", 0, 7, 0, None)]))
        self.assertEqual(got, {("t", 0): 0})
        self.assertEqual(self.store.fetch("g", "t", 0), (7, 0, None))
        # A follower re-joining with unchanged metadata keeps the generation.
        again = self.result(self.join(b))
        self.assertEqual((again.error_code, again.generation_id), (0, gen))

    def test_absent_member_times_out_and_the_rest_rebalance(self) -> None:
        a, b, gen = self.stable_pair()
        self.restart()
        # Only A comes back; B's session, started afresh at restore, runs out.
        for _ in range(SESSION_MS // 2000 - 1):
            self.clock.advance(2)
            self.assertEqual(self.coord.heartbeat("g", gen, a), 0)
        self.clock.advance(2)
        self.assertEqual(self.coord.group_state("g"), GroupState.PREPARING_REBALANCE)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 27)
        self.assertEqual(self.coord.heartbeat("g", gen, b), 25)
        joined = self.result(self.join(a))
        self.assertEqual((joined.generation_id, joined.leader_id), (gen + 1, a))
        self.assertEqual(joined.members, [(a, None, b"meta-range")])
        self.result(self.coord.sync("g", gen + 1, a, [(a, b"all")]))
        self.assertEqual(self.store.groups_metadata()["g"].generation, gen + 1)

    def test_nobody_comes_back_and_the_group_goes_empty(self) -> None:
        self.stable_pair()
        self.restart()
        self.clock.advance(SESSION_MS / 1000)
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)
        stored = self.store.groups_metadata()["g"]
        self.assertEqual((stored.members, stored.protocol_type), ((), "consumer"))
        self.restart()
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)

    def test_group_that_went_empty_is_restored_empty_with_its_generation(self) -> None:
        a = self.stable_single().member_id
        self.assertEqual(self.store.groups_metadata()["g"].generation, 1)
        self.assertEqual(self.result(self.coord.leave("g", a)), 0)
        self.assertEqual(self.store.groups_metadata()["g"].generation, 2)
        self.restart()
        self.assertEqual(self.coord.group_state("g"), GroupState.EMPTY)
        self.assertEqual(self.coord.list_groups(), [("g", "consumer")])
        self.assertEqual(self.result(self.join(a)).error_code, 25)
        d = self.join()
        self.clock.advance(DELAY_MS / 1000)
        self.assertEqual(self.result(d).generation_id, 3)

    def test_restart_mid_rebalance_restores_the_last_stable_generation(self) -> None:
        a, b, gen = self.stable_pair()
        d_b = self.join(b, protocols=[ROUNDROBIN, RANGE])
        self.result(self.join(a))
        self.assertEqual(self.result(d_b).generation_id, gen + 1)
        self.restart()  # generation gen + 1 never became Stable
        self.assertEqual(self.coord.heartbeat("g", gen + 1, a), 22)
        self.assertEqual(self.coord.heartbeat("g", gen, a), 0)

    def test_static_member_is_restored_with_its_instance_id(self) -> None:
        d = self.join(instance_id="host-1")
        self.clock.advance(DELAY_MS / 1000)
        old = self.result(d).member_id
        self.result(self.coord.sync("g", 1, old, []))
        self.restart()
        self.assertEqual(self.coord.heartbeat("g", 1, old), 0)
        new = self.result(self.join(instance_id="host-1"))
        self.assertNotEqual(new.member_id, old)
        self.assertEqual(self.coord.heartbeat("g", new.generation_id, old), 25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "new",
                    "rejoin",
                    "rejoin-changed",
                    "sync",
                    "heartbeat",
                    "leave",
                    "cancel",
                    "commit",
                    "advance",
                ]
            ),
            st.integers(min_value=0, max_value=7),
        ),
        max_size=40,
    )
)
def test_random_operations_keep_the_group_consistent(ops: list[tuple[str, int]]) -> None:
    """Whatever clients do, no exception escapes, the invariants hold, and once the
    coordinator stops no timer is left."""
    clock = task.Clock()
    commits: list[Any] = []

    class _FakeStore:
        def write_batch(self, ops: Any) -> None:
            commits.append(ops)

        def groups(self) -> list[str]:
            return []

        def groups_metadata(self) -> dict[str, Any]:
            return {}

        def consumer_groups_state(self) -> dict[str, bytes]:
            return {}

        def group_configs(self) -> dict[str, dict[str, str]]:
            return {}

        def fetch(self, *args: Any) -> None:
            return None

        def committed(self, group_id: str) -> dict[Any, Any]:
            return {}

    coord = GroupCoordinator(
        clock=clock,
        offsets=_FakeStore(),  # type: ignore[arg-type]
        run_blocking=defer.maybeDeferred,
        initial_rebalance_delay_ms=DELAY_MS,
    )
    known: list[str] = []
    generation = {"value": 0}
    pending: list[Deferred[Any]] = []

    def remember(d: Deferred[Any]) -> None:
        def seen(result: Any) -> Any:
            if isinstance(result, JoinResult) and result.error_code == 0:
                generation["value"] = result.generation_id
                if result.member_id not in known:
                    known.append(result.member_id)
            return None

        d.addCallbacks(seen, lambda f: f.trap(CancelledError))
        pending.append(d)

    def pick(n: int) -> str:
        return known[n % len(known)] if known else "nobody"

    for op, n in ops:
        if op == "new":
            remember(
                coord.join(
                    "g",
                    "",
                    client_id=f"c{n}",
                    client_host="h",
                    session_timeout_ms=SESSION_MS,
                    rebalance_timeout_ms=REBALANCE_MS,
                    protocol_type="consumer",
                    protocols=[RANGE],
                    group_instance_id=None,
                    require_known_member_id=False,
                )
            )
        elif op in ("rejoin", "rejoin-changed"):
            meta = [("range", bytes([n]))] if op == "rejoin-changed" else [RANGE]
            remember(
                coord.join(
                    "g",
                    pick(n),
                    client_id="c",
                    client_host="h",
                    session_timeout_ms=SESSION_MS,
                    rebalance_timeout_ms=REBALANCE_MS,
                    protocol_type="consumer",
                    protocols=meta,
                    group_instance_id=None,
                    require_known_member_id=False,
                )
            )
        elif op == "sync":
            member = pick(n)
            remember(coord.sync("g", generation["value"], member, [(m, b"x") for m in known]))
        elif op == "heartbeat":
            assert coord.heartbeat("g", generation["value"], pick(n)) in (0, 22, 25, 27)
        elif op == "leave":
            assert coord.leave("g", pick(n)).result in (0, 25)
        elif op == "cancel":
            live = [d for d in pending if not d.called]
            if live:
                live[n % len(live)].cancel()
        elif op == "commit":
            coord.commit_offsets("g", generation["value"], pick(n), [("t", 0, n, 0, None)])
        else:
            clock.advance(n * 1.5)
        group = coord._groups.get("g")
        if group is not None:
            # An Empty group is kept only with a member id outstanding or a generation.
            assert (
                group.members
                or group.pending
                or group.generation > 0
                or group.state is not GroupState.EMPTY
            )
            if group.state is GroupState.PREPARING_REBALANCE:
                assert group.rebalance_timer is not None and group.rebalance_timer.active()
            if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
                assert group.leader_id in group.members
            assert set(group.join_order) <= set(group.members)
            for m in group.members.values():
                parked = m.join_waiter is not None or m.sync_waiter is not None
                timer = m.session_timer is not None and m.session_timer.active()
                assert parked != timer, (m, parked, timer)
    coord.stop()
    assert clock.getDelayedCalls() == []
    assert all(d.called for d in pending)
