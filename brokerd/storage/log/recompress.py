# -*- test-case-name: tests.storage.log.test_recompress -*-
"""A topic's ``compression.type``: client batches stored with the topic's codec.

Kafka keeps a producer's batches as they come while ``compression.type`` is
``producer`` (the default); any other value makes the broker store every batch with
that codec, decompressing and compressing again when the producer used another one
(``uncompressed`` decompresses). A batch already in the topic's codec is kept byte for
byte, as Kafka keeps it. Offsets, timestamps and the producer fields of each batch
stay, so idempotence and transactions see the same batch; only its length, codec bits
and CRC change. The records are not decoded: their bytes are the same in every codec, so
the records section is decompressed and compressed again as a whole. The level is the
topic's ``compression.<codec>.level`` (gzip, lz4, zstd; snappy has none).

Pure and blocking (the write pool runs it, before the append): no I/O, no Twisted.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.errors import CorruptBatch
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.record.encode import recompress_batch
from brokerd.storage.record.header import BatchHeader, parse_batches

__all__ = ["MAX_RECOMPRESSED_BATCH_BYTES", "recompress"]

#: Bound of one batch's decompressed records while it is recompressed.
MAX_RECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024

def recompress(
    config: LogConfig, data: bytes, headers: Sequence[BatchHeader]
) -> tuple[bytes, list[BatchHeader]]:
    """``data`` (validated batches described by ``headers``) with every batch in the
    topic's codec, and the new headers; unchanged when nothing needs recompressing."""
    target = config.compression
    if target is None or all(h.compression == target[0] for h in headers):
        return data, list(headers)
    codec, level = target
    parts: list[bytes | memoryview] = []
    view = memoryview(data)
    pos = 0
    for header in headers:
        batch = view[pos : pos + header.size]
        pos += header.size
        if header.compression == codec:
            parts.append(batch)
            continue
        try:
            parts.append(recompress_batch(
                batch, codec, level, max_uncompressed=MAX_RECOMPRESSED_BATCH_BYTES
            ))
        except CorruptBatch as exc:
            raise CorruptBatch(f"batch at offset {header.base_offset}: {exc}") from exc
    out = b"".join(parts)
    return out, parse_batches(out, max_batch_bytes=len(out))
