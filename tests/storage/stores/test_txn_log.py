"""The transaction state journal (brokerd.storage.stores.txn_log) on real files: round trip, torn
tail, CRC damage, compaction, refusal of values and lengths the format cannot carry."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zlib

import attrs
from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import StorageError
from brokerd.storage.stores import txn_log
from brokerd.storage.stores.txn_log import (
    MAGIC,
    MAX_RECORD_BYTES,
    TXN_LOG_FILE_NAME,
    StoredOffset,
    StoredTxn,
    TxnLog,
    decode_body,
    encode_state,
)


def txn(tid: str = "t", state: str = "Ongoing", epoch: int = 0, **kw: object) -> StoredTxn:
    fields: dict[str, object] = {
        "transactional_id": tid,
        "producer_id": 42,
        "producer_epoch": epoch,
        "last_producer_id": -1,
        "last_producer_epoch": -1,
        "timeout_ms": 60_000,
        "state": state,
        "partitions": (("orders", 0), ("orders", 3)),
        "offsets": (
            ("g1", (StoredOffset("orders", 0, 10, 2, "meta"), StoredOffset("x", 1, 5, -1, None))),
            ("g2", ()),
        ),
        "start_time_ms": 1_700_000_000_000,
        "last_update_ms": 1_700_000_000_500,
    }
    fields.update(kw)
    return StoredTxn(**fields)  # type: ignore[arg-type]


class TxnLogTests(SynchronousTestCase):
    def temp_path(self) -> str:
        """A fresh path in a private temporary directory removed after the test."""
        base = tempfile.mkdtemp(prefix="brokerd-txn-")
        self.addCleanup(shutil.rmtree, base, True)
        return os.path.join(base, "d")

    def setUp(self) -> None:
        self.dir = self.temp_path()
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, TXN_LOG_FILE_NAME)

    def reopen(self, log: TxnLog | None = None, **kw: int) -> TxnLog:
        if log is not None:
            log.close()
        new = TxnLog.open(self.dir, **kw)
        self.addCleanup(new.close)
        return new

    def test_new_file_has_magic_only(self) -> None:
        log = self.reopen()
        self.assertEqual(log.transactions(), {})
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), MAGIC)
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)

    def test_write_records_keeps_puts_and_forgets_in_their_order(self) -> None:
        log = self.reopen()
        a, b = txn("a"), txn("b", "Empty", partitions=(), offsets=())
        log.write_records([a, "a", b, "b", b])  # one write: a forgotten, b put again
        self.assertEqual(set(log.transactions()), {"b"})
        log = self.reopen(log)
        self.assertEqual(log.transactions(), {"b": b})

    def test_round_trip_last_record_wins_and_tombstones(self) -> None:
        log = self.reopen()
        a, b = txn("a"), txn("b", "Empty", partitions=(), offsets=())
        log.write(put=[a, b])
        log.write(put=[attrs.evolve(a, state="PrepareCommit", producer_epoch=1)])
        log.write(put=[txn("c\udcff unicode é")])
        log.write(delete=["b"])
        expected = {
            "a": attrs.evolve(a, state="PrepareCommit", producer_epoch=1),
            "c\udcff unicode é": txn("c\udcff unicode é"),
        }
        self.assertEqual(log.transactions(), expected)
        log = self.reopen(log)
        self.assertEqual(log.transactions(), expected)
        self.assertEqual(log.journal.truncated_bytes, 0)

    def test_every_stored_state_round_trips(self) -> None:
        for state in txn_log.STORED_STATES:
            value = txn(state=state)
            self.assertEqual(decode_body(encode_state(value)[8:]), value)

    def test_torn_tail_is_truncated(self) -> None:
        log = self.reopen()
        log.write(put=[txn("a")])
        good = os.path.getsize(self.path)
        log.write(put=[txn("b")])
        log.close()
        full = os.path.getsize(self.path)
        for cut in (good + 3, full - 1):
            with open(self.path, "r+b") as f:
                f.truncate(cut)
            log = self.reopen()
            self.assertEqual(set(log.transactions()), {"a"})
            self.assertEqual(log.journal.truncated_bytes, cut - good)
            self.assertEqual(os.path.getsize(self.path), good)
            # New records land right after the last good one.
            log.write(put=[txn("b")])
            log.close()
            self.assertEqual(os.path.getsize(self.path), full)

    def test_crc_damage_stops_replay_there(self) -> None:
        log = self.reopen()
        log.write(put=[txn("a")])
        good = os.path.getsize(self.path)
        log.write(put=[txn("b")])
        log.write(put=[txn("c")])
        log.close()
        with open(self.path, "r+b") as f:
            f.seek(good + 20)
            byte = f.read(1)
            f.seek(good + 20)
            f.write(bytes([byte[0] ^ 0xFF]))
        log = self.reopen()
        self.assertEqual(set(log.transactions()), {"a"})
        self.assertEqual(os.path.getsize(self.path), good)

    def test_huge_length_is_refused_without_reading_it(self) -> None:
        log = self.reopen()
        log.write(put=[txn("a")])
        log.close()
        good = os.path.getsize(self.path)
        with open(self.path, "ab") as f:
            f.write(struct.pack(">II", 0xFFFFFFF0, 0) + b"x" * 100)
        log = self.reopen()
        self.assertEqual(set(log.transactions()), {"a"})
        self.assertEqual(log.journal.truncated_bytes, 108)
        self.assertEqual(os.path.getsize(self.path), good)

    def test_huge_count_in_a_valid_frame_is_refused(self) -> None:
        body = bytearray(encode_state(txn("a", partitions=(), offsets=()))[8:])
        # The partition count follows the id and the fixed fields.
        count_at = 1 + 2 + 1 + 8 + 2 + 8 + 2 + 4 + 1 + 8 + 8
        body[count_at : count_at + 4] = struct.pack(">I", 0xFFFFFFFF)
        self.assertRaises(ValueError, decode_body, bytes(body))
        log = self.reopen()
        log.write(put=[txn("ok")])
        log.close()
        with open(self.path, "ab") as f:
            f.write(struct.pack(">II", len(body), zlib.crc32(body)) + bytes(body))
        self.assertEqual(set(self.reopen().transactions()), {"ok"})

    def test_not_a_transaction_log(self) -> None:
        with open(self.path, "wb") as f:
            f.write(b"BKOFFS03" + b"\0" * 10)
        self.assertRaises(StorageError, TxnLog.open, self.dir)
        with open(self.path, "wb") as f:
            f.write(b"XX")
        self.assertRaises(StorageError, TxnLog.open, self.dir)

    def test_torn_magic_is_rewritten(self) -> None:
        with open(self.path, "wb") as f:
            f.write(MAGIC[:3])
        log = self.reopen()
        self.assertEqual(log.journal.truncated_bytes, 3)
        log.write(put=[txn()])
        self.assertEqual(set(self.reopen(log).transactions()), {"t"})

    def test_values_out_of_range_write_nothing(self) -> None:
        log = self.reopen()
        size = os.path.getsize(self.path)
        bad = [
            txn(epoch=40_000),
            txn(state="Dead"),
            txn(partitions=(("x", 2**31),)),
            txn("x" * 40_000),
            txn(offsets=(("g", (StoredOffset("t", 0, 2**63, 0, None),)),)),
        ]
        for value in bad:
            self.assertRaises(ValueError, log.write, put=[txn("fine"), value])
        self.assertEqual(os.path.getsize(self.path), size)
        self.assertEqual(log.transactions(), {})

    def test_compaction_keeps_latest_and_drops_tombstoned(self) -> None:
        log = self.reopen(compact_min_bytes=4096, compact_ratio=2)
        for i in range(200):
            log.write(put=[txn("a", epoch=i % 100), txn("b", epoch=1)])
        log.write(delete=["b"])
        self.assertGreater(log.journal.compactions, 0)
        self.assertLess(os.path.getsize(self.path), 4096 * 2)
        self.assertEqual(log.transactions(), {"a": txn("a", epoch=199 % 100)})
        self.assertEqual(self.reopen(log).transactions(), {"a": txn("a", epoch=99)})
        self.assertFalse(os.path.exists(self.path + ".tmp"))

    def test_open_compacts_a_bloated_file(self) -> None:
        log = self.reopen()
        for i in range(100):
            log.write(put=[txn("a", epoch=i)])
        before = os.path.getsize(self.path)
        log = self.reopen(log, compact_min_bytes=1024, compact_ratio=2)
        self.assertEqual(log.journal.compactions, 1)
        self.assertLess(os.path.getsize(self.path), before)
        self.assertEqual(log.transactions()["a"].producer_epoch, 99)

    def test_failed_write_fails_only_itself(self) -> None:
        """A write that fails (nothing reached the file) is not latched: the next write
        is tried and succeeds (a full disk that got space back)."""
        log = self.reopen()
        os.close(log.journal._fd)  # a disk that fails: the next write gets EBADF
        log.journal._fd = os.open(self.path, os.O_RDONLY)
        self.assertRaises(StorageError, log.write, put=[txn()])
        self.assertEqual(log.transactions(), {})
        self.assertIsNone(log.journal.offline_reason)
        os.close(log.journal._fd)
        log.journal._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        log.write(put=[txn()])
        self.assertEqual(self.reopen(log).transactions(), {"t": txn()})

    def test_closed_log_refuses_writes(self) -> None:
        log = self.reopen()
        log.close()
        log.close()
        self.assertRaises(StorageError, log.write, put=[txn()])

    def test_max_record_limit(self) -> None:
        self.assertEqual(MAX_RECORD_BYTES, 64 << 20)
        huge = txn(partitions=tuple(("t" * 249, i) for i in range(MAX_RECORD_BYTES // 250)))
        self.assertRaises(ValueError, encode_state, huge)
