"""Durable allocator of Kafka producer ids (InitProducerId): an id is never handed out twice.

The file (by convention ``<data-dir>/producer-ids``) is a journal (the engine in
:mod:`brokerd.storage.journal.engine`, header ``BKPIDJ01``) of high-water marks, each
record an ``int64``: every id below the last mark may have been handed out. The mark is
raised in blocks of :data:`PRODUCER_ID_BLOCK` ids, each raise one appended record and one
fsync before any id of the block is handed out, so allocation costs at most one fsync per
block and a restart skips at most one block of ids, never repeats one. Compaction keeps
the file at one record.

Losing a mark would hand ids out again, so the file is trusted less than the other
journals: a tail shorter than one record is a raise that never completed (no id of it
was handed out) and is cut, but a whole record that fails its check, or a mark lower
than the one before it, is damage, and the file is refused (refusing is safer than
restarting lower and reusing ids). A file of the earlier single-record format
(``BKPIDS01``, 20 bytes: magic, mark, CRC-32) is read and rewritten as a journal.

A failed fsync takes the allocator offline, as it does the other journals: no id is
handed out until it has reopened from disk (``retry_reopen``, polled by the broker).

What this module does not do: remember which producer holds which id or epoch (the core
and ``log/producer_state.py`` do), or anything with Twisted. :meth:`ProducerIdAllocator.next_id`
blocks on the fsync once per block; callers on the reactor run it in a worker thread.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib
from collections.abc import Callable

from brokerd.errors import StorageError
from brokerd.storage.journal.engine import Journal, JournalKind
from brokerd.storage.journal.records import RECORD_HEADER, frame, iter_frames

__all__ = [
    "PRODUCER_IDS_FILE_NAME",
    "PRODUCER_IDS_NAME",
    "PRODUCER_ID_BLOCK",
    "ProducerIdAllocator",
]

#: File name used when the allocator is given the data directory instead of a file path.
#: It cannot look like a ``<topic>-<int>`` partition directory.
PRODUCER_IDS_FILE_NAME = "producer-ids"
#: What the allocator is called in its log lines and in ``/readyz``.
PRODUCER_IDS_NAME = "producer id block"
#: Producer ids are reserved durably in blocks of this many: one fsync per block, and at
#: most one block's worth of ids skipped after a restart.
PRODUCER_ID_BLOCK = 1000

_INT64_MAX = 2**63 - 1
_MARK = struct.Struct(">q")
_RECORD_BYTES = RECORD_HEADER.size + _MARK.size
#: The single-record format before the journal: magic, mark, crc32 of the first 16 bytes.
_OLD_FILE = struct.Struct(">8sqI")
_OLD_MAGIC = b"BKPIDS01"

PRODUCER_IDS_JOURNAL = JournalKind(
    name=PRODUCER_IDS_NAME,
    noun="producer id file",
    file_name=PRODUCER_IDS_FILE_NAME,
    magic=b"BKPIDJ01",
    old_magics=(_OLD_MAGIC,),
)
#: One record is live; compact once a few hundred raises have piled up behind it.
_COMPACT_MIN_BYTES = 4096
_COMPACT_RATIO = 4


class _Mark:
    """The high-water mark, as replayed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.value = 0

    def replay(self, data: bytes, pos: int, magic: bytes) -> int:
        if magic == _OLD_MAGIC:
            return self._replay_old(data)
        for body, _start, end in iter_frames(data, pos, _MARK.size):
            if len(body) != _MARK.size:
                break
            (mark,) = _MARK.unpack(body)
            if mark < self.value:
                raise StorageError(f"{self.path} is damaged (its mark went down)")
            self.value, pos = mark, end
        if len(data) - pos >= _RECORD_BYTES:
            raise StorageError(f"{self.path} is damaged (a whole record fails its check)")
        return pos

    def _replay_old(self, data: bytes) -> int:
        if len(data) != _OLD_FILE.size:
            raise StorageError(f"{self.path} is damaged (size {len(data)})")
        _, mark, crc = _OLD_FILE.unpack(data)
        if crc != zlib.crc32(data[: _OLD_FILE.size - 4]) or mark < 0:
            raise StorageError(f"{self.path} is damaged")
        self.value = int(mark)
        return len(data)

    def live_bytes(self) -> int:
        return _RECORD_BYTES

    def snapshot(self) -> bytes:
        return _record(self.value)


def _record(mark: int) -> bytes:
    return frame(_MARK.pack(mark), _MARK.size, "producer id mark")


class ProducerIdAllocator:
    """Durable counter for Kafka producer ids (InitProducerId): never reuses an id.

    On start-up allocation resumes at the last durable mark, so up to one block of ids is
    skipped after a restart, never repeated. :meth:`next_id` blocks on an fsync once per
    :data:`PRODUCER_ID_BLOCK` ids; run it in a worker thread. Thread-safe.

    :param path: the journal, or the data directory (then :data:`PRODUCER_IDS_FILE_NAME`
        inside it is used).
    :param clock: seconds; times the fault log's window and the reopen backoff.
    :raises StorageError: the file exists but is damaged.
    """

    def __init__(
        self,
        path: str,
        *,
        block_size: int = PRODUCER_ID_BLOCK,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self._block = block_size
        self._lock = threading.Lock()
        self.journal = Journal.open(
            path, PRODUCER_IDS_JOURNAL, _Mark(path), clock=clock,
            compact_min_bytes=_COMPACT_MIN_BYTES, compact_ratio=_COMPACT_RATIO,
        )
        self.path = self.journal.path
        self._limit = self.journal.state.value
        self._next = self._limit

    def next_id(self) -> int:
        """A producer id never returned before, in this run or an earlier one.

        :raises StorageError: the new high-water mark could not be made durable (no id is
            handed out beyond a durable mark), or the int64 id space is exhausted.
        """
        with self._lock:
            if self._next >= self._limit:
                mark = self._next + self._block
                if mark > _INT64_MAX:
                    raise StorageError("producer id space exhausted")
                self.journal.append(_record(mark))
                self.journal.state.value = mark
                self.journal.compact_if_due()
                self._limit = mark
            pid = self._next
            self._next += 1
            return pid

    def close(self) -> None:
        """Close the file: every handed-out id is already covered by a durable mark."""
        with self._lock:
            self.journal.close()

    # -- faults and reopening (as the broker's store recovery polls them) ---------------




    def retry_reopen(self, now: float | None = None) -> bool:
        """Reopen from disk if offline and due; True if back online. The next block
        starts at the reopened mark, which is at least every id handed out."""
        with self._lock:
            return self.journal.reopen_if_due(now, lambda: _Mark(self.path), self._adopt)

    def _adopt(self, mark: _Mark) -> None:
        # What the file says now is what a restart would resume from: ids are handed
        # out only below it. The next id never goes down, so an id at or above a lower
        # mark waits for a new raise first.
        self._limit = mark.value
