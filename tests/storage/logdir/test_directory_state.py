"""The log directory's shared state (``brokerd/storage/logdir/directory_state.py``): its
mutators keep the topics and their IDs, the open and offline partitions, and the
collision keys consistent with each other."""

from __future__ import annotations

import time
from pathlib import Path

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.topic_ids import new_topic_id
from brokerd.storage.types import TopicInfo


def new_state(path: Path) -> DirectoryState:
    return DirectoryState(
        str(path), LogConfig(), auto_create=False, default_partitions=1, clock=time.time
    )


def test_a_topic_is_published_and_unpublished_with_its_id_and_logs(tmp_path: Path) -> None:
    state = new_state(tmp_path)
    info = TopicInfo("t", 2, topic_id=new_topic_id())
    plog = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), recovery_point=None)
    try:
        state.put_offline(("t", 0), "disk gone")
        state.put_online(("t", 0), plog)
        assert state.offline == {} and state.logs == {("t", 0): plog}
        state.publish_topic(info)
        assert state.topics == {"t": info} and state.ids == {info.topic_id: "t"}
        assert state.unpublish_topic(info) == [plog, None]
        assert state.topics == {} and state.ids == {} and state.logs == {}
        # Offline takes a partition's log out of the open ones and hands it back.
        state.put_online(("t", 0), plog)
        assert state.put_offline(("t", 0), "bad segment") is plog
        assert state.logs == {} and state.offline == {("t", 0): "bad segment"}
    finally:
        plog.close()


def test_a_failed_create_hands_its_collision_key_back(tmp_path: Path) -> None:
    state = new_state(tmp_path)
    state.reserve_name("a.b")
    assert state.creating == {"a.b"} and set(state.collisions.values()) == {"a.b"}
    with state.lock:  # it wakes the threads waiting on the name
        state.end_create("a.b", created=False)
    assert state.creating == set() and state.collisions == {}
    # Two old topics that collide ('.' versus '_'): the key passes to the survivor.
    for name in ("x.y", "x_y"):
        state.publish_topic(TopicInfo(name, 1, topic_id=new_topic_id()))
        state.take_collision_key(name)
    state.unpublish_topic(state.topics["x.y"])
    state.release_collision("x.y")
    assert set(state.collisions.values()) == {"x_y"}
