"""The share group coordinator (membership, epochs, timeouts, share sessions) and the
assignment, on a task.Clock."""

from __future__ import annotations

from twisted.internet import task

from brokerd.kafka.groups.share.assignment import assign
from brokerd.kafka.groups.share.coordinator import (
    HeartbeatError,
    SessionError,
    ShareGroupCoordinator,
)


def coordinator(clock: task.Clock, gone: list[tuple[str, str]]) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(
        clock=clock,
        partition_counts=lambda: {"t": 2, "u": 1},
        on_member_gone=lambda g, m: gone.append((g, m)),
        session_timeout_ms=lambda g: 45000,
        heartbeat_interval_ms=lambda g: 5000,
    )


def test_assignment_covers_every_partition_and_every_member() -> None:
    assert assign({"a": ["t"]}, {"t": 3}) == {"a": {("t", 0), ("t", 1), ("t", 2)}}
    two = assign({"a": ["t"], "b": ["t"]}, {"t": 3})
    assert two == {"a": {("t", 0), ("t", 2)}, "b": {("t", 1)}}
    many = assign({m: ["t"] for m in "abc"}, {"t": 1})
    assert many == {m: {("t", 0)} for m in "abc"}
    assert assign({"a": ["nope"]}, {"t": 1}) == {"a": set()}
    mixed = assign({"a": ["t", "u"], "b": ["u"]}, {"t": 2, "u": 1})
    assert mixed == {"a": {("t", 0), ("t", 1), ("u", 0)}, "b": {("u", 0)}}


def test_join_heartbeat_leave() -> None:
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone)
    first = c.heartbeat("g", "m1", 0, ["t"])
    assert first.error is HeartbeatError.NONE and first.member_epoch == 1
    assert first.assignment == {("t", 0), ("t", 1)}
    second = c.heartbeat("g", "m2", 0, ["t"])
    assert second.member_epoch == 2 and len(second.assignment or ()) == 1
    # m1 heartbeats with the epoch it was told and learns the new one.
    again = c.heartbeat("g", "m1", 1, None)
    assert again.error is HeartbeatError.NONE and again.member_epoch == 2
    assert len(again.assignment or ()) == 1
    assert c.heartbeat("g", "m1", 1, None).error is HeartbeatError.FENCED
    assert c.heartbeat("g", "nobody", 3, None).error is HeartbeatError.UNKNOWN_MEMBER
    assert c.heartbeat("g", "m3", 0, None).error is HeartbeatError.INVALID
    assert c.heartbeat("g", "", 0, ["t"]).error is HeartbeatError.INVALID
    assert c.heartbeat("g", "m2", -1, None).member_epoch == -1
    assert gone == [("g", "m2")]  # no share session: released at once
    c.session("g", "m1", 0, [("t", 0)], [])
    c.heartbeat("g", "m1", -1, None)
    assert gone == [("g", "m2")]  # released when its session closes
    assert c.session("g", "m1", -1, [], []) == {("t", 0)}
    assert c.delete_group("g")


def test_a_silent_member_is_removed() -> None:
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone)
    c.heartbeat("g", "m1", 0, ["t"])
    clock.advance(44.9)
    c.heartbeat("g", "m1", 1, None)
    clock.advance(44.9)
    assert c.is_member("g", "m1")
    clock.advance(0.2)
    assert not c.is_member("g", "m1") and gone == [("g", "m1")]
    assert c.delete_group("g")


def test_share_sessions() -> None:
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone)
    assert c.session("g", "m", 1, [], []) is SessionError.NOT_FOUND
    assert c.session("g", "m", 0, [("t", 0)], []) == {("t", 0)}
    assert c.session("g", "m", 2, [], []) is SessionError.INVALID_EPOCH
    assert c.session("g", "m", 1, [("t", 1)], [("t", 0)]) == {("t", 1)}
    assert c.session("g", "m", 2, [], []) == {("t", 1)}
    assert c.session("g", "m", -1, [], []) == {("t", 1)}
    # Closed: nothing more on it, though it is kept until its acknowledgements are in.
    assert c.session("g", "m", 3, [], []) is SessionError.NOT_FOUND
    assert c.session("g", "m", -1, [], []) is SessionError.NOT_FOUND
    c.close_session("g", "m")
    assert c.session("g", "m", 3, [], []) is SessionError.NOT_FOUND


def test_a_leave_crossing_the_closing_acknowledgements_releases_nothing() -> None:
    """librdkafka sends its leave heartbeat and its closing ShareAcknowledge at once:
    the records stay with the member until the closing request is done with them."""
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone)
    c.heartbeat("g", "m", 0, ["t"])
    assert c.session("g", "m", 0, [("t", 0), ("t", 1)], []) == {("t", 0), ("t", 1)}
    assert c.session("g", "m", -1, [], []) == {("t", 0), ("t", 1)}  # acks under way ...
    assert c.heartbeat("g", "m", -1, None).member_epoch == -1  # ... when the leave lands
    assert gone == [] and not c.is_member("g", "m")
    c.close_session("g", "m")  # the closing request releases what is left itself
    assert gone == []
    assert c.delete_group("g")
