"""Completing a decided transaction (:class:`~brokerd.kafka.txn.completion.TxnCompleter`):
markers then offsets, a failed step stops there, a retry skips what was done."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.api import CoreTransactions
from brokerd.errors import StorageError
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.txn.completion import TxnCompleter
from brokerd.kafka.txn.state import TxnMetadata
from brokerd.kafka.txn.types import TxnOffset

P0, P1 = ("t", 0), ("t", 1)


class FakeCore:
    def __init__(self) -> None:
        self.markers: list[tuple[list[tuple[str, int]], int, int, bool]] = []
        self.fail = False

    def write_txn_markers(
        self, partitions: Sequence[tuple[str, int]], producer_id: int, producer_epoch: int,
        *, commit: bool,
    ) -> defer.Deferred[None]:
        self.markers.append((list(partitions), producer_id, producer_epoch, commit))
        if self.fail:
            return defer.fail(StorageError("disk full"))
        return defer.succeed(None)


class FakeGroups:
    def __init__(self) -> None:
        self.commits: list[tuple[str, list[Any]]] = []
        self.answer: dict[str, Any] = {}

    def commit_txn_offsets(self, group_id: str, entries: list[Any]) -> defer.Deferred[Any]:
        self.commits.append((group_id, entries))
        answer = self.answer.get(group_id, {})
        if isinstance(answer, Exception):
            return defer.fail(answer)
        return defer.succeed(answer)


def decided(commit: bool) -> TxnMetadata:
    meta = TxnMetadata("tid", 7, 2, 60_000).add_partitions([P1, P0], 1)
    for group in ("g1", "g2"):
        meta = meta.add_group(group, 1).with_offsets(group, {P0: TxnOffset(10, 3, "m")}, 1)
    return meta.prepare(commit, 2)


class CompleterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = FakeCore()
        self.groups = FakeGroups()
        self.completer = TxnCompleter(
            core=cast(CoreTransactions, self.core),
            groups=cast(GroupCoordinator, self.groups),
            now_ms=lambda: 0,
        )

    def run_once(self, meta: TxnMetadata) -> bool:
        return self.successResultOf(self.completer.markers_and_offsets(meta))

    def test_a_commit_writes_sorted_markers_then_each_groups_offsets(self) -> None:
        self.assertTrue(self.run_once(decided(True)))
        self.assertEqual(self.core.markers, [([P0, P1], 7, 2, True)])
        self.assertEqual(self.groups.commits, [
            ("g1", [("t", 0, 10, 3, "m")]), ("g2", [("t", 0, 10, 3, "m")])])

    def test_an_abort_writes_abort_markers_and_hands_no_offsets(self) -> None:
        self.assertTrue(self.run_once(decided(False)))
        self.assertEqual(self.core.markers, [([P0, P1], 7, 2, False)])
        self.assertEqual(self.groups.commits, [])

    def test_failed_markers_stop_there_and_are_retried(self) -> None:
        self.core.fail = True
        self.assertFalse(self.run_once(decided(True)))
        self.assertEqual(self.groups.commits, [])
        self.core.fail = False
        self.assertTrue(self.run_once(decided(True)))
        self.assertEqual(len(self.core.markers), 2)
        self.assertEqual([g for g, _ in self.groups.commits], ["g1", "g2"])

    def test_a_retry_skips_the_steps_done_until_the_decision_is_done(self) -> None:
        self.groups.answer["g2"] = {P0: 15}  # a refused offset: the step fails
        self.assertFalse(self.run_once(decided(True)))
        self.groups.answer["g2"] = {P0: 0}
        self.assertTrue(self.run_once(decided(True)))
        self.assertEqual(len(self.core.markers), 1)  # not written twice
        self.assertEqual([g for g, _ in self.groups.commits], ["g1", "g2", "g2"])
        self.completer.done(decided(True))
        self.assertTrue(self.run_once(decided(True)))  # forgotten: everything again
        self.assertEqual(len(self.core.markers), 2)

    def test_a_group_that_raises_fails_the_step(self) -> None:
        self.groups.answer["g1"] = StorageError("offsets store offline")
        self.assertFalse(self.run_once(decided(True)))
        self.assertEqual([g for g, _ in self.groups.commits], ["g1"])
