"""Tests for brokerd.storage.stores.producer_ids: producer ids are never handed out twice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.stores.producer_ids import ProducerIdAllocator


def test_producer_ids_are_never_reused_across_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "producer-ids")
    alloc = ProducerIdAllocator(path, block_size=10)
    first = [alloc.next_id() for _ in range(25)]
    assert first == list(range(25))
    alloc.close()

    again = ProducerIdAllocator(path, block_size=10)
    second = [again.next_id() for _ in range(5)]
    assert min(second) > max(first)
    assert len(set(first) | set(second)) == 30
    # Default block size, reopened mid-block: still strictly above everything handed out.
    third = ProducerIdAllocator(path).next_id()
    assert third > max(second)
    assert ProducerIdAllocator(path).next_id() > third
    assert sorted(os.listdir(tmp_path)) == ["producer-ids"]


def test_damaged_producer_id_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "producer-ids"
    ProducerIdAllocator(str(path)).next_id()
    raw = bytearray(path.read_bytes())
    raw[10] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(StorageError):
        ProducerIdAllocator(str(path))


def test_data_directory_path_and_stale_temp_file(tmp_path: Path) -> None:
    (tmp_path / "producer-ids.tmp").write_bytes(b"left by a crash before its rename")
    alloc = ProducerIdAllocator(str(tmp_path), block_size=3)
    assert alloc.path == str(tmp_path / "producer-ids")
    assert [alloc.next_id() for _ in range(4)] == [0, 1, 2, 3]
    assert sorted(os.listdir(tmp_path)) == ["producer-ids"]
    assert ProducerIdAllocator(str(tmp_path)).next_id() == 6


def test_failed_persist_hands_out_no_id_beyond_the_durable_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brokerd.storage import fileio

    path = str(tmp_path / "producer-ids")
    alloc = ProducerIdAllocator(path, block_size=2)
    assert [alloc.next_id(), alloc.next_id()] == [0, 1]

    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio, "write_all", full_disk)
    with pytest.raises(StorageError, match="producer-ids"):
        alloc.next_id()
    monkeypatch.undo()
    # The durable mark still says 2: a restart would resume at 2, and so does this run.
    assert ProducerIdAllocator(path)._limit == 2
    assert alloc.next_id() == 2
    assert ProducerIdAllocator(path).next_id() == 4


def test_a_torn_raise_is_cut_and_a_file_of_the_old_format_is_read(tmp_path: Path) -> None:
    import struct
    import zlib

    path = tmp_path / "producer-ids"
    head = struct.pack(">8sq", b"BKPIDS01", 5000)
    path.write_bytes(head + struct.pack(">I", zlib.crc32(head)))
    alloc = ProducerIdAllocator(str(path), block_size=10)
    assert alloc.next_id() == 5000
    alloc.close()
    assert path.read_bytes().startswith(b"BKPIDJ01")
    # A raise torn mid-write (shorter than a record) was never handed out from.
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x08\x01")
    assert ProducerIdAllocator(str(path)).next_id() == 5010


def test_a_failed_sync_takes_it_offline_until_it_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brokerd.storage import fileio

    clock = [0.0]
    alloc = ProducerIdAllocator(str(tmp_path), block_size=2, clock=lambda: clock[0])
    assert [alloc.next_id(), alloc.next_id()] == [0, 1]

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(fileio, "datasync", eio)
    with pytest.raises(StorageError):
        alloc.next_id()
    monkeypatch.undo()
    assert alloc.journal.offline_reason is not None
    with pytest.raises(StorageError, match="offline"):
        alloc.next_id()
    assert not alloc.retry_reopen()  # not due yet
    clock[0] += 3600
    assert alloc.retry_reopen()
    assert alloc.journal.offline_reason is None
    handed = alloc.next_id()
    assert handed >= 2
    assert ProducerIdAllocator(str(tmp_path)).next_id() > handed
