"""Durable allocator of Kafka producer ids (InitProducerId): an id is never handed out twice.

The file (by convention ``<data-dir>/producer-ids``) holds a high-water mark: every id
below it may have been handed out. Layout, 20 bytes big-endian: 8-byte magic
``BKPIDS01``, ``int64`` mark, ``uint32`` CRC-32 of the first 16 bytes. The mark is raised
in blocks of :data:`PRODUCER_ID_BLOCK` ids and replaced atomically (temporary file, fsync,
rename, directory fsync), so allocation costs at most one fsync per block and a restart
skips at most one block of ids, never repeats one.

What this module does not do: remember which producer holds which id or epoch (the core
and ``producer_state.py`` do), or anything with Twisted. :meth:`ProducerIdAllocator.next_id`
blocks on the fsync once per block; callers on the reactor run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import zlib

from brokerd.errors import StorageError
from brokerd.storage.fileio import TEMP_SUFFIX, atomic_write

__all__ = ["PRODUCER_IDS_FILE_NAME", "PRODUCER_ID_BLOCK", "ProducerIdAllocator"]

#: File name used when the allocator is given the data directory instead of a file path.
#: It cannot look like a ``<topic>-<int>`` partition directory.
PRODUCER_IDS_FILE_NAME = "producer-ids"
#: Producer ids are reserved durably in blocks of this many: one fsync per block, and at
#: most one block's worth of ids skipped after a restart.
PRODUCER_ID_BLOCK = 1000

_INT64_MAX = 2**63 - 1
_HEAD = struct.Struct(">8sq")  # magic, high-water mark
_FILE = struct.Struct(">8sqI")  # the head, then crc32 of the head
_MAGIC = b"BKPIDS01"


class ProducerIdAllocator:
    """Durable counter for Kafka producer ids (InitProducerId): never reuses an id.

    The file holds a high-water mark: every id below it may have been handed out. On
    start-up allocation resumes at the mark, so up to one block of ids is skipped after a
    restart, never repeated. :meth:`next_id` blocks on a rename + fsync once per
    :data:`PRODUCER_ID_BLOCK` ids; run it in a worker thread. Thread-safe.
    """

    def __init__(self, path: str, *, block_size: int = PRODUCER_ID_BLOCK) -> None:
        """
        :param path: the counter file, or the data directory (then
            :data:`PRODUCER_IDS_FILE_NAME` inside it is used).
        :raises StorageError: the file exists but is damaged (refusing is safer than
            restarting at 0 and reusing ids).
        """
        if os.path.isdir(path):
            path = os.path.join(path, PRODUCER_IDS_FILE_NAME)
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.path = os.path.abspath(path)
        self._block = block_size
        self._lock = threading.Lock()
        # A temporary file left by a crash before its rename: the mark it carried was
        # never handed out from, so it is garbage.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path + TEMP_SUFFIX)
        self._limit = self._load()
        self._next = self._limit

    def _load(self) -> int:
        try:
            with open(self.path, "rb") as f:
                raw = f.read(_FILE.size + 1)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        if len(raw) != _FILE.size:
            raise StorageError(f"{self.path} is damaged (size {len(raw)})")
        magic, mark, crc = _FILE.unpack(raw)
        if magic != _MAGIC or crc != zlib.crc32(raw[: _HEAD.size]) or mark < 0:
            raise StorageError(f"{self.path} is damaged")
        return int(mark)

    def _persist(self, mark: int) -> None:
        head = _HEAD.pack(_MAGIC, mark)
        try:
            atomic_write(self.path, head + struct.pack(">I", zlib.crc32(head)))
        except OSError as exc:
            raise StorageError(f"cannot persist producer id mark to {self.path}: {exc}") from exc

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
                self._persist(mark)
                self._limit = mark
            pid = self._next
            self._next += 1
            return pid

    def close(self) -> None:
        """Nothing to release: every handed-out id is already covered by a durable mark."""
