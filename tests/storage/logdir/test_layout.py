"""The data directory's names and small file helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.logdir.layout import (
    CHECKPOINT_FILE,
    REGISTRY_FILE,
    is_fresh,
    parse_partition_dir,
    partition_dir_name,
    read_small,
    write_file,
)


def test_a_partition_dir_name_parses_back_at_its_last_dash() -> None:
    for topic, partition in (("t", 0), ("a-b-c", 11), ("x-1", 3)):
        assert parse_partition_dir(partition_dir_name(topic, partition)) == (topic, partition)
    for name in ("nodash", "t-", "t-x", "-0", "bad name-0", "t-1.tmp"):
        assert parse_partition_dir(name) is None


def test_a_directory_is_fresh_until_it_holds_a_registry_checkpoint_or_partition(
    tmp_path: Path,
) -> None:
    (tmp_path / "lost+found").mkdir()
    (tmp_path / ".lock").write_bytes(b"")
    assert is_fresh(str(tmp_path))
    for name in (REGISTRY_FILE, CHECKPOINT_FILE, "orders-0"):
        (tmp_path / name).write_bytes(b"")
        assert not is_fresh(str(tmp_path))
        (tmp_path / name).unlink()


def test_write_file_and_read_small_round_trip_and_wrap_os_errors(tmp_path: Path) -> None:
    write_file(str(tmp_path), "f", b"data")
    assert read_small(str(tmp_path / "f")) == b"data"
    assert read_small(str(tmp_path / "missing")) is None
    with pytest.raises(StorageError, match="cannot write"):
        write_file(str(tmp_path / "missing"), "f", b"x")
    (tmp_path / "dir").mkdir()
    with pytest.raises(StorageError, match="cannot read"):
        read_small(str(tmp_path / "dir"))
