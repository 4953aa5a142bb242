"""The native protocol's byte layouts (:mod:`brokerd.native.wire`): the request layout
table against the messages, and the shared encoders and checks."""

from __future__ import annotations

import struct

import pytest

from brokerd.native import messages as msg
from brokerd.native import wire
from brokerd.native.messages import ErrorCode, RequestType


def test_every_request_type_has_one_layout_matching_its_message() -> None:
    # Types 1-6 walk the layout table; the admin types (7-14) and the queue types
    # (15-18) have their own bodies (brokerd.native.operator_wire and queue_wire, tested in
    # tests/native/test_operator_wire.py and tests/native/test_queue_wire.py).
    assert sorted(wire.REQUEST_LAYOUTS) + sorted(msg.OPERATOR_REQUEST_TYPES) + sorted(
        msg.QUEUE_REQUEST_TYPES
    ) == sorted(RequestType)
    for request_type, layout in wire.REQUEST_LAYOUTS.items():
        assert layout.request_type == request_type
        assert wire.LAYOUT_OF_CLASS[layout.message] is layout
        attributes = {a.name for a in layout.message.__attrs_attrs__}  # type: ignore[attr-defined]
        expected = {f.name for f in layout.fields} | ({"topic"} if layout.has_topic else set())
        if layout.has_records:
            expected = expected - {"count"} | {"values"}
        assert attributes == expected, request_type


def test_check_range_passes_values_inside_and_refuses_others() -> None:
    assert wire.check_range("partition", 0, wire.MAX_U32) == 0
    assert wire.check_range("partition", wire.MAX_U32, wire.MAX_U32) == wire.MAX_U32
    with pytest.raises(ValueError, match=r"partition 4294967296 is outside 0\.\.4294967295"):
        wire.check_range("partition", wire.MAX_U32 + 1, wire.MAX_U32)
    with pytest.raises(ValueError):
        wire.check_range("offset", -1, wire.MAX_U64)


def test_string_bytes_is_u16_prefixed_utf8_and_refuses_what_does_not_fit() -> None:
    assert wire.string_bytes("é") == b"\x00\x02\xc3\xa9"
    assert wire.string_bytes("") == b"\x00\x00"
    assert len(wire.string_bytes("x" * wire.MAX_U16)) == 2 + wire.MAX_U16
    with pytest.raises(ValueError, match="group length"):
        wire.string_bytes("x" * (wire.MAX_U16 + 1), "group")


def test_a_layout_packs_its_fields_in_order_with_their_widths() -> None:
    layout = wire.REQUEST_LAYOUTS[RequestType.LONG_POLL_FETCH]
    assert layout.fixed.format == ">IQIII"
    assert [f.maximum for f in layout.fields] == [
        wire.MAX_U32, wire.MAX_U64, wire.MAX_U32, wire.MAX_U32, wire.MAX_U32]
    assert wire.REQUEST_LAYOUTS[RequestType.LIST_TOPICS].fixed.size == 0


def test_create_topic_checks_its_partition_count() -> None:
    check = wire.REQUEST_LAYOUTS[RequestType.CREATE_TOPIC].check
    assert check is not None
    assert check((1,)) is None
    assert check((msg.MAX_PARTITIONS,)) is None
    for bad in (0, msg.MAX_PARTITIONS + 1):
        refusal = check((bad,))
        assert refusal is not None and refusal[0] is ErrorCode.INVALID_PARTITIONS
        assert str(bad) in refusal[1]


def test_fixed_records_picks_each_value_out_of_a_run() -> None:
    layout = wire.fixed_records(4, 3, 1)
    assert layout is wire.fixed_records(4, 3, 1)  # cached
    data = b"".join(struct.pack(">I", 3) + v + b"!" for v in (b"abc", b"def"))
    assert [v for (v,) in layout.iter_unpack(data)] == [b"abc", b"def"]
