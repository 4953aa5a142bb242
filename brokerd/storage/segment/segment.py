"""One log segment: a ``<20-digit base offset>.log`` file plus its ``.index``/``.timeindex``
and, once it holds transactional batches, its ``.txnindex`` (``segment/txn_index.py``).

What it does: appends already-stamped batches with ``os.pwrite`` on a raw fd (looping on
short writes, truncating back to the last good byte on an error), keeps the sparse indexes
up to date per batch (Kafka's rule: an entry after more than ``index_interval_bytes`` of
log), finds the batch holding an offset or the first batch at or after a timestamp
(index bisect, then a short scan of batch headers), validates and truncates itself during
recovery, and reference-counts readers so that retention can delete a segment while a
read is in flight (the fd is closed only when the last reader is done, so a racing read
never hits EBADF or, worse, a recycled fd number).

Descriptors: the ``.log`` file is a :class:`~brokerd.storage.segment.fd_cache.CachedFile`, opened
on first use and closed again when the process's descriptor budget needs room and no one
uses it (``segment/fd_cache.py``). A pin holds the descriptor open until the matching unpin (so a
pinned segment stays readable after retention unlinked it, and ``sendfile`` can use
:meth:`Segment.pinned_fd`); every other use (an append, a sync, recovery) holds it for
the call. The index files are opened only to be written (``segment/index.py``).

What it does not do: decide when to roll, flush or delete (``log/partition_log.py`` does), assign
offsets, or decode records. No Twisted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import threading
import time
from collections.abc import Sequence

from brokerd.errors import StorageError
from brokerd.storage.fileio import FILE_MODE, fsync_dir, pwrite_all
from brokerd.storage.record.header import BATCH_HEADER_SIZE, read_header
from brokerd.storage.segment.fd_cache import CachedFile, FdCache, FileGone, default_cache
from brokerd.storage.segment.index import OffsetIndex, TimeIndex
from brokerd.storage.segment.resync import Damage, validate
from brokerd.storage.segment.scan import SegmentScan
from brokerd.storage.segment.txn_index import TxnIndex

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "SEGMENT_FILE_RE",
    "TIMEINDEX_SUFFIX",
    "TXNINDEX_SUFFIX",
    "BatchInfo",
    "Recovered",
    "Segment",
    "segment_file_name",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
#: A segment's files: the base offset in 20 digits, then one of the suffixes above.
SEGMENT_FILE_RE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex)\Z")

_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC

_Buffer = bytes | bytearray | memoryview

log = logging.getLogger("brokerd.storage")

#: Per appended batch: (base offset, last offset, max timestamp, size in bytes).
BatchInfo = tuple[int, int, int, int]


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class Recovered:
    """What :meth:`Segment.recover` found: batches validated, bytes cut, and why."""

    __slots__ = ("batches", "quarantined", "reason", "truncated")

    def __init__(
        self, batches: int, truncated: int, reason: str | None, quarantined: int = 0
    ) -> None:
        self.batches = batches
        self.truncated = truncated
        self.reason = reason
        #: Damaged regions below the recovery point kept (see ``segment/resync.py``).
        self.quarantined = quarantined


class Segment:
    """A segment file and its indexes (lookups: :attr:`scan`). Create with
    :meth:`create` or :meth:`open`."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        file: CachedFile,
        index_interval: int,
        cache: FdCache,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        self.index = OffsetIndex(
            os.path.join(directory, segment_file_name(base_offset, INDEX_SUFFIX))
        )
        self.timeindex = TimeIndex(
            os.path.join(directory, segment_file_name(base_offset, TIMEINDEX_SUFFIX))
        )
        self.txnindex = TxnIndex(
            os.path.join(directory, segment_file_name(base_offset, TXNINDEX_SUFFIX)), cache
        )
        self.index_interval = index_interval
        self._file = file
        #: Bytes of valid batches (the file may be longer only during a failed write).
        self.size = 0
        #: The offset after the segment's last batch (== base_offset while empty).
        self.next_offset = base_offset
        #: Largest batch max_timestamp in the segment, -1 if none is known.
        self.max_timestamp = -1
        self._first_append_ms: float | None = None
        #: False when the directory listing at open showed no ``.txnindex`` file for the
        #: segment, so :meth:`load` need not try to open one.
        self.txnindex_listed = True
        # True while the first batch's timestamp is still to be read (see first_append_ms).
        self._first_append_unread = False
        self._since_index = 0
        #: Damaged regions recovery stepped over (quarantined; reads of them fail).
        self.damaged: tuple[Damage, ...] = ()
        #: Header walks and lookups by offset and by timestamp.
        self.scan = SegmentScan(self)
        self._lock = threading.Lock()
        self._refs = 0
        self._closed = False

    # --- construction ------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: str, base_offset: int, index_interval: int, cache: FdCache | None = None
    ) -> Segment:
        """Create a new empty segment (all three files) and fsync the directory."""
        cache = cache if cache is not None else default_cache()
        path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        try:
            fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except OSError as exc:
            raise StorageError(f"cannot create segment {path}: {exc}") from exc
        segment = cls(directory, base_offset, cache.adopt(path, _OPEN_FLAGS, fd), index_interval,
                      cache)
        try:
            # Empty index files need no fsync of their own: the directory fsync makes
            # their names durable.
            segment.index.persist(sync=False)
            segment.timeindex.persist(sync=False)
            fsync_dir(directory)
        except (OSError, StorageError) as exc:
            segment.close()
            raise StorageError(f"cannot create segment {path}: {exc}") from exc
        return segment

    @classmethod
    def open(
        cls, directory: str, base_offset: int, index_interval: int, cache: FdCache | None = None
    ) -> Segment:
        """Open an existing segment; its indexes are not loaded yet (see :meth:`load`).

        The descriptor opened here is the cache's to close again when it needs room."""
        cache = cache if cache is not None else default_cache()
        path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        file = cache.file(path, _OPEN_FLAGS)
        try:
            fd = file.acquire()
        except StorageError as exc:
            raise StorageError(f"cannot open segment {path}: {exc}") from exc
        try:
            size = os.fstat(fd).st_size
        except OSError as exc:
            file.close()
            raise StorageError(f"cannot open segment {path}: {exc}") from exc
        finally:
            file.release()
        segment = cls(directory, base_offset, file, index_interval, cache)
        segment.size = size
        return segment

    def load(self) -> bool:
        """Trust the segment's bytes: load the indexes and walk the tail after the last
        index entry to learn the segment's end offset and newest timestamp.

        False if an index is missing or fails its sanity checks, or if the tail does not
        end exactly at the end of the file with valid headers: then the caller runs
        :meth:`recover`.
        """
        if not self.index.load(log_size=self.size) or not self.timeindex.load(offsets=self.index):
            return False
        count = len(self.index)
        if count:
            rel, pos = self.index.entry(count - 1)
            max_ts = self.timeindex.entry(count - 1)[0]
        else:
            rel, pos, max_ts = 0, 0, -1
        expected = self.base_offset + rel
        end = pos
        try:
            for hpos, header in self.scan.headers_from(pos, self.size, expected):
                expected = header.last_offset + 1
                max_ts = max(max_ts, header.max_timestamp)
                end = hpos + header.size
        except StorageError:
            return False
        if end != self.size:
            return False
        self.next_offset = expected
        self.max_timestamp = max_ts
        if self.txnindex_listed:
            self.txnindex.load(self.base_offset, self.next_offset)
        # Bytes since the last entry decide when the next append adds one.
        self._since_index = self.size - pos if count else self.size
        if self.size and self._first_append_ms is None:
            self._first_append_unread = True
        return True

    @property
    def first_append_ms(self) -> float | None:
        """Milliseconds when the segment got its first batch (for segment_ms rolling).
        For a segment opened with batches in it, its first batch's timestamp, read on
        first use rather than at open (only segment_ms rolling asks, and only of the
        active segment; a second concurrent first reader reads the same value)."""
        if self._first_append_unread:
            self._first_append_unread = False
            self._first_append_ms = self._first_batch_timestamp()
        return self._first_append_ms

    @first_append_ms.setter
    def first_append_ms(self, value: float | None) -> None:
        self._first_append_unread = False
        self._first_append_ms = value

    def _first_batch_timestamp(self) -> float | None:
        try:
            first = read_header(self.pread(0, BATCH_HEADER_SIZE))
        except (StorageError, struct.error):
            first = None
        if first is not None and first.max_timestamp >= 0:
            return float(first.max_timestamp)
        return None

    def recover(self, *, truncate: bool = True, quarantine_below: int = -1) -> Recovered:
        """Validate every batch (header, CRC, offsets increasing from the base), rebuild
        both indexes, and truncate the file at the first invalid or incomplete batch.

        Damage at an offset below ``quarantine_below`` (flushed, acknowledged data) is
        stepped over when a valid batch follows it (``segment/resync.py``): the region is kept in
        :attr:`damaged`, and reads reaching it fail. With ``truncate`` False nothing is
        cut at all (a flushed segment whose damage must be reported, not hidden): the
        indexes cover the valid batches and ``size`` stays the file size, so reads
        reaching the damage fail loudly.
        Raises :class:`StorageError` only if the file cannot be read or truncated.
        """
        self.index.clear()
        self.timeindex.clear()
        self._since_index = 0
        self.max_timestamp = -1
        fd = self._file.acquire()
        try:
            return self._recover(fd, truncate, quarantine_below)
        finally:
            self._file.release()

    def _recover(self, fd: int, truncate: bool, quarantine_below: int) -> Recovered:
        try:
            file_size = os.fstat(fd).st_size
        except OSError as exc:
            raise StorageError(f"cannot stat {self.log_path}: {exc}") from exc
        found = validate(self, file_size, quarantine_below)
        self.damaged = tuple(found.damaged)
        pos, expected, reason = found.end, found.next_offset, found.reason
        if not truncate:
            self.size = file_size
            self.next_offset = expected
            self._rewrite_indexes()
            self.txnindex.load(self.base_offset, self.next_offset)
            return Recovered(found.batches, 0, reason, len(found.damaged))
        truncated = file_size - pos
        if truncated:
            try:
                os.ftruncate(fd, pos)
                os.fsync(fd)
            except OSError as exc:
                raise StorageError(f"cannot truncate {self.log_path}: {exc}") from exc
        self.size = pos
        self.next_offset = expected
        self._rewrite_indexes()
        # Entries whose marker the truncation cut off go (the replay rebuilds the rest).
        self.txnindex.load(self.base_offset, self.next_offset)
        self.first_append_ms = None
        if self.size:
            self.first_append_ms = self._first_batch_timestamp()
        return Recovered(found.batches, truncated, reason, len(found.damaged))

    def _rewrite_indexes(self) -> None:
        """Persist the rebuilt indexes. If the disk refuses (full), they are served from
        memory: the log's bytes are intact, so reads must not fail for want of an index
        file; the file is written again when the segment is sealed or the log closed."""
        try:
            self.index.rewrite()
            self.timeindex.rewrite()
        except StorageError as exc:
            log.warning("%s: indexes kept in memory only: %s", self.log_path, exc)

    # --- writing (one writer at a time) ---------------------------------------------------

    def force_index_entry(self) -> None:
        """Make the next indexed batch get an index entry (recovery, after a damaged
        region: lookups past it must start after it)."""
        self._since_index = self.index_interval + 1

    def index_batch(self, pos: int, base_offset: int, max_timestamp: int, size: int) -> None:
        if self._since_index > self.index_interval:
            rel = base_offset - self.base_offset
            # Offset entry before time entry: a reader seeing time entry i finds offset
            # entry i (see index.py).
            self.index.append(rel, pos)
            self.timeindex.append(self.max_timestamp, rel)
            self._since_index = 0
        self._since_index += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp

    def append(self, data: _Buffer, batches: Sequence[BatchInfo]) -> None:
        """Write stamped batches at the end and index them.

        On an I/O error the file is cut back to its previous end and
        :class:`StorageError` is raised; the segment is unchanged.
        """
        start = self.size
        fd = self._file.acquire()
        try:
            pwrite_all(fd, data, start)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError as exc2:
                raise StorageError(
                    f"write to {self.log_path} failed ({exc}) and truncating back "
                    f"failed too ({exc2})"
                ) from exc
            raise StorageError(f"write to {self.log_path} failed: {exc}") from exc
        finally:
            self._file.release()
        pos = start
        last = self.next_offset - 1
        for base_offset, last_offset, max_timestamp, size in batches:
            self.index_batch(pos, base_offset, max_timestamp, size)
            pos += size
            last = last_offset
        self.size = pos
        self.next_offset = last + 1

    def sync(self) -> None:
        """fdatasync the log file and the aborted-transaction index. OSError propagates:
        the caller decides it is fatal."""
        self.txnindex.sync()
        self._file.datasync()

    def seal(self) -> None:
        """Persist and fsync both indexes (the segment will take no more appends)."""
        self.index.persist(sync=True)
        self.timeindex.persist(sync=True)

    def persist_indexes(self, *, sync: bool) -> None:
        self.index.persist(sync=sync)
        self.timeindex.persist(sync=sync)

    # --- reading (any thread) -------------------------------------------------------------

    def pin(self) -> bool:
        """Take a reference for a read; False if the segment is closed or deleted.

        The pin holds the log file's descriptor open (opening it if the cache had closed
        it) until :meth:`unpin`. Raises :class:`StorageError` if it cannot be opened for
        another reason than the file being gone."""
        with self._lock:
            if self._closed:
                return False
            self._refs += 1
        try:
            self._file.acquire()
        except FileGone:
            self._unref()
            return False
        except BaseException:
            self._unref()
            raise
        return True

    def unpin(self) -> None:
        self._file.release()
        self._unref()

    def _unref(self) -> None:
        with self._lock:
            self._refs -= 1
            release = self._closed and self._refs == 0
        if release:
            self._release()

    def pinned_fd(self) -> int:
        """The log file's descriptor, for a caller holding a pin (valid until it unpins):
        what ``sendfile`` reads from."""
        return self._file.fd_in_use()

    @property
    def file_open(self) -> bool:
        """Whether the log file has a descriptor open now."""
        return self._file.is_open

    @property
    def _fd(self) -> int:
        # Older tests check a pinned segment's descriptor stays open through this name;
        # new code uses pinned_fd() or file_open.
        return self._file._fd

    def pread(self, pos: int, size: int) -> bytes:
        """Read up to ``size`` bytes at ``pos`` (fewer only at the end of the file)."""
        fd = self._file.acquire()
        try:
            data = os.pread(fd, size, pos)
            if len(data) == size or not data:
                return data
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(fd, size - got, pos + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            return b"".join(parts)
        except OSError as exc:
            raise StorageError(f"cannot read {self.log_path}: {exc}") from exc
        finally:
            self._file.release()

    def newest_time_ms(self) -> float:
        """The segment's newest record time for retention (file mtime if none is known)."""
        if self.max_timestamp >= 0:
            return float(self.max_timestamp)
        try:
            return os.stat(self.log_path).st_mtime * 1000.0
        except OSError:
            return time.time() * 1000.0

    # --- teardown -------------------------------------------------------------------------

    def close(self) -> None:
        """Close now, or when the last pinned reader is done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            release = self._refs == 0
        if release:
            self._release()

    def delete(self) -> None:
        """Unlink the files (readers holding a pin keep reading) and close."""
        self.close()
        for path in (self.log_path, self.index.path, self.timeindex.path, self.txnindex.path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _release(self) -> None:
        self._file.close()
        self.index.close()
        self.timeindex.close()
        self.txnindex.close()

