"""What a segment opened at start leaves out: its first batch's timestamp (its age, for
segment_ms rolling) is read only when asked, and its .txnindex only if the directory
listing showed one; on real files."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.txn_index import AbortedEntry

BASE = 7


def _closed_segment(directory: Path, first_ts: int) -> None:
    segment = Segment.create(str(directory), BASE, 4096)
    for i, ts in enumerate((first_ts, first_ts + 50)):
        base = segment.next_offset
        data = encode_batch([b"v%d" % i], timestamp_ms=ts, base_offset=base)
        segment.append(data, [(base, base, ts, len(data))])
    segment.close()


def test_age_read_on_first_use(tmp_path: Path) -> None:
    _closed_segment(tmp_path, 5000)
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        assert segment.first_append_ms == 5000.0
        assert segment.first_append_ms == 5000.0
    finally:
        segment.close()


def test_a_value_set_before_the_read_wins(tmp_path: Path) -> None:
    """The writer stamping the segment (as an append to an empty one does) is not
    overwritten by a read left pending from the open."""
    _closed_segment(tmp_path, 5000)
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        segment.first_append_ms = 123.0
        assert segment.first_append_ms == 123.0
    finally:
        segment.close()


def test_a_batch_without_timestamp_leaves_the_age_unknown(tmp_path: Path) -> None:
    _closed_segment(tmp_path, -1)
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        assert segment.first_append_ms is None
    finally:
        segment.close()


def test_an_empty_segment_has_no_age(tmp_path: Path) -> None:
    Segment.create(str(tmp_path), BASE, 4096).close()
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        assert segment.first_append_ms is None
    finally:
        segment.close()


def test_aborted_index_listed_at_open_is_loaded(tmp_path: Path) -> None:
    """The listing decides whether the .txnindex is read: a segment with aborted
    transactions still has them after a clean close and reopen, one without has none."""
    big = 1 << 20

    def open_log(name: str) -> PartitionLog:
        return PartitionLog.open(str(tmp_path / name), LogConfig(), recovery_point=None)

    with_txn, without = open_log("t-0"), open_log("t-1")
    data = encode_batch(
        [b"t1"], timestamp_ms=1000, producer_id=4, producer_epoch=0, base_sequence=0,
        transactional=True,
    )
    with_txn.append(data, parse_batches(data, max_batch_bytes=big))
    with_txn.append_marker(4, 0, commit=False, coordinator_epoch=1, timestamp_ms=1000)
    plain = encode_batch([b"p"], timestamp_ms=1000)
    without.append(plain, parse_batches(plain, max_batch_bytes=big))
    expected = list(with_txn.segments[-1].txnindex.entries)
    assert expected and isinstance(expected[0], AbortedEntry)
    with_txn.close()
    without.close()

    again, plain_again = open_log("t-0"), open_log("t-1")
    try:
        assert again.segments[-1].txnindex_listed
        assert again.segments[-1].txnindex.entries == expected
        assert not plain_again.segments[-1].txnindex_listed
        assert plain_again.segments[-1].txnindex.entries == []
    finally:
        again.close()
        plain_again.close()
