"""Transactions of one partition log (``brokerd/storage/log/txns.py``), on a hand-built
shared state with a plain write of batches: markers end ongoing transactions, an abort is
recorded in the segment's ``.txnindex``, the LSO stays at the first open transaction, and
committed reads learn what to skip."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.log.loader import open_segments
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.producer_state import ProducerStateManager
from brokerd.storage.log.txns import PartitionTxns
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import AbortedTxn

from tests.storage.log.log_parts import append, close, new_state, publish, write


def txn_batch(state: LogState, txns: PartitionTxns, pid: int, values: list[bytes]) -> int:
    """Append a transactional batch of ``pid`` as the log does; its base offset."""
    base = state.log_end_offset
    data = encode_batch(
        values, timestamp_ms=0, producer_id=pid, producer_epoch=0, transactional=True,
        base_offset=base,
    )
    txns.ensure_txn_file(state.segments[-1])
    write(state, data, [(base, base + len(values) - 1, 0, len(data))], len(values))
    txns.begin_txns([(pid, base)])
    return base


def publish_txns(state: LogState, txns: PartitionTxns) -> None:
    publish(state, lso=txns.stable_end(state.log_end_offset))


def test_markers_move_the_lso_and_aborts_are_recorded(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    txns = PartitionTxns(state, lambda *a, **kw: write(state, *a, **kw), ProducerStateManager())
    try:
        assert not txns.transactional and not txns.any_aborted
        append(state, [b"plain"])  # 0
        first = txn_batch(state, txns, 7, [b"x", b"y"])  # 1-2
        txn_batch(state, txns, 8, [b"z"])  # 3
        publish_txns(state, txns)
        assert txns.transactional and state.segments[-1].txnindex.exists
        assert state.last_stable_offset == first == 1
        assert txns.txn_snapshot() == (4, {7: 1, 8: 3})
        abort = txns.append_marker(7, 0, commit=False, coordinator_epoch=1, timestamp_ms=5)
        publish_txns(state, txns)
        assert abort.base_offset == 4 and txns.any_aborted
        assert state.last_stable_offset == 3  # producer 8 is still open
        txns.append_marker(8, 0, commit=True, coordinator_epoch=1, timestamp_ms=6)
        publish_txns(state, txns)
        assert state.last_stable_offset == 6 and txns.txn_snapshot() == (6, {})
        assert txns.aborted_txns(0, 6) == (AbortedTxn(7, 1),)
        assert txns.aborted_txns(5, 6) == ()  # fetched from past its marker
        committed = txns.committed_filter(0, 6)
        assert committed is not None and committed.stop == 6
        assert committed.skips(False, 7, 1) and not committed.skips(False, 8, 3)
        assert committed.skips(True, 8, 5)  # a marker: never shown
    finally:
        close(state)


def test_a_partition_without_transactions_skips_nothing(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    txns = PartitionTxns(state, lambda *a, **kw: write(state, *a, **kw), ProducerStateManager())
    try:
        append(state, [b"a"])
        publish(state)
        assert txns.committed_filter(0, 1) is None
        assert txns.aborted_txns(0, 1) == ()
        assert txns.stable_end(1) == 1
    finally:
        close(state)


def test_recover_rebuilds_the_open_transactions_from_the_segments(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    txns = PartitionTxns(state, lambda *a, **kw: write(state, *a, **kw), ProducerStateManager())
    txn_batch(state, txns, 7, [b"x"])  # 0, aborted
    txns.append_marker(7, 0, commit=False, coordinator_epoch=1, timestamp_ms=5)  # 1
    txn_batch(state, txns, 9, [b"y"])  # 2, left open
    for segment in state.segments:
        segment.seal()
    close(state)
    # Opened again: the segments as the loader finds them.
    segments, _stats = open_segments(str(tmp_path / "t-0"), 4096, None)
    state = LogState(str(tmp_path / "t-0"), state.config, lambda: 0.0, segments)
    try:
        again = PartitionTxns(
            state, lambda *a, **kw: write(state, *a, **kw), ProducerStateManager()
        )
        assert again.transactional and again.any_aborted
        assert state.log_end_offset == 3
        again.recover()
        assert again.txn_snapshot() == (3, {9: 2})
        assert state.visible[0] == 3 and state.visible[3] == 2  # the LSO published
        assert again.aborted_txns(0, 3) == (AbortedTxn(7, 0),)
    finally:
        close(state)
