"""brokerd.kafka.groups.consumer.classic_members: the embedded consumer protocol
(subscriptions and assignments parsed and written, malformed bytes refused) and the
classic member's Heartbeat signal over every (member state, at the group epoch, every
partition it waits for is free) triple."""

from __future__ import annotations

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.classic_members import (
    HEARTBEAT_SIGNALS,
    BadEmbeddedProtocol,
    encode_assignment,
    heartbeat_signal,
    parse_assignment,
    parse_subscription,
    subscription_version,
)
from brokerd.kafka.groups.consumer.state import ClassicProtocol, MemberState
from brokerd.kafka.wire.codec import Writer


def subscription(topics: tuple[str, ...], owned: tuple[tuple[str, int], ...] = (),
                 version: int = 1) -> bytes:
    w = Writer()
    w.int16(version)
    w.int32(len(topics))
    for t in topics:
        w.nullable_string(t)
    w.nullable_bytes(None)
    if version >= 1:
        by_topic: dict[str, list[int]] = {}
        for t, p in owned:
            by_topic.setdefault(t, []).append(p)
        w.int32(len(by_topic))
        for t, ps in sorted(by_topic.items()):
            w.nullable_string(t)
            w.int32(len(ps))
            for p in ps:
                w.int32(p)
    return w.getvalue()


_S, _UR, _UL = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                MemberState.UNRELEASED_PARTITIONS)

# -- the embedded protocol --------------------------------------------------------------


def test_subscription_and_assignment_round_trip() -> None:
    sub = parse_subscription(subscription(("t", "u"), (("t", 1), ("t", 2))))
    assert (sub.version, sub.topics, sub.owned) == (1, ("t", "u"), {("t", 1), ("t", 2)})
    v0 = parse_subscription(subscription(("t",), version=0))
    assert (v0.version, v0.topics, v0.owned) == (0, ("t",), frozenset())
    data = encode_assignment({"t": frozenset({3, 1}), "u": frozenset()}, 1)
    assert parse_assignment(data) == {("t", 1), ("t", 3)}
    assert data[:2] == b"\x00\x01"
    assert parse_assignment(b"") == frozenset()
    assert encode_assignment({}, 9)[:2] == b"\x00\x03"  # capped at the highest version


@pytest.mark.parametrize("data", [b"\x00", b"\xff\xff", b"\x00\x00\x7f\xff\xff\xff",
                                  b"\x00\x00\x00\x00\x00\x01\xff\xff"])
def test_malformed_embedded_protocol_is_refused(data: bytes) -> None:
    with pytest.raises(BadEmbeddedProtocol):
        parse_subscription(data)
    with pytest.raises(BadEmbeddedProtocol):
        parse_assignment(data)


# -- the signal table -------------------------------------------------------------------

_EXPECTED = {
    # (state, at the group epoch, all it waits for released): must it re-join?
    (_S, True, False): False, (_S, True, True): False,
    (_S, False, False): True, (_S, False, True): True,
    (_UR, True, False): True, (_UR, True, True): True,
    (_UR, False, False): True, (_UR, False, True): True,
    (_UL, True, False): False, (_UL, True, True): True,
    (_UL, False, False): True, (_UL, False, True): True,
}


@pytest.mark.parametrize("key", sorted(_EXPECTED, key=str))
def test_heartbeat_signal_over_every_input(key: tuple[MemberState, bool, bool]) -> None:
    code = heartbeat_signal(*key)
    assert code is (ErrorCode.REBALANCE_IN_PROGRESS if _EXPECTED[key] else ErrorCode.NONE)


def test_the_signal_table_covers_every_input() -> None:
    assert set(HEARTBEAT_SIGNALS) == {(s, a, f) for s in MemberState for a in (True, False)
                                      for f in (True, False)}


def test_subscription_version_is_the_preferred_protocols_or_zero() -> None:
    assert subscription_version(ClassicProtocol(10_000, (
        ("range", subscription(("t",), version=1)), ("sticky", subscription(("t",), version=0)),
    ))) == 1
    assert subscription_version(ClassicProtocol(10_000, ())) == 0
    assert subscription_version(ClassicProtocol(10_000, (("range", b"\xff\xff"),))) == 0
