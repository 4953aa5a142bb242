# -*- test-case-name: tests.storage.journal.test_engine -*-
"""One engine for every journal file: open, replay, append and sync, compact, reopen.

A journal is a magic header followed by framed records (:mod:`.records`). The engine
knows nothing of what the records mean: its :class:`JournalState` (the store's in-memory
view) replays them, says how many bytes the live records would take, and writes those
records out for a compaction. What the engine does, the same way for every store:

* **open**: create the file (magic, fsync, directory fsync), or replay it. A file shorter
  than its magic that is a prefix of it was torn while being created and starts again;
  any other header is refused. Everything after the last whole, intact record is a write
  that never completed (it was never acknowledged): it is cut off for good, so new
  records never land behind garbage. A file with an older magic is rewritten in the
  current format at once (its store still reads the old records), so an older brokerd
  refuses the file instead of truncating record kinds it does not know as a torn tail.
* **append**: one write and one fdatasync per call; a failure that the file could be cut
  back from fails only that call, a failed sync takes the journal offline
  (:mod:`brokerd.storage.journal.faults`) until :meth:`Journal.reopen_if_due` has replayed
  the file from disk.
* **compaction**: once the file is :attr:`compact_ratio` times what its live records
  would take (and at least ``compact_min_bytes``), it is rewritten as those records
  (temporary file, fsync, rename, directory fsync). A failure before the rename keeps the
  old file in use and waits for the file to grow by the ratio again; a failed rename
  takes the journal offline, since which file a crash would leave is then unknown.

What it does not do: locking (its store serialises writers and guards its own view), any
record kind, or Twisted. Every call blocks on the disk; stores on the reactor run them in
a worker thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import attrs

from brokerd.errors import StorageError
from brokerd.storage.fileio import (
    FILE_MODE,
    TEMP_SUFFIX,
    ReplaceFailed,
    fsync_dir,
    rewrite_for_append,
    write_all,
)
from brokerd.storage.journal.faults import StoreFaults, append_records, reopen_if_due, settle

__all__ = ["Journal", "JournalKind", "JournalState", "JournalStore"]


@attrs.frozen
class JournalKind:
    """What distinguishes one store's journal file.

    :param name: what the store is called in log lines and ``/readyz``.
    :param noun: what the file is called in errors ("offsets journal").
    :param file_name: the file's name when a store is opened with its data directory.
    :param magic: the current header.
    :param old_magics: headers of older formats still read (same length as ``magic``).
    :param stale_suffixes: temporary files left by older brokerd versions' compactions,
        removed on open like the current one.
    """

    name: str
    noun: str
    file_name: str
    magic: bytes
    old_magics: tuple[bytes, ...] = ()
    stale_suffixes: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if any(len(m) != len(self.magic) for m in self.old_magics):
            raise ValueError("every magic of a journal has the same length")


class JournalState(Protocol):
    """A store's in-memory view of its journal, as the engine drives it."""

    def replay(self, data: bytes, pos: int, magic: bytes) -> int:
        """Apply the records of ``data`` from ``pos`` (the file's header was ``magic``)
        and return where the last whole, intact record ends."""
        ...

    def live_bytes(self) -> int:
        """Bytes the live records would take in a compacted file (header excluded)."""
        ...

    def snapshot(self) -> bytes:
        """The live records, as a compaction writes them (header excluded)."""
        ...


S = TypeVar("S", bound=JournalState)


class JournalStore(Protocol):
    """A durable store on the engine, as the broker's store recovery and the metrics see
    it: its journal (name, faults, offline reason) and how it reopens from disk."""

    @property
    def journal(self) -> Journal[Any]: ...

    def retry_reopen(self, now: float | None = None) -> bool:
        """Reopen from disk if offline and its retry is due; True if back online."""
        ...


class Journal(Generic[S]):
    """One open journal file and the view it replays into. Create with :meth:`open`.

    Not thread-safe: its store holds a lock around every call that writes.
    """

    def __init__(
        self,
        path: str,
        fd: int,
        kind: JournalKind,
        state: S,
        *,
        clock: Callable[[], float],
        compact_min_bytes: int,
        compact_ratio: int,
    ) -> None:
        # Use open(); the constructor only stores what open() prepared.
        self.path = path
        self.kind = kind
        #: The store's view; replaced by a reopen.
        self.state = state
        self._fd = fd
        self._clock = clock
        self._compact_min_bytes = compact_min_bytes
        self._compact_ratio = compact_ratio
        self._size = 0
        self._compact_at = 0
        self._old_format = False
        self._closed = False
        self.faults = StoreFaults(kind.name, path, clock)
        #: Bytes of torn or corrupt tail dropped by the last open (0 for a clean file).
        self.truncated_bytes = 0
        #: Compactions since open (including one at open), reopens included.
        self.compactions = 0
        #: The last compaction failure, if any (not fatal: the old file stays in use).
        self.last_compaction_error: BaseException | None = None

    @classmethod
    def open(
        cls,
        path: str,
        kind: JournalKind,
        state: S,
        *,
        clock: Callable[[], float],
        compact_min_bytes: int,
        compact_ratio: int,
    ) -> Journal[S]:
        """Open (creating if needed) the journal at ``path`` (or ``kind.file_name`` in
        the directory ``path``) and replay it into ``state``.

        :raises StorageError: the file is not this kind of journal, or I/O failed.
        """
        if compact_min_bytes < 1 or compact_ratio < 1:
            raise ValueError("compaction needs a positive size and ratio")
        if os.path.isdir(path):
            path = os.path.join(path, kind.file_name)
        path = os.path.abspath(path)
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            # A temporary file left by a compaction that crashed before its rename: the
            # journal it would have replaced is still complete, so it is just dropped.
            for suffix in (TEMP_SUFFIX, *kind.stale_suffixes):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + suffix)
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
                created = True
            except FileExistsError:
                fd = os.open(path, flags)
                created = False
        except OSError as exc:
            raise StorageError(f"cannot open {kind.noun} {path}: {exc}") from exc
        journal = cls(
            path, fd, kind, state, clock=clock, compact_min_bytes=compact_min_bytes,
            compact_ratio=compact_ratio,
        )
        try:
            if created:
                write_all(fd, kind.magic)
                os.fsync(fd)
                fsync_dir(os.path.dirname(path))
                journal._size = len(kind.magic)
            else:
                journal._replay()
            journal._compact_at = journal._next_compact_at(journal._live_file_bytes())
            if journal._size >= journal._compact_at or journal._old_format:
                journal._compact(force=journal._old_format)
        except ReplaceFailed as exc:
            os.close(fd)
            raise StorageError(f"cannot compact {kind.noun} {path}: {exc}") from exc
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"cannot recover {kind.noun} {path}: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        return journal

    def _replay(self) -> None:
        magic = self.kind.magic
        chunks: list[bytes] = []
        os.lseek(self._fd, 0, os.SEEK_SET)
        while chunk := os.read(self._fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        if len(data) < len(magic):
            if not any(m.startswith(data) for m in (magic, *self.kind.old_magics)):
                raise StorageError(f"{self.path} is not a brokerd {self.kind.noun}")
            # Torn while being created: nothing was ever acknowledged from it.
            os.ftruncate(self._fd, 0)
            write_all(self._fd, magic)
            os.fsync(self._fd)
            self.truncated_bytes = len(data)
            self._size = len(magic)
            return
        header = data[: len(magic)]
        if header != magic and header not in self.kind.old_magics:
            raise StorageError(f"{self.path} is not a brokerd {self.kind.noun}")
        self._old_format = header != magic
        pos = self.state.replay(data, len(magic), header)
        if pos != len(data):
            self.truncated_bytes = len(data) - pos
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    # -- writing ------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes of the file that replay (header included)."""
        return self._size

    @property
    def name(self) -> str:
        """What the store is called in log lines, ``/readyz`` and the metrics."""
        return self.kind.name

    @property
    def offline_reason(self) -> str | None:
        """Why the journal refuses writes until it is reopened, or None."""
        return self.faults.offline_reason

    @property
    def write_errors(self) -> int:
        """Writes that failed or were refused since open (reopens keep counting)."""
        return self.faults.errors

    def append(self, data: bytes) -> None:
        """Write and sync whole framed records at the end of the file.

        :raises StorageError: nothing was stored; the next append tries again. After a
            failed sync it is a :class:`~brokerd.storage.journal.faults.StoreOffline`: the
            journal refuses appends until :meth:`reopen_if_due` has reopened it.
        """
        self.faults.check_writable()
        append_records(self._fd, data, self._size, self.faults)
        self._size += len(data)

    def compact_if_due(self) -> None:
        """Compact if the file has outgrown its live records by the ratio; called by the
        store after it applied an append to its view. Never raises for a compaction that
        failed: the appended records are durable in either file."""
        if self._size < self._compact_at:
            return
        try:
            self._compact()
        except ReplaceFailed as exc:
            self.faults.lost_trust(f"compaction's rename failed: {exc}")

    def close(self) -> None:
        """Close the file; every append that returned is already durable."""
        self.faults.close()
        if not self._closed:
            self._closed = True
            os.close(self._fd)

    # -- reopening ----------------------------------------------------------------------

    def reopen_if_due(
        self, now: float | None, fresh_state: Callable[[], S], adopt: Callable[[S], None]
    ) -> bool:
        """Reopen an offline journal from disk if its retry is due: replay the file into
        ``fresh_state()``, cut a torn tail, sync file and directory, then hand the new
        view to ``adopt`` (the store swaps it in under its own lock). True if the
        journal is back online."""
        return reopen_if_due(
            self.faults, now, lambda: self._open_again(fresh_state()),
            lambda fresh: self._adopt(fresh, adopt),
        )

    def _open_again(self, state: S) -> Journal[S]:
        fresh = Journal.open(
            self.path, self.kind, state, clock=self._clock,
            compact_min_bytes=self._compact_min_bytes, compact_ratio=self._compact_ratio,
        )
        try:
            settle(fresh._fd, self.path)
        except OSError:
            fresh.close()
            raise
        return fresh

    def _adopt(self, fresh: Journal[S], adopt: Callable[[S], None]) -> None:
        old_fd = self._fd
        adopt(fresh.state)
        self.state = fresh.state
        self._fd = fresh._fd
        self._size = fresh._size
        self._compact_at = fresh._compact_at
        self._old_format = False
        self.truncated_bytes = fresh.truncated_bytes
        self.compactions += fresh.compactions
        with contextlib.suppress(OSError):
            os.close(old_fd)

    # -- compaction ---------------------------------------------------------------------

    def _live_file_bytes(self) -> int:
        return len(self.kind.magic) + self.state.live_bytes()

    def _next_compact_at(self, live_bytes: int) -> int:
        return max(self._compact_min_bytes, self._compact_ratio * live_bytes)

    def _compact(self, *, force: bool = False) -> None:
        """Rewrite the file as its live records if it is mostly dead ones (``force``:
        regardless, to replace an old header). A failure before the rename is only
        remembered; a failure at the rename raises :class:`ReplaceFailed`."""
        live = self._live_file_bytes()
        if not force and self._size < self._next_compact_at(live):
            # The live set itself grew: check again once the file grows by the ratio.
            self._compact_at = self._next_compact_at(live)
            return
        data = self.kind.magic + self.state.snapshot()
        try:
            new_fd = rewrite_for_append(self.path, data)
        except ReplaceFailed as exc:
            self.last_compaction_error = exc.cause
            raise
        except OSError as exc:
            self.last_compaction_error = exc
            # Do not retry on every append: wait until the file grows by the ratio again.
            self._compact_at = self._size * self._compact_ratio
            if force and self._old_format:
                # Appending current records behind an old header would let an older
                # brokerd truncate them (and everything after them) as a torn tail.
                raise
            return
        os.close(self._fd)
        self._fd = new_fd
        self._size = len(data)
        self._compact_at = self._next_compact_at(len(data))
        self.compactions += 1
        self.last_compaction_error = None
        self._old_format = False
