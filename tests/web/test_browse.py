"""The message browser's sans-IO parts: its query, how bytes are shown, the filters, the
default partitioner's hash, and the batch the produce form appends."""

from __future__ import annotations

import json

import pytest

from brokerd.registry.model import Schema, SchemaType, framed
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_records
from brokerd.storage.types import Record
from brokerd.web import browse
from brokerd.web.browse import (
    MAX_SHOWN_CHARS,
    BadQuery,
    BrowseQuery,
    SchemaNames,
    ShowAs,
    Start,
    StartAt,
    matches,
    parse_query,
    shown,
)

from tests.web.memory_registry import MemoryRegistry


def args(**values: str) -> dict[bytes, list[bytes]]:
    return {k.encode(): [v.encode()] for k, v in values.items()}


def test_the_query_and_its_defaults() -> None:
    assert parse_query({}, 3) == BrowseQuery()
    query = parse_query(args(partition="2", offset="17", limit="5", key="k", show="hex"), 3)
    assert query == BrowseQuery(2, Start(StartAt.OFFSET, 17), 5, key="k", show=ShowAs.HEX)
    assert parse_query(args(offset="latest"), 1).start == Start(StartAt.LATEST)
    # A time takes precedence over an offset; ISO times without an offset are UTC.
    timed = parse_query(args(offset="3", timestamp="1970-01-01T00:00:01.5"), 1)
    assert timed.start == Start(StartAt.TIMESTAMP, 1500)
    assert parse_query(args(timestamp="2000"), 1).start == Start(StartAt.TIMESTAMP, 2000)
    assert parse_query(args(timestamp="1970-01-01T01:00:00+01:00"), 1).start.value == 0
    # The next page's link keeps the filters and replaces the start.
    assert timed.arguments(offset="9") == {"partition": "0", "offset": "9"}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"partition": "3"}, "partition: 3 is out of range (from 0 to 2)"),
        ({"offset": "-1"}, "offset: -1 is out of range"),
        ({"offset": "first"}, "offset: 'first' is not a number"),
        ({"limit": "501"}, "limit: 501 is out of range (from 1 to 500)"),
        ({"timestamp": "tuesday"}, "timestamp: 'tuesday' is neither"),
        ({"show": "raw"}, "show: 'raw' is not one of auto, text, hex"),
        ({"key": "k" * 2000}, "key: longer than 1024 characters"),
    ],
)
def test_bad_queries_say_which_parameter(given: dict[str, str], message: str) -> None:
    with pytest.raises(BadQuery, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_query(args(**given), 3)
    with pytest.raises(BadQuery, match="not UTF-8"):
        parse_query({b"key": [b"\xff"]}, 1)


def test_how_bytes_are_shown() -> None:
    assert shown(None, ShowAs.AUTO, None) == browse.Shown("null", "null")
    assert shown(b'{"a":[1]}', ShowAs.AUTO, None) == browse.Shown(
        "json", '{\n  "a": [\n    1\n  ]\n}')
    assert shown(b"42", ShowAs.AUTO, None).kind == "text"  # only objects and arrays are JSON
    assert shown(b"{not json", ShowAs.AUTO, None).kind == "text"
    assert shown(b"\xff\x00", ShowAs.AUTO, None) == browse.Shown("hex", "ff 00")
    assert shown(b"abc", ShowAs.HEX, None).text == "61 62 63"
    forced = shown(b"a\xffb", ShowAs.TEXT, None)
    assert forced.text == "a\ufffdb" and "not UTF-8" in forced.note
    long = shown("é".encode() * 5000, ShowAs.AUTO, None)
    assert long.cut and len(long.text) == MAX_SHOWN_CHARS
    huge = shown(b"\xff" * 100_000, ShowAs.AUTO, None)
    assert huge.kind == "hex" and huge.cut and len(huge.text) <= MAX_SHOWN_CHARS
    # A value longer than the decode bound whose cut falls inside a character is text.
    cut = shown(b"a" * (browse.MAX_DECODE_BYTES - 1) + "é".encode(), ShowAs.AUTO, None)
    assert cut.kind == "text" and cut.cut


def test_framed_values_through_a_registry() -> None:
    registry = MemoryRegistry()
    registry.add("t-value", Schema(SchemaType.JSON, '{"type": "object"}'))
    names = SchemaNames(registry)
    value = framed(1, b'{"x": 1}')
    seen = shown(value, ShowAs.AUTO, names)
    assert seen.kind == "schema" and json.loads(seen.text) == {"x": 1}
    assert seen.note == "schema id 1, subject t-value (JSON)"
    unknown = shown(framed(9, b"\x00\x01"), ShowAs.AUTO, names)
    assert unknown.kind == "hex" and "does not know" in unknown.note
    broken = shown(framed(1, b"{no"), ShowAs.AUTO, names)
    assert broken.kind == "hex" and "schema id 1 does not decode it" in broken.note
    # Without a registry a framed value is just bytes.
    assert shown(value, ShowAs.AUTO, None).kind == "hex"


def test_filters() -> None:
    r = Record(5, 0, b"user-1", b'{"city": "Lyon"}', (("trace", b"abc"), ("kind", None)))
    assert matches(r, BrowseQuery(key="user"), None)
    assert not matches(r, BrowseQuery(key="user-2"), None)
    assert matches(r, BrowseQuery(value="Lyon"), None)
    assert matches(r, BrowseQuery(header="kind"), None)
    assert matches(r, BrowseQuery(header="trace", header_value="b"), None)
    assert not matches(r, BrowseQuery(header="kind", header_value="b"), None)
    assert matches(r, BrowseQuery(header_value="abc"), None)  # any header's value
    assert not matches(Record(0, 0, None, None), BrowseQuery(key="x"), None)


def test_encode_records_keeps_keys_values_and_headers() -> None:
    records = [
        Record(0, 0, b"k", b"v", (("h", b"1"), ("n", None))),
        Record(0, 0, None, None),
    ]
    batch = encode_records(records, timestamp_ms=1234)
    decoded = decode_records(batch, max_uncompressed=1 << 20)
    assert decoded == [
        Record(0, 1234, b"k", b"v", (("h", b"1"), ("n", None))),
        Record(1, 1234, None, None),
    ]
