"""The descriptor budget (brokerd/storage/segment/fd_cache.py) on real files: lazy opens, LRU
eviction of idle files only, deferred close, the inode check on reopen, and EMFILE."""

from __future__ import annotations

import gc
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.segment.fd_cache import (
    DESCRIPTOR_RESERVE,
    MIN_BUDGET,
    FdCache,
    FileGone,
    default_budget,
)

FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC


def _files(tmp_path: Path, n: int) -> list[str]:
    paths = []
    for i in range(n):
        path = tmp_path / f"f{i}"
        path.write_bytes(f"file {i}".encode())
        paths.append(str(path))
    return paths


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_nothing_is_opened_until_used_and_reads_see_the_file(tmp_path: Path) -> None:
    cache = FdCache(4)
    before = _open_fds()
    files = [cache.file(p, FLAGS) for p in _files(tmp_path, 10)]
    assert _open_fds() == before
    assert cache.open_count == 0 and not files[0].is_open
    fd = files[3].acquire()
    try:
        assert os.pread(fd, 100, 0) == b"file 3"
    finally:
        files[3].release()
    assert files[3].is_open and cache.open_count == 1 and cache.opens == 1
    assert _open_fds() == before + 1


def test_the_budget_holds_and_the_least_recently_used_idle_file_goes(tmp_path: Path) -> None:
    cache = FdCache(3)
    files = [cache.file(p, FLAGS) for p in _files(tmp_path, 5)]
    before = _open_fds()
    for f in files[:3]:
        f.acquire()
        f.release()
    # Using the first again makes the second the least recently used.
    files[0].acquire()
    files[0].release()
    files[3].acquire()
    files[3].release()
    assert [f.is_open for f in files] == [True, False, True, True, False]
    assert cache.open_count == 3 and cache.evictions == 1
    assert _open_fds() == before + 3
    # A reopened file reads the same bytes.
    fd = files[1].acquire()
    assert os.pread(fd, 100, 0) == b"file 1"
    files[1].release()
    assert cache.opens == 5


def test_a_file_in_use_is_never_closed_and_the_budget_is_soft(tmp_path: Path) -> None:
    cache = FdCache(2)
    files = [cache.file(p, FLAGS) for p in _files(tmp_path, 4)]
    held = [f.acquire() for f in files[:3]]  # over budget: all in use
    assert cache.open_count == 3
    for i, fd in enumerate(held):
        assert os.pread(fd, 100, 0) == f"file {i}".encode()
        assert files[i].fd_in_use() == fd
    # Opening a fourth evicts nothing in use.
    files[3].acquire()
    assert all(f.is_open for f in files)
    for f in files:
        f.release()
    # The last release shrinks back to the budget.
    assert cache.open_count == 2
    assert [f.is_open for f in files] == [False, False, True, True]


def test_close_waits_for_the_last_user_and_later_acquires_fail(tmp_path: Path) -> None:
    cache = FdCache(8)
    (path,) = _files(tmp_path, 1)
    f = cache.file(path, FLAGS)
    fd = f.acquire()
    f.close()
    assert os.pread(fd, 100, 0) == b"file 0"  # still valid for the holder
    f.release()
    assert not f.is_open and cache.open_count == 0
    with pytest.raises(OSError):
        os.fstat(fd)
    with pytest.raises(StorageError, match="closed"):
        f.acquire()
    f.close()  # idempotent


def test_release_without_acquire_is_an_error(tmp_path: Path) -> None:
    cache = FdCache(8)
    f = cache.file(_files(tmp_path, 1)[0], FLAGS)
    with pytest.raises(StorageError, match="released more often"):
        f.release()
    with pytest.raises(StorageError, match="without holding"):
        f.fd_in_use()


def test_an_unlinked_file_is_gone_once_its_descriptor_was_closed(tmp_path: Path) -> None:
    cache = FdCache(1)
    a, b = (cache.file(p, FLAGS) for p in _files(tmp_path, 2))
    a.acquire()
    a.release()
    b.acquire()  # evicts a
    b.release()
    os.unlink(a.path)
    with pytest.raises(FileGone, match="gone"):
        a.acquire()
    assert a.users == 0


def test_a_file_replaced_under_its_name_is_not_read(tmp_path: Path) -> None:
    """Compaction renames its cleaned copy over a segment's name: a reopen by name must not
    read the new file's bytes as the old one's."""
    cache = FdCache(1)
    a, b = (cache.file(p, FLAGS) for p in _files(tmp_path, 2))
    a.acquire()
    a.release()
    b.acquire()
    b.release()
    (tmp_path / "new").write_bytes(b"other bytes")
    os.replace(tmp_path / "new", a.path)
    with pytest.raises(FileGone, match="replaced"):
        a.acquire()
    assert a.users == 0 and not a.is_open


def test_adopt_takes_a_just_created_descriptor(tmp_path: Path) -> None:
    cache = FdCache(1)
    (old,) = _files(tmp_path, 1)
    first = cache.file(old, FLAGS)
    first.acquire()
    first.release()
    path = str(tmp_path / "created")
    fd = os.open(path, FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
    adopted = cache.adopt(path, FLAGS | os.O_CREAT | os.O_EXCL, fd)
    assert adopted.is_open and not first.is_open  # the budget made room
    assert adopted.flags & (os.O_CREAT | os.O_EXCL) == 0
    assert adopted.acquire() == fd
    adopted.release()


def test_set_budget_sheds_idle_files(tmp_path: Path) -> None:
    cache = FdCache(10)
    files = [cache.file(p, FLAGS) for p in _files(tmp_path, 6)]
    for f in files:
        f.acquire()
        f.release()
    files[5].acquire()
    cache.set_budget(2)
    assert cache.open_count == 2 and files[5].is_open and files[4].is_open
    files[5].release()
    with pytest.raises(ValueError):
        cache.set_budget(0)
    with pytest.raises(ValueError):
        FdCache(0)


@pytest.fixture
def low_nofile() -> Iterator[int]:
    """The soft descriptor limit lowered to what is open now plus a few (restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Descriptors of earlier tests' unreachable sockets and files would be closed by a
    # collection during the test, leaving more room than counted: collect them first.
    gc.collect()
    # The limit caps descriptor numbers, not their count: with holes in the table (and
    # descriptors above them) a limit of count + 6 would leave more than 6 free numbers.
    in_use = {int(name) for name in os.listdir("/proc/self/fd")}
    room = 0
    while room - sum(1 for fd in in_use if fd < room) < 6:
        room += 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (room, hard))
    try:
        yield room
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_emfile_closes_idle_files_and_retries(tmp_path: Path, low_nofile: int) -> None:
    """Connections took the descriptors the budget counted on: the open still succeeds
    by giving back idle files."""
    cache = FdCache(100)
    files = [cache.file(p, FLAGS) for p in _files(tmp_path, 12)]
    opened = 0
    for f in files:
        f.acquire()
        f.release()
        opened += 1
    # More files than descriptors left were opened, each after shedding idle ones.
    assert opened == 12
    assert cache.open_count < 12 and cache.evictions > 0
    for f in files:
        f.close()
    assert cache.open_count == 0


def test_emfile_with_every_file_in_use_is_a_storage_error(
    tmp_path: Path, low_nofile: int
) -> None:
    cache = FdCache(100)
    files = [cache.file(p, FLAGS) for p in _files(tmp_path, 12)]
    held = []
    with pytest.raises(StorageError, match="cannot open"):
        for f in files:
            f.acquire()
            held.append(f)
    for f in held:
        f.release()
        f.close()
    assert cache.open_count == 0


def test_default_budget_leaves_most_descriptors_to_connections() -> None:
    budget = default_budget(20_000)
    assert budget == (20_000 - DESCRIPTOR_RESERVE) // 3
    # 10,000 partitions' files (capped at the budget) and 10,000 connections fit.
    assert budget + 10_000 + DESCRIPTOR_RESERVE <= 20_000
    assert default_budget(100) == MIN_BUDGET
    assert default_budget(resource.RLIM_INFINITY) > 100_000
