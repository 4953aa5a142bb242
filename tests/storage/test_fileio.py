"""The durable-file primitives: whole writes, whole reads that refuse symlinks, atomic
replacement that leaves no temporary file, and the cut back of a failed append."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from brokerd.storage.fileio import (
    FILE_MODE,
    TEMP_SUFFIX,
    atomic_write,
    cut_back,
    pwrite_all,
    read_at_most,
    read_file,
    removed_on_error,
    rewrite_for_append,
    write_all,
    write_temp,
)


def test_read_file_reads_all_is_none_when_absent_and_refuses_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "data"
    target.write_bytes(b"x" * (3 << 20))
    assert read_file(str(target)) == b"x" * (3 << 20)
    assert read_file(str(tmp_path / "missing")) is None
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError) as caught:
        read_file(str(tmp_path / "link"))
    assert caught.value.errno == errno.ELOOP


def test_read_at_most_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_bytes(b"12345")
    assert read_at_most(str(path), 5) == b"12345"
    with pytest.raises(OSError) as caught:
        read_at_most(str(path), 4)
    assert caught.value.errno == errno.EFBIG


def test_atomic_write_replaces_the_file_private_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "state"
    (tmp_path / ("state" + TEMP_SUFFIX)).write_bytes(b"stale from a crash")
    path.write_bytes(b"old")
    atomic_write(str(path), b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == FILE_MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_write_temp_refuses_to_write_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    # A stale temporary that is a symlink is removed, not written through.
    (tmp_path / ("f" + TEMP_SUFFIX)).symlink_to(victim)
    temp = write_temp(str(tmp_path / "f"), b"data")
    assert Path(temp).read_bytes() == b"data" and not Path(temp).is_symlink()
    assert victim.read_bytes() == b"keep"


def test_write_all_and_pwrite_all_write_every_byte(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        write_all(fd, memoryview(b"hello world"))
        pwrite_all(fd, bytearray(b"WORLD"), 6)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"hello WORLD"


def test_removed_on_error_removes_the_file_and_lets_the_error_through(tmp_path: Path) -> None:
    path = tmp_path / "half"
    with pytest.raises(RuntimeError), removed_on_error(str(path)):
        path.write_bytes(b"half")
        raise RuntimeError("boom")
    assert not path.exists()
    with removed_on_error(str(path)):
        path.write_bytes(b"whole")
    assert path.read_bytes() == b"whole"


def test_cut_back_truncates_to_the_intact_size(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    path.write_bytes(b"intact" + b"torn")
    fd = os.open(path, os.O_RDWR)
    try:
        assert cut_back(fd, 6)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"intact"
    fd = os.open(path, os.O_RDONLY)
    try:
        assert not cut_back(fd, 2)  # not writable: the size stays wrong
    finally:
        os.close(fd)


def test_rewrite_for_append_returns_an_appending_descriptor_on_the_new_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal"
    path.write_bytes(b"old old old")
    fd = rewrite_for_append(str(path), b"compact")
    try:
        write_all(fd, b"+next")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"compact+next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal"]
