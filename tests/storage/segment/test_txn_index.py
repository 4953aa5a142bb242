"""The .txnindex file: entries round-trip and are collected; a damaged tail is cut."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from brokerd.storage.segment.txn_index import TXN_ENTRY_SIZE, AbortedEntry, TxnIndex


def test_txnindex_round_trip_and_collect(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TxnIndex(path)
    assert index.load(0, 100) == 0 and not index.exists
    entries = [AbortedEntry(1, 2, 5, 2), AbortedEntry(2, 3, 9, 3), AbortedEntry(1, 10, 12, 10)]
    for e in entries:
        index.append(e)
    index.sync()
    with pytest.raises(ValueError):
        index.append(AbortedEntry(3, 1, 12, 1))
    assert os.path.getsize(path) == 3 * TXN_ENTRY_SIZE
    index.close()
    again = TxnIndex(path)
    assert again.load(0, 100) == 0
    assert again.entries == entries and again.exists
    out: list[AbortedEntry] = []
    again.collect(6, 11, out)
    assert out == entries[1:]
    out = []
    again.collect(6, 10, out)  # the third begins at 10: not below the upper bound
    assert out == [entries[1]]
    assert again.has_marker(9) and not again.has_marker(8)
    again.delete()
    assert not os.path.exists(path)


def test_txnindex_damage_is_cut(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TxnIndex(path)
    for e in [AbortedEntry(1, 2, 5, 2), AbortedEntry(2, 3, 9, 3), AbortedEntry(1, 10, 12, 10)]:
        index.append(e)
    index.close()
    with open(path, "ab") as f:
        f.write(b"\x00" * 7)  # a torn entry
    again = TxnIndex(path)
    assert again.load(0, 100) == 0
    assert len(again) == 3 and os.path.getsize(path) == 3 * TXN_ENTRY_SIZE
    # A marker past the recovered end, and everything after it, goes.
    assert again.load(0, 9) == 2
    assert len(again) == 1 and os.path.getsize(path) == TXN_ENTRY_SIZE
    # A bad version stops the read there.
    with open(path, "r+b") as f:
        f.write(b"\x00\x07")
    assert again.load(0, 100) == 1 and len(again) == 0
    # Out of order or first > last: damage too.
    index = TxnIndex(path)
    index.load(0, 100)
    index.append(AbortedEntry(1, 2, 5, 2))
    index.close()
    with open(path, "ab") as f:
        f.write(struct.pack(">hqqqq", 0, 1, 9, 4, 0))
    assert again.load(0, 100) == 1 and len(again) == 1
    again.close()
