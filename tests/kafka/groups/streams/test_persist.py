"""Streams groups survive a restart: their state goes to the offsets journal (beside the
consumer groups' records) whenever what is kept of it changes, and a new coordinator on
the reopened store restores every group; members heartbeat on with their epochs and no
rebalance, and DeleteGroups erases the record.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import StorageError
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.streams.coordinator import HeartbeatAnswer, HeartbeatInput
from brokerd.kafka.groups.streams.persist import decode_group, encode_group
from brokerd.kafka.groups.streams.state import StreamsGroupState, Tasks
from brokerd.storage.stores.offsets import OffsetStore

from tests.kafka.groups.journal_node import JournalNode
from tests.kafka.groups.streams.test_coordinator import WORD_COUNT, ready_topics


class Broker:
    """A coordinator on a real offsets journal, restartable."""

    def __init__(self, path: Path) -> None:
        self.node = JournalNode(path)
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, Tasks] = {}

    def hb(self, member: str, **fields: Any) -> HeartbeatAnswer:
        epoch = self.epochs.get(member, 0)
        if epoch == 0:
            fields.update(rebalance_timeout_ms=30_000, topology=WORD_COUNT,
                          process_id=f"p-{member}", user_endpoint=("h", 8080))
        answers: list[HeartbeatAnswer] = []
        self.node.coord.streams_heartbeat(
            HeartbeatInput(group_id="g", member_id=member, member_epoch=epoch,
                           owned=self.owned.get(member, Tasks()), **fields),
            ready_topics(),
        ).addCallback(answers.append)
        (answer,) = answers  # the journal node writes inline
        if answer.error_code == 0:
            self.epochs[member] = answer.member_epoch
            if answer.assignment is not None:
                self.owned[member] = answer.assignment
        return answer

    def restart(self) -> None:
        self.node.restart()


def test_a_restart_restores_the_group_and_members_carry_on(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    for _ in range(4):
        b.hb("a")
        b.hb("b")
    before = b.node.coord.streams.groups["g"]
    assert before.state is StreamsGroupState.STABLE
    epoch, target = before.group_epoch, dict(before.target)
    assert decode_group("g", encode_group(before)).target == target
    b.restart()
    group = b.node.coord.streams.groups["g"]
    assert group.group_epoch == epoch and group.target == target
    assert group.topology == WORD_COUNT
    assert group.state is StreamsGroupState.STABLE
    assert b.node.coord.admin.group_type("g") == "streams"
    assert b.hb("a").error_code == 0 and b.hb("b").error_code == 0
    assert b.node.coord.streams.groups["g"].group_epoch == epoch
    # b never comes back: fenced when its fresh session runs out; a takes everything.
    for _ in range(10):
        b.node.clock.advance(5)
        b.hb("a")
    assert set(b.node.coord.streams.groups["g"].members) == {"a"}
    assert len(b.owned["a"].active) == 8


def test_only_changes_are_written_and_delete_erases(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.hb("a")
    b.hb("a")
    size = Path(b.node.path).stat().st_size
    for _ in range(5):
        b.hb("a")
    assert Path(b.node.path).stat().st_size == size
    b.node.coord.streams.heartbeat(
        HeartbeatInput(group_id="g", member_id="a", member_epoch=-1), ready_topics())
    results: list[Any] = []
    b.node.coord.admin.delete_groups(["g"]).addCallback(results.append)
    assert results == [[("g", 0)]]
    b.restart()
    assert "g" not in b.node.coord.streams.groups


def test_a_streams_group_id_is_no_classic_group(tmp_path: Path) -> None:
    """JoinGroup with a streams group's id: INCONSISTENT_GROUP_PROTOCOL, as Kafka; the
    id is listed with type "streams"."""
    b = Broker(tmp_path)
    b.hb("a")
    results: list[Any] = []
    b.node.coord.join(
        "g", "", client_id="c", client_host="/127.0.0.1", session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000, protocol_type="consumer", protocols=[("range", b"")],
        group_instance_id=None, require_known_member_id=False,
    ).addCallback(results.append)
    assert results[0].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    code, listed = b.node.coord.admin.list_groups_with_states(types_filter=["streams"])
    assert (code, listed) == (0, [("g", "streams", "Stable")])


def test_operators_see_a_streams_group_with_its_members_partitions(tmp_path: Path) -> None:
    """The operator view (brokerctl, the console, /metrics): type "streams", each member
    with the input partitions of its active tasks."""
    b = Broker(tmp_path)
    for _ in range(3):
        b.hb("a")
        b.hb("b")
    (described,) = b.node.coord.admin.describe(["g"])
    assert (described.state, described.protocol_type) == ("Stable", "streams")
    owned = sorted(tp for m in described.members for tp in m.assigned_partitions())
    assert owned == sorted([("lines", p) for p in range(4)]
                           + [("app-by-word-repartition", p) for p in range(4)])


class HeartbeatDurabilityTests(SynchronousTestCase):
    """StreamsGroupHeartbeat through the coordinator runtime, as ConsumerGroupHeartbeat:
    the answer that gives a member its epoch leaves once the group's record is synced; a
    failed write answers NOT_COORDINATOR and the next change writes the whole state."""

    def setUp(self) -> None:
        self.held: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []
        self.fail = False
        # Not trial's mktemp: under pytest it lands in the working directory.
        self.path = tempfile.mkdtemp(prefix="brokerd-streams-")
        self.addCleanup(shutil.rmtree, self.path, True)
        self.store = OffsetStore.open(os.path.join(self.path, "offsets.log"))
        self.coord = GroupCoordinator(clock=task.Clock(), offsets=self.store,
                                      run_blocking=self._hold_write)
        self.addCleanup(self.store.close)
        self.addCleanup(self.coord.stop)

    def _hold_write(self, f: Any, *args: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.held.append((f, args, d))
        return d

    def _finish(self) -> None:
        while self.held:
            f, args, d = self.held.pop(0)
            if self.fail:
                d.errback(StorageError("No space left on device"))
            else:
                d.callback(f(*args))

    def _join(self, member: str) -> HeartbeatInput:
        return HeartbeatInput(group_id="g", member_id=member, member_epoch=0,
                              rebalance_timeout_ms=30_000, topology=WORD_COUNT,
                              process_id=f"p-{member}", owned=Tasks())

    def test_answer_waits_for_the_sync(self) -> None:
        answers: list[HeartbeatAnswer] = []
        self.coord.streams_heartbeat(self._join("a"), ready_topics()).addCallback(
            answers.append)
        self.assertEqual((answers, len(self.held)), ([], 1))
        self.assertEqual(self.store.consumer_groups_state(), {})
        self._finish()
        self.assertEqual((answers[0].error_code, answers[0].member_epoch), (0, 1))
        stored = decode_group("g", self.store.consumer_groups_state()["g"])
        self.assertEqual(set(stored.members), {"a"})

    def test_a_failed_write_answers_not_coordinator_and_the_next_change_stores_all(
        self,
    ) -> None:
        answers: list[HeartbeatAnswer] = []
        self.coord.streams_heartbeat(self._join("a"), ready_topics()).addCallback(
            answers.append)
        self._finish()
        self.fail = True
        self.coord.streams_heartbeat(self._join("b"), ready_topics()).addCallback(
            answers.append)
        self._finish()
        self.assertEqual(answers[1].error_code, ErrorCode.NOT_COORDINATOR)
        self.assertEqual(
            set(decode_group("g", self.store.consumer_groups_state()["g"]).members), {"a"})
        self.fail = False
        # b never learnt its epoch; a's next heartbeat writes the group as memory has it.
        a = attrs.evolve(self._join("a"), member_epoch=answers[0].member_epoch,
                         topology=None, owned=None)
        self.coord.streams_heartbeat(a, ready_topics()).addCallback(answers.append)
        self._finish()
        self.assertEqual(answers[2].error_code, 0)
        stored = decode_group("g", self.store.consumer_groups_state()["g"])
        self.assertEqual(set(stored.members), set(self.coord.streams.groups["g"].members))

    def test_answers_leave_in_submission_order(self) -> None:
        order: list[str] = []
        for member in ("a", "b", "c"):
            self.coord.streams_heartbeat(self._join(member), ready_topics()).addCallback(
                lambda answer, m=member: order.append(m))
        self.assertEqual(order, [])
        self._finish()
        self.assertEqual(order, ["a", "b", "c"])
