"""Producer-state snapshots and the batch-header replay the core restores them with."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.batch import encode_batch, parse_batches
from brokerd.storage.log import LogConfig, PartitionLog
from brokerd.storage.producer_state import SNAPSHOT_NAME, read_snapshot, write_snapshot


def test_snapshot_round_trip_and_garbage(tmp_path: Path) -> None:
    write_snapshot(str(tmp_path), 42, {7: {"epoch": 1, "batches": [[0, 2, 40, 42]]}})
    assert read_snapshot(str(tmp_path)) == (42, {7: {"epoch": 1, "batches": [(0, 2, 40, 42)]}})
    assert not (tmp_path / (SNAPSHOT_NAME + ".tmp")).exists()
    for junk in (b"", b"{", b'{"format": 1}', b'{"format": 9, "end_offset": 1}', b"\xff" * 10):
        (tmp_path / SNAPSHOT_NAME).write_bytes(junk)
        assert read_snapshot(str(tmp_path)) is None
    (tmp_path / SNAPSHOT_NAME).unlink()
    assert read_snapshot(str(tmp_path)) is None


def test_batch_headers_from_an_offset_across_segments(tmp_path: Path) -> None:
    log = PartitionLog.open(
        str(tmp_path / "t-0"), LogConfig(segment_bytes=2048), recovery_point=None
    )
    for i in range(50):
        data = encode_batch(
            [b"x" * 30] * 3, timestamp_ms=1, producer_id=7, producer_epoch=0, base_sequence=3 * i
        )
        log.append(data, parse_batches(data, max_batch_bytes=1 << 20))
    log.publish()
    assert len(log.segment_bases) > 3
    headers = log.batch_headers(100)
    assert [h.base_offset for h in headers] == list(range(99, 150, 3))
    assert [h.base_sequence for h in headers] == list(range(99, 150, 3))
    assert len(log.batch_headers(0)) == 50
    assert log.batch_headers(150) == []
    log.close()
