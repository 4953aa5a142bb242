"""A partition's storage settings: their bounds, the cleanup policy's values and the
codec and level a ``compression.type`` stores batches with."""

from __future__ import annotations

import pytest

from brokerd.storage.config.log_config import INT32_MAX, LogConfig
from brokerd.storage.record.compression import Compression


@pytest.mark.parametrize(
    "bad",
    [
        {"segment_bytes": 0},
        {"segment_bytes": INT32_MAX + 1},
        {"retention_ms": -1},
        {"index_interval_bytes": -1},
        {"min_cleanable_dirty_ratio": 1.5},
        {"cleanup_policy": frozenset()},
        {"cleanup_policy": {"delete", "archive"}},
        {"segment_index_bytes": 3},
        {"message_timestamp_type": "Now"},
        {"compression_type": "brotli"},
    ],
)
def test_values_out_of_bounds_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LogConfig(**bad)  # type: ignore[arg-type]


def test_the_cleanup_policy_says_delete_and_compact() -> None:
    assert (LogConfig().delete, LogConfig().compact) == (True, False)
    both = LogConfig(cleanup_policy=["compact", "delete"])  # type: ignore[arg-type]
    assert both.cleanup_policy == frozenset({"compact", "delete"})
    assert (both.delete, both.compact) == (True, True)


def test_compression_is_the_codec_with_its_level_or_none_for_producer() -> None:
    assert LogConfig().compression is None
    assert LogConfig(compression_type="zstd", compression_zstd_level=7).compression == (
        Compression.ZSTD, 7
    )
    assert LogConfig(compression_type="gzip").compression == (Compression.GZIP, -1)
    assert LogConfig(compression_type="lz4").compression == (Compression.LZ4, 9)
    assert LogConfig(compression_type="snappy").compression == (Compression.SNAPPY, None)
    uncompressed = LogConfig(compression_type="uncompressed").compression
    assert uncompressed == (Compression.NONE, None)
