"""Consumer-protocol groups (KIP-848) survive a restart: their state goes to the offsets
journal (consumer group records) whenever what is kept of it changes, and a new
coordinator on the reopened store restores every group; members heartbeat on with their
epochs, and members that never come back are fenced when their fresh session runs out.

Also the journal side: the record kind round-trips, is compacted, is erased by
DeleteGroups, a BKOFFS03 journal is read and rewritten as BKOFFS04, and an unreadable
state is left out (logged) instead of failing the start.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred

from brokerd.errors import StorageError
from brokerd.kafka.groups.consumer.coordinator import HeartbeatAnswer, HeartbeatInput
from brokerd.kafka.groups.consumer.persist import decode_group, encode_group
from brokerd.kafka.groups.consumer.state import ConsumerGroupState
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.storage.stores.offsets import ConsumerGroupUpdate, GroupDeletion, OffsetStore
from brokerd.storage.stores.offsets_format import MAGIC, encode_commit, encode_consumer_group

from tests.kafka.groups.journal_node import JournalNode

T1 = uuid.UUID(int=7)
TOPICS = {"t": (T1, 4)}


class Broker:
    """A coordinator on a real offsets journal, restartable."""

    def __init__(self, path: Path) -> None:
        self.node = JournalNode(path)
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, dict[uuid.UUID, frozenset[int]]] = {}

    def hb(self, member: str, epoch: int | None = None, **fields: Any) -> HeartbeatAnswer:
        epoch = self.epochs.get(member, 0) if epoch is None else epoch
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("subscribed_topic_names", ("t",))
        fields.setdefault("owned", self.owned.get(member, {}))
        answer = self.node.coord.consumer.heartbeat(
            HeartbeatInput(group_id="g", member_id=member, member_epoch=epoch, **fields),
            TOPICS,
        )
        if answer.error_code == 0:
            self.epochs[member] = answer.member_epoch
            if answer.assignment is not None:
                self.owned[member] = dict(answer.assignment)
        return answer

    def restart(self) -> None:
        self.node.restart()


def test_a_restart_restores_the_group_and_members_carry_on(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.hb("a")
    b.hb("b")
    for _ in range(4):
        b.hb("a")
        b.hb("b")
    before = b.node.coord.consumer.groups["g"]
    epoch, target = before.group_epoch, dict(before.target)
    b.restart()
    group = b.node.coord.consumer.groups["g"]
    assert group.group_epoch == epoch and group.target == target
    assert group.state is ConsumerGroupState.STABLE
    # Both members go on with the epochs they had, no rebalance.
    assert b.hb("a").error_code == 0 and b.hb("b").error_code == 0
    assert b.node.coord.consumer.groups["g"].group_epoch == epoch
    # b never comes back: fenced when its fresh session runs out; a takes everything.
    for _ in range(10):
        b.node.clock.advance(5)
        b.hb("a")
    assert "b" not in b.node.coord.consumer.groups["g"].members
    for _ in range(3):
        b.hb("a")
    assert b.owned["a"] == {T1: frozenset(range(4))}


def test_only_changes_are_written(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.hb("a")
    size = Path(b.node.path).stat().st_size
    for _ in range(5):
        b.hb("a")
    assert Path(b.node.path).stat().st_size == size


def test_a_converted_classic_group_is_not_restored_as_classic(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    d = b.node.coord.join("g", "", client_id="c", client_host="h", session_timeout_ms=6000,
                     rebalance_timeout_ms=6000, protocol_type="consumer",
                     protocols=[("range", b"")], group_instance_id=None,
                     require_known_member_id=False)
    b.node.clock.advance(1)
    joined = d.result
    assert b.node.coord.leave("g", joined.member_id).result == 0
    assert b.node.coord.group_state("g") is not None
    assert b.hb("a").error_code == 0
    assert b.node.coord.group_state("g") is None
    b.restart()
    assert b.node.coord.group_state("g") is None and "g" in b.node.coord.consumer.groups


def test_delete_groups_erases_the_state(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.hb("a")
    b.hb("a", -1)
    results: list[Any] = []
    b.node.coord.admin.delete_groups(["g"]).addCallback(results.append)
    assert results == [[("g", 0)]]
    assert b.node.store.consumer_groups_state() == {}
    b.restart()
    assert "g" not in b.node.coord.consumer.groups


def test_journal_records_round_trip_and_compact(tmp_path: Path) -> None:
    path = str(tmp_path / "o.log")
    store = OffsetStore.open(path, compact_min_bytes=1, compact_ratio=1)
    for i in range(5):
        store.write_batch([ConsumerGroupUpdate("g", b"state-%d" % i)])
    store.write_batch([ConsumerGroupUpdate("h", b"x"), ConsumerGroupUpdate("h", None)])
    store.write_batch([ConsumerGroupUpdate("nothing", None)])
    assert store.consumer_groups_state() == {"g": b"state-4"}
    store.close()
    again = OffsetStore.open(path)
    assert again.consumer_groups_state() == {"g": b"state-4"}
    again.write_batch([GroupDeletion("g")])
    assert again.consumer_groups_state() == {}
    again.close()


def test_an_older_journal_is_read_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "o.log"
    commit = encode_commit(b"g", [])
    path.write_bytes(b"BKOFFS03" + commit)
    OffsetStore.open(str(path)).close()
    assert path.read_bytes()[:8] == MAGIC == b"BKOFFS04"


def test_unreadable_state_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "offsets.log"
    path.write_bytes(MAGIC + encode_consumer_group(b"bad", b"{not json"))
    b = Broker(tmp_path)
    assert "bad" not in b.node.coord.consumer.groups
    assert b.hb("a").error_code == 0


def test_persist_round_trip_and_refusals(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.hb("a", instance_id="i", rack_id="r", subscribed_topic_regex="t.*",
         subscribed_topic_names=None)
    b.hb("b")
    data = encode_group(b.node.coord.consumer.groups["g"])
    back = decode_group("g", data)
    assert encode_group(back) == data
    assert back.static_members == {"i": "a"}
    for bad in (b"", b"[]", b'{"v": 2}', data.replace(b'"uniform"', b'"nope"'),
                data.replace(b'"epoch":', b'"epoch":"x","e":')):
        with pytest.raises(ValueError):
            decode_group("g", bad)


def test_a_restored_regex_keeps_its_topics_until_its_member_heartbeats(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.hb("a", subscribed_topic_names=None, subscribed_topic_regex="t.*")
    b.hb("b", subscribed_topic_names=("t",))
    for _ in range(4):
        b.hb("a")
        b.hb("b")
    b.restart()
    # b leaves before a's first heartbeat after the restart: a's regex, not resolved
    # again yet, still stands for the topic it matched.
    b.hb("b", -1)
    group = b.node.coord.consumer.groups["g"]
    assert set(group.subscribed_metadata) == {"t"}
    assert group.target["a"] == {T1: frozenset(range(4))}
    assert b.hb("a").error_code == 0
    assert b.node.coord.consumer.regexes.matched("g", "t.*") == {"t"}


def test_a_heartbeat_is_answered_once_its_group_state_is_durable(tmp_path: Path) -> None:
    """ConsumerGroupHeartbeat through the coordinator runtime: the answer that gives a
    member its epoch waits for the group's record; a failed write answers
    NOT_COORDINATOR, and the member's retry stores the state."""
    held: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []
    fail = [False]

    def run(f: Any, *args: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        held.append((f, args, d))
        return d

    def finish() -> None:
        while held:
            f, args, d = held.pop(0)
            if fail[0]:
                d.errback(StorageError("No space left on device"))
            else:
                d.callback(f(*args))

    store = OffsetStore.open(str(tmp_path / "offsets.log"))
    coord = GroupCoordinator(clock=task.Clock(), offsets=store, run_blocking=run)
    join = HeartbeatInput(group_id="g", member_id="a", member_epoch=0,
                          rebalance_timeout_ms=30_000, subscribed_topic_names=("t",),
                          owned={})
    answers: list[HeartbeatAnswer] = []
    coord.consumer_heartbeat(join, TOPICS).addCallback(answers.append)
    assert answers == [] and len(held) == 1
    assert store.consumer_groups_state() == {}
    finish()
    assert answers[0].error_code == 0 and answers[0].member_epoch == 1
    assert decode_group("g", store.consumer_groups_state()["g"]).group_epoch == 1

    fail[0] = True
    b = attrs.evolve(join, member_id="b")
    coord.consumer_heartbeat(b, TOPICS).addCallback(answers.append)
    finish()
    assert answers[1].error_code == 16  # NOT_COORDINATOR: retriable
    fail[0] = False
    # Memory moved on without the journal; the next change writes the whole state.
    coord.consumer_heartbeat(attrs.evolve(b, member_epoch=-1), TOPICS)  # b leaves
    finish()
    stored = decode_group("g", store.consumer_groups_state()["g"])
    assert set(stored.members) == {"a"} and stored.group_epoch == 3
    coord.stop()
    store.close()
