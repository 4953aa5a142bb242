"""The share-partition's runs: records acquired together stay one run, split only where
part of it changes, and joined again when neighbours agree (KIP-932 state, held as
Kafka's share-partition holds it: in-flight batches, not one entry per offset)."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.share.partition import (
    AckBatch,
    AcquiredRange,
    InvalidAcknowledgement,
    LogSpan,
    SharePartition,
    StateRun,
)
from brokerd.core.share.states import AckType, RecordState

A, Q, K, R = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
              RecordState.ARCHIVED)
ACCEPT, RELEASE, REJECT, GAP, RENEW = (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT,
                                       AckType.GAP, AckType.RENEW)
LOCK_MS = 30_000


def partition(limit: int = 3, locks: int = 10_000) -> SharePartition:
    return SharePartition(0, delivery_count_limit=limit, lock_duration_ms=LOCK_MS,
                          max_record_locks=locks)


def shape(p: SharePartition) -> list[tuple[int, int, RecordState, int, str | None]]:
    return [(r.first, r.last, r.state, r.delivery_count, r.member) for r in p.ranges]


class RunTests(SynchronousTestCase):
    def test_a_batch_acquired_is_one_run_however_large(self) -> None:
        p = partition()
        got, changed = p.acquire("m", [LogSpan(0, 999), LogSpan(1000, 1999)], 5000, 0.0)
        self.assertEqual(got, [AcquiredRange(0, 1999, 1)])
        self.assertEqual(changed, [(0, 999), (1000, 1999)])
        # One member, one deadline, one count: the two batches are one run.
        self.assertEqual(shape(p), [(0, 1999, Q, 1, "m")])
        self.assertEqual(p.acquired_count(), 2000)
        self.assertEqual(p.runs(changed), [StateRun(0, 1999, Q, 1)])

    def test_whole_batches_pass_max_records_to_the_end_of_the_batch(self) -> None:
        p = partition()
        spans = [LogSpan(0, 9), LogSpan(10, 19)]
        got, _ = p.acquire("m", spans, 3, 0.0, whole_batches=True)
        self.assertEqual(got, [AcquiredRange(0, 9, 1)])
        # The record limit (and the native queue) stays exact.
        got, _ = p.acquire("n", spans, 3, 0.0)
        self.assertEqual(got, [AcquiredRange(10, 12, 1)])
        self.assertEqual(p.end, 13)

    def test_a_partial_acknowledgement_splits_and_the_prefix_goes(self) -> None:
        p = partition()
        p.acquire("m", [LogSpan(0, 9)], 10, 0.0)
        p.acknowledge("m", [AckBatch(0, 9, (ACCEPT,) * 3 + (RELEASE,) * 2 + (ACCEPT,) * 5)])
        # 0-2 done and gone (the start moved), 3-4 back with the group, 5-9 done.
        self.assertEqual(p.start, 3)
        self.assertEqual(shape(p), [(3, 4, A, 1, None), (5, 9, K, 1, None)])
        self.assertEqual(p.fetch_offset(), 3)
        self.assertEqual(p.done_count(), 5)

    def test_neighbours_that_agree_again_are_merged(self) -> None:
        p = partition()
        p.acquire("m", [LogSpan(0, 9)], 10, 0.0)
        p.acknowledge("m", [AckBatch(2, 3, (RELEASE,)), AckBatch(6, 7, (RELEASE,))])
        self.assertEqual(len(p.ranges), 5)
        got, _ = p.acquire("m", [LogSpan(0, 9)], 10, 0.0)
        self.assertEqual(got, [AcquiredRange(2, 3, 2), AcquiredRange(6, 7, 2)])
        p.acknowledge("m", [AckBatch(2, 3, (RELEASE,)), AckBatch(6, 7, (RELEASE,))])
        p.release_member("m")
        # Everything available again at two delivery counts: five runs, not ten records.
        self.assertEqual(shape(p), [(0, 1, A, 1, None), (2, 3, A, 2, None),
                                    (4, 5, A, 1, None), (6, 7, A, 2, None),
                                    (8, 9, A, 1, None)])
        got, _ = p.acquire("n", [LogSpan(0, 9)], 100, 5.0)
        p.acknowledge("n", [AckBatch(0, 9, (ACCEPT,))])
        self.assertEqual((p.start, p.ranges), (10, []))

    def test_expiry_releases_runs_then_archives_them_at_the_limit(self) -> None:
        p = partition(limit=2)
        p.acquire("m", [LogSpan(0, 4)], 10, 1000.0)
        p.acquire("n", [LogSpan(5, 9)], 10, 2000.0)
        self.assertEqual(p.next_deadline(), 1000.0 + LOCK_MS)
        self.assertEqual(p.expire_locks(1000.0 + LOCK_MS), [(0, 4)])
        self.assertEqual(shape(p)[0], (0, 4, A, 1, None))
        got, _ = p.acquire("n", [LogSpan(0, 4)], 10, 40_000.0)
        self.assertEqual(got, [AcquiredRange(0, 4, 2)])
        self.assertEqual(p.summary().redelivered, 5)
        # The second expiry is at the limit: archived, and the start passes them.
        self.assertEqual(p.expire_locks(40_000.0 + LOCK_MS), [(0, 4), (5, 9)])
        self.assertEqual(p.start, 5)
        self.assertEqual(shape(p), [(5, 9, A, 1, None)])
        self.assertEqual(p.summary().archived, 5)

    def test_renew_extends_only_the_renewed_part(self) -> None:
        p = partition()
        p.acquire("m", [LogSpan(0, 9)], 10, 0.0)
        p.acknowledge("m", [AckBatch(4, 5, (RENEW,))], 20_000.0)
        self.assertEqual(p.expire_locks(LOCK_MS), [(0, 3), (6, 9)])
        self.assertEqual(shape(p), [(0, 3, A, 1, None), (4, 5, Q, 1, "m"),
                                    (6, 9, A, 1, None)])
        self.assertEqual(p.next_deadline(), 20_000.0 + LOCK_MS)

    def test_reject_and_release_at_the_limit_archive(self) -> None:
        p = partition(limit=1)
        p.acquire("m", [LogSpan(0, 5)], 10, 0.0)
        p.acknowledge("m", [AckBatch(0, 5, (REJECT, REJECT, RELEASE, RELEASE, ACCEPT, GAP))])
        self.assertEqual((p.start, p.ranges), (6, []))
        self.assertEqual(p.summary().archived, 5)

    def test_acknowledgements_are_all_or_nothing_across_runs(self) -> None:
        p = partition()
        p.acquire("m", [LogSpan(0, 4)], 10, 0.0)
        p.acquire("n", [LogSpan(5, 9)], 10, 0.0)
        before = shape(p)
        for batches in (
            [AckBatch(3, 6, (ACCEPT,))],  # 5-6 are n's
            [AckBatch(0, 1, (ACCEPT,)), AckBatch(1, 2, (ACCEPT,))],  # overlapping
            [AckBatch(0, 4, (ACCEPT,)), AckBatch(12, 12, (GAP,))],  # past the window
            [AckBatch(0, 2, (ACCEPT, ACCEPT))],  # wrong shape
        ):
            with self.assertRaises(InvalidAcknowledgement):
                p.acknowledge("m", batches)
            self.assertEqual(shape(p), before)

    def test_gaps_in_the_log_count_as_done(self) -> None:
        p = partition()
        got, _ = p.acquire("m", [LogSpan(0, 2), LogSpan(5, 6), LogSpan(7, 8, skip=True)],
                           10, 0.0)
        self.assertEqual(got, [AcquiredRange(0, 2, 1), AcquiredRange(5, 6, 1)])
        # 3-4 have no record; GAP there is accepted and changes nothing.
        p.acknowledge("m", [AckBatch(0, 6, (ACCEPT, ACCEPT, ACCEPT, GAP, GAP, ACCEPT,
                                            ACCEPT))])
        self.assertEqual((p.start, p.end, p.ranges), (9, 9, []))

    def test_the_lock_cap_stops_at_a_batch_boundary_in_whole_batch_mode(self) -> None:
        p = partition(locks=15)
        got, _ = p.acquire("m", [LogSpan(0, 9), LogSpan(10, 19), LogSpan(20, 29)], 100,
                           0.0, whole_batches=True)
        self.assertEqual(got, [AcquiredRange(0, 19, 1)])
        self.assertEqual(p.acquire("n", [LogSpan(20, 29)], 100, 0.0, whole_batches=True),
                         ([], []))

    def test_move_start_cuts_a_run(self) -> None:
        p = partition()
        p.acquire("m", [LogSpan(0, 9)], 10, 0.0)
        p.move_start(6)
        self.assertEqual(shape(p), [(6, 9, Q, 1, "m")])
        self.assertEqual(p.acquired_count(), 4)

    def test_restore_keeps_the_runs_and_frees_the_locks(self) -> None:
        p = partition(limit=2)
        p.acquire("m", [LogSpan(0, 9)], 10, 0.0)
        p.acknowledge("m", [AckBatch(2, 3, (ACCEPT,)), AckBatch(6, 7, (RELEASE,))])
        p.acquire("n", [LogSpan(6, 7)], 10, 0.0)
        runs = p.runs()
        self.assertEqual(runs, [StateRun(0, 1, Q, 1), StateRun(2, 3, K, 1),
                                StateRun(4, 5, Q, 1), StateRun(6, 7, Q, 2),
                                StateRun(8, 9, Q, 1)])
        after_crash = partition(limit=2)
        after_crash.restore(p.start, p.end, runs)
        # Locks died with the broker; 6-7 were at the limit.
        self.assertEqual(shape(after_crash), [(0, 1, A, 1, None), (2, 3, K, 1, None),
                                              (4, 5, A, 1, None), (6, 7, R, 2, None),
                                              (8, 9, A, 1, None)])
        # A reload on a live broker keeps what memory still holds as the journal does.
        live = partition(limit=2)
        live.restore(p.start, p.end, runs, held=p)
        self.assertEqual(shape(live), shape(p))
        self.assertEqual(live.acquired_count(), p.acquired_count())
