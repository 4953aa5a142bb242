"""Damage below the recovery point is quarantined, not truncated: acknowledged batches
after it survive a crash (the rule is in brokerd/storage/segment/resync.py and
docs/operations.md, "Recovery"). Several damage shapes: a payload byte, the CRC field,
the length field (smaller and larger), the magic byte, a zeroed batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import CorruptStoredBatch
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.header import scan_batches

from tests.read_specs import BYTES, COMMITTED_RECORDS

# No roll by age: the records' 1970 timestamps would make the default segment.ms (7 days)
# roll the reopened segment at the first append, and these cases damage one segment.
CONFIG = LogConfig(index_interval_bytes=400, segment_ms=None)
BATCHES = 200
PER_BATCH = 5
VICTIM = 100


def value(offset: int) -> bytes:
    return b"record-%06d" % offset


def write_clean(path: Path) -> None:
    plog = PartitionLog.open(str(path), CONFIG, recovery_point=None)
    for b in range(BATCHES):
        plog.append_values(
            [value(b * PER_BATCH + i) for i in range(PER_BATCH)], timestamp_ms=1000 + b
        )
    plog.close()


def damage(path: Path, shape: str) -> tuple[int, int]:
    """Damage batch VICTIM of the only segment; returns its (position, size)."""
    log_file = next(p for p in path.iterdir() if p.name.endswith(".log"))
    data = bytearray(log_file.read_bytes())
    pos, header = scan_batches(bytes(data)).batches[VICTIM]
    if shape == "payload":
        data[pos + header.size - 3] ^= 0x40
    elif shape == "crc":
        data[pos + 18] ^= 0x01
    elif shape == "length-small":
        data[pos + 8 : pos + 12] = (49).to_bytes(4, "big")
    elif shape == "length-large":
        data[pos + 8 : pos + 12] = (header.batch_length + 777).to_bytes(4, "big")
    elif shape == "magic":
        data[pos + 16] = 7
    elif shape == "zeroed":
        data[pos : pos + header.size] = bytes(header.size)
    else:
        raise AssertionError(shape)
    log_file.write_bytes(bytes(data))
    return pos, header.size


def crash(plog: PartitionLog) -> None:
    """What kill -9 leaves: files as written, indexes not persisted, nothing closed."""
    for segment in plog.segments:
        segment.close()


SHAPES = ["payload", "crc", "length-small", "length-large", "magic", "zeroed"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("point", [1000, 1001])
def test_acknowledged_record_survives_damage_below_recovery_point(
    tmp_path: Path, shape: str, point: int, caplog: pytest.LogCaptureFixture
) -> None:
    write_clean(tmp_path)
    pos, _size = damage(tmp_path, shape)
    # Clean start: nothing is rescanned, the damage goes unnoticed.
    plog = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=None)
    info = plog.append_values([b"acknowledged"], timestamp_ms=5000)
    plog.flush()  # --fsync always: acknowledged only after this
    plog.publish()
    assert info.base_offset == 1000
    crash(plog)

    plog = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=point)
    try:
        assert plog.high_watermark == 1001
        assert plog.log_end_offset == 1001
        assert plog.recovery.regions_quarantined == 1
        assert plog.recovery.bytes_truncated == 0
        assert f"byte {pos}" in caplog.text and "quarantined" in caplog.text
        assert plog.read(1000, 100, COMMITTED_RECORDS).decoded[0].value == b"acknowledged"
        bad = range(VICTIM * PER_BATCH, (VICTIM + 1) * PER_BATCH)
        for offset in bad:
            with pytest.raises(CorruptStoredBatch, match="damaged"):
                plog.read(offset, 100, COMMITTED_RECORDS)
            with pytest.raises(CorruptStoredBatch):
                plog.read(offset, 100, BYTES)
        # Everything around it is served, by both read paths.
        for offset in [*range(0, bad.start), *range(bad.stop, 1000)]:
            records = plog.read(offset, 1, COMMITTED_RECORDS).decoded
            assert records[0].offset == offset and records[0].value == value(offset)
            raw = plog.read(offset, 64, BYTES).records
            first = next(iter(decode_records(raw, max_uncompressed=1 << 20)))
            assert first.offset <= offset
        # A read running into the damage stops before it.
        raw = plog.read(bad.start - 1, 1 << 20, BYTES).records
        offsets = [r.offset for r in decode_records(raw, max_uncompressed=1 << 20)]
        assert offsets[-1] == bad.start - 1
        # Producer-state style header walks step over the quarantined region.
        headers = plog.batch_headers(bad.start - 10)
        assert [h.base_offset for h in headers][:3] == [490, 495, 505]
        # Appends continue after the acknowledged record.
        assert plog.append_values([b"next"], timestamp_ms=6000).base_offset == 1001
    finally:
        plog.close()


@pytest.mark.parametrize("shape", ["payload", "length-large"])
def test_damage_past_recovery_point_is_still_a_torn_tail(tmp_path: Path, shape: str) -> None:
    """Kafka's rule is kept for the unflushed region: cut at the first bad byte."""
    write_clean(tmp_path)
    damage(tmp_path, shape)
    plog = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=0)
    try:
        assert plog.high_watermark == VICTIM * PER_BATCH
        assert plog.recovery.regions_quarantined == 0
        assert plog.recovery.bytes_truncated > 0
    finally:
        plog.close()


def test_quarantine_without_a_later_valid_batch_cuts(tmp_path: Path) -> None:
    """Damage in the last batch with nothing valid after it: nothing to keep."""
    write_clean(tmp_path)
    log_file = next(p for p in tmp_path.iterdir() if p.name.endswith(".log"))
    data = bytearray(log_file.read_bytes())
    pos, header = scan_batches(bytes(data)).batches[-1]
    data[pos + header.size - 2] ^= 0x01
    log_file.write_bytes(bytes(data))
    plog = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=1000)
    try:
        assert plog.high_watermark == 995
        assert plog.recovery.bytes_truncated == header.size
        assert plog.read(995, 10, COMMITTED_RECORDS).decoded == ()
        assert plog.read(994, 10, COMMITTED_RECORDS).decoded[-1].offset == 994
    finally:
        plog.close()


def test_fresh_data_directory_is_not_an_unclean_shutdown(tmp_path: Path) -> None:
    from brokerd.storage.logdir.log_directory import LogDirectory

    fresh = LogDirectory.open(str(tmp_path / "new"))
    try:
        assert fresh.was_clean
        fresh.topic_changes.create_topic("t", 1)
        fresh.get("t", 0).append_values([b"x"], timestamp_ms=1)
    finally:
        fresh.close()
    # A crash (no marker) in a used directory is still an unclean shutdown.
    (tmp_path / "new" / ".clean_shutdown").unlink()
    again = LogDirectory.open(str(tmp_path / "new"))
    try:
        assert not again.was_clean
    finally:
        again.close()
