"""The state-table rule consumer groups and streams groups (KIP-848, KIP-1071) share.

Their group states differ (a streams group also has NotReady), but the table is built
the same way: any live state may reach any other, because one heartbeat may add a
member (the group epoch moves), compute the new target and reconcile every affected
member at once; Dead is final. A change outside a table raises
:class:`brokerd.fsm.InvalidTransition`: a coordinator bug, never a client error. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

__all__ = ["live_states_table"]

_S = TypeVar("_S", bound=enum.Enum)


def live_states_table(states: type[_S], dead: _S) -> Mapping[_S, frozenset[_S]]:
    """For each of ``states``, the states a group may move to: all of them from a live
    state, only ``dead`` from ``dead``."""
    every = frozenset(states)
    return {s: (frozenset({dead}) if s is dead else every) for s in states}
