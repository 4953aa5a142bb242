"""brokerd.fsm: the one transition-table step and its two table readers."""

from __future__ import annotations

import enum

import pytest

from brokerd.fsm import InvalidTransition, from_next, from_previous, step


class _S(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


def test_step_returns_what_follows_and_refuses_none_or_absent_pairs() -> None:
    table = {(_S.A, "go"): _S.B, (_S.B, "go"): None}
    assert step(table, _S.A, "go") is _S.B
    with pytest.raises(InvalidTransition) as listed_none:
        step(table, _S.B, "go")
    assert listed_none.value.state is _S.B
    assert listed_none.value.event == "go"
    with pytest.raises(InvalidTransition):
        step(table, _S.C, "go")


def test_invalid_transition_message_names_values_and_subject() -> None:
    plain = InvalidTransition(_S.A, _S.C)
    assert str(plain) == "C in state A"
    named = InvalidTransition(_S.A, "leave", "group g1")
    assert str(named) == "group g1: leave in state A"
    assert isinstance(named, ValueError)
    with pytest.raises(InvalidTransition, match=r"^txn t: C in state B$"):
        step({}, _S.B, _S.C, "txn t")


def test_from_previous_reads_valid_previous_states() -> None:
    table = from_previous({_S.B: [_S.A], _S.C: [_S.A, _S.B]})
    assert table == {(_S.A, _S.B): _S.B, (_S.A, _S.C): _S.C, (_S.B, _S.C): _S.C}
    assert step(table, _S.B, _S.C) is _S.C
    with pytest.raises(InvalidTransition):
        step(table, _S.C, _S.A)


def test_from_next_reads_next_states() -> None:
    table = from_next({_S.A: {_S.B}, _S.B: {_S.A, _S.C}, _S.C: ()})
    assert table == {(_S.A, _S.B): _S.B, (_S.B, _S.A): _S.A, (_S.B, _S.C): _S.C}
    with pytest.raises(InvalidTransition):
        step(table, _S.A, _S.C)
