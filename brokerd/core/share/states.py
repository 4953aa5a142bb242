# -*- test-case-name: tests.core.share.test_states -*-
"""The state of one record of a share-partition and its transition table (KIP-932).

A record between the share-partition start offset (SPSO) and its end offset is in one of
four states (:class:`RecordState`). What can happen to it is an :class:`Event`;
:data:`TRANSITIONS` names, for every (state, event) pair, the :class:`Target` or marks the
pair invalid (``None``: the caller answers INVALID_RECORD_STATE, nothing changes). A
release or a lock timeout returns a record to AVAILABLE unless its delivery count has
reached the group's limit, in which case it is archived: :func:`next_state` resolves that
one guarded target. With a dead-letter topic (KIP-1191) a record a member rejects or that
runs out of deliveries is ARCHIVING first: it leaves ARCHIVING for ARCHIVED only by
DEAD_LETTERED, once its dead-letter record is written, and holds the start offset until
then. Pure: no clock, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from brokerd.fsm import step

__all__ = [
    "TRANSITIONS",
    "AckType",
    "Event",
    "RecordState",
    "Target",
    "next_state",
]


class RecordState(enum.IntEnum):
    """A record's state (the number is what the share-state journal stores)."""

    #: May be acquired by any member (new, released, or its lock timed out).
    AVAILABLE = 0
    #: Locked by one member until it acknowledges it or the lock expires.
    ACQUIRED = 1
    #: Accepted: processed, never delivered again.
    ACKNOWLEDGED = 2
    #: Rejected or over the delivery-count limit in a group with a dead-letter topic:
    #: never delivered again, its dead-letter record not yet written (KIP-1191).
    ARCHIVING = 3
    #: Rejected, over the delivery-count limit, or skipped (control record, aborted
    #: transaction, gap): never delivered again.
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """Kafka's acknowledgement types (ShareFetch and ShareAcknowledge ``AcknowledgeTypes``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    #: Keep the record and extend its lock (ShareFetch/ShareAcknowledge v2, KIP-1222).
    RENEW = 4


class Event(enum.Enum):
    """What may happen to a record."""

    ACQUIRE = "acquire"
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    #: The member said the offset holds no record (a compacted gap).
    GAP = "gap"
    LOCK_TIMEOUT = "lock-timeout"
    #: The holder left the group or was fenced; the same as a release.
    MEMBER_GONE = "member-gone"
    #: The log no longer has the record to deliver again (retention, an offset reset).
    SKIP = "skip"
    #: The holder extends its lock (the deadline restarts; nothing else changes).
    RENEW = "renew"
    #: The record's dead-letter record is written (or could not be: Kafka archives it
    #: all the same).
    DEAD_LETTERED = "dead-lettered"


class Target(enum.Enum):
    AVAILABLE = "available"
    ACQUIRED = "acquired"
    ACKNOWLEDGED = "acknowledged"
    ARCHIVED = "archived"
    #: AVAILABLE below the delivery-count limit, ARCHIVED at it.
    AVAILABLE_UNLESS_AT_LIMIT = "available-unless-at-limit"


_A, _Q, _K, _G, _R = (
    RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING, RecordState.ARCHIVED,
)

#: Every (state, event) pair: its target, or None where the pair is refused.
TRANSITIONS: Mapping[tuple[RecordState, Event], Target | None] = {
    (_A, Event.ACQUIRE): Target.ACQUIRED,
    (_A, Event.ACCEPT): None,
    (_A, Event.RELEASE): None,
    (_A, Event.REJECT): None,
    (_A, Event.GAP): None,
    (_A, Event.LOCK_TIMEOUT): None,
    (_A, Event.MEMBER_GONE): None,
    (_A, Event.RENEW): None,
    (_A, Event.SKIP): Target.ARCHIVED,
    (_Q, Event.ACQUIRE): None,
    (_Q, Event.ACCEPT): Target.ACKNOWLEDGED,
    (_Q, Event.RELEASE): Target.AVAILABLE_UNLESS_AT_LIMIT,
    (_Q, Event.REJECT): Target.ARCHIVED,
    (_Q, Event.GAP): Target.ARCHIVED,
    (_Q, Event.LOCK_TIMEOUT): Target.AVAILABLE_UNLESS_AT_LIMIT,
    (_Q, Event.MEMBER_GONE): Target.AVAILABLE_UNLESS_AT_LIMIT,
    (_Q, Event.RENEW): Target.ACQUIRED,
    (_Q, Event.SKIP): Target.ARCHIVED,
    (_K, Event.ACQUIRE): None,
    (_K, Event.ACCEPT): None,
    (_K, Event.RELEASE): None,
    (_K, Event.REJECT): None,
    (_K, Event.GAP): None,
    (_K, Event.LOCK_TIMEOUT): None,
    (_K, Event.MEMBER_GONE): None,
    (_K, Event.RENEW): None,
    (_K, Event.SKIP): None,
    (_R, Event.ACQUIRE): None,
    (_R, Event.ACCEPT): None,
    (_R, Event.RELEASE): None,
    (_R, Event.REJECT): None,
    (_R, Event.GAP): None,
    (_R, Event.LOCK_TIMEOUT): None,
    (_R, Event.MEMBER_GONE): None,
    (_R, Event.RENEW): None,
    (_R, Event.SKIP): None,
    (_G, Event.ACQUIRE): None,
    (_G, Event.ACCEPT): None,
    (_G, Event.RELEASE): None,
    (_G, Event.REJECT): None,
    (_G, Event.GAP): None,
    (_G, Event.LOCK_TIMEOUT): None,
    (_G, Event.MEMBER_GONE): None,
    (_G, Event.RENEW): None,
    (_G, Event.SKIP): None,
    (_G, Event.DEAD_LETTERED): Target.ARCHIVED,
    (_A, Event.DEAD_LETTERED): None,
    (_Q, Event.DEAD_LETTERED): None,
    (_K, Event.DEAD_LETTERED): None,
    (_R, Event.DEAD_LETTERED): None,
}

#: Acknowledgement types as events.
ACK_EVENTS: Mapping[AckType, Event] = {
    AckType.GAP: Event.GAP,
    AckType.ACCEPT: Event.ACCEPT,
    AckType.RELEASE: Event.RELEASE,
    AckType.REJECT: Event.REJECT,
    AckType.RENEW: Event.RENEW,
}

_PLAIN = {
    Target.AVAILABLE: _A,
    Target.ACQUIRED: _Q,
    Target.ACKNOWLEDGED: _K,
    Target.ARCHIVED: _R,
}


def next_state(
    state: RecordState, event: Event, *, delivery_count: int, limit: int
) -> RecordState:
    """The state after ``event`` for a record delivered ``delivery_count`` times.

    :raises InvalidTransition: the table refuses the pair.
    """
    target = step(TRANSITIONS, state, event, "a share-group record")
    if target is Target.AVAILABLE_UNLESS_AT_LIMIT:
        return _R if delivery_count >= limit else _A
    return _PLAIN[target]
