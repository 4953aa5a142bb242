"""brokerd.kafka.groups.store: an OffsetCommit's partitions judged, OffsetFetch rows,
the group rules of commits, a group's journal record both ways, and the ordered,
batched write queue (a real offsets journal in tmp_path; writes run when the test says)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer

from brokerd.errors import StorageError
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.state import GroupMetadata, GroupState, Member
from brokerd.kafka.groups.store import (
    STORE_FAILED,
    CommitQueue,
    check_offsets,
    commit_member_error,
    fetch_rows,
    restored_group,
    stored_group,
    txn_member_error,
)
from brokerd.storage.stores.offsets import GroupDeletion, OffsetStore

from tests.deferreds import result_of, watch


@pytest.fixture
def store(tmp_path: Path) -> Iterator[OffsetStore]:
    offsets = OffsetStore.open(str(tmp_path / "offsets.log"))
    yield offsets
    offsets.close()


def _member(member_id: str, instance: str | None = None) -> Member:
    name = member_id.encode()
    return Member(member_id, instance, "client", "/10.0.0.1", 10_000, 30_000,
                  [("range", b"meta-" + name)], assignment=b"as-" + name)


def _stable(generation: int = 3) -> GroupMetadata:
    group = GroupMetadata("g", generation=generation, protocol_name="range", leader_id="a")
    group.add_member(_member("a"), "consumer")
    group.add_member(_member("b", "i-b"), "consumer")
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.transition_to(GroupState.COMPLETING_REBALANCE)
    group.transition_to(GroupState.STABLE)
    return group


def test_check_offsets_codes_each_partition_and_keeps_the_good_ones() -> None:
    results, accepted = check_offsets([
        ("t", 0, 5, -1, None),
        ("t", 1, 6, -1, "x" * 5000),
        ("bad/topic", 0, 1, -1, None),
        ("t", -1, 1, -1, None),
        ("t", 2, 2**63, -1, None),
    ])
    assert results == {
        ("t", 0): 0,
        ("t", 1): int(ErrorCode.OFFSET_METADATA_TOO_LARGE),
        ("bad/topic", 0): int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", -1): int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 2): int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    }
    assert accepted == [("t", 0, 5, -1, None)]


def test_fetch_rows_from_memory(store: OffsetStore) -> None:
    store.commit("g", [("t", 1, 9, 2, "m"), ("t", 0, 4, -1, None)])
    assert fetch_rows(store, "g", None, ErrorCode.NONE) == [
        ("t", 0, 4, -1, "", 0), ("t", 1, 9, 2, "m", 0)]
    assert fetch_rows(store, "g", [("t", 1), ("u", 0)], ErrorCode.NONE) == [
        ("t", 1, 9, 2, "m", 0), ("u", 0, -1, -1, "", 0)]
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert fetch_rows(store, "g", [("t", 1)], code) == [("t", 1, -1, -1, "", int(code))]
    assert fetch_rows(store, "g", None, code) == []


def test_commit_and_txn_member_rules() -> None:
    group = _stable(generation=3)
    assert commit_member_error(None, -1, "", None) is ErrorCode.NONE
    assert commit_member_error(None, 2, "a", None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit_member_error(group, 3, "a", None) is ErrorCode.NONE
    assert commit_member_error(group, 2, "a", None) is ErrorCode.ILLEGAL_GENERATION
    assert commit_member_error(group, 3, "zz", None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit_member_error(group, 3, "old", "i-b") is ErrorCode.FENCED_INSTANCE_ID
    group.transition_to(GroupState.PREPARING_REBALANCE)
    assert commit_member_error(group, 3, "a", None) is ErrorCode.NONE
    group.transition_to(GroupState.COMPLETING_REBALANCE)
    assert commit_member_error(group, 3, "a", None) is ErrorCode.REBALANCE_IN_PROGRESS
    assert txn_member_error(group, 3, "a", None) is ErrorCode.NONE
    assert txn_member_error(None, -1, "", None) is ErrorCode.NONE
    assert txn_member_error(None, 0, "", None) is ErrorCode.NONE
    assert txn_member_error(None, 1, "", None) is ErrorCode.ILLEGAL_GENERATION
    assert txn_member_error(group, -1, "zz", None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_member_error(group, 3, "old", "i-b") is ErrorCode.FENCED_INSTANCE_ID


def test_a_stable_group_and_an_empty_one_round_trip() -> None:
    group = _stable()
    stored = stored_group(group)
    assert (stored.protocol_type, stored.generation, stored.protocol_name, stored.leader_id) == (
        "consumer", 3, "range", "a")
    assert [m.metadata for m in stored.members] == [b"meta-a", b"meta-b"]
    back = restored_group("g", stored)
    assert back.state is GroupState.STABLE
    assert (back.generation, back.leader_id, list(back.members)) == (3, "a", ["a", "b"])
    assert back.members["b"].assignment == b"as-b"
    assert back.instance_ids == {"i-b": "b"}
    empty = restored_group("e", stored_group(GroupMetadata("e", generation=7,
                                                           protocol_type="consumer")))
    assert (empty.state, empty.generation, empty.protocol_type, empty.members) == (
        GroupState.EMPTY, 7, "consumer", {})


class _Writes:
    """``run_blocking`` that runs each write when the test says."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[..., Any], tuple[Any, ...], defer.Deferred[Any]]] = []

    def __call__(self, f: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self.jobs.append((f, args, d))
        return d

    def run(self, fail: BaseException | None = None) -> None:
        f, args, d = self.jobs.pop(0)
        if fail is not None:
            d.errback(fail)
            return
        d.callback(f(*args))


def test_queued_writes_go_in_order_in_one_batch(store: OffsetStore) -> None:
    writes = _Writes()
    queue = CommitQueue(offsets=store, run_blocking=writes)
    first = watch(queue.commit("g", [("t", 0, 1, -1, None)], {("t", 0): 0}))
    assert len(writes.jobs) == 1  # the first write runs at once
    second = watch(queue.commit("g", [("t", 0, 2, -1, None)], {("t", 0): 0}))
    deleted = watch(queue.delete(GroupDeletion("g")))
    third = watch(queue.commit("g", [("t", 1, 3, -1, None)], {("t", 1): 0}))
    writes.run()
    assert first == [{("t", 0): 0}] and second == []
    assert len(writes.jobs) == 1  # the rest: one batch
    writes.run()
    assert second == [{("t", 0): 0}] and deleted == [0] and third == [{("t", 1): 0}]
    assert store.committed("g") == {("t", 1): (3, -1, None)}  # deleted, then committed
    assert result_of(queue.drained()) is None


def test_a_failed_write_fails_its_own_batch_and_queued_ones_can_be_refused(
    store: OffsetStore,
) -> None:
    writes = _Writes()
    queue = CommitQueue(offsets=store, run_blocking=writes)
    failing = watch(queue.commit("g", [("t", 0, 1, -1, None)], {("t", 0): 0, ("x", 0): 3}))
    queued = watch(queue.commit("g", [("t", 0, 2, -1, None)], {("t", 0): 0}))
    configs = watch(queue.store_group_configs("g", {"a": "b"}))
    writes.run(StorageError("disk full"))
    assert failing == [{("t", 0): int(STORE_FAILED), ("x", 0): 3}]
    answers = queue.refuse_queued(ErrorCode.NOT_COORDINATOR)
    # The second batch is being written: nothing left to refuse.
    assert answers == []
    writes.run()
    assert queued == [{("t", 0): 0}] and configs == [0]
    later = queue.commit("g", [("t", 0, 3, -1, None)], {("t", 0): 0})
    blocked = queue.commit("g", [("t", 0, 4, -1, None)], {("t", 0): 0})
    refused = queue.refuse_queued(ErrorCode.NOT_COORDINATOR)
    assert [answer for _, answer in refused] == [{("t", 0): int(ErrorCode.NOT_COORDINATOR)}]
    assert refused[0][0] is blocked
    writes.run()
    assert result_of(later) == {("t", 0): 0}
    assert store.fetch("g", "t", 0) == (3, -1, None)
