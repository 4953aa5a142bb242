"""brokerd.kafka.groups.kip848.states: the live-states table rule."""

from __future__ import annotations

import enum

import pytest

from brokerd.fsm import InvalidTransition, from_next, step
from brokerd.kafka.groups.kip848.states import live_states_table


class _G(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


def test_live_states_reach_every_state_and_dead_only_dead() -> None:
    table = live_states_table(_G, _G.DEAD)
    assert table[_G.EMPTY] == frozenset(_G)
    assert table[_G.STABLE] == frozenset(_G)
    assert table[_G.DEAD] == frozenset({_G.DEAD})
    steps = from_next(table)
    assert step(steps, _G.STABLE, _G.EMPTY) is _G.EMPTY
    with pytest.raises(InvalidTransition):
        step(steps, _G.DEAD, _G.EMPTY)
