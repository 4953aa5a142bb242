"""The journal engine on its own, with the smallest possible store: a view that keeps
the latest value per one-byte key. What the stores built on it add is tested with them
(tests/storage/stores/test_offsets.py, tests/storage/stores/test_txn_log.py,
tests/storage/stores/test_producer_ids.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage import fileio
from brokerd.storage.journal.engine import Journal, JournalKind
from brokerd.storage.journal.records import frame, iter_frames

KIND = JournalKind(name="test store", noun="test journal", file_name="test.journal",
                   magic=b"TESTJ002", old_magics=(b"TESTJ001",))


class Latest:
    """key byte -> value bytes; the last record of a key wins."""

    def __init__(self) -> None:
        self.values: dict[int, bytes] = {}
        self.magics: list[bytes] = []

    def replay(self, data: bytes, pos: int, magic: bytes) -> int:
        self.magics.append(magic)
        for body, _start, end in iter_frames(data, pos, 1 << 10):
            self.values[body[0]] = body[1:]
            pos = end
        return pos

    def live_bytes(self) -> int:
        return sum(8 + 1 + len(v) for v in self.values.values())

    def snapshot(self) -> bytes:
        return b"".join(record(k, v) for k, v in sorted(self.values.items()))


def record(key: int, value: bytes) -> bytes:
    return frame(bytes([key]) + value, 1 << 10, "test")


def open_journal(path: Path, **kwargs: int) -> Journal[Latest]:
    limits = {"compact_min_bytes": 256, "compact_ratio": 2, **kwargs}
    return Journal.open(str(path), KIND, Latest(), clock=lambda: 0.0, **limits)


def put(journal: Journal[Latest], key: int, value: bytes) -> None:
    journal.append(record(key, value))
    journal.state.values[key] = value
    journal.compact_if_due()


def test_appends_replay_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    journal = open_journal(tmp_path)
    assert journal.path == str(tmp_path / "test.journal")
    put(journal, 1, b"one")
    put(journal, 2, b"two")
    journal.close()
    whole = (tmp_path / "test.journal").stat().st_size
    with open(tmp_path / "test.journal", "ab") as f:
        f.write(record(3, b"three")[:-2])  # a write that never completed
    again = open_journal(tmp_path)
    assert again.state.values == {1: b"one", 2: b"two"}
    assert again.truncated_bytes == len(record(3, b"three")) - 2
    assert again.size == whole == (tmp_path / "test.journal").stat().st_size


def test_compaction_keeps_only_the_live_records(tmp_path: Path) -> None:
    journal = open_journal(tmp_path)
    for i in range(100):
        put(journal, 1, b"%03d" % i)
    assert journal.compactions > 0
    assert journal.size < 256
    journal.close()
    assert open_journal(tmp_path).state.values == {1: b"099"}


def test_an_old_header_is_read_then_rewritten_and_a_foreign_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "test.journal"
    path.write_bytes(b"TESTJ001" + record(7, b"old"))
    journal = open_journal(tmp_path)
    assert journal.state.magics == [b"TESTJ001"]
    assert journal.state.values == {7: b"old"}
    assert path.read_bytes().startswith(b"TESTJ002")
    journal.close()
    path.write_bytes(b"SOMETHING ELSE")
    with pytest.raises(StorageError, match="not a brokerd test journal"):
        open_journal(tmp_path)
    path.write_bytes(b"TESTJ")  # torn while being created
    assert open_journal(tmp_path).truncated_bytes == 5


def test_a_failed_sync_takes_it_offline_and_a_reopen_swaps_the_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [0.0]
    journal = Journal.open(str(tmp_path), KIND, Latest(), clock=lambda: clock[0],
                           compact_min_bytes=256, compact_ratio=2)
    put(journal, 1, b"kept")

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(fileio, "datasync", eio)
    with pytest.raises(StorageError):
        put(journal, 2, b"unsure")
    monkeypatch.undo()
    assert journal.offline_reason is not None
    with pytest.raises(StorageError, match="offline"):
        put(journal, 3, b"refused")
    adopted: list[Latest] = []
    clock[0] += 3600
    assert journal.reopen_if_due(None, Latest, adopted.append)
    assert journal.offline_reason is None
    (view,) = adopted
    assert journal.state is view
    # The record whose sync failed was cut back (never acknowledged); the reopen
    # replayed what the file holds.
    assert view.values == {1: b"kept"}
    put(journal, 3, b"after")
    journal.close()
    assert open_journal(tmp_path).state.values == {1: b"kept", 3: b"after"}
