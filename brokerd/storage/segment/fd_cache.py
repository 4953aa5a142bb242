"""Segment files opened lazily and kept open under a descriptor budget (an LRU).

Why: a partition's active segment and every sealed segment each have a ``.log`` file; with
one descriptor per file held for the process's life, 10,000 partitions and 10,000 client
connections do not fit a 20,000-descriptor limit. Here a file is a :class:`CachedFile`:
its descriptor is opened on first use and may be closed again when more than ``budget``
files are open and it is the least recently used one not in use. A busy partition's
active segment is used on every append, so it stays open; an idle one costs nothing.

Rules the users rely on:

- :meth:`CachedFile.acquire` returns an open descriptor and counts a user;
  :meth:`CachedFile.release` gives it back. A file with users is never closed by
  eviction, so a descriptor stays valid (never recycled for another file) from acquire to
  release: a read pin, a ``sendfile`` in progress, a write.
- A reopened file must be the file first opened (same device and inode): if the name now
  holds another file (compaction renamed its cleaned copy over it) or none (retention
  unlinked it), the reopen fails with :class:`FileGone` instead of reading other bytes.
- :meth:`CachedFile.close` closes at once, or when the last user releases.
- The budget is soft: when every open file has users, one more is opened anyway (users
  are bounded by the read and write threads and the sends in flight). If ``open`` fails
  for want of descriptors (``EMFILE``/``ENFILE``: connections took them), idle files are
  closed and the open is tried once more.

Evicting a file written but not yet synced is allowed: ``fdatasync`` on a descriptor
opened later flushes the same file's pages, and Linux reports a write-back error to the
first ``fsync`` after it on any descriptor of the file (unless someone already saw it).

What it does not do: read or write the files (the segment does), or decide the budget for
the operator (the default is sized from ``RLIMIT_NOFILE``: :func:`default_budget`). No
Twisted. Threads: one lock per cache guards every file's state; ``open`` and ``close``
run under it (they are quick local-disk syscalls).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import threading
from collections import OrderedDict

from brokerd.errors import StorageError
from brokerd.storage.fileio import datasync

__all__ = [
    "DESCRIPTOR_RESERVE",
    "FILE_SHARE",
    "MIN_BUDGET",
    "CachedFile",
    "FdCache",
    "FileGone",
    "default_budget",
    "default_cache",
    "raise_soft_limit",
    "set_default_cache",
]

#: Descriptors left for everything that is not a segment file: listeners, the journal,
#: offsets and transaction logs, thread pools, checkpoints being written, TLS files.
DESCRIPTOR_RESERVE = 256
#: Fewest segment files kept open, whatever the limit (below this an append and the reads
#: of a handful of partitions would evict one another).
MIN_BUDGET = 64
#: The descriptors left after the reserve are split: one part in this many for files.
FILE_SHARE = 3
#: The limit assumed when there is none.
UNLIMITED_AS = 1 << 20
#: On EMFILE, this share of the idle open files is closed before the one retry.
EMFILE_SHED_SHARE = 4

_NO_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)
_GONE = (errno.ENOENT, errno.ELOOP)


class FileGone(StorageError):
    """The file was unlinked or replaced by another since it was first opened."""


def raise_soft_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (what the JVM does
    for Kafka at start); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft


def default_budget(soft_limit: int) -> int:
    """Segment files kept open for a descriptor limit: a third of what the reserve
    leaves, the rest being for client connections (a 20,000 limit keeps 6,581 files open
    beside up to 13,163 connections). Idle connections are what an operator cannot
    control; a reopened file costs an ``open`` and an ``fstat``."""
    if soft_limit == resource.RLIM_INFINITY or soft_limit <= 0:
        soft_limit = UNLIMITED_AS
    return max(MIN_BUDGET, (soft_limit - DESCRIPTOR_RESERVE) // FILE_SHARE)


class CachedFile:
    """One file opened on demand through its :class:`FdCache` (see the module doc)."""

    __slots__ = ("_cache", "_closed", "_fd", "_ident", "_users", "flags", "path")

    def __init__(self, cache: FdCache, path: str, flags: int) -> None:
        self._cache = cache
        self.path = path
        #: Flags of every (re)open; never O_CREAT or O_TRUNC.
        self.flags = flags & ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC)
        self._fd = -1
        self._users = 0
        self._closed = False
        self._ident: tuple[int, int] | None = None

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open now (tests and metrics)."""
        return self._fd >= 0

    @property
    def users(self) -> int:
        return self._users

    def acquire(self) -> int:
        """An open descriptor of the file, valid until the matching :meth:`release`.

        Raises :class:`FileGone` if the file was unlinked or replaced while closed, and
        :class:`StorageError` if it cannot be opened or was closed.
        """
        cache = self._cache
        # The common case, an open file, inline: this runs for every read and append.
        with cache._lock:
            fd = self._fd
            if fd >= 0 and not self._closed:
                self._users += 1
                cache._open.move_to_end(self)
                return fd
        return cache._acquire(self)

    def release(self) -> None:
        cache = self._cache
        with cache._lock:
            if self._users > 1 or (
                self._users == 1 and not self._closed and len(cache._open) <= cache._budget
            ):
                self._users -= 1
                return
        cache._release(self)

    def datasync(self) -> None:
        """fdatasync the file, opening it if it is closed. Raises :class:`OSError` (an
        open that fails included): the caller decides whether it is fatal."""
        try:
            fd = self.acquire()
        except StorageError as exc:
            raise OSError(f"cannot open {self.path} to sync it: {exc}") from exc
        try:
            datasync(fd)
        finally:
            self.release()

    def fd_in_use(self) -> int:
        """The descriptor of a file the caller holds acquired (no extra user counted)."""
        fd = self._fd
        if fd < 0 or self._users <= 0:
            raise StorageError(f"{self.path}: descriptor asked for without holding the file")
        return fd

    def close(self) -> None:
        """Close now, or when the last user releases; later acquires fail."""
        self._cache._close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._fd >= 0 else "idle")
        return f"<CachedFile {self.path} {state} users={self._users}>"


class FdCache:
    """Open descriptors of :class:`CachedFile` objects, at most ``budget`` idle ones."""

    def __init__(self, budget: int) -> None:
        if budget < 1:
            raise ValueError(f"a descriptor budget must be positive, got {budget}")
        self._budget = budget
        self._lock = threading.Lock()
        #: Every file with an open descriptor, least recently used first.
        self._open: OrderedDict[CachedFile, None] = OrderedDict()
        #: Opens since start (first opens and reopens) and descriptors closed to make room.
        self.opens = 0
        self.evictions = 0

    @property
    def budget(self) -> int:
        return self._budget

    def set_budget(self, budget: int) -> None:
        """Change the budget; files over it are closed as they become idle."""
        if budget < 1:
            raise ValueError(f"a descriptor budget must be positive, got {budget}")
        with self._lock:
            self._budget = budget
            self._shed(len(self._open) - budget)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def file(self, path: str, flags: int) -> CachedFile:
        """A file opened on its first :meth:`CachedFile.acquire` (nothing is opened now)."""
        return CachedFile(self, path, flags)

    def adopt(self, path: str, flags: int, fd: int) -> CachedFile:
        """A file the caller just opened (created) as ``fd``; the cache owns ``fd`` now."""
        f = CachedFile(self, path, flags)
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"cannot stat {path}: {exc}") from exc
        with self._lock:
            f._fd = fd
            f._ident = (st.st_dev, st.st_ino)
            self._open[f] = None
            self.opens += 1
            self._shed(len(self._open) - self._budget)
        return f

    # --- the state machine, under the lock ----------------------------------------------

    def _acquire(self, f: CachedFile) -> int:
        with self._lock:
            if f._closed:
                raise StorageError(f"{f.path} is closed")
            if f._fd >= 0:
                f._users += 1
                self._open.move_to_end(f)
                return f._fd
            # Room first, so the budget holds with the new descriptor.
            self._shed(len(self._open) + 1 - self._budget)
            fd = self._open_fd(f)
            f._fd = fd
            f._users += 1
            self._open[f] = None
            self.opens += 1
            return fd

    def _open_fd(self, f: CachedFile) -> int:
        try:
            fd = self._try_open(f)
        except OSError as exc:
            if exc.errno not in _NO_DESCRIPTORS:
                raise self._open_error(f, exc) from exc
            # Connections took the descriptors: give back some idle files and retry once.
            self._shed(max(1, len(self._open) // EMFILE_SHED_SHARE))
            try:
                fd = self._try_open(f)
            except OSError as exc2:
                raise self._open_error(f, exc2) from exc2
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"cannot stat {f.path}: {exc}") from exc
        ident = (st.st_dev, st.st_ino)
        if f._ident is None:
            f._ident = ident
        elif f._ident != ident:
            os.close(fd)
            raise FileGone(f"{f.path} was replaced by another file since it was opened")
        return fd

    @staticmethod
    def _try_open(f: CachedFile) -> int:
        return os.open(f.path, f.flags)

    @staticmethod
    def _open_error(f: CachedFile, exc: OSError) -> StorageError:
        if exc.errno in _GONE and f._ident is not None:
            return FileGone(f"{f.path} is gone since it was opened: {exc}")
        return StorageError(f"cannot open {f.path}: {exc}")

    def _shed(self, count: int) -> None:
        """Close up to ``count`` idle files, least recently used first."""
        if count <= 0:
            return
        victims = []
        for f in self._open:
            if f._users == 0:
                victims.append(f)
                if len(victims) >= count:
                    break
        for f in victims:
            del self._open[f]
            fd, f._fd = f._fd, -1
            self.evictions += 1
            _close_quietly(fd)

    def _release(self, f: CachedFile) -> None:
        with self._lock:
            if f._users <= 0:
                raise StorageError(f"{f.path}: released more often than acquired")
            f._users -= 1
            if f._users:
                return
            if f._closed:
                self._drop(f)
            elif len(self._open) > self._budget:
                # Opened over budget while everything was in use: shrink back now.
                self._shed(len(self._open) - self._budget)

    def _close(self, f: CachedFile) -> None:
        with self._lock:
            if f._closed:
                return
            f._closed = True
            if f._users == 0:
                self._drop(f)

    def _drop(self, f: CachedFile) -> None:
        if f._fd >= 0:
            self._open.pop(f, None)
            fd, f._fd = f._fd, -1
            _close_quietly(fd)


def _close_quietly(fd: int) -> None:
    # close() of a local file fails only for a bad descriptor; the data is in the page
    # cache either way, and sync() reports write-back errors.
    with contextlib.suppress(OSError):
        os.close(fd)


_default: FdCache | None = None
_default_lock = threading.Lock()


def default_cache() -> FdCache:
    """The process's cache, made on first use: the soft descriptor limit raised to the
    hard one, then the budget sized from it (:func:`default_budget`)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = FdCache(default_budget(raise_soft_limit()))
        return _default


def set_default_cache(cache: FdCache | None) -> None:
    """Replace the process's cache (an operator's budget, or tests); None: made again on
    next use. Files already made keep the cache they were made with."""
    global _default
    with _default_lock:
        _default = cache
