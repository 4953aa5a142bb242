"""What a compacted topic refuses on produce: records without a key, in any codec."""

from __future__ import annotations

import pytest

from brokerd.errors import InvalidRecord
from brokerd.storage.log.produce_checks import refuse_keyless
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches


def test_keyless_records_are_refused() -> None:
    keyed = encode_batch([b"v"], keys=[b"k"], timestamp_ms=1)
    refuse_keyless(keyed, parse_batches(keyed, max_batch_bytes=1 << 20), "t", 0)
    for codec in (Compression.NONE, Compression.ZSTD):
        bad = encode_batch([b"v", b"w"], keys=[b"k", None], timestamp_ms=1, compression=codec)
        with pytest.raises(InvalidRecord, match="Compacted topic cannot accept") as info:
            refuse_keyless(bad, parse_batches(bad, max_batch_bytes=1 << 20), "t", 0)
        assert [i for i, _ in info.value.record_errors] == [1]
