"""Where the log cleaner meets DeleteRecords, retention and topic deletion (real files)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from brokerd.core.cleaner_service import CleanerService, CleanerSettings
from brokerd.storage.cleaner.compactor import clean_log
from brokerd.storage.cleaner.keymap import OffsetMap
from brokerd.storage.log.producer_state import ProducerStateManager, load_table, write_snapshot
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches

from tests.compaction_helpers import T0, compact_config, latest, open_log, put, read_all, roll

BOTH = {"compact", "delete"}


def test_segment_emptied_after_delete_records_made_it_first(tmp_path: Path) -> None:
    """DeleteRecords (or retention) removes the first segment while a pass runs: the
    next segment, every record of which the pass removes, is now the first one. The pass
    keeps it (empty) instead of failing with an error that killed the cleaner thread."""
    log = open_log(tmp_path, compact_config(cleanup_policy=BOTH))
    put(log, [(b"a", b"1")])
    roll(log)
    put(log, [(b"a", b"2")])
    roll(log)
    put(log, [(b"a", b"3")])
    roll(log)
    s1 = log.segments[1]
    written: list[str] = []

    def hook(step: str) -> None:
        if step == "segment-written":
            written.append(step)
            if len(written) == 2:  # s1 written, not yet swapped
                log.delete_records_before(s1.base_offset)

    result = clean_log(log, None, now_ms=T0, key_map=OffsetMap(1 << 16), hook=hook)
    assert result is not None and result.segments_deleted == 0
    assert log.segments[0].base_offset == s1.base_offset == log.log_start_offset
    assert log.segments[0].size == 0
    assert latest(read_all(log))[b"a"] == b"3"
    log.close()
    again = open_log(tmp_path, compact_config(cleanup_policy=BOTH))
    assert latest(read_all(again))[b"a"] == b"3"
    again.close()


def test_delete_records_waits_for_a_swap_in_progress(tmp_path: Path) -> None:
    """DeleteRecords deleting the segment the cleaner is swapping: it waits for the swap
    (as retention does), so no orphan segment file is left and no segment leaks."""
    log = open_log(tmp_path, compact_config(cleanup_policy=BOTH))
    for i in range(3):
        put(log, [(b"a", b"%d" % i), (b"b", b"%d" % i)])
    roll(log)
    put(log, [(b"a", b"last")])
    roll(log)
    s1 = log.segments[1]
    deleter: list[threading.Thread] = []

    def hook(step: str) -> None:
        if step == "swap-committed" and not deleter:
            thread = threading.Thread(target=log.delete_records_before, args=(s1.base_offset,))
            deleter.append(thread)
            thread.start()
            thread.join(0.3)

    clean_log(log, None, now_ms=T0, key_map=OffsetMap(1 << 16), hook=hook)
    deleter[0].join(5)
    assert not deleter[0].is_alive()
    on_disk = sorted(int(n[:-4]) for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert on_disk == [s.base_offset for s in log.segments]
    assert log.log_start_offset == s1.base_offset == log.segments[0].base_offset
    log.close()


class _NoReactor:
    def callFromThread(self, f: Any, *a: Any, **kw: Any) -> None:
        f(*a, **kw)


COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
}


def _fill(logdir: LogDirectory, keys: list[bytes], rounds: int) -> None:
    log = logdir.get("t", 0)
    for r in range(rounds):
        for key in keys:
            put(log, [(key, b"v%d" % r)])
    roll(log)


def test_checkpoint_of_a_deleted_topic_is_not_applied_to_its_successor(tmp_path: Path) -> None:
    """A topic deleted and created again under its name starts with no cleaner
    checkpoint: its first pass compacts it from offset 0."""
    logdir = LogDirectory.open(str(tmp_path / "data"))
    logdir.topic_changes.create_topic("t", 1, COMPACT)
    service = CleanerService(
        logdir,
        CleanerSettings(dedupe_buffer_bytes=1 << 20),
        reactor=_NoReactor(),
        wall_clock=lambda: T0 / 1000.0,
    )
    _fill(logdir, [b"k%d" % i for i in range(10)], rounds=30)
    assert service.clean_one()
    old_end = logdir.get("t", 0).log_end_offset
    logdir.topic_changes.delete_topic("t")
    logdir.topic_changes.create_topic("t", 1, COMPACT)
    # Keys only below the old checkpoint, then others after it.
    _fill(logdir, [b"old%d" % i for i in range(5)], rounds=old_end // 5 - 10)
    _fill(logdir, [b"new%d" % i for i in range(5)], rounds=30)
    assert service.clean_one()
    log = logdir.get("t", 0)
    records = [r for r in read_all(log) if r.key != b"filler"]
    old_keys = [r.key for r in records if r.key is not None and r.key.startswith(b"old")]
    assert len(old_keys) == 5, "one record per key"
    logdir.close()


def test_emptied_first_segment_does_not_hold_back_time_retention(tmp_path: Path) -> None:
    """``compact,delete``: the pass empties the first segment (kept, for the log start).
    Having no record, its age for retention.ms is its file's mtime, which the swap must
    not reset to now, or retention keeps every old segment after it for another
    retention.ms (Kafka gives a cleaned segment its original's modification time)."""
    config = compact_config(cleanup_policy=BOTH, retention_ms=1000)
    log = open_log(tmp_path, config)
    put(log, [(b"a", b"1")])
    roll(log)
    put(log, [(b"a", b"2")])
    roll(log)
    for segment in log.segments[:-1]:
        os.utime(segment.log_path, (T0 / 1000.0, T0 / 1000.0))
    clean_log(log, None, now_ms=T0, key_map=OffsetMap(1 << 16))
    assert log.segments[0].size == 0
    before = len(log.segments)
    # Every record is older than retention.ms, the active segment's too: all go (the
    # active one after a roll), the emptied first one first.
    assert log.enforce_retention(now=T0 / 1000.0 + 60) == before
    assert log.log_start_offset == log.log_end_offset
    log.close()


def test_topic_deleted_during_a_pass_is_not_an_error(tmp_path: Path) -> None:
    """DeleteTopics removes the partition directory under a running pass: the pass
    stops (None, as when the broker stops) instead of failing with an I/O error, and
    leaves no file behind."""
    data = tmp_path / "data"
    logdir = LogDirectory.open(str(data))
    logdir.topic_changes.create_topic("t", 1, COMPACT)
    _fill(logdir, [b"k%d" % i for i in range(10)], rounds=30)
    log = logdir.get("t", 0)

    def hook(step: str) -> None:
        if step == "segment-written" and "t" in logdir.topics():
            logdir.topic_changes.delete_topic("t")

    assert clean_log(log, None, now_ms=T0, key_map=OffsetMap(1 << 16), hook=hook) is None
    assert not (data / "t-0").exists()
    logdir.close()


def test_created_partitions_take_the_topic_configs_and_are_cleaned(tmp_path: Path) -> None:
    """CreatePartitions on a topic with overrides (regression): the new partitions get
    the topic's config, including one altered since its creation, and the cleaner
    service compacts them."""
    logdir = LogDirectory.open(str(tmp_path / "data"))
    logdir.topic_changes.create_topic("t", 1, {"cleanup.policy": "delete"})
    logdir.topic_changes.alter_topic_configs("t", lambda _current: COMPACT)
    logdir.partition_changes.create_partitions("t", 2)
    new = logdir.get("t", 1)
    assert new.config == logdir.get("t", 0).config and new.config.compact
    service = CleanerService(
        logdir,
        CleanerSettings(dedupe_buffer_bytes=1 << 20),
        reactor=_NoReactor(),
        wall_clock=lambda: T0 / 1000.0,
    )
    for r in range(30):
        for k in range(10):
            put(new, [(b"k%d" % k, b"v%d" % r)])
    roll(new)
    assert service.clean_one()
    assert service.records_removed > 0
    keys = [r.key for r in read_all(new) if r.key != b"filler"]
    assert sorted(keys) == sorted(b"k%d" % k for k in range(10))
    logdir.close()


def test_producer_state_after_a_crash_over_a_cleaned_segment(tmp_path: Path) -> None:
    """A producer's batches written after the last producer-state snapshot, all of their
    records superseded before a crash: the cleaner keeps the producer's last batch (one
    record of it), so the snapshot plus the replay know its sequence at the restart and
    its next batch is accepted."""
    log = open_log(tmp_path)
    put(log, [(b"a", b"1")], producer=(7, 0, 0))
    table = ProducerStateManager()
    table.replay(log.batch_headers(0), log_start_offset=0)
    write_snapshot(str(tmp_path), log.log_end_offset, table.snapshot())
    put(log, [(b"b", b"1")], producer=(7, 0, 1))
    put(log, [(b"b", b"2")])
    roll(log)
    clean_log(log, None, now_ms=T0, key_map=OffsetMap(1 << 16))
    restarted = ProducerStateManager()
    load_table(log, restarted)
    data = encode_batch(
        [b"3"], keys=[b"c"], timestamp_ms=T0, producer_id=7, producer_epoch=0, base_sequence=2
    )
    assert restarted.check(parse_batches(data, max_batch_bytes=1 << 20)) is None
    assert restarted.snapshot()[7]["batches"][-1][:2] == [1, 1]
    log.close()
