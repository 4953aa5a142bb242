"""The record framing the broker's journals share, and a bounds-checked body reader.

The consumer-offsets journal (``stores/offsets_format.py``) and the transaction state journal
(``stores/txn_log.py``) store records the same way: ``u32 body_length, u32 crc32(body), body``
(big-endian; CRC-32 as :func:`zlib.crc32`), appended and fdatasynced one write at a time.
This module is that framing: :func:`frame` one body, :func:`iter_frames` walk a file's
bytes and stop at the first record that is incomplete, too long or fails its CRC (a write
that never completed: everything from there on is cut at open), and :class:`BodyReader`,
the cursor record decoders read a body with, which refuses any overrun and any element
count the rest of the body cannot hold, before anything is allocated.

What it does not do: record kinds, their fields, or any I/O. Pure.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

__all__ = ["RECORD_HEADER", "BodyReader", "frame", "iter_frames"]

RECORD_HEADER = struct.Struct(">II")
_U32 = struct.Struct(">I")


def frame(body: bytes, max_body_bytes: int, what: str) -> bytes:
    """``body`` with its length and CRC in front; ValueError beyond ``max_body_bytes``."""
    if len(body) > max_body_bytes:
        raise ValueError(f"{what} record larger than {max_body_bytes} bytes")
    return RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body


def iter_frames(data: bytes, pos: int, max_body_bytes: int) -> Iterator[tuple[bytes, int, int]]:
    """``(body, start, end)`` of each whole, intact record of ``data`` from ``pos``. Stops
    silently at the first record that is incomplete, claims more than ``max_body_bytes``
    (checked before anything is sliced) or fails its CRC."""
    while pos + RECORD_HEADER.size <= len(data):
        length, crc = RECORD_HEADER.unpack_from(data, pos)
        end = pos + RECORD_HEADER.size + length
        if length > max_body_bytes or end > len(data):
            return
        body = data[pos + RECORD_HEADER.size : end]
        if zlib.crc32(body) != crc:
            return
        yield body, pos, end
        pos = end


class BodyReader:
    """Bounds-checked cursor over one record body; any overrun raises ValueError."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise ValueError("record body overrun")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size))

    def count(self, min_item_bytes: int) -> int:
        """A u32 element count, refused before any loop if the rest cannot hold it."""
        (n,) = self.unpack(_U32)
        if n * min_item_bytes > len(self._data) - self._pos:
            raise ValueError(f"count {n} exceeds the record")
        return int(n)

    def done(self) -> bool:
        return self._pos == len(self._data)
