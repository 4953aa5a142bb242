"""The share-state journal: records round-trip, replay, torn tails, compaction."""

from __future__ import annotations

import errno
import os
import random
from itertools import pairwise
from pathlib import Path

import pytest

from brokerd.core.share.engine import ShareEngine
from brokerd.core.share.partition import AckBatch, LogSpan
from brokerd.core.share.states import AckType, RecordState
from brokerd.storage import fileio
from brokerd.storage.journal.faults import StoreOffline
from brokerd.storage.journal.records import iter_frames
from brokerd.storage.offline_backoff import OFFLINE_RETRY_FIRST_SECONDS
from brokerd.storage.stores.share_state import (
    GroupConfigs,
    GroupDeleted,
    PartitionDeleted,
    PartitionState,
    ShareStateStore,
    StoredRun,
    _View,
    decode_body,
    encode,
)


def test_records_round_trip() -> None:
    for record in (
        PartitionState("g", "t", 3, 10, 20, (StoredRun(10, 12, 1, 2),), replace=True),
        PartitionDeleted("g", "t", 3),
        GroupConfigs("g", (("share.auto.offset.reset", "earliest"),)),
        GroupDeleted("g"),
    ):
        ((body, _, _),) = list(iter_frames(encode(record), 0, 1 << 20))
        assert decode_body(body) == record


def test_a_kill_keeps_acknowledgements_and_counts(tmp_path: Path) -> None:
    store = ShareStateStore.open(str(tmp_path))
    engine = ShareEngine()
    store.write(engine.set_overrides("g", {"share.delivery.count.limit": "3"}))
    _, recs = engine.ensure("g", "t", 0, log_start=0, log_end=0)
    store.write(recs)
    _, recs = engine.acquire("g", "t", 0, "m", [LogSpan(0, 9)], 10, 0)
    store.write(recs)
    store.write(engine.acknowledge("g", "t", 0, "m", [AckBatch(0, 4, (AckType.ACCEPT,))]))
    store.write(engine.acknowledge("g", "t", 0, "m", [AckBatch(5, 5, (AckType.RELEASE,))]))
    # No close: as after kill -9; a torn half record at the end.
    with open(store.path, "ab") as f:
        f.write(b"\x00\x00\x01\x00garbage")
    again = ShareStateStore.open(str(tmp_path))
    fresh = ShareEngine()
    fresh.restore(again.partitions(), again.group_configs())
    part = fresh.partition("g", "t", 0)
    assert part is not None
    assert part.start == 5 and part.end == 10 and part.limit == 3
    assert [(r.first, r.last, r.state, r.delivery_count) for r in part.ranges] == [
        (5, 9, RecordState.AVAILABLE, 1)
    ]
    got, _ = fresh.acquire("g", "t", 0, "n", [LogSpan(5, 12)], 100, 0)
    assert [(r.first, r.last, r.delivery_count) for r in got] == [(5, 9, 2), (10, 12, 1)]
    again.close()
    store.close()


def test_compaction_keeps_the_state(tmp_path: Path) -> None:
    store = ShareStateStore.open(str(tmp_path))
    engine = ShareEngine()
    _, recs = engine.ensure("g", "t", 0, log_start=0, log_end=0)
    store.write(recs)
    for i in range(300):
        _, recs = engine.acquire("g", "t", 0, "m", [LogSpan(i, i)], 1, 0)
        store.write(recs)
        store.write(engine.acknowledge("g", "t", 0, "m", [AckBatch(i, i, (AckType.ACCEPT,))]))
    store.write(engine.delete_group("gone"))
    size = os.path.getsize(store.path)
    assert size < 1 << 20
    store.close()
    again = ShareStateStore.open(str(tmp_path))
    assert again.partitions()[("g", "t", 0)].start == 300
    again.close()


def test_a_failed_fsync_takes_the_journal_offline_until_it_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    store = ShareStateStore.open(str(tmp_path), clock=lambda: now[0])
    engine = ShareEngine()
    _, recs = engine.ensure("g", "t", 0, log_start=0, log_end=0)
    store.write(recs)

    def eio(*_: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fileio, "datasync", eio)
    _, recs = engine.acquire("g", "t", 0, "m", [LogSpan(0, 3)], 10, 0)
    with pytest.raises(StoreOffline, match="fdatasync failed"):
        store.write(recs)
    monkeypatch.undo()
    assert store.journal.offline_reason is not None
    with pytest.raises(StoreOffline):
        store.write(recs)
    now[0] += OFFLINE_RETRY_FIRST_SECONDS
    assert store.retry_reopen()
    assert store.journal.offline_reason is None
    store.write(recs)
    store.close()
    again = ShareStateStore.open(str(tmp_path))
    assert again.partitions()[("g", "t", 0)].entries == {o: (1, 1) for o in range(4)}
    again.close()


def test_the_view_keeps_runs_as_a_per_offset_map_would() -> None:
    """Replaying records of runs (overwrites, starts moving up, whole-window
    replacements) gives the same per-offset states as overwriting one entry per
    offset; the view stores runs."""
    rng = random.Random(932)
    for _ in range(200):
        view = _View()
        model: dict[int, tuple[int, int]] = {}
        start = 0
        for _ in range(30):
            replace = rng.random() < 0.05
            start = max(start, start + rng.choice((0, 0, 0, rng.randrange(0, 40))))
            runs = []
            for _ in range(rng.randrange(0, 4)):
                first = start + rng.randrange(0, 60)
                last = first + rng.randrange(0, 25)
                runs.append(StoredRun(first, last, rng.choice((0, 1, 2, 4)), rng.randrange(1, 4)))
            view.apply(PartitionState("g", "t", 0, start, start + 100, tuple(runs), replace))
            if replace:
                model = {}
            for r in runs:
                model.update(dict.fromkeys(range(r.first, r.last + 1), (r.state, r.delivery_count)))
            model = {o: v for o, v in model.items() if o >= start}
            part = view.partitions[("g", "t", 0)]
            assert part.entries == model
            spans = part.spans
            assert all(a[1] < b[0] for a, b in pairwise(spans))
            assert {
                o: (r.state, r.delivery_count) for r in part.runs()
                for o in range(r.first, r.last + 1)
            } == model
