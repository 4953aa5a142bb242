"""Offline partitions come back: a retry once due reopens them with the recovery point
they kept, a failure backs off, and a partition of a gone topic is forgotten."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.logdir.offline import (
    OFFLINE_RETRY_FIRST_SECONDS,
    OfflinePartitions,
)
from brokerd.storage.types import TopicInfo


def setup(path: Path) -> tuple[DirectoryState, OfflinePartitions, list[float]]:
    now = [1000.0]
    state = DirectoryState(
        str(path), LogConfig(), auto_create=False, default_partitions=1, clock=lambda: now[0]
    )
    state.publish_topic(TopicInfo("t", 2))
    return state, OfflinePartitions(state), now


def test_a_partition_comes_back_once_its_retry_is_due(tmp_path: Path) -> None:
    state, offline, now = setup(tmp_path)
    offline.went_offline(("t", 1), "disk full", 7)
    offline.went_offline(("t", 0), "disk full", None)
    assert state.offline == {("t", 1): "disk full", ("t", 0): "disk full"}
    assert offline.points() == {("t", 1): 7}
    assert offline.retry(now[0] + OFFLINE_RETRY_FIRST_SECONDS - 1) == 0
    assert offline.retry(now[0] + OFFLINE_RETRY_FIRST_SECONDS) == 2
    try:
        assert state.offline == {} and set(state.logs) == {("t", 0), ("t", 1)}
        assert offline.points() == {}
    finally:
        for plog in state.logs.values():
            plog.close()


def test_a_failed_retry_keeps_it_offline_and_doubles_the_delay(tmp_path: Path) -> None:
    state, offline, now = setup(tmp_path)
    (tmp_path / "t-0").write_bytes(b"not a directory")
    offline.went_offline(("t", 0), "first", 3)
    first_try = now[0] + OFFLINE_RETRY_FIRST_SECONDS
    assert offline.retry(first_try) == 0
    assert state.offline[("t", 0)] != "first"  # the new reason
    assert offline.points() == {("t", 0): 3}
    assert offline.retry(first_try + 2 * OFFLINE_RETRY_FIRST_SECONDS - 0.1) == 0
    (tmp_path / "t-0").unlink()
    assert offline.retry(first_try + 2 * OFFLINE_RETRY_FIRST_SECONDS) == 1
    state.logs[("t", 0)].close()


def test_a_partition_of_a_gone_topic_is_forgotten(tmp_path: Path) -> None:
    state, offline, now = setup(tmp_path)
    offline.went_offline(("t", 1), "disk full", 4)
    offline.went_offline(("u", 0), "disk full", 5)
    state.unpublish_topic(state.topics["t"])
    assert offline.retry(now[0] + OFFLINE_RETRY_FIRST_SECONDS) == 0
    assert state.offline == {} and offline.points() == {} and state.logs == {}
    offline.went_offline(("t", 0), "again", 1)
    offline.forget(("t", 0))
    assert state.offline == {} and offline.points() == {}
