"""The ongoing transactions tracker, pure: the last stable offset, the aborted entries,
batches that are not transactional."""

from __future__ import annotations

from brokerd.storage.log.ongoing_txns import TxnTracker
from brokerd.storage.record.control import encode_marker
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import read_header
from brokerd.storage.segment.txn_index import AbortedEntry


def test_tracker_lso_and_aborted_entries() -> None:
    t = TxnTracker()
    assert t.stable_end(10) == 10 and not t
    t.begin(1, 10)
    t.begin(1, 15)  # already ongoing: first offset stays
    t.begin(2, 12)
    assert t.first_unstable() == 10 and t.stable_end(20) == 10
    assert t.stable_end(8) == 8  # never past the data end
    assert t.end(1, 20, commit=True) is None
    assert t.stable_end(21) == 12
    assert t.end(2, 22, commit=False) == AbortedEntry(2, 12, 22, 23)
    assert t.end(3, 23, commit=False) is None  # no ongoing transaction: nothing recorded
    assert t.stable_end(24) == 24


def test_tracker_aborted_entry_lso_is_that_of_the_marker_time() -> None:
    t = TxnTracker({1: 5, 2: 3})
    entry = t.end(1, 9, commit=False)
    assert entry == AbortedEntry(1, 5, 9, 3)  # producer 2 still holds the LSO at 3
    t.forget_below(4)
    assert t.ongoing == {2: 4}
    t.restore([(8, 1)])
    assert t.ongoing == {8: 1}


def test_tracker_observe_ignores_non_transactional_batches() -> None:
    t = TxnTracker()
    header = read_header(encode_batch([b"x"], timestamp_ms=0, producer_id=4, base_offset=3))
    assert t.observe(header) is None and not t
    txn = read_header(
        encode_batch([b"x"], timestamp_ms=0, producer_id=4, transactional=True, base_offset=3)
    )
    t.observe(txn)
    assert t.ongoing == {4: 3}
    abort = read_header(
        encode_marker(4, 0, commit=False, coordinator_epoch=0, timestamp_ms=0, base_offset=6)
    )
    assert t.observe(abort, commit=False) == AbortedEntry(4, 3, 6, 7)
