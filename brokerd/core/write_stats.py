# -*- test-case-name: tests.core.test_write_stats -*-
"""What one partition's write path reports to the metrics: records and bytes appended,
each append's time from queued to durable, and each fsync's duration.

A :class:`WriteStats` belongs to one :class:`~brokerd.core.writer.PartitionWriter` and
runs in the reactor thread when a write job is done. An append is durable when the fsync
that covers it completes: in the job that wrote it (``--fsync always``), or in a later
flush (interval mode); for the latter at most :data:`MAX_UNSYNCED_SAMPLES` appends per
partition between two syncs are remembered (the first ones), so memory stays bounded
whatever the produce rate. Transaction markers are not counted as records.

What it does not do: store series (a :class:`~brokerd.observers.WriteObserver` does)
or time anything in the write pool itself (the job measures its fsync).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from brokerd.core.appends import Append, MarkerAppend
from brokerd.observers import NULL_WRITES, WriteObserver
from brokerd.storage.types import AppendInfo

#: Appends answered before their sync whose queue time is kept until the sync comes.
MAX_UNSYNCED_SAMPLES = 128


class WriteStats:
    """One partition's write statistics (reactor thread)."""

    def __init__(
        self,
        topic: str,
        observer: WriteObserver = NULL_WRITES,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topic = topic
        self._observer = observer
        self.now = monotonic
        self._unsynced: list[float] = []

    def job_done(
        self,
        landed: Sequence[tuple[Append, AppendInfo, float]],
        *,
        synced: bool,
        sync_seconds: float | None,
    ) -> None:
        """A write job finished: ``landed`` are its appends that succeeded, with their
        offsets and queue times; ``synced`` whether it ended with a successful fsync
        (taking ``sync_seconds``)."""
        observer = self._observer
        for append, info, _ in landed:
            # A retry answered from the producer state appended nothing.
            if not isinstance(append, MarkerAppend) and not info.duplicate:
                observer.records_in(
                    self._topic, info.last_offset - info.base_offset + 1, append.stored_bytes()
                )
        if not synced:
            room = MAX_UNSYNCED_SAMPLES - len(self._unsynced)
            if room > 0:
                self._unsynced.extend(queued for _, _, queued in landed[:room])
            return
        if sync_seconds is not None:
            observer.synced(sync_seconds)
        now = self.now()
        for queued in self._unsynced:
            observer.durable(now - queued)
        self._unsynced.clear()
        for _, _, queued in landed:
            observer.durable(now - queued)


__all__ = ["MAX_UNSYNCED_SAMPLES", "WriteStats"]
