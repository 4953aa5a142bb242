"""The record framing the journals share: one frame per body, a walk that stops at the
first torn, oversized or corrupt record, and a body cursor that refuses overruns."""

from __future__ import annotations

import struct

from twisted.trial.unittest import SynchronousTestCase

from brokerd.storage.journal.records import RECORD_HEADER, BodyReader, frame, iter_frames


class SharedFramingTests(SynchronousTestCase):
    """The framing every journal uses (brokerd/storage/journal/records.py)."""

    def test_frames_stop_at_a_torn_oversized_or_corrupt_record(self) -> None:
        good = frame(b"one", 16, "test") + frame(b"two", 16, "test")
        self.assertEqual([b for b, _s, _e in iter_frames(good, 0, 16)], [b"one", b"two"])
        self.assertEqual([b for b, _s, _e in iter_frames(good[:-1], 0, 16)], [b"one"])
        corrupt = bytearray(good)
        corrupt[-1] ^= 1
        self.assertEqual([b for b, _s, _e in iter_frames(bytes(corrupt), 0, 16)], [b"one"])
        # A length above the limit is refused before anything is sliced.
        self.assertEqual(list(iter_frames(b"\xff\xff\xff\xff\x00\x00\x00\x00", 0, 16)), [])
        self.assertRaises(ValueError, frame, b"x" * 17, 16, "test")
        reader = BodyReader(b"\x00\x00\x00\x09ab")
        self.assertRaises(ValueError, reader.count, 1)  # 9 items cannot fit in 2 bytes

    def test_frame_is_length_crc_and_body_and_walks_from_an_offset(self) -> None:
        framed = frame(b"abc", 16, "test")
        length, _crc = RECORD_HEADER.unpack_from(framed, 0)
        self.assertEqual((length, framed[RECORD_HEADER.size :]), (3, b"abc"))
        data = b"\x00" * 5 + framed + frame(b"", 16, "test")
        self.assertEqual(
            list(iter_frames(data, 5, 16)),
            [(b"abc", 5, 5 + len(framed)), (b"", 5 + len(framed), len(data))],
        )

    def test_body_reader_takes_unpacks_and_refuses_overruns(self) -> None:
        reader = BodyReader(b"\x00\x00\x00\x02xyz")
        self.assertEqual(reader.count(1), 2)
        self.assertEqual(reader.take(2), b"xy")
        self.assertFalse(reader.done())
        self.assertRaises(ValueError, reader.take, 2)
        self.assertRaises(ValueError, reader.take, -1)
        self.assertEqual(reader.unpack(struct.Struct(">B")), (ord("z"),))
        self.assertTrue(reader.done())
