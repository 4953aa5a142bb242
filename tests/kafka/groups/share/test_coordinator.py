"""The share group coordinator (membership, epochs, timeouts, share sessions) and the
assignment, on a task.Clock."""

from __future__ import annotations

from twisted.internet import task

from brokerd.kafka.groups.share.assignment import assign
from brokerd.kafka.groups.share.coordinator import (
    MAX_MEMBERS,
    MAX_SESSIONS,
    HeartbeatError,
    SessionError,
    ShareGroupCoordinator,
)


def coordinator(
    clock: task.Clock, gone: list[tuple[str, str]], **extra: int
) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(
        clock=clock,
        partition_counts=lambda: {"t": 2, "u": 1},
        on_member_gone=lambda g, m: gone.append((g, m)),
        session_timeout_ms=lambda g: 45000,
        heartbeat_interval_ms=lambda g: 5000,
        **extra,
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


def test_only_a_joining_member_makes_a_group() -> None:
    # Heartbeats of unknown members with any other epoch, or without topics, are
    # refused and leave nothing: a client inventing group ids fills no table.
    c = coordinator(task.Clock(), [])
    assert c.heartbeat("x1", "m", 3, None).error is HeartbeatError.UNKNOWN_MEMBER
    assert c.heartbeat("x2", "m", -1, None).member_epoch == -1
    assert c.heartbeat("x3", "m", 0, None).error is HeartbeatError.INVALID
    assert c.groups == {}
    assert c.heartbeat("g", "m", 0, ["t"]).error is HeartbeatError.NONE
    assert set(c.groups) == {"g"}


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
    assert c.session("g", "m", 0, [("t", 0)], []) is SessionError.UNKNOWN_MEMBER
    c.heartbeat("g", "m", 0, ["t"])
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


def open_sessions(c: ShareGroupCoordinator, count: int, prefix: str = "a") -> int:
    """``count`` members, each with a share session, in groups of their own (as full as
    groups get): how many sessions the coordinator refused."""
    refused = 0
    for i in range(count):
        group, member = f"{prefix}{i // MAX_MEMBERS}", f"m{i}"
        assert c.heartbeat(group, member, 0, ["t"]).error is HeartbeatError.NONE
        answer = c.session(group, member, 0, [("t", 0)], [])
        if answer is SessionError.LIMIT_REACHED:
            refused += 1
        else:
            assert answer == {("t", 0)}
    return refused


def test_at_the_cap_a_new_session_is_refused_and_live_ones_go_on() -> None:
    """Sessions in someone else's groups, as many as the broker holds, leave a victim's
    session as it was: the newcomers are refused (Kafka's SHARE_SESSION_LIMIT_REACHED),
    nobody is evicted."""
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone)
    c.heartbeat("victim", "v", 0, ["t"])
    assert c.session("victim", "v", 0, [("t", 0)], []) == {("t", 0)}
    assert open_sessions(c, MAX_SESSIONS + 50) == 51
    assert c.session_count == MAX_SESSIONS
    for epoch in range(1, 5):
        assert c.session("victim", "v", epoch, [], []) == {("t", 0)}
    assert gone == []
    # A member opening a new session replaces its own, at the cap too.
    assert c.session("a0", "m0", 0, [("t", 1)], []) == {("t", 1)}
    assert c.session("a0", "m0", 1, [], []) == {("t", 1)}
    c.stop()


def test_a_session_whose_member_is_gone_makes_room() -> None:
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone, max_sessions=2)
    assert open_sessions(c, 2) == 0
    c.heartbeat("a0", "m0", -1, None)  # leaves, its session left open
    assert gone == []
    c.heartbeat("b", "new", 0, ["t"])
    assert c.session("b", "new", 0, [("t", 0)], []) == {("t", 0)}
    # Evicted: what the member held is released now.
    assert gone == [("a0", "m0")]
    assert c.session("a0", "m0", 1, [], []) is SessionError.NOT_FOUND
    c.heartbeat("b", "newer", 0, ["t"])
    assert c.session("b", "newer", 0, [("t", 0)], []) is SessionError.LIMIT_REACHED
    # A member timing out takes its session with it.
    clock.advance(46)
    assert sorted(gone) == [("a0", "m0"), ("a0", "m1"), ("b", "new"), ("b", "newer")]
    assert c.session_count == 0


def test_a_closing_session_or_a_member_back_is_not_evicted() -> None:
    clock, gone = task.Clock(), []
    c = coordinator(clock, gone, max_sessions=2)
    assert open_sessions(c, 2) == 0
    # m0's closing request (acknowledgements under way) crosses its leave.
    assert c.session("a0", "m0", -1, [], []) == {("t", 0)}
    c.heartbeat("a0", "m0", -1, None)
    # m1 leaves and joins again under its id, its session still in use.
    c.heartbeat("a0", "m1", -1, None)
    c.heartbeat("a0", "m1", 0, ["t"])
    c.heartbeat("b", "new", 0, ["t"])
    assert c.session("b", "new", 0, [("t", 0)], []) is SessionError.LIMIT_REACHED
    assert c.session("a0", "m1", 1, [], []) == {("t", 0)}
    c.close_session("a0", "m0")
    assert c.session("b", "new", 0, [("t", 0)], []) == {("t", 0)}
    assert gone == []
    c.stop()
