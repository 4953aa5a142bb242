"""brokerd.kafka.groups.kip848.records: the shared checks of a group's stored record
(JSON, typed fields, a bool never a number) and a member's shared fields both ways."""

from __future__ import annotations

import attrs
import pytest

from brokerd.kafka.groups.kip848.records import RecordFields

FIELDS = RecordFields("consumer group record")


@attrs.frozen
class _Member:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    member_epoch: int
    previous_member_epoch: int


def test_member_fields_round_trip() -> None:
    member = _Member("m1", None, "r1", "c", "/10.0.0.1", 30_000, 4, 3)
    out = FIELDS.member_out(member)
    assert out == {"id": "m1", "instance": None, "rack": "r1", "client": "c",
                   "host": "/10.0.0.1", "rebalance_ms": 30_000, "epoch": 4, "previous": 3}
    assert _Member(**FIELDS.member_in(out)) == member


def test_get_checks_types_and_refuses_bools_for_numbers() -> None:
    assert FIELDS.get({"n": 3}, "n", int) == 3
    assert FIELDS.get({"b": True}, "b", bool) is True
    with pytest.raises(ValueError, match=r"^consumer group record: 'n' is not"):
        FIELDS.get({"n": True}, "n", int)
    with pytest.raises(ValueError, match="'n' is not"):
        FIELDS.get({}, "n", int)
    with pytest.raises(ValueError):
        FIELDS.member_in({**FIELDS.member_out(_Member("m", None, None, "", "", 1, 1, 0)),
                          "epoch": "1"})


def test_load_reads_json_or_says_which_record_is_bad() -> None:
    assert FIELDS.load(b'{"a": [1]}') == {"a": [1]}
    with pytest.raises(ValueError, match=r"^streams group record: "):
        RecordFields("streams group record").load(b"{not json")
    with pytest.raises(ValueError, match=r"^consumer group record: "):
        FIELDS.load(b"\xff\xfe")
    assert str(FIELDS.bad("why")) == "consumer group record: why"
