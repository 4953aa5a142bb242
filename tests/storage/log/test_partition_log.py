"""The partition log facade (``brokerd/storage/log/partition_log.py``): it holds its parts
(composition, no mixins, no part reaching into its host through a self-typed Protocol) and
callers reach every part's job through it. The behaviour in depth is tested in
tests/storage/log/test_partition_log_files.py, tests/storage/log/test_txns_log.py,
tests/storage/log/test_stored_reads_by_reference.py and the tests of
each part beside this file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import brokerd.storage.log.partition_log
from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog

from tests.read_specs import BYTES, COMMITTED, COMMITTED_RECORDS, REFERENCE, span_of

LOG_PACKAGE = Path(brokerd.storage.log.partition_log.__file__).parent
BIG = 1 << 20


def test_the_log_is_composed_not_mixed() -> None:
    assert PartitionLog.__mro__ == (PartitionLog, object)
    # No method of the package types its ``self``: a part holds what it works on.
    typed_self = [
        f"{path.name}:{node.lineno}"
        for path in LOG_PACKAGE.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.args.args
        and node.args.args[0].arg == "self"
        and node.args.args[0].annotation is not None
    ]
    assert typed_self == []


def open_log(path: Path, **config: int) -> PartitionLog:
    return PartitionLog.open(
        str(path), LogConfig(**config), recovery_point=None, clock=lambda: 0.0
    )


def test_callers_reach_every_part_through_the_facade(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=200)
    try:
        for i in range(6):
            plog.append_values([b"%d" % i * 100], timestamp_ms=i)
        plog.flush()
        assert plog.publish() == 6 == plog.high_watermark == plog.log_end_offset
        assert plog.recovery_point == 6 and len(plog.segments) > 2
        # The reads (stored_reads.py): every form through one call.
        stored = plog.read(0, BIG, REFERENCE)
        span = span_of(stored)
        assert span is not None and plog.verified.covers(plog.segments[0], 0, span.length)
        span.release()
        assert plog.read(2, BIG, COMMITTED_RECORDS).decoded[0].value == b"2" * 100
        assert plog.read(6, BIG, BYTES).records == b""
        # Transactions (txns.py): a marker with nothing open, and the LSO.
        plog.append_marker(9, 0, commit=False, coordinator_epoch=0, timestamp_ms=7)
        plog.publish()
        assert plog.last_stable_offset == 7 == plog.high_watermark
        assert plog.txn_snapshot() == (7, {})
        assert plog.read(0, BIG, COMMITTED).aborted == ()
        # The log start (start.py), then retention (maintenance.py).
        assert plog.delete_records_before(3) == 3 == plog.log_start_offset
        with pytest.raises(OffsetOutOfRange):
            plog.read(2, BIG, BYTES)
        assert plog.cleanable_end == 6  # the marker is not flushed yet
        plog.flush()
        assert plog.cleanable_end == 7
        plog.reconfigure(LogConfig(segment_bytes=200, retention_bytes=0))
        assert plog.enforce_retention() >= 1
        assert plog.segment_bases[0] == plog.log_start_offset
    finally:
        plog.close()
    with pytest.raises(UnknownTopicOrPartition):
        plog.read(0, BIG, BYTES)
