"""Kafka's offset checkpoint format and the log-start-offset checkpoint file."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.checkpoints import (
    LOG_START_CHECKPOINT_FILE,
    encode_checkpoint,
    parse_checkpoint,
    read_start_offsets,
    write_start_offsets,
)


def test_checkpoint_format_round_trip() -> None:
    data = encode_checkpoint([("b", 1, 9), ("a-x", 0, 100)])
    assert data == b"0\n2\na-x 0 100\nb 1 9\n"
    assert parse_checkpoint(data) == {("a-x", 0): 100, ("b", 1): 9}
    for bad in (b"", b"1\n0\n", b"0\n1\n", b"0\n1\n../x 0 1\n", b"0\n1\na 0 -1\n"):
        with pytest.raises(ValueError):
            parse_checkpoint(bad)


def test_the_start_offsets_file_round_trips_and_is_empty_when_absent(tmp_path: Path) -> None:
    assert read_start_offsets(str(tmp_path)) == {}
    write_start_offsets(str(tmp_path), [("t", 0, 5), ("t", 1, 7)])
    assert read_start_offsets(str(tmp_path)) == {("t", 0): 5, ("t", 1): 7}
    write_start_offsets(str(tmp_path), [("u", 2, 3)])
    assert read_start_offsets(str(tmp_path)) == {("u", 2): 3}


def test_a_corrupt_start_offsets_file_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / LOG_START_CHECKPOINT_FILE).write_bytes(b"0\n2\nt 0 5\n")
    with pytest.raises(StorageError, match="would come back"):
        read_start_offsets(str(tmp_path))


def test_an_unwritable_directory_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot write"):
        write_start_offsets(str(tmp_path / "missing"), [("t", 0, 1)])
