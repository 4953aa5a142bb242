"""brokerd.proxy.instances on the real group coordinator (its offsets store in a temporary
file) and a fake clock: membership by heartbeats, partitions shared with another member,
commits, the bounds and idle expiry."""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.proxy_members import ProxyMembers
from brokerd.proxy.errors import ProxyError
from brokerd.proxy.instances import ConsumerInstances, InstanceConfig, InstanceState
from brokerd.proxy.limits import ProxyLimits
from brokerd.storage.stores.offsets import OffsetStore

TOPICS = {"orders": (uuid.uuid4(), 4), "audit": (uuid.uuid4(), 1)}


class InstancesTests(SynchronousTestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-proxy-instances-")
        self.addCleanup(tmp.cleanup)
        self.clock = task.Clock()
        self.store = OffsetStore.open(os.path.join(tmp.name, "offsets.log"))
        self.addCleanup(self.store.close)
        self.coordinator = GroupCoordinator(
            clock=self.clock, offsets=self.store, run_blocking=defer.maybeDeferred,
            initial_rebalance_delay_ms=0,
        )
        self.addCleanup(self.coordinator.stop)
        self.limits = ProxyLimits(max_instances=5, max_instances_per_address=3,
                                  instance_timeout_ms=60_000)
        self.instances = ConsumerInstances(
            ProxyMembers(self.coordinator, lambda: TOPICS), self.clock, self.limits)

    def create(self, name: str, address: str = "10.0.0.1", group: str = "g") -> Any:
        return self.instances.create(group, name, address=address, principal="User:ANONYMOUS",
                                     config=InstanceConfig())

    def members(self, group: str = "g") -> set[str]:
        found = self.coordinator.consumer.groups.get(group)
        return set() if found is None else set(found.members)

    def test_a_subscribed_instance_is_a_member_and_gets_every_partition(self) -> None:
        one = self.create("one")
        self.successResultOf(self.instances.subscribe(one, topics=("orders",)))
        self.assertIs(one.state, InstanceState.SUBSCRIBED)
        self.assertEqual(self.members(), {one.member_id})
        self.assertEqual(one.assignment, {("orders", p) for p in range(4)})

    def test_two_instances_share_the_partitions_and_a_leaver_gives_them_back(self) -> None:
        one, two = self.create("one"), self.create("two")
        self.successResultOf(self.instances.subscribe(one, topics=("orders",)))
        self.successResultOf(self.instances.subscribe(two, topics=("orders",)))
        # Revocation and hand-over happen over the next heartbeats (5 s by default).
        for _ in range(6):
            self.clock.advance(5)
        self.assertEqual(len(one.assignment), 2)
        self.assertEqual(len(two.assignment), 2)
        self.assertFalse(one.assignment & two.assignment)
        self.successResultOf(self.instances.delete(one))
        self.assertEqual(self.members(), {two.member_id})
        for _ in range(3):
            self.clock.advance(5)
        self.assertEqual(len(two.assignment), 4)

    def test_revoked_positions_are_committed_for_the_next_owner(self) -> None:
        one = self.create("one")
        self.successResultOf(self.instances.subscribe(one, topics=("orders",)))
        for p in range(4):
            one.positions[("orders", p)] = one.uncommitted[("orders", p)] = 10 + p
        two = self.create("two")
        self.successResultOf(self.instances.subscribe(two, topics=("orders",)))
        for _ in range(6):
            self.clock.advance(5)
        moved = {p for _t, p in two.assignment}
        committed = self.coordinator.fetch_offsets("g", [("orders", p) for p in moved])
        self.assertEqual({row[1]: row[2] for row in committed}, {p: 10 + p for p in moved})

    def test_a_manual_assignment_commits_outside_the_group_protocol(self) -> None:
        one = self.create("one")
        self.instances.assign(one, frozenset({("audit", 0)}))
        self.assertIs(one.state, InstanceState.ASSIGNED)
        self.successResultOf(self.instances.commit(one, {("audit", 0): (7, "m")}))
        self.assertEqual(self.instances.committed(one, [("audit", 0)]), {("audit", 0): (7, "m")})
        refused = self.failureResultOf(
            defer.maybeDeferred(self.instances.subscribe, one, topics=("audit",)), ProxyError)
        self.assertEqual(refused.value.error_code, 40903)

    def test_instances_per_address_and_in_all_are_bounded(self) -> None:
        for name in ("a", "b", "c"):
            self.create(name)
        with self.assertRaises(ProxyError) as refused:
            self.create("d")
        self.assertEqual(refused.exception.http_status, 429)
        self.create("d", address="10.0.0.2")
        self.create("e", address="10.0.0.3")
        with self.assertRaises(ProxyError) as full:
            self.create("f", address="10.0.0.4")
        self.assertIn("its most", full.exception.message)
        with self.assertRaises(ProxyError) as taken:
            self.instances.delete(self.instances.get("g", "a"))
            self.create("b")
        self.assertEqual(taken.exception.error_code, 40902)
        self.create("f", address="10.0.0.1")  # a's slot is free again

    def test_an_idle_instance_expires_and_leaves_its_group(self) -> None:
        one = self.create("one")
        self.successResultOf(self.instances.subscribe(one, topics=("orders",)))
        self.clock.advance(59)
        self.instances.get("g", "one")  # used: the idle timer starts again
        self.clock.advance(59)
        self.assertEqual(self.members(), {one.member_id})
        self.clock.advance(2)
        self.assertIs(one.state, InstanceState.CLOSED)
        self.assertEqual(self.members(), set())
        with self.assertRaises(ProxyError) as gone:
            self.instances.get("g", "one")
        self.assertEqual(gone.exception.error_code, 40403)
        self.assertEqual(len(self.instances), 0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_fenced_instance_joins_again(self) -> None:
        one = self.create("one")
        self.successResultOf(self.instances.subscribe(one, topics=("orders",)))
        first = one.member_id
        # The group forgets it (as after a session timeout), then its heartbeat comes.
        self.coordinator.consumer.groups["g"].members.pop(first)
        self.clock.advance(5)
        self.clock.advance(0)
        self.assertEqual(one.member_epoch > 0, True)
        self.assertEqual(self.members(), {one.member_id})

    def test_a_join_is_answered_once_the_group_is_durable(self) -> None:
        held: list[tuple[Any, tuple[Any, ...], defer.Deferred[Any]]] = []

        def run(f: Any, *args: Any) -> defer.Deferred[Any]:
            d: defer.Deferred[Any] = defer.Deferred()
            held.append((f, args, d))
            return d

        coordinator = GroupCoordinator(
            clock=self.clock, offsets=self.store, run_blocking=run,
            initial_rebalance_delay_ms=0,
        )
        instances = ConsumerInstances(
            ProxyMembers(coordinator, lambda: TOPICS), self.clock, self.limits)
        one = instances.create("h", "one", address="10.0.0.1", principal="User:ANONYMOUS",
                               config=InstanceConfig())
        joined = instances.subscribe(one, topics=("orders",))
        # The group's new state is being written: no answer, no partitions, yet.
        self.assertEqual(len(held), 1)
        self.assertNoResult(joined)
        self.assertEqual((one.assignment, one.member_epoch), (frozenset(), 0))
        instances.poll_membership(one)  # no second heartbeat while one is in flight
        self.assertEqual(len(held), 1)
        f, args, d = held.pop()
        d.callback(f(*args))
        self.successResultOf(joined)
        self.assertEqual(one.assignment, {("orders", p) for p in range(4)})
        self.assertIn("h", self.store.consumer_groups_state())
        instances.stop()
        while held:
            f, args, d = held.pop(0)
            d.callback(f(*args))
        self.successResultOf(coordinator.stop())

    def test_a_refused_join_is_told_and_leaves_the_instance_idle(self) -> None:
        one = self.create("one")
        refused = self.failureResultOf(
            self.instances.subscribe(one, pattern="(unclosed"), ProxyError
        )
        self.assertIn("refused the subscription", refused.value.message)
        self.assertIs(one.state, InstanceState.IDLE)
        self.assertEqual(self.members(), set())
        self.assertEqual(self.clock.getDelayedCalls(), [one.expiry])
        # A good one still joins.
        self.successResultOf(self.instances.subscribe(one, topics=("orders",)))
        self.assertEqual(self.members(), {one.member_id})
