"""Tests for brokerd.storage.stores.offsets and offsets_journal: the committed-offsets journal."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.names import MAX_GROUP_ID_LENGTH
from brokerd.storage import fileio
from brokerd.storage.stores.offsets import (
    OFFSETS_FILE_NAME,
    CommitOp,
    GroupDeletion,
    GroupUpdate,
    OffsetDeletion,
    OffsetStore,
    StoredGroup,
    StoredMember,
)
from brokerd.storage.stores.offsets_format import (
    MAGIC,
    Committed,
    encode_commit,
    encode_group,
)


def _journal(tmp_path: Path) -> str:
    return str(tmp_path / OFFSETS_FILE_NAME)


def test_commit_fetch_reopen_round_trip(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path, clock=lambda: 1700000000.5)
    assert store.fetch("g", "t", 0) is None
    store.commit("g", [("t", 0, 5, 0, "meta"), ("t", 1, 7, 3, None)])
    store.commit("g", [("t", 0, 9, 1, "")])
    store.commit("other", [("u", 2, 1, -1, None)])
    assert store.fetch("g", "t", 0) == (9, 1, "")
    assert store.committed("g") == {("t", 0): (9, 1, ""), ("t", 1): (7, 3, None)}
    store.close()

    again = OffsetStore.open(path)
    assert again.journal.truncated_bytes == 0
    assert again.fetch("g", "t", 0) == (9, 1, "")
    assert again.fetch("g", "t", 1) == (7, 3, None)
    assert again.fetch("other", "u", 2) == (1, -1, None)
    assert again.fetch("g", "u", 2) is None
    assert again.groups() == ["g", "other"]
    again.close()


def test_open_accepts_the_data_directory(tmp_path: Path) -> None:
    store = OffsetStore.open(str(tmp_path))
    store.commit("g", [("t", 0, 1, 0, None)])
    store.close()
    assert os.listdir(tmp_path) == [OFFSETS_FILE_NAME]
    assert OffsetStore.open(_journal(tmp_path)).fetch("g", "t", 0) == (1, 0, None)


def test_torn_tail_is_truncated_and_earlier_commits_survive(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None)])
    good_size = os.path.getsize(path)
    store.commit("g", [("t", 0, 2, 0, None), ("t", 1, 2, 0, None)])
    store.close()
    full = os.path.getsize(path)
    os.truncate(path, full - 5)  # a crash in the middle of the second record's write

    again = OffsetStore.open(path)
    assert again.journal.truncated_bytes == full - 5 - good_size
    assert os.path.getsize(path) == good_size
    # The second commit is all-or-nothing: neither of its partitions is visible.
    assert again.committed("g") == {("t", 0): (1, 0, None)}
    # New commits land right after the last good record and survive another reopen.
    again.commit("g", [("t", 0, 3, 0, "x")])
    again.close()
    assert OffsetStore.open(path).committed("g") == {("t", 0): (3, 0, "x")}


def test_garbage_tail_is_dropped(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None)])
    store.close()
    good_size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(b"\xff" * 3 + os.urandom(200))

    again = OffsetStore.open(path)
    assert again.fetch("g", "t", 0) == (1, 0, None)
    assert os.path.getsize(path) == good_size
    again.close()


def test_corrupt_last_record_fails_its_crc_and_is_dropped(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None)])
    good_size = os.path.getsize(path)
    store.commit("g", [("t", 0, 2, 0, None)])
    store.close()
    with open(path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        byte = f.read(1)
        f.seek(-3, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0x55]))

    again = OffsetStore.open(path)
    assert again.fetch("g", "t", 0) == (1, 0, None)
    assert os.path.getsize(path) == good_size
    again.close()


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    Path(path).write_bytes(b"something else entirely")
    with pytest.raises(StorageError):
        OffsetStore.open(path)


def test_journal_torn_while_being_created_is_restarted(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    Path(path).write_bytes(b"BKO")
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 4, 0, None)])
    store.close()
    assert OffsetStore.open(path).fetch("g", "t", 0) == (4, 0, None)


def test_compaction_keeps_latest_values_and_survives_reopen(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path, compact_min_bytes=4096, compact_ratio=4)
    for i in range(150):
        store.commit("g", [("t", 0, i, 0, f"m{i}"), ("t", 1, 1000 + i, 2, None)])
        store.commit("h", [("u", 0, i, 0, None)])
    store.delete_topic("u")
    assert store.journal.compactions > 0
    assert store.journal.last_compaction_error is None
    # 300 commit records would be ~20 KiB; compaction keeps it near the live size.
    assert os.path.getsize(path) < 4096 * 2
    store.commit("g", [("t", 2, 1, 0, None)])  # appends still work after a rewrite
    store.close()
    assert not os.path.exists(path + ".compact-tmp")

    again = OffsetStore.open(path)
    assert again.committed("g") == {
        ("t", 0): (149, 0, "m149"),
        ("t", 1): (1149, 2, None),
        ("t", 2): (1, 0, None),
    }
    assert again.committed("h") == {}
    again.close()


def test_compaction_on_open_and_leftover_temp_file(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)  # default thresholds: no compaction while writing
    for i in range(100):
        store.commit("g", [("t", 0, i, 0, None)])
    store.close()
    big = os.path.getsize(path)
    Path(path + ".compact-tmp").write_bytes(b"half-written compaction")

    again = OffsetStore.open(path, compact_min_bytes=1, compact_ratio=2)
    assert again.journal.compactions == 1
    assert os.path.getsize(path) < big / 10
    assert again.fetch("g", "t", 0) == (99, 0, None)
    again.close()
    assert sorted(os.listdir(tmp_path)) == [OFFSETS_FILE_NAME]
    assert OffsetStore.open(path).fetch("g", "t", 0) == (99, 0, None)


@pytest.mark.parametrize(
    "group", ["../../etc", "/etc/passwd", "a/b", "..", "", "\x00\n", "x" * MAX_GROUP_ID_LENGTH]
)
def test_group_ids_never_reach_a_file_name(tmp_path: Path, group: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store = OffsetStore.open(str(data), compact_min_bytes=1, compact_ratio=1)
    for i in range(3):  # with these thresholds every commit also compacts
        store.commit(group, [("t", 0, i, 0, None)])
    store.close()
    assert os.listdir(data) == [OFFSETS_FILE_NAME]
    assert sorted(os.listdir(tmp_path)) == ["data"]
    assert OffsetStore.open(str(data)).fetch(group, "t", 0) == (2, 0, None)


def test_limits_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    size = os.path.getsize(path)
    with pytest.raises(ValueError):
        store.commit("x" * (MAX_GROUP_ID_LENGTH + 1), [("t", 0, 1, 0, None)])
    with pytest.raises(ValueError):
        store.commit("g", [("t", 0, 1, 0, None), ("t", 1, 1, 0, "m" * 5000)])
    with pytest.raises(ValueError):
        store.commit("g", [("t", -1, 1, 0, None)])
    assert os.path.getsize(path) == size
    assert store.committed("g") == {}
    store.close()


def test_delete_topic_is_durable(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("gone", 0, 1, 0, None), ("kept", 0, 2, 0, None)])
    store.commit("h", [("gone", 3, 1, 0, None)])
    store.delete_topic("gone")
    store.delete_topic("never-existed")
    assert store.committed("g") == {("kept", 0): (2, 0, None)}
    store.close()
    again = OffsetStore.open(path)
    assert again.committed("g") == {("kept", 0): (2, 0, None)}
    assert again.committed("h") == {}
    assert again.groups() == ["g"]
    again.close()


def test_failed_sync_refuses_further_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None)])

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(fileio, "datasync", broken)  # under append_synced
    with pytest.raises(StorageError):
        store.commit("g", [("t", 0, 2, 0, None)])
    monkeypatch.undo()
    # Never retry-and-trust after a failed fsync: the store stays failed.
    with pytest.raises(StorageError):
        store.commit("g", [("t", 0, 3, 0, None)])
    assert store.fetch("g", "t", 0) == (1, 0, None)
    store.close()
    assert OffsetStore.open(path).fetch("g", "t", 0) == (1, 0, None)


def test_concurrent_commits_and_reads(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path, compact_min_bytes=2048, compact_ratio=2)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                store.commit(f"g{n}", [("t", n, i, 0, None)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for n in range(4):
            got = store.fetch(f"g{n}", "t", n)
            assert got is None or 0 <= got[0] < 40
        time.sleep(0.001)  # let the writers have the GIL
    for t in threads:
        t.join()
    assert errors == []
    store.close()
    again = OffsetStore.open(path)
    assert [again.fetch(f"g{n}", "t", n) for n in range(4)] == [(39, 0, None)] * 4


def _group(generation: int, *, members: int = 2) -> StoredGroup:
    return StoredGroup(
        protocol_type="consumer",
        generation=generation,
        protocol_name="range",
        leader_id="m0",
        members=tuple(
            StoredMember(
                member_id=f"m{i}",
                group_instance_id="static-1" if i == 1 else None,
                client_id=f"client-\u00e9{i}",
                client_host="/127.0.0.1",
                session_timeout_ms=10_000,
                rebalance_timeout_ms=300_000,
                metadata=b"\x00\x01meta" + bytes([i]),
                assignment=bytes(range(i * 3)),
            )
            for i in range(members)
        ),
    )


def test_group_metadata_round_trip(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    assert store.groups_metadata() == {}
    store.commit("g", [("t", 0, 5, 0, None)])
    store.store_group("g", _group(1))
    store.store_group("g", _group(2, members=3))
    store.store_group("\u00fcber", _group(7, members=1))
    assert store.groups_metadata() == {"g": _group(2, members=3), "\u00fcber": _group(7, members=1)}
    store.close()

    again = OffsetStore.open(path)
    assert again.journal.truncated_bytes == 0
    assert again.groups_metadata() == {"g": _group(2, members=3), "\u00fcber": _group(7, members=1)}
    # Group records do not disturb the offsets kept in the same journal.
    assert again.committed("g") == {("t", 0): (5, 0, None)}
    assert again.groups() == ["g"]
    again.close()


def test_group_tombstone_is_durable_and_free_when_nothing_is_stored(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    size = os.path.getsize(path)
    store.delete_group("never-stored")
    assert os.path.getsize(path) == size  # nothing to forget: no record, no fsync
    store.store_group("g", _group(1))
    store.store_group("h", _group(4))
    store.delete_group("g")
    assert list(store.groups_metadata()) == ["h"]
    store.close()
    again = OffsetStore.open(path)
    assert list(again.groups_metadata()) == ["h"]
    # Re-created after its tombstone: the new record wins again.
    again.store_group("g", _group(9))
    again.close()
    assert OffsetStore.open(path).groups_metadata()["g"].generation == 9


def test_compaction_keeps_the_latest_group_record(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path, compact_min_bytes=4096, compact_ratio=4)
    for i in range(200):
        store.store_group("g", _group(i))
        store.store_group("gone", _group(i))
        store.commit("g", [("t", 0, i, 0, None)])
    store.delete_group("gone")
    for i in range(50):
        store.commit("g", [("t", 0, i, 0, None)])
    assert store.journal.compactions > 0
    assert store.journal.last_compaction_error is None
    assert os.path.getsize(path) < 4096 * 2
    store.close()
    again = OffsetStore.open(path)
    assert again.groups_metadata() == {"g": _group(199)}
    assert again.fetch("g", "t", 0) == (49, 0, None)
    again.close()


def test_torn_group_record_is_truncated(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.store_group("g", _group(1))
    good_size = os.path.getsize(path)
    store.store_group("g", _group(2, members=3))
    store.close()
    os.truncate(path, os.path.getsize(path) - 7)
    again = OffsetStore.open(path)
    assert again.journal.truncated_bytes > 0
    assert os.path.getsize(path) == good_size
    assert again.groups_metadata() == {"g": _group(1)}
    again.close()


def test_group_record_limits_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    size = os.path.getsize(path)
    with pytest.raises(ValueError):
        store.store_group("x" * (MAX_GROUP_ID_LENGTH + 1), _group(1))
    with pytest.raises(ValueError):
        store.store_group("g", _group(2**31))
    assert os.path.getsize(path) == size
    assert store.groups_metadata() == {}
    store.close()


def test_journal_of_the_previous_format_is_read_and_upgraded(tmp_path: Path) -> None:
    """A BKOFFS01 journal (commits and topic deletions only) keeps its offsets and is
    rewritten with the new magic at once, so an older brokerd refuses it outright rather
    than truncating group records as a torn tail."""
    path = _journal(tmp_path)
    commit = encode_commit(b"g", [(b"t", 0, Committed(42, 3, "old", 1700000000000))])
    Path(path).write_bytes(b"BKOFFS01" + commit + b"\x00\x00")  # plus a torn tail
    store = OffsetStore.open(path)
    assert store.fetch("g", "t", 0) == (42, 3, "old")
    assert Path(path).read_bytes()[:8] == MAGIC
    store.store_group("g", _group(1))
    store.close()
    again = OffsetStore.open(path)
    assert again.fetch("g", "t", 0) == (42, 3, "old")
    assert again.groups_metadata() == {"g": _group(1)}
    again.close()


@pytest.mark.parametrize("suffix", [".tmp", ".compact-tmp"])
def test_temp_file_of_a_crashed_compaction_is_dropped(tmp_path: Path, suffix: str) -> None:
    """Both the current temp name and the one older versions used."""
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None)])
    store.close()
    Path(path + suffix).write_bytes(b"half-written compaction")
    again = OffsetStore.open(path)
    assert again.fetch("g", "t", 0) == (1, 0, None)
    assert os.listdir(tmp_path) == [OFFSETS_FILE_NAME]
    again.close()


def test_compaction_failing_before_the_rename_is_only_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path, compact_min_bytes=1, compact_ratio=2)

    def full_disk(target: str, data: bytes) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio, "write_temp", full_disk)  # under rewrite_for_append
    for i in range(5):
        store.commit("g", [("t", 0, i, 0, None)])
    assert isinstance(store.journal.last_compaction_error, OSError)
    monkeypatch.undo()
    store.commit("g", [("t", 0, 9, 0, None)])
    store.close()
    assert os.listdir(tmp_path) == [OFFSETS_FILE_NAME]
    assert OffsetStore.open(path).fetch("g", "t", 0) == (9, 0, None)


def test_compaction_failing_at_the_rename_refuses_further_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failed rename or directory fsync either file may survive a crash, so the
    store appends to neither."""
    path = _journal(tmp_path)
    store = OffsetStore.open(path, compact_min_bytes=1, compact_ratio=2)
    store.commit("g", [("t", 0, 1, 0, None)])

    def failing_dir_fsync(temp: str, target: str) -> None:
        os.replace(temp, target)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(fileio, "replace_durably", failing_dir_fsync)
    last = 1
    while store.journal.last_compaction_error is None:
        last += 1
        assert last < 100, "no compaction was triggered"
        # Durable before the compaction it triggers.
        store.commit("g", [("t", 0, last, 0, None)])
    monkeypatch.undo()
    with pytest.raises(StorageError, match=OFFSETS_FILE_NAME):
        store.commit("g", [("t", 0, 1000, 0, None)])
    assert store.fetch("g", "t", 0) == (last, 0, None)
    store.close()
    assert OffsetStore.open(path).fetch("g", "t", 0) == (last, 0, None)


# -- group and offset deletions (DeleteGroups, OffsetDelete), Empty-group records ------


def test_group_and_offset_deletions_are_durable_and_ordered(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None), ("t", 1, 2, 0, None), ("u", 0, 3, 0, None)])
    store.store_group("g", _group(3))
    store.commit("h", [("t", 0, 9, 0, None)])
    store.write_batch([OffsetDeletion("g", (("t", 1), ("nope", 5)))])
    assert store.committed("g") == {("t", 0): (1, 0, None), ("u", 0): (3, 0, None)}
    # In one batch: a commit before the deletion goes with it, one after it survives.
    store.write_batch(
        [
            CommitOp("h", (("t", 1, 4, 0, None),)),
            GroupDeletion("h"),
            CommitOp("h", (("t", 2, 5, 0, None),)),
            GroupDeletion("g"),
        ]
    )
    assert store.committed("h") == {("t", 2): (5, 0, None)}
    assert store.committed("g") == {}
    assert store.groups_metadata() == {}
    store.close()
    again = OffsetStore.open(path)
    assert again.journal.truncated_bytes == 0
    assert again.committed("h") == {("t", 2): (5, 0, None)}
    assert again.groups() == ["h"]
    assert again.groups_metadata() == {}
    again.close()


def test_empty_group_record_keeps_its_generation(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    empty = StoredGroup(protocol_type="consumer", generation=8, protocol_name="", leader_id="",
                        members=())
    store.write_batch([GroupUpdate("g", empty)])
    store.close()
    again = OffsetStore.open(path, compact_min_bytes=1, compact_ratio=1)  # compacts at open
    assert again.groups_metadata() == {"g": empty}
    again.close()


def test_compaction_after_deletions(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path, compact_min_bytes=4096, compact_ratio=4)
    for i in range(150):
        store.commit("g", [("t", 0, i, 0, None), ("t", 1, i, 0, None)])
        store.commit("gone", [("t", 0, i, 0, None)])
    store.write_batch([GroupDeletion("gone"), OffsetDeletion("g", (("t", 1),))])
    for i in range(100):
        store.commit("g", [("t", 0, i, 0, None)])
    assert store.journal.compactions > 0
    store.close()
    again = OffsetStore.open(path)
    assert again.groups() == ["g"]
    assert again.committed("g") == {("t", 0): (99, 0, None)}
    again.close()


def test_deletion_limits_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    size = os.path.getsize(path)
    for bad in (
        OffsetDeletion("g", (("", 0),)),
        OffsetDeletion("g", (("t", -1),)),
        GroupDeletion("x" * (MAX_GROUP_ID_LENGTH + 1)),
    ):
        with pytest.raises(ValueError):
            store.write_batch([CommitOp("g", (("t", 0, 1, 0, None),)), bad])
    assert os.path.getsize(path) == size
    assert store.committed("g") == {}
    store.close()


def test_torn_deletion_record_is_truncated(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    store = OffsetStore.open(path)
    store.commit("g", [("t", 0, 1, 0, None)])
    good_size = os.path.getsize(path)
    store.write_batch([OffsetDeletion("g", (("t", 0),))])
    store.close()
    os.truncate(path, os.path.getsize(path) - 3)
    again = OffsetStore.open(path)
    assert again.journal.truncated_bytes > 0
    assert os.path.getsize(path) == good_size
    assert again.fetch("g", "t", 0) == (1, 0, None)
    again.close()


def test_journal_of_format_02_is_read_and_upgraded(tmp_path: Path) -> None:
    """A BKOFFS02 journal (with group records) keeps everything and is rewritten as the
    current format, so a brokerd without deletion records refuses it outright."""
    path = _journal(tmp_path)
    commit = encode_commit(b"g", [(b"t", 0, Committed(42, 3, "old", 1700000000000))])
    Path(path).write_bytes(b"BKOFFS02" + commit + encode_group(b"g", _group(5)))
    store = OffsetStore.open(path)
    assert Path(path).read_bytes()[:8] == MAGIC == b"BKOFFS04"
    assert store.fetch("g", "t", 0) == (42, 3, "old")
    assert store.groups_metadata() == {"g": _group(5)}
    store.write_batch([GroupDeletion("g")])
    store.close()
    again = OffsetStore.open(path)
    assert again.groups() == [] and again.groups_metadata() == {}
    again.close()
