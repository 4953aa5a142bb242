# -*- test-case-name: tests.storage.record.test_control -*-
"""Transaction markers: the control batches that end a transaction on a partition.

A marker is a RecordBatch v2 with the transactional and control attribute bits set, the
transaction's producer id and epoch, base sequence -1, and one record: key ``int16
version = 0, int16 type`` (0 = ABORT, 1 = COMMIT), value ``int16 version = 0, int32
coordinator_epoch`` (Kafka's ``EndTransactionMarker``). :func:`encode_marker` builds one,
:func:`parse_marker` reads a stored one back.

What it does not do: append markers (``log/txns.py``) or decide which transaction they
end (``log/ongoing_txns.py``). Pure, no I/O.
"""

from __future__ import annotations

import enum
import struct

import attrs

from brokerd.errors import CorruptBatch
from brokerd.storage.record.compression import Buffer
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import BATCH_HEADER_SIZE, read_header

__all__ = ["MAX_MARKER_BYTES", "ControlType", "Marker", "encode_marker", "parse_marker"]

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_VERSION = 0
#: A stored marker batch larger than this is damage (a real one is about 80 bytes).
MAX_MARKER_BYTES = 4096


class ControlType(enum.IntEnum):
    """The ``type`` of a control record's key."""

    ABORT = 0
    COMMIT = 1


@attrs.frozen
class Marker:
    """A parsed transaction marker."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def encode_marker(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
) -> bytes:
    """One marker batch for ``producer_id`` at ``base_offset``."""
    if producer_id < 0:
        raise ValueError("a marker needs a producer id")
    control_type = ControlType.COMMIT if commit else ControlType.ABORT
    return encode_batch(
        [_VALUE.pack(_VERSION, coordinator_epoch)],
        keys=[_KEY.pack(_VERSION, int(control_type))],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        base_offset=base_offset,
        transactional=True,
        control=True,
    )


def parse_marker(batch: Buffer) -> Marker:
    """The marker of a whole stored control batch. Raises :class:`CorruptBatch` if it is
    not one (a control batch whose first record is not a known marker)."""
    if len(batch) > MAX_MARKER_BYTES:
        raise CorruptBatch(f"control batch of {len(batch)} bytes, a marker is much smaller")
    if len(batch) < BATCH_HEADER_SIZE:
        raise CorruptBatch("truncated control batch")
    header = read_header(batch)
    if not header.is_control:
        raise CorruptBatch(f"batch at offset {header.base_offset} is not a control batch")
    records = decode_records(batch, max_uncompressed=MAX_MARKER_BYTES)
    if not records:
        raise CorruptBatch("control batch without a record")
    key = records[0].key
    if key is None or len(key) < _KEY.size:
        raise CorruptBatch("control record without a valid key")
    version, control_type = _KEY.unpack_from(key)
    if version != _VERSION or control_type not in (ControlType.ABORT, ControlType.COMMIT):
        raise CorruptBatch(f"control record version {version} type {control_type}")
    value = records[0].value
    coordinator_epoch = 0
    if value is not None and len(value) >= _VALUE.size:
        coordinator_epoch = _VALUE.unpack_from(value)[1]
    return Marker(
        header.producer_id,
        header.producer_epoch,
        control_type == ControlType.COMMIT,
        coordinator_epoch,
    )
