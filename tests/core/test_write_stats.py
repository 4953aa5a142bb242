"""A partition writer's statistics: the records in, the time to durability, the fsyncs,
with unsynced appends bounded until the next sync."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.appends import MarkerAppend, ValuesAppend
from brokerd.core.write_stats import MAX_UNSYNCED_SAMPLES, WriteStats
from brokerd.storage.types import AppendInfo


class RecordingObserver:
    def __init__(self) -> None:
        self.ins: list[tuple[str, int, int]] = []
        self.durables: list[float] = []
        self.syncs: list[float] = []

    def records_in(self, topic: str, records: int, size: int) -> None:
        self.ins.append((topic, records, size))

    def durable(self, seconds: float) -> None:
        self.durables.append(seconds)

    def synced(self, seconds: float) -> None:
        self.syncs.append(seconds)


class WriteStatsTest(SynchronousTestCase):
    def test_synced_job_reports_records_durable_and_fsync(self) -> None:
        obs = RecordingObserver()
        now = [10.0]
        stats = WriteStats("t", obs, monotonic=lambda: now[0])
        values = ValuesAppend((b"ab", b"c"))
        marker = MarkerAppend(1, 0, commit=True)
        now[0] = 10.5
        stats.job_done(
            [(values, AppendInfo(4, 5, 0), 10.0), (marker, AppendInfo(6, 6, 0), 10.25)],
            synced=True, sync_seconds=0.125,
        )
        self.assertEqual(obs.ins, [("t", 2, values.stored_bytes())])  # the marker is no record
        self.assertEqual(obs.syncs, [0.125])
        self.assertEqual(obs.durables, [0.5, 0.25])

    def test_unsynced_appends_are_durable_at_the_next_sync_and_bounded(self) -> None:
        obs = RecordingObserver()
        now = [0.0]
        stats = WriteStats("t", obs, monotonic=lambda: now[0])
        append = ValuesAppend((b"x",))
        many = [(append, AppendInfo(i, i, 0), 1.0) for i in range(MAX_UNSYNCED_SAMPLES + 10)]
        stats.job_done(many, synced=False, sync_seconds=None)
        self.assertEqual(obs.durables, [])
        self.assertEqual(len(obs.ins), MAX_UNSYNCED_SAMPLES + 10)
        now[0] = 3.0
        stats.job_done([], synced=True, sync_seconds=0.01)  # the interval flush
        self.assertEqual(obs.durables, [2.0] * MAX_UNSYNCED_SAMPLES)
        stats.job_done([], synced=True, sync_seconds=0.01)
        self.assertEqual(len(obs.durables), MAX_UNSYNCED_SAMPLES)
