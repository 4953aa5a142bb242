"""Response frames whose record bytes are not copied (:mod:`brokerd.net.frames`): how a
spliced frame groups its parts, and the ``records`` helpers on bytes and file regions."""

from __future__ import annotations

from brokerd.net.frames import (
    OWN_PART_BYTES,
    SplicedFrame,
    cut_records,
    frame_memory_bytes,
    records_size,
    release_records,
)
from brokerd.storage.types import StoredRecords


class FakeRegion:
    def __init__(self, length: int) -> None:
        self.position = 0
        self.length = length
        self.released = False

    def fileno(self) -> int:
        raise AssertionError("not sent here")

    def read(self) -> bytes:
        return b"r" * self.length

    def read_at(self, offset: int, size: int) -> bytes:
        return b"r" * size

    def truncate(self, length: int) -> None:
        self.length = length

    def release(self) -> None:
        self.released = True


def test_short_parts_are_joined_and_long_parts_and_regions_kept_apart() -> None:
    region = FakeRegion(1000)
    big = b"b" * OWN_PART_BYTES
    frame = SplicedFrame.of(
        [b"a", b"b", StoredRecords(region), b"c", big, StoredRecords(b"d"), b"e"])
    assert frame.parts == (b"ab", region, b"c", big, b"de")
    assert frame.size == 2 + 1000 + 1 + OWN_PART_BYTES + 2
    assert frame.regions == (region,)
    assert frame_memory_bytes(frame) == 2 + 1 + OWN_PART_BYTES + 2
    assert frame_memory_bytes(b"xyz") == 3


def test_records_size_of_each_kind() -> None:
    assert records_size(None) == 0
    assert records_size(b"12345") == 5
    assert records_size(StoredRecords(b"123")) == 3
    assert records_size(StoredRecords(FakeRegion(42))) == 42


def test_cutting_bytes_and_stored_bytes() -> None:
    assert cut_records(b"abcdef", 2) == b"ab"
    cut = cut_records(StoredRecords(b"abcdef"), 4)
    assert isinstance(cut, StoredRecords) and cut.payload == b"abcd"
    assert cut_records(StoredRecords(b"abcdef"), 0) == b""


def test_cutting_a_region_truncates_it_in_place_or_releases_it() -> None:
    region = FakeRegion(100)
    records = StoredRecords(region)
    assert cut_records(records, 40) is records
    assert region.length == 40 and not region.released
    assert cut_records(records, 500) is records
    assert region.length == 40  # never grown
    assert cut_records(records, 0) == b""
    assert region.released


def test_release_records_gives_back_regions_only() -> None:
    region = FakeRegion(10)
    release_records(StoredRecords(region))
    assert region.released
    release_records(StoredRecords(b"abc"))  # bytes: nothing to give back
    release_records(b"abc")
    release_records(None)
