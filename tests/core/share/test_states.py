"""The share-partition record state table, over every (state, event) pair."""

from __future__ import annotations

import pytest

from brokerd.core.share.states import (
    TRANSITIONS,
    Event,
    RecordState,
    next_state,
)
from brokerd.fsm import InvalidTransition

A, Q, K, R = (
    RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED,
)

#: The expected state after each pair, below the limit and at it (None: refused).
EXPECTED: dict[tuple[RecordState, Event], tuple[RecordState | None, RecordState | None]] = {
    (A, Event.ACQUIRE): (Q, Q),
    (A, Event.SKIP): (R, R),
    (Q, Event.ACCEPT): (K, K),
    (Q, Event.RELEASE): (A, R),
    (Q, Event.REJECT): (R, R),
    (Q, Event.GAP): (R, R),
    (Q, Event.LOCK_TIMEOUT): (A, R),
    (Q, Event.MEMBER_GONE): (A, R),
    (Q, Event.SKIP): (R, R),
    (Q, Event.RENEW): (Q, Q),
    # KIP-1191: ARCHIVING leaves only once its dead-letter record is written.
    (RecordState.ARCHIVING, Event.DEAD_LETTERED): (R, R),
}


def test_the_table_names_every_pair() -> None:
    assert set(TRANSITIONS) == {(s, e) for s in RecordState for e in Event}


@pytest.mark.parametrize("state", list(RecordState))
@pytest.mark.parametrize("event", list(Event))
def test_every_pair(state: RecordState, event: Event) -> None:
    below, at_limit = EXPECTED.get((state, event), (None, None))
    for count, expected in ((1, below), (5, at_limit)):
        if expected is None:
            with pytest.raises(InvalidTransition):
                next_state(state, event, delivery_count=count, limit=5)
        else:
            assert next_state(state, event, delivery_count=count, limit=5) is expected


def test_state_numbers_are_kafkas() -> None:
    # 3 is ARCHIVING, KIP-1191's (Kafka 4.4 RecordState).
    assert [int(s) for s in RecordState] == [0, 1, 2, 3, 4]
