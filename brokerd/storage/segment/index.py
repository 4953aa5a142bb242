"""Sparse per-segment indexes: the offset index (``.index``) and the time index (``.timeindex``).

Offset index entry (8 bytes, big-endian): ``int32 relative offset, int32 file position``,
where the relative offset is a batch's base offset minus the segment's base offset and the
position is where that batch starts in the ``.log`` (Kafka keys its entries by the batch's
last offset instead; keying by the base offset lets a lookup stop at the entry's batch).
Entries are added every ``index_interval_bytes`` of log (Kafka's rule), so looking an
offset up is a bisect plus a scan of at most that many bytes of batch headers.

Time index entry (12 bytes, big-endian): ``int64 timestamp, int32 relative offset``. One
entry is written with each offset-index entry: ``timestamp`` is the largest batch
``max_timestamp`` of every batch *before* the batch at ``relative offset``. So all batches
before that offset are older than or equal to ``timestamp``; the timestamps never decrease.

What this module does: keeps the entries in memory (the in-memory arrays are what lookups
use), loads them from disk with sanity checks, and persists entries that are not yet on
disk when asked. What it does not do: decide when to add entries, read the ``.log``, or
trust its files after an unclean shutdown (the segment rebuilds them). Index files carry
no checksum: they are derived data, always rebuildable from the log.

Descriptors: a file is opened only to be read at load or written by :meth:`persist` /
:meth:`rewrite`, and closed again before they return (they run when a segment is created,
sealed, rebuilt or closed), so an index holds no descriptor between those.

Threads: one writer appends while readers look up. The writer appends the position before
the offset (and the offset before the timestamp), and readers bound their search by the
length of the array appended last, so a reader never sees half an entry.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
import sys
from array import array

from brokerd.errors import StorageError
from brokerd.storage.fileio import FILE_MODE, pwrite_all, read_file

__all__ = ["OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE", "OffsetIndex", "TimeIndex"]

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


def _split_time_entries(data: bytes, count: int) -> tuple[array[int], array[int]]:
    """The timestamps and relative offsets of ``count`` packed time-index entries, as two
    arrays. Strided byte copies in C: unpacking entry by entry took 110 ms for the
    260,000 entries of a full 1 GiB segment's index, this takes about 2 ms."""
    ts_bytes = bytearray(8 * count)
    rel_bytes = bytearray(4 * count)
    for k in range(8):
        ts_bytes[k::8] = data[k::TIME_ENTRY_SIZE]
    for k in range(4):
        rel_bytes[k::4] = data[8 + k :: TIME_ENTRY_SIZE]
    ts = array("q")
    ts.frombytes(ts_bytes)
    rels = array("i")
    rels.frombytes(rel_bytes)
    if _LITTLE:
        ts.byteswap()
        rels.byteswap()
    return ts, rels


class _IndexFile:
    """Appends packed entries to a file; remembers how many are already on disk."""

    entry_size = 0

    def __init__(self, path: str) -> None:
        self.path = path
        self._persisted = 0

    def __len__(self) -> int:
        raise NotImplementedError

    def _pack(self, start: int) -> bytes:
        raise NotImplementedError

    def persist(self, *, sync: bool) -> None:
        """Write the entries not yet on disk (fsync them if ``sync``).

        Raises :class:`StorageError` on an I/O error.
        """
        self._write(sync=sync)

    def rewrite(self) -> None:
        """Make the file hold exactly the in-memory entries (after a rebuild), without
        fsync: recovery rebuilds many indexes and makes them durable later, with the log
        bytes they describe (:meth:`persist` with ``sync``). A file that already holds
        them (the usual case after a kill -9: it was written as the log was) is not
        written at all."""
        data = self._pack(0)
        fd = self._open_fd("rewrite")
        try:
            if os.fstat(fd).st_size != len(data) or os.pread(fd, len(data), 0) != data:
                # Overwritten, then cut: truncating to zero first makes ext4 flush the
                # file at once (its guard for rewrite-by-truncate), a wait per index.
                pwrite_all(fd, data, 0)
                os.ftruncate(fd, len(data))
        except OSError as exc:
            raise StorageError(f"cannot rewrite index {self.path}: {exc}") from exc
        finally:
            os.close(fd)
        self._persisted = len(self)

    def _open_fd(self, what: str) -> int:
        # Opened per write and closed after: sealed segments' indexes hold no descriptor.
        try:
            return os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
            )
        except OSError as exc:
            raise StorageError(f"cannot {what} index {self.path}: {exc}") from exc

    def _write(self, *, sync: bool) -> None:
        fd = self._open_fd("write")
        try:
            count = len(self)
            if count > self._persisted:
                pwrite_all(fd, self._pack(self._persisted), self._persisted * self.entry_size)
                self._persisted = count
            if sync:
                os.fsync(fd)
        except OSError as exc:
            raise StorageError(f"cannot write index {self.path}: {exc}") from exc
        finally:
            os.close(fd)

    def _read_entries(self) -> bytes | None:
        """The file's bytes, if it can be read and holds whole entries (else None: the
        caller rebuilds the index)."""
        try:
            data = read_file(self.path)
        except OSError:
            return None
        if data is None or len(data) % self.entry_size:
            return None
        return data

    def close(self) -> None:
        """Nothing is held open between writes (kept for the segment's teardown)."""

    def unlink(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class OffsetIndex(_IndexFile):
    """``relative offset -> file position`` of some batch starts, in increasing order."""

    entry_size = OFFSET_ENTRY_SIZE

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._rel = array("i")
        self._pos = array("i")

    def __len__(self) -> int:
        return len(self._rel)

    def _pack(self, start: int) -> bytes:
        pack = _OFFSET_ENTRY.pack
        return b"".join(pack(self._rel[i], self._pos[i]) for i in range(start, len(self._rel)))

    def append(self, rel_offset: int, position: int) -> None:
        self._pos.append(position)
        self._rel.append(rel_offset)

    def clear(self) -> None:
        """Forget every entry; the caller rebuilds and then calls :meth:`rewrite`."""
        self._rel = array("i")
        self._pos = array("i")
        self._persisted = 0

    def lookup(self, rel_offset: int) -> tuple[int, int] | None:
        """The last entry whose relative offset is <= ``rel_offset``, or None."""
        rels = self._rel
        i = bisect.bisect_right(rels, rel_offset, 0, len(rels)) - 1
        if i < 0:
            return None
        return rels[i], self._pos[i]

    def entry(self, i: int) -> tuple[int, int]:
        return self._rel[i], self._pos[i]

    def relative_offsets(self) -> array[int]:
        """Every entry's relative offset, in order (the array itself: do not modify)."""
        return self._rel

    def last(self) -> tuple[int, int] | None:
        n = len(self._rel)
        return (self._rel[n - 1], self._pos[n - 1]) if n else None

    def load(self, *, log_size: int) -> bool:
        """Read the file; True if it exists and passes the sanity checks.

        Checks: size a multiple of the entry size, relative offsets and positions strictly
        increasing and non-negative, every position inside the log. On False the in-memory
        index is empty and the caller rebuilds it.
        """
        self.clear()
        data = self._read_entries()
        if data is None:
            return False
        flat = array("i")
        flat.frombytes(data)
        if _LITTLE:
            flat.byteswap()
        rels = flat[0::2]
        positions = flat[1::2]
        prev_rel = -1
        prev_pos = -1
        for rel, pos in zip(rels, positions, strict=True):
            if rel <= prev_rel or pos <= prev_pos:
                return False
            prev_rel, prev_pos = rel, pos
        if len(positions) and positions[-1] >= log_size:
            return False
        self._rel = rels
        self._pos = positions
        self._persisted = len(rels)
        return True


class TimeIndex(_IndexFile):
    """``timestamp, relative offset`` pairs, both non-decreasing (see the module doc)."""

    entry_size = TIME_ENTRY_SIZE

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._ts = array("q")
        self._rel = array("i")

    def __len__(self) -> int:
        return len(self._ts)

    def _pack(self, start: int) -> bytes:
        pack = _TIME_ENTRY.pack
        return b"".join(pack(self._ts[i], self._rel[i]) for i in range(start, len(self._ts)))

    def append(self, timestamp: int, rel_offset: int) -> None:
        self._rel.append(rel_offset)
        self._ts.append(timestamp)

    def clear(self) -> None:
        """Forget every entry; the caller rebuilds and then calls :meth:`rewrite`."""
        self._ts = array("q")
        self._rel = array("i")
        self._persisted = 0

    def last_before(self, timestamp: int) -> int | None:
        """Index of the last entry whose timestamp is < ``timestamp``, or None.

        Every batch before that entry's offset is older than ``timestamp``, so a search for
        the first batch at or after ``timestamp`` may start there.
        """
        ts = self._ts
        i = bisect.bisect_left(ts, timestamp, 0, len(ts)) - 1
        return i if i >= 0 else None

    def entry(self, i: int) -> tuple[int, int]:
        return self._ts[i], self._rel[i]

    def load(self, *, offsets: OffsetIndex) -> bool:
        """Read the file; True if it is sane and matches ``offsets`` entry for entry."""
        self.clear()
        data = self._read_entries()
        if data is None:
            return False
        count = len(data) // TIME_ENTRY_SIZE
        if count != len(offsets):
            return False
        ts, rels = _split_time_entries(data, count)
        if rels != offsets.relative_offsets():
            return False
        prev_ts = ts[0] if count else 0
        for stamp in ts:
            if stamp < prev_ts:
                return False
            prev_ts = stamp
        self._ts = ts
        self._rel = rels
        self._persisted = count
        return True
