"""Response frames whose record bytes are not copied into the frame (sans-IO).

A Kafka Fetch response is mostly stored record batches. Rather than joining them into one
``bytes`` frame, the handler puts a :class:`StoredRecords` in a partition's ``records``
field: either bytes read from the log (sent as their own part with
``transport.writeSequence``, no join) or a :class:`FileRegion`, a range of a segment file
that the connection sends with ``os.sendfile`` (``brokerd/net/sendfile.py``). The codec's
:class:`~brokerd.kafka.codec.Writer` keeps such a value as a separate part, and
:func:`~brokerd.kafka.codec.response_frame` then returns a :class:`SplicedFrame`: the
frame as a sequence of in-memory parts and file regions.

Both are ``bytes`` subclasses so that they travel through the typed encoding functions
unchanged; their ``bytes`` value is **not** their wire content (a :class:`StoredRecords`
is ``b""``, a :class:`SplicedFrame` holds its in-memory parts only). Only code that knows
them may look inside: :func:`records_size` and :func:`cut_records` for the handlers, the
codec's ``Writer`` and ``response_frame``, and ``RequestConnection.write``, which sends
a :class:`SplicedFrame` part by part. Nothing here touches files or transports.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = [
    "FileRegion",
    "Part",
    "SplicedFrame",
    "StoredRecords",
    "cut_records",
    "frame_regions",
    "records_size",
    "release_records",
]


class FileRegion(Protocol):
    """Bytes of an open file, sent by descriptor (``brokerd.storage.stored.StoredSpan``)."""

    position: int
    length: int

    @property
    def released(self) -> bool: ...

    def fileno(self) -> int: ...

    def read(self) -> bytes: ...

    def truncate(self, length: int) -> None: ...

    def release(self) -> None: ...


#: One part of a spliced frame, in wire order.
Part = bytes | FileRegion


class StoredRecords(bytes):
    """A ``records`` field value sent without joining it into the frame: ``payload`` is
    the records' bytes or the file region holding them. Its own ``bytes`` value is empty
    (``len()`` and truth follow the records; slicing does not: use :func:`cut_records`)."""

    payload: Part

    def __new__(cls, payload: Part) -> StoredRecords:
        obj = super().__new__(cls, b"")
        obj.payload = payload
        return obj

    @property
    def size(self) -> int:
        payload = self.payload
        return len(payload) if isinstance(payload, bytes) else payload.length

    # Truth and len() follow the records, not the empty bytes value, so that
    # ``records or b""`` and ``len(records)`` keep their meaning.
    def __bool__(self) -> bool:
        return self.size > 0

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"StoredRecords({self.payload!r})"


class SplicedFrame(bytes):
    """An encoded frame (or body) as ``parts``: bytes and file regions in wire order.
    ``size`` is its length on the wire; its own ``bytes`` value is the in-memory parts
    only (see the module docstring)."""

    parts: tuple[Part, ...]
    size: int

    def __new__(cls, parts: Iterable[Part]) -> SplicedFrame:
        merged: list[Part] = []
        pending: list[bytes] = []
        size = 0
        for part in parts:
            if isinstance(part, StoredRecords):
                part = part.payload
            if isinstance(part, SplicedFrame):
                raise TypeError("a spliced frame nests no other spliced frame")
            if isinstance(part, bytes):
                size += len(part)
                if len(part) < _OWN_PART_BYTES:
                    pending.append(part)
                    continue
            else:
                size += part.length
            # A large part (stored bytes, a file region) stays a part of its own.
            if pending:
                merged.append(b"".join(pending))
                pending = []
            merged.append(part)
        if pending:
            merged.append(b"".join(pending))
        obj = super().__new__(cls, b"".join(p for p in merged if isinstance(p, bytes)))
        obj.parts = tuple(merged)
        obj.size = size
        return obj

    @property
    def regions(self) -> tuple[FileRegion, ...]:
        return frame_regions(self.parts)

    def __repr__(self) -> str:
        return f"<SplicedFrame {self.size} bytes in {len(self.parts)} parts>"


#: In-memory parts shorter than this are joined with their neighbours (one write); longer
#: ones (record bytes) are written as parts of their own, without being copied.
_OWN_PART_BYTES = 16 * 1024


def frame_regions(parts: Iterable[Part]) -> tuple[FileRegion, ...]:
    return tuple(p for p in parts if not isinstance(p, bytes))


def records_size(records: bytes | None) -> int:
    """The wire length of a ``records`` field value (plain bytes or :class:`StoredRecords`)."""
    if records is None:
        return 0
    if isinstance(records, StoredRecords):
        return records.size
    return len(records)


def cut_records(records: bytes, size: int) -> bytes:
    """The first ``size`` bytes of a ``records`` value (a fetch cut at its byte budget).
    A file region is cut in place; cut to nothing it is released."""
    if not isinstance(records, StoredRecords):
        return records[:size]
    payload = records.payload
    if isinstance(payload, bytes):
        return StoredRecords(payload[:size]) if size else b""
    if size <= 0:
        payload.release()
        return b""
    payload.truncate(min(size, payload.length))
    return records


def release_records(records: bytes | None) -> None:
    """Give back the file region a ``records`` value holds, if any (an answer dropped)."""
    if isinstance(records, StoredRecords) and not isinstance(records.payload, bytes):
        records.payload.release()
