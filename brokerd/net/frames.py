"""Response frames whose record bytes are not copied into the frame (sans-IO).

A Kafka Fetch response is mostly stored record batches. Rather than joining them into one
``bytes`` frame, the handler puts a :class:`StoredRecords` in a partition's ``records``
field: either bytes read from the log (sent as their own part, no join) or a
:class:`FileRegion`, a range of a segment file that the connection sends with
``os.sendfile`` on a plain socket (``brokerd/net/sendfile.py``) or reads in bounded chunks
on TLS (``brokerd/net/chunked.py``). The codec's :class:`~brokerd.kafka.wire.codec.Writer`
keeps such a value as a separate part, and :func:`~brokerd.kafka.wire.codec.response_frame`
then returns a :class:`SplicedFrame`: the frame as a sequence of in-memory parts and file
regions.

Both are plain frozen value types, not ``bytes``: a ``records`` field is typed
:data:`Records` (``bytes | StoredRecords``) and an encoded answer :data:`Frame`
(``bytes | SplicedFrame``), so the type checker makes every caller handle both kinds.
:class:`StoredRecords`, :data:`Records` and :class:`FileRegion` are defined with the
storage types (``brokerd/storage/types.py``), since a log read answers them.
:func:`records_size`, :func:`cut_records` and :func:`release_records` work on either.
Nothing here touches files or transports.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from brokerd.storage.types import FileRegion, Part, Records, StoredRecords

__all__ = [
    "OWN_PART_BYTES",
    "Frame",
    "SplicedFrame",
    "cut_records",
    "frame_memory_bytes",
    "frame_regions",
    "records_size",
    "release_records",
]


@attrs.frozen(eq=False)
class SplicedFrame:
    """An encoded frame (or body) as ``parts``: bytes and file regions in wire order;
    ``size`` is its length on the wire. Build one with :meth:`of`."""

    parts: tuple[Part, ...]
    size: int

    @classmethod
    def of(cls, parts: Iterable[Part | StoredRecords]) -> SplicedFrame:
        """The frame of ``parts``: short in-memory parts joined with their neighbours,
        long ones (record bytes) and file regions kept as parts of their own."""
        merged: list[Part] = []
        pending: list[bytes] = []
        size = 0
        for part in parts:
            if isinstance(part, StoredRecords):
                part = part.payload
            if isinstance(part, bytes):
                size += len(part)
                if len(part) < OWN_PART_BYTES:
                    pending.append(part)
                    continue
            else:
                size += part.length
            if pending:
                merged.append(b"".join(pending))
                pending = []
            merged.append(part)
        if pending:
            merged.append(b"".join(pending))
        return cls(tuple(merged), size)

    @property
    def regions(self) -> tuple[FileRegion, ...]:
        return frame_regions(self.parts)

    def __repr__(self) -> str:
        return f"<SplicedFrame {self.size} bytes in {len(self.parts)} parts>"


#: An encoded answer: one ``bytes`` frame, or a spliced one.
Frame = bytes | SplicedFrame

#: In-memory parts shorter than this are joined with their neighbours (one write); longer
#: ones (record bytes) are written as parts of their own, without being copied.
OWN_PART_BYTES = 16 * 1024


def frame_regions(parts: Iterable[Part]) -> tuple[FileRegion, ...]:
    return tuple(p for p in parts if not isinstance(p, bytes))


def frame_memory_bytes(frame: Frame) -> int:
    """The bytes of ``frame`` held in memory (its file regions are not)."""
    if isinstance(frame, bytes):
        return len(frame)
    return sum(len(p) for p in frame.parts if isinstance(p, bytes))


def records_size(records: Records | None) -> int:
    """The wire length of a ``records`` field value."""
    if records is None:
        return 0
    if isinstance(records, StoredRecords):
        return records.size
    return len(records)


def cut_records(records: Records, size: int) -> Records:
    """The first ``size`` bytes of a ``records`` value (a fetch cut at its byte budget).
    A file region is cut in place; cut to nothing it is released."""
    if isinstance(records, bytes):
        return records[:size]
    payload = records.payload
    if isinstance(payload, bytes):
        return StoredRecords(payload[:size]) if size else b""
    if size <= 0:
        payload.release()
        return b""
    payload.truncate(min(size, payload.length))
    return records


def release_records(records: Records | None) -> None:
    """Give back the file region a ``records`` value holds, if any (an answer dropped)."""
    if isinstance(records, StoredRecords) and not isinstance(records.payload, bytes):
        records.payload.release()
