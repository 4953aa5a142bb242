"""The one shape of the house's state machines: a transition table from ``(state, event)``
to what follows, and the one error for a pair the table refuses.

A table lists what follows each pair, or None where the pair cannot happen; a pair absent
from the table cannot happen either, so a table may list every pair (the connection's
phases, the share-group records: a test then checks that none is forgotten) or only the
allowed ones. Where the event is simply the state asked for (the groups, the
transactions), Kafka declares the table as each state's valid previous states, or each
state's next ones: :func:`from_previous` and :func:`from_next` read those forms into a
table whose event is the new state. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

__all__ = ["InvalidTransition", "from_next", "from_previous", "step"]

_S = TypeVar("_S")
_E = TypeVar("_E")
_T = TypeVar("_T")


class InvalidTransition(ValueError):
    """A ``(state, event)`` pair the transition table refuses. Inside the broker's own
    machines (connections, groups, transactions) it is a bug; a share-group record refuses
    a client's acknowledgement with it (INVALID_RECORD_STATE)."""

    def __init__(self, state: object, event: object, subject: str = "") -> None:
        said = f"{_name(event)} in state {_name(state)}"
        super().__init__(f"{subject}: {said}" if subject else said)
        self.state = state
        self.event = event


def _name(value: object) -> str:
    return str(getattr(value, "value", value))


def step(
    table: Mapping[tuple[_S, _E], _T | None], state: _S, event: _E, subject: str = ""
) -> _T:
    """What follows ``event`` in ``state``. :raises InvalidTransition: the table refuses
    the pair (``subject`` names the machine in the message, e.g. its group)."""
    after = table.get((state, event))
    if after is None:
        raise InvalidTransition(state, event, subject)
    return after


def from_previous(previous: Mapping[_S, Iterable[_S]]) -> Mapping[tuple[_S, _S], _S]:
    """The table of Kafka's ``validPreviousStates`` form: for each state, the states it may
    be entered from. Its event is the state asked for."""
    return {(old, new): new for new, olds in previous.items() for old in olds}


def from_next(following: Mapping[_S, Iterable[_S]]) -> Mapping[tuple[_S, _S], _S]:
    """The table of the next-states form: for each state, the states it may move to. Its
    event is the state asked for."""
    return {(old, new): new for old, news in following.items() for new in news}
