"""The consumer-offsets journal's record format: each record kind round-trips, the
compacted journal's records decode to what it holds, and limits are refused before
anything is encoded."""

from __future__ import annotations

import pytest

from brokerd.storage.stores.offsets_format import (
    RECORD_HEADER,
    CommitOp,
    Committed,
    ConsumerGroupUpdate,
    GroupConfigUpdate,
    GroupDeletion,
    GroupUpdate,
    OffsetDeletion,
    StoredGroup,
    StoredMember,
    decode_body,
    encode_commit,
    encode_delete_group,
    encode_delete_offsets,
    encode_delete_topic,
    encode_live,
    encode_ops,
    iter_records,
    live_size,
)

GROUP = StoredGroup(
    "consumer", 7, "range", "m1",
    (
        StoredMember("m1", None, "c", "/h", 10_000, 30_000, b"meta", b"assign"),
        StoredMember("m2", "static-\udc80", "c", "/h", 1, 2, b"", b""),
    ),
)


def test_deletion_record_codec() -> None:
    body = encode_delete_offsets(b"g", [(b"t", 0), (b"\xc3\xbc", 7)])[8:]
    assert decode_body(body) == OffsetDeletion("g", (("t", 0), ("\u00fc", 7)))
    assert decode_body(encode_delete_group(b"g")[8:]) == GroupDeletion("g")
    for bad in (body[:-1], body + b"x", encode_delete_group(b"g")[8:] + b"x"):
        with pytest.raises(ValueError):
            decode_body(bad)
    # A count larger than the record can hold is refused, not allocated.
    lying = b"\x06\x00\x01g\xff\xff\xff\xff"
    with pytest.raises(ValueError):
        decode_body(lying)



def test_commit_topic_deletion_and_group_records_round_trip() -> None:
    commit = encode_commit(
        b"g", [(b"t", 3, Committed(42, 5, "m\u00fc", 1700)), (b"u", 0, Committed(1, -1, None, 9))]
    )
    assert decode_body(commit[RECORD_HEADER.size :]) == (
        "g", [("t", 3, Committed(42, 5, "m\u00fc", 1700)), ("u", 0, Committed(1, -1, None, 9))]
    )
    assert decode_body(encode_delete_topic(b"t")[RECORD_HEADER.size :]) == (None, "t")
    [(record, op)] = encode_ops([GroupUpdate("g", GROUP)], 0)
    assert decode_body(record[RECORD_HEADER.size :]) == op == GroupUpdate("g", GROUP)
    [(tombstone, _)] = encode_ops([GroupUpdate("g", None)], 0)
    assert decode_body(tombstone[RECORD_HEADER.size :]) == GroupUpdate("g", None)
    with pytest.raises(ValueError, match="unknown record kind"):
        decode_body(b"\x63")


def test_encode_ops_stamps_commits_and_skips_empty_ones() -> None:
    ops = [
        CommitOp("g", (("t", 0, 10, 2, None),)),
        CommitOp("g", ()),
        ConsumerGroupUpdate("c", b"state"),
        GroupConfigUpdate("c", {"b": "2", "a": "1"}),
        GroupDeletion("old"),
        OffsetDeletion("g", (("t", 1),)),
    ]
    encoded = encode_ops(ops, now_ms=555)
    assert [meaning for _record, meaning in encoded] == [
        ("g", [("t", 0, Committed(10, 2, None, 555))]),
        *ops[2:],
    ]
    decoded = [decode_body(record[RECORD_HEADER.size :]) for record, _ in encoded]
    assert decoded[0] == encoded[0][1]
    assert decoded[1:] == ops[2:]


@pytest.mark.parametrize(
    "op",
    [
        CommitOp("g", (("", 0, 1, 0, None),)),
        CommitOp("g", (("t", -1, 1, 0, None),)),
        CommitOp("g", (("t", 0, 2**63, 0, None),)),
        CommitOp("g", (("t", 0, 1, 2**31, None),)),
        CommitOp("g", (("t", 0, 1, 0, "m" * 5000),)),
        CommitOp("g" * 300, (("t", 0, 1, 0, None),)),
        GroupUpdate("g", StoredGroup("consumer", 2**31, "range", "m", ())),
        OffsetDeletion("g", (("t", -1),)),
    ],
)
def test_a_value_out_of_range_is_refused_before_encoding(op: object) -> None:
    with pytest.raises(ValueError):
        encode_ops([CommitOp("g", (("t", 0, 1, 0, None),)), op], 0)  # type: ignore[list-item]


def test_the_live_records_decode_back_and_their_size_is_known() -> None:
    offsets = {"g": {("t", 1): Committed(5, 0, None, 1), ("t", 0): Committed(4, 0, "x", 1)}}
    group_record = encode_ops([GroupUpdate("g", GROUP)], 0)[0][0]
    data = encode_live(offsets, {"g": GROUP}, {"c": b"s"}, {"c": {"k": "v"}})
    decoded = [d for d, _end in iter_records(data, 0)]
    assert decoded == [
        ("g", [("t", 0, Committed(4, 0, "x", 1)), ("t", 1, Committed(5, 0, None, 1))]),
        GroupUpdate("g", GROUP),
        ConsumerGroupUpdate("c", b"s"),
        GroupConfigUpdate("c", {"k": "v"}),
    ]
    assert live_size(offsets, {"g": len(group_record)}) == len(
        encode_live(offsets, {"g": GROUP})
    )
    # Replay stops at the first torn record.
    assert len(list(iter_records(data[:-1], 0))) == 3
