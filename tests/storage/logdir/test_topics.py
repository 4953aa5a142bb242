"""Creating, reconfiguring and deleting topics (``TopicChanges``): partition counts,
auto-create, name collisions, config overrides, and a delete that leaves nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from brokerd.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.log_directory import LogDirectory

from tests.read_specs import COMMITTED_RECORDS


def open_dir(path: Path, **kwargs: Any) -> LogDirectory:
    return LogDirectory.open(str(path), LogConfig(segment_bytes=1000), **kwargs)


def test_auto_create(tmp_path: Path) -> None:
    ld = open_dir(tmp_path, default_partitions=3)
    with pytest.raises(UnknownTopicOrPartition):
        ld.get("t", 0)
    assert not (tmp_path / "t-0").exists()
    plog = ld.get("t", 1, create=True)
    assert isinstance(plog, PartitionLog)
    assert ld.topics()["t"].partitions == 3
    assert ld.get("t", 1) is plog
    with pytest.raises(UnknownTopicOrPartition):
        ld.get("t", 3, create=True)
    with pytest.raises(UnknownTopicOrPartition):
        ld.get("t", -1)
    ld.close()
    ld = open_dir(tmp_path, auto_create=False)
    with pytest.raises(UnknownTopicOrPartition):
        ld.get("other", 0, create=True)
    assert "other" not in ld.topics()
    assert not (tmp_path / "other-0").exists()
    ld.get("t", 2)
    ld.close()


def test_create_topic_errors(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    for bad in (0, -1, 10_001):
        with pytest.raises(InvalidPartitions):
            ld.topic_changes.create_topic("t", bad)
    info = ld.topic_changes.create_topic("t", 10)
    assert info.partitions == 10
    with pytest.raises(TopicAlreadyExists):
        ld.topic_changes.create_topic("t", 1)
    ld.close()


def test_delete_topic(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("gone", 2)
    old = ld.get("gone", 0)
    old.append_values([b"old"], timestamp_ms=1)
    old.publish()
    ld.topic_changes.delete_topic("gone")
    assert not (tmp_path / "gone-0").exists() and not (tmp_path / "gone-1").exists()
    assert "gone" not in ld.topics()
    with pytest.raises(UnknownTopicOrPartition):
        ld.get("gone", 0)
    with pytest.raises(UnknownTopicOrPartition):
        ld.topic_changes.delete_topic("gone")
    # A handle held across the delete refuses politely.
    with pytest.raises(UnknownTopicOrPartition):
        old.read(0, 10, COMMITTED_RECORDS)
    with pytest.raises(UnknownTopicOrPartition):
        old.append_values([b"x"], timestamp_ms=1)
    ld.topic_changes.create_topic("gone", 1)
    assert ld.get("gone", 0).log_end_offset == 0
    ld.close()
    ld = open_dir(tmp_path)
    assert ld.topics()["gone"].partitions == 1
    ld.close()


def test_stale_partition_dir_replaced_on_create(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.close()
    stale = tmp_path / "t-0"
    stale.mkdir()
    PartitionLog.open(str(stale), LogConfig(), recovery_point=None).close()
    plog = PartitionLog.open(str(stale), LogConfig(), recovery_point=None)
    plog.append_values([b"ghost"], timestamp_ms=1)
    plog.close()
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 1)
    assert ld.get("t", 0).log_end_offset == 0  # no resurrected data
    ld.close()


def test_concurrent_auto_create(tmp_path: Path) -> None:
    ld = open_dir(tmp_path, default_partitions=4)
    got: list[PartitionLog] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            got.append(ld.get("race", i % 4, create=True))
            ld.topics()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(p) for p in got}) == 4
    ld.close()



def test_validate_only_creates_nothing_and_bad_names_are_refused(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    try:
        info = ld.topic_changes.create_topic("v", 2, {"retention.ms": "5"}, validate_only=True)
        assert (info.partitions, dict(info.configs)) == (2, {"retention.ms": "5"})
        assert "v" not in ld.topics() and not (tmp_path / "v-0").exists()
        ld.topic_changes.create_topic("a.b", 1)
        with pytest.raises(InvalidTopic):
            ld.topic_changes.create_topic("a_b", 1)  # collides once '.' == '_'
        with pytest.raises(InvalidTopic):
            ld.topic_changes.create_topic("__consumer_offsets", 1)
        with pytest.raises(InvalidConfig):
            ld.topic_changes.create_topic("c", 1, {"retention.ms": "soon"})
        assert sorted(ld.topics()) == ["a.b"]
    finally:
        ld.close()


def test_altered_configs_are_stored_and_taken_by_open_partitions(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 1, {"retention.ms": "1000"})
    plog = ld.get("t", 0)
    checked = ld.topic_changes.alter_topic_configs(
        "t", lambda old: {"retention.ms": "7"}, validate_only=True
    )
    assert checked.configs == {"retention.ms": "7"}
    assert ld.topics()["t"].configs == {"retention.ms": "1000"}
    assert plog.config.retention_ms == 1000
    info = ld.topic_changes.alter_topic_configs(
        "t", lambda old: {**old, "cleanup.policy": "compact"}
    )
    assert info.configs == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert plog.config.compact
    with pytest.raises(InvalidConfig):
        ld.topic_changes.alter_topic_configs("t", lambda old: {"segment.bytes": "1"})
    with pytest.raises(UnknownTopicOrPartition):
        ld.topic_changes.alter_topic_configs("missing", lambda old: {})
    topic_id = ld.topics()["t"].topic_id
    ld.close()
    ld = open_dir(tmp_path)
    assert ld.topics()["t"].configs == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert ld.topics()["t"].topic_id == topic_id
    ld.close()
