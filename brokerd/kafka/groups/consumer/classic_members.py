# -*- test-case-name: tests.kafka.groups.consumer.test_classic_members -*-
"""Members of a consumer-protocol group that still speak the classic protocol (the
online migration of KIP-848): the embedded consumer protocol they carry, and when a
Heartbeat tells them to re-join.

A classic member inside a consumer group joins with JoinGroup (its subscription and the
partitions it still owns are in its ConsumerProtocolSubscription), gets the assignment
the server-side assignor computed in SyncGroup (a ConsumerProtocolAssignment), and uses
its member epoch as its generation. It cannot be told a new assignment in a Heartbeat
answer, so when its target moves it is told REBALANCE_IN_PROGRESS and re-joins;
:data:`HEARTBEAT_SIGNALS` holds that rule over every member state.

What this module does not do: keep groups, arm timers or answer requests
(:mod:`.coordinator`), convert whole groups (:mod:`brokerd.kafka.groups.migration`).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.state import ClassicProtocol, MemberState
from brokerd.kafka.wire.codec import CodecError, Reader, Writer

#: The protocol type of every member using the consumer embedded protocol.
CONSUMER_PROTOCOL_TYPE = "consumer"

#: The highest ConsumerProtocolSubscription/Assignment version (Kafka 4.x).
_MAX_VERSION = 3


class BadEmbeddedProtocol(ValueError):
    """Metadata or an assignment that is not the consumer embedded protocol."""


@attrs.frozen
class Subscription:
    """A ConsumerProtocolSubscription's fields the coordinator uses."""

    version: int
    topics: tuple[str, ...]
    #: (topic name, partition) the member owns (version 1+; empty below).
    owned: frozenset[tuple[str, int]] = frozenset()
    rack_id: str | None = None


def parse_subscription(data: bytes) -> Subscription:
    """A member's JoinGroup metadata; BadEmbeddedProtocol if it is not one."""
    try:
        r = Reader(data)
        version = r.int16()
        if version < 0:
            raise BadEmbeddedProtocol(f"subscription version {version}")
        count = r.array_count(2) or 0
        topics = []
        for _ in range(count):
            name = r.nullable_string()
            if name is None:
                raise BadEmbeddedProtocol("null topic name")
            topics.append(name)
        r.nullable_bytes()  # user data: the client's assignor's, not ours
        owned: set[tuple[str, int]] = set()
        rack: str | None = None
        if version >= 1 and r.remaining:
            owned = _topic_partitions(r)
        if version >= 2 and r.remaining:
            r.int32()  # generation id
        if version >= 3 and r.remaining:
            rack = r.nullable_string()
    except CodecError as e:
        raise BadEmbeddedProtocol(str(e)) from None
    return Subscription(version, tuple(topics), frozenset(owned), rack)


def parse_assignment(data: bytes) -> frozenset[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: none, as a classic
    member holds before its first SyncGroup); BadEmbeddedProtocol if not one."""
    if not data:
        return frozenset()
    try:
        r = Reader(data)
        if r.int16() < 0:
            raise BadEmbeddedProtocol("negative assignment version")
        return frozenset(_topic_partitions(r))
    except CodecError as e:
        raise BadEmbeddedProtocol(str(e)) from None


def _topic_partitions(r: Reader) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for _ in range(r.array_count(6) or 0):
        name = r.nullable_string()
        if name is None:
            raise BadEmbeddedProtocol("null topic name")
        for _ in range(r.array_count(4) or 0):
            out.add((name, r.int32()))
    return out


def encode_assignment(partitions: Mapping[str, frozenset[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment (no user data) at ``version`` (at most 3: every
    version has this layout)."""
    w = Writer()
    w.int16(max(0, min(version, _MAX_VERSION)))
    topics = sorted((t, ps) for t, ps in partitions.items() if ps)
    w.int32(len(topics))
    for name, ps in topics:
        w.nullable_string(name)
        w.int32(len(ps))
        for p in sorted(ps):
            w.int32(p)
    w.nullable_bytes(None)
    return w.getvalue()


def subscription_version(classic: ClassicProtocol) -> int:
    """The version of the member's preferred subscription (its assignment is answered
    at the same version)."""
    try:
        return parse_subscription(classic.protocols[0][1]).version if classic.protocols else 0
    except BadEmbeddedProtocol:
        return 0


_MS = MemberState.STABLE
_MUR = MemberState.UNREVOKED_PARTITIONS
_MUL = MemberState.UNRELEASED_PARTITIONS
_OK = ErrorCode.NONE
_RB = ErrorCode.REBALANCE_IN_PROGRESS

#: (member state, at the group epoch, every partition it waits for is free now) -> the
#: Heartbeat answer of a classic member, as Kafka's coordinator gives it. It re-joins to
#: learn a new target, to confirm a revocation, or to take the partitions the others
#: released; otherwise its generation stands.
HEARTBEAT_SIGNALS: Mapping[tuple[MemberState, bool, bool], ErrorCode] = {
    (_MS, True, False): _OK,
    (_MS, True, True): _OK,
    (_MS, False, False): _RB,
    (_MS, False, True): _RB,
    (_MUR, True, False): _RB,
    (_MUR, True, True): _RB,
    (_MUR, False, False): _RB,
    (_MUR, False, True): _RB,
    (_MUL, True, False): _OK,
    (_MUL, True, True): _RB,
    (_MUL, False, False): _RB,
    (_MUL, False, True): _RB,
}


def heartbeat_signal(state: MemberState, at_group_epoch: bool, released: bool) -> ErrorCode:
    return HEARTBEAT_SIGNALS[(state, at_group_epoch, released)]


__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "HEARTBEAT_SIGNALS",
    "BadEmbeddedProtocol",
    "Subscription",
    "encode_assignment",
    "heartbeat_signal",
    "parse_assignment",
    "parse_subscription",
    "subscription_version",
]
