# -*- test-case-name: tests.storage.segment.test_txn_index -*-
"""The aborted-transaction index of one segment: ``<20-digit base offset>.txnindex``.

One 34-byte entry per transaction aborted by a marker in the segment, in marker order,
big-endian: ``int16 version = 0, int64 producer_id, int64 first_offset, int64
last_offset, int64 last_stable_offset`` (``last_offset`` is the ABORT marker's offset).
A read_committed fetch collects the entries that overlap what it returns, so the client
can drop those producers' records (:meth:`TxnIndex.collect`).

The file exists only for a segment that ever held transactional batches: the log creates
it (empty) with the segment's first transactional batch, so that its presence tells the
start-up replay where transactions may begin (``producer_state.load_table``). Entries
are kept in memory (lookups use them) and appended to the file at once; the file is
fdatasynced with the segment's log file. On open it is read back with bounds checks:
entries must be sane and in order, with markers inside the segment's recovered range; the
first entry that is not (a torn tail, or a marker the crash cut off the log) and all after
it are dropped, and the file is cut there.

The file's descriptor is a :class:`~brokerd.storage.segment.fd_cache.CachedFile` of the
segment's cache: held only while an entry is written or synced, and closed when the
process's descriptor budget needs room.

What it does not do: decide what is aborted (``log/ongoing_txns.py``) or read the log. No
Twisted. Threads: one writer appends while readers collect; readers bound their walk by
the length of the list appended last, so they never see half an entry.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct

import attrs

from brokerd.errors import StorageError
from brokerd.storage.fileio import FILE_MODE, datasync, pwrite_all
from brokerd.storage.segment.fd_cache import CachedFile, FdCache, default_cache

__all__ = ["MAX_TXN_INDEX_BYTES", "TXN_ENTRY_SIZE", "AbortedEntry", "TxnIndex"]

log = logging.getLogger("brokerd.storage")

_ENTRY = struct.Struct(">hqqqq")
TXN_ENTRY_SIZE = _ENTRY.size
_VERSION = 0
#: A larger file is damage: a segment holds at most one marker per 70 or so bytes of log,
#: and segments are at most 2 GiB.
MAX_TXN_INDEX_BYTES = 1024 * 1024 * 1024
_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC


@attrs.frozen
class AbortedEntry:
    """An aborted transaction on one partition: its producer, the offset of its first
    record, the offset of its ABORT marker (``last_offset``) and the partition's LSO just
    after the marker was appended."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndex:
    """A segment's aborted transactions, in memory and in its file."""

    def __init__(self, path: str, cache: FdCache | None = None) -> None:
        self.path = path
        self.entries: list[AbortedEntry] = []
        #: ``last_offset`` of each entry (bisected by :meth:`collect`); appended after
        #: ``entries``.
        self._lasts: list[int] = []
        self._cache = cache if cache is not None else default_cache()
        self._file: CachedFile | None = None
        #: The file exists (the segment holds or held transactional batches).
        self.exists = False
        self._dirty = False

    def __len__(self) -> int:
        return len(self._lasts)

    # --- opening ----------------------------------------------------------------------

    def load(self, base_offset: int, end_offset: int) -> int:
        """Read the file back if it exists, keeping the sane entries whose marker lies in
        ``[base_offset, end_offset)``; cut the file after them. Returns how many entries
        were dropped. Raises :class:`StorageError` if the file cannot be read or cut."""
        self.close()
        self.entries, self._lasts = [], []
        try:
            fd = os.open(self.path, _FLAGS)
        except FileNotFoundError:
            self.exists = False
            return 0
        except OSError as exc:
            raise StorageError(f"cannot open {self.path}: {exc}") from exc
        self._file = self._cache.adopt(self.path, _FLAGS, fd)
        self.exists = True
        # The cache may have closed ``fd`` already to make room: use what acquire gives.
        fd = self._file.acquire()
        try:
            return self._load(fd, base_offset, end_offset)
        finally:
            self._file.release()

    def _load(self, fd: int, base_offset: int, end_offset: int) -> int:
        try:
            size = os.fstat(fd).st_size
            if size > MAX_TXN_INDEX_BYTES:
                log.error("%s: %d bytes, treating it as damage", self.path, size)
                size = 0
            data = os.pread(fd, size, 0) if size else b""
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        count = len(data) // TXN_ENTRY_SIZE
        last = base_offset - 1
        for i in range(count):
            version, pid, first, marker, lso = _ENTRY.unpack_from(data, i * TXN_ENTRY_SIZE)
            if (
                version != _VERSION
                or pid < 0
                or not 0 <= first <= marker
                or marker <= last
                or marker >= end_offset
            ):
                break
            self.entries.append(AbortedEntry(pid, first, marker, lso))
            self._lasts.append(marker)
            last = marker
        keep = len(self._lasts) * TXN_ENTRY_SIZE
        dropped = count - len(self._lasts)
        if keep != os.fstat(fd).st_size:
            if dropped:
                log.warning("%s: dropped %d entries past the log's end", self.path, dropped)
            try:
                os.ftruncate(fd, keep)
                datasync(fd)
            except OSError as exc:
                raise StorageError(f"cannot truncate {self.path}: {exc}") from exc
        return dropped

    def create(self) -> None:
        """Create the (empty) file; the caller fsyncs the directory. Raises
        :class:`StorageError`."""
        if self.exists:
            return
        try:
            fd = os.open(self.path, _FLAGS | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise StorageError(f"cannot create {self.path}: {exc}") from exc
        self._file = self._cache.adopt(self.path, _FLAGS, fd)
        self.exists = True

    # --- writing (one writer) -------------------------------------------------------------

    def append(self, entry: AbortedEntry) -> None:
        """Add an entry (its marker after every entry's) and write it to the file."""
        if self._lasts and entry.last_offset <= self._lasts[-1]:
            raise ValueError(f"{self.path}: entries must follow marker order")
        self.create()
        assert self._file is not None
        data = _ENTRY.pack(
            _VERSION,
            entry.producer_id,
            entry.first_offset,
            entry.last_offset,
            entry.last_stable_offset,
        )
        fd = self._file.acquire()
        try:
            pwrite_all(fd, data, len(self._lasts) * TXN_ENTRY_SIZE)
        except OSError as exc:
            raise StorageError(f"write to {self.path} failed: {exc}") from exc
        finally:
            self._file.release()
        self.entries.append(entry)
        self._lasts.append(entry.last_offset)
        self._dirty = True

    def has_marker(self, marker_offset: int) -> bool:
        i = bisect.bisect_left(self._lasts, marker_offset)
        return i < len(self._lasts) and self._lasts[i] == marker_offset

    def sync(self) -> None:
        """fdatasync the file if entries were written since the last sync. OSError
        propagates (the caller decides it is fatal)."""
        if self._dirty and self._file is not None:
            self._file.datasync()
            self._dirty = False

    # --- reading (any thread) -------------------------------------------------------------

    def collect(self, fetch_offset: int, upper: int, out: list[AbortedEntry]) -> None:
        """Append to ``out`` the entries whose marker is at or after ``fetch_offset`` and
        whose first offset is below ``upper`` (Kafka's rule for a fetch's list)."""
        n = len(self._lasts)
        if not n:
            return
        entries = self.entries
        for i in range(bisect.bisect_left(self._lasts, fetch_offset, 0, n), n):
            if entries[i].first_offset < upper:
                out.append(entries[i])

    # --- teardown -------------------------------------------------------------------------

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
