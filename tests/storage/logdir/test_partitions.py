"""Storage side of CreatePartitions and DeleteRecords: growing a topic durably, moving the
log start offset, the log-start-offset-checkpoint file, restarts and crashes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from brokerd.errors import (
    InvalidPartitions,
    OffsetOutOfRange,
    PolicyViolation,
    StorageError,
    UnknownTopicOrPartition,
)
from brokerd.storage.checkpoints import (
    LOG_START_CHECKPOINT_FILE,
    encode_checkpoint,
    parse_checkpoint,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.layout import REGISTRY_FILE
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.logdir.registry import read_registry

from tests.read_specs import BYTES, COMMITTED_RECORDS


def open_dir(path: Path, **kwargs: Any) -> LogDirectory:
    return LogDirectory.open(str(path), LogConfig(segment_bytes=1000), **kwargs)


def crash(ld: LogDirectory) -> None:
    """Drop the directory as a killed process would: no flush, no marker, lock released."""
    os.close(ld._lock_fd)


def fill(plog: PartitionLog, count: int, *, ts: int = 1000) -> None:
    for i in range(count):
        plog.append_values([b"value-%03d" % i], timestamp_ms=ts + i)
    plog.flush()
    plog.publish()


def first_offset(plog: PartitionLog, offset: int) -> int:
    return plog.read(offset, 10**6, COMMITTED_RECORDS).decoded[0].offset


# -- CreatePartitions ------------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False])
def test_create_partitions_survives_reopen(tmp_path: Path, clean: bool) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("grow", 2)
    fill(ld.get("grow", 1), 3)
    info = ld.partition_changes.create_partitions("grow", 5)
    assert info.partitions == 5 and ld.topics()["grow"].partitions == 5
    for p in (2, 3, 4):
        plog = ld.get("grow", p)
        assert (plog.log_start_offset, plog.log_end_offset) == (0, 0)
        assert os.path.isdir(tmp_path / f"grow-{p}")
    fill(ld.get("grow", 4), 2)
    if clean:
        ld.close()
    else:
        crash(ld)
    ld = open_dir(tmp_path)
    assert ld.topics()["grow"].partitions == 5
    assert ld.get("grow", 4).log_end_offset == 2
    assert ld.get("grow", 1).log_end_offset == 3
    ld.close()


def test_create_partitions_errors(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 3)
    with pytest.raises(InvalidPartitions, match="already has 3"):
        ld.partition_changes.create_partitions("t", 3)
    with pytest.raises(InvalidPartitions, match="would not be an increase"):
        ld.partition_changes.create_partitions("t", 2)
    with pytest.raises(InvalidPartitions):
        ld.partition_changes.create_partitions("t", 10**6)
    with pytest.raises(UnknownTopicOrPartition):
        ld.partition_changes.create_partitions("nosuch", 4)
    assert ld.topics()["t"].partitions == 3
    assert not (tmp_path / "t-3").exists()
    ld.close()


def test_create_partitions_replaces_leftover_of_a_crash(tmp_path: Path) -> None:
    """A directory left by a crash before the registry named it is stale: it goes."""
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 1)
    ld.close()
    stale = tmp_path / "t-1"
    stale.mkdir()
    (stale / "00000000000000000000.log").write_bytes(b"junk")
    ld = open_dir(tmp_path)
    assert ld.topics()["t"].partitions == 1
    ld.partition_changes.create_partitions("t", 2)
    assert ld.get("t", 1).log_end_offset == 0
    ld.close()


def test_create_partitions_registry_is_written(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 1)
    ld.partition_changes.create_partitions("t", 4)
    assert read_registry(str(tmp_path))["t"].partitions == 4  # durable before close
    ld.close()
    assert b'"partitions": 4' in (tmp_path / REGISTRY_FILE).read_bytes()


# -- DeleteRecords ---------------------------------------------------------------------


def make_log(tmp_path: Path, count: int = 60) -> tuple[LogDirectory, PartitionLog]:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("d", 1)
    plog = ld.get("d", 0)
    fill(plog, count)
    assert len(plog.segment_bases) > count // 15
    return ld, plog


def test_delete_records_moves_start_and_deletes_whole_segments(tmp_path: Path) -> None:
    ld, plog = make_log(tmp_path)
    bases = plog.segment_bases
    target = bases[2] + 1  # inside the third segment
    assert ld.partition_changes.delete_records("d", 0, target) == target
    assert plog.log_start_offset == target
    # The first two segments are gone, the straddling one stays.
    assert plog.segment_bases == bases[2:]
    assert not (tmp_path / "d-0" / f"{bases[0]:020d}.log").exists()
    assert not (tmp_path / "d-0" / f"{bases[1]:020d}.index").exists()
    assert (tmp_path / "d-0" / f"{bases[2]:020d}.log").exists()
    with pytest.raises(OffsetOutOfRange):
        plog.read(target - 1, 10**6, BYTES)
    with pytest.raises(OffsetOutOfRange):
        plog.read(bases[2], 10**6, COMMITTED_RECORDS)
    assert first_offset(plog, target) == target
    # Kafka's raw read may start at the batch holding the offset; each batch is one record.
    assert plog.read(target, 10**6, BYTES).log_start_offset == target
    entries = parse_checkpoint((tmp_path / LOG_START_CHECKPOINT_FILE).read_bytes())
    assert entries == {("d", 0): target}
    ld.close()


def test_delete_records_offsets(tmp_path: Path) -> None:
    ld, plog = make_log(tmp_path, 20)
    hw = plog.high_watermark
    with pytest.raises(OffsetOutOfRange):
        ld.partition_changes.delete_records("d", 0, hw + 1)
    with pytest.raises(OffsetOutOfRange):
        ld.partition_changes.delete_records("d", 0, -2)
    assert ld.partition_changes.delete_records("d", 0, 5) == 5
    # Below the current start: nothing moves, the current start is the answer.
    assert ld.partition_changes.delete_records("d", 0, 3) == 5
    # -1: up to the high watermark; the active segment stays (empty of readable records).
    assert ld.partition_changes.delete_records("d", 0, -1) == hw
    assert plog.read(hw, 100, BYTES).records == b""
    assert plog.segment_bases[-1] <= hw
    with pytest.raises(UnknownTopicOrPartition):
        ld.partition_changes.delete_records("d", 1, 0)
    with pytest.raises(UnknownTopicOrPartition):
        ld.partition_changes.delete_records("nosuch", 0, 0)
    # Appends continue after the new start.
    plog.append_values([b"after"], timestamp_ms=5000)
    plog.publish()
    assert plog.read(hw, 100, COMMITTED_RECORDS).decoded[0].value == b"after"
    ld.close()


def test_unpublished_records_cannot_be_deleted(tmp_path: Path) -> None:
    ld, plog = make_log(tmp_path, 5)
    plog.append_values([b"unpublished"], timestamp_ms=1)
    with pytest.raises(OffsetOutOfRange):
        ld.partition_changes.delete_records("d", 0, 6)
    ld.close()


@pytest.mark.parametrize("clean", [True, False])
def test_delete_records_survives_restart_and_crash(tmp_path: Path, clean: bool) -> None:
    ld, plog = make_log(tmp_path)
    target = plog.segment_bases[1] + 2
    ld.partition_changes.delete_records("d", 0, target)
    if clean:
        ld.close()
    else:
        crash(ld)
    ld = open_dir(tmp_path)
    plog = ld.get("d", 0)
    assert plog.log_start_offset == target
    with pytest.raises(OffsetOutOfRange):
        plog.read(target - 1, 100, COMMITTED_RECORDS)
    assert first_offset(plog, target) == target
    ld.close()


def test_killed_process_keeps_the_start(tmp_path: Path) -> None:
    """A real process answers DeleteRecords' storage call, then dies at once."""
    script = f"""
import os
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.config.log_config import LogConfig
ld = LogDirectory.open({str(tmp_path)!r}, LogConfig(segment_bytes=1000))
ld.topic_changes.create_topic("k", 1)
log = ld.get("k", 0)
for i in range(50):
    log.append_values([b"rec-%d" % i], timestamp_ms=i)
log.flush()
log.publish()
print(ld.partition_changes.delete_records("k", 0, 33))
os._exit(9)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    assert proc.stdout.strip() == b"33"
    ld = open_dir(tmp_path)
    plog = ld.get("k", 0)
    assert plog.log_start_offset == 33
    assert plog.read(33, 100, COMMITTED_RECORDS).decoded[0].value == b"rec-33"
    ld.close()


def test_failed_persist_leaves_the_start(tmp_path: Path) -> None:
    ld, plog = make_log(tmp_path, 10)

    def broken() -> None:
        raise StorageError("disk full")

    with pytest.raises(StorageError):
        plog.delete_records_before(5, persist=broken)
    assert plog.log_start_offset == 0
    assert first_offset(plog, 0) == 0
    ld.close()


def test_compacted_topic_refuses(tmp_path: Path) -> None:
    ld = LogDirectory.open(str(tmp_path), LogConfig(cleanup_policy={"compact"}))
    ld.topic_changes.create_topic("c", 1)
    fill(ld.get("c", 0), 3)
    with pytest.raises(PolicyViolation):
        ld.partition_changes.delete_records("c", 0, 1)
    assert ld.get("c", 0).log_start_offset == 0
    ld.close()


def test_recreated_topic_starts_at_zero(tmp_path: Path) -> None:
    ld, _plog = make_log(tmp_path, 10)
    ld.partition_changes.delete_records("d", 0, 7)
    ld.topic_changes.delete_topic("d")
    ld.topic_changes.create_topic("d", 1)
    fill(ld.get("d", 0), 2)
    ld.close()
    ld = open_dir(tmp_path)
    assert ld.get("d", 0).log_start_offset == 0
    assert first_offset(ld.get("d", 0), 0) == 0
    ld.close()


def test_start_past_the_log_end_restarts_empty(tmp_path: Path) -> None:
    """A crash lost records the checkpoint points into: Kafka restarts the log there."""
    ld, _plog = make_log(tmp_path, 10)
    ld.close()
    (tmp_path / LOG_START_CHECKPOINT_FILE).write_bytes(encode_checkpoint([("d", 0, 25)]))
    ld = open_dir(tmp_path)
    plog = ld.get("d", 0)
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (25, 25, 25)
    assert plog.segment_bases == (25,)
    assert plog.append_values([b"x"], timestamp_ms=1).base_offset == 25
    plog.publish()
    ld.close()
    ld = open_dir(tmp_path)
    assert ld.get("d", 0).read(25, 100, COMMITTED_RECORDS).decoded[0].value == b"x"
    ld.close()


def test_corrupt_checkpoint_refused(tmp_path: Path) -> None:
    ld, _plog = make_log(tmp_path, 3)
    ld.close()
    (tmp_path / LOG_START_CHECKPOINT_FILE).write_bytes(b"0\n2\nd 0 1\n")
    with pytest.raises(StorageError, match="corrupt"):
        open_dir(tmp_path)


def test_retention_never_moves_the_start_back(tmp_path: Path) -> None:
    ld = LogDirectory.open(str(tmp_path), LogConfig(segment_bytes=1000, retention_bytes=1500))
    ld.topic_changes.create_topic("r", 1)
    plog = ld.get("r", 0)
    fill(plog, 60)
    bases = plog.segment_bases
    ld.partition_changes.delete_records("r", 0, bases[-2] + 1)
    plog.enforce_retention()
    assert plog.log_start_offset == bases[-2] + 1
    ld.close()


def test_offset_for_timestamp_not_below_start(tmp_path: Path) -> None:
    ld, plog = make_log(tmp_path, 30)
    target = plog.segment_bases[1] + 1
    ld.partition_changes.delete_records("d", 0, target)
    found = plog.offset_for_timestamp(0)
    assert found is not None and found[0] == target
    ld.close()
