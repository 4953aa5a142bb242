# -*- test-case-name: tests.kafka.groups.consumer.test_regex_resolver -*-
"""Which topics a consumer group's subscription regexes match, worked out in bounded
slices so that no heartbeat, and no refresh, holds the reactor for long.

Even RE2's linear matching (:mod:`brokerd.kafka.regex`) is CPU: thousands of topics
against many large patterns add up. Each (group, regex) keeps its matches and the set of
topic names they are complete for, so steady heartbeats check nothing, a new topic is
checked once and a deleted one is dropped. That set is one snapshot of the names shared
by every resolution that is up to date, so a regex costs memory for its matches only,
however many groups hold one. Checking is charged in units of RE2 work, the pattern's
program size times the name's length (plus :data:`MATCH_OVERHEAD` per name for the call
and the ACL check); one slice spends at most :data:`SLICE_COST`. No heartbeat does that
work: as in Kafka, which resolves regexes asynchronously, a heartbeat that brings a new
regex or finds new topics only starts a pass, and the work runs one slice per reactor
turn (``callLater(0)``: other connections are served in between), round-robin over every
group's work; ``on_resolved(group_id)`` tells the coordinator when a group's regex has
its new answer. Until then the regex keeps its previous answer (nothing, when new), so
the heartbeat that brought it is answered with the member's named topics only.

Every topic the coordinator sees may match, internal topics included: Kafka 4.4's
resolver skips none (a client that wants them out says so in its regex; franz-go checks
that the broker assigns ``__consumer_offsets`` to a regex naming it). Where ACLs apply,
a topic counts only if the principal may DESCRIBE it (Kafka 4's rule): the principal of
the heartbeat that first needed the regex resolved, checked when a topic is first
matched.

Reactor thread only; time comes from the injected clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

import attrs

from brokerd.clock import Clock, DelayedCall
from brokerd.kafka.regex import SLICE_COST, Regex, compile_regex

__all__ = ["MATCH_OVERHEAD", "SLICE_COST", "MayDescribe", "RegexResolver", "every_topic"]

#: What checking one name costs beyond RE2's own work (a Python call, an ACL lookup).
MATCH_OVERHEAD = 1_000

#: Whether the principal of a member may DESCRIBE a topic (by name).
MayDescribe = Callable[[str], bool]


def every_topic(_topic: str) -> bool:
    """Without ACLs: every topic may be described."""
    return True


@attrs.define
class _Resolution:
    """One regex of one group: its answer for the topic names of ``base``, and the pass
    that brings it up to ``target`` while one runs."""

    regex: Regex
    may_describe: MayDescribe
    #: The names the answer is complete for. A snapshot shared with every other
    #: resolution that is up to date: a regex costs memory for its matches only.
    base: frozenset[str] = frozenset()
    #: What matches among ``base`` (deleted topics taken out as they go).
    matched: frozenset[str] = frozenset()
    #: The pass under way (``target`` None: none): names to check, how many are done,
    #: and the matches among them.
    target: frozenset[str] | None = None
    todo: Sequence[str] = ()
    done: int = 0
    found: list[str] = attrs.Factory(list)

    @property
    def pending(self) -> bool:
        return self.target is not None

    def update(self, names: frozenset[str], ordered: Sequence[str]) -> None:
        """Catch up with the topic names as they are now (``ordered``: the same, as a
        sequence): deleted topics leave the answer at once; names never checked start a
        pass, unless one runs (the next takes them)."""
        self.trim(names)
        if self.target is not None or names is self.base:
            return
        todo: Sequence[str] = ordered if not self.base else tuple(names - self.base)
        if not todo:
            self.base = names
            return
        self.target, self.todo, self.done, self.found = names, todo, 0, []

    def trim(self, names: frozenset[str]) -> frozenset[str]:
        """The answer without deleted topics (a pass may end with names deleted since
        it began)."""
        if self.matched and not self.matched <= names:
            self.matched = self.matched & names
        return self.matched

    def step(self) -> int:
        """Check the next name of the pass; its cost. The last one ends the pass."""
        assert self.target is not None
        cost = self.check(self.todo[self.done])
        self.done += 1
        if self.done == len(self.todo):
            self.matched = (self.matched & self.target) | frozenset(self.found)
            self.base, self.target, self.todo, self.done, self.found = (
                self.target, None, (), 0, [])
        return cost

    def check(self, name: str) -> int:
        """Check one name; its cost."""
        if self.regex.fullmatch(name) and self.may_describe(name):
            self.found.append(name)
        return self.regex.work(name) + MATCH_OVERHEAD


class RegexResolver:
    """The regexes of every consumer group of one coordinator.

    :param clock: schedules the slices after the first.
    :param on_resolved: called with a group id when one of its regexes got a new answer
        in a later slice.
    :param slice_cost: the work of one slice (:data:`SLICE_COST`).
    """

    def __init__(
        self,
        clock: Clock,
        on_resolved: Callable[[str], None],
        *,
        slice_cost: int = SLICE_COST,
    ) -> None:
        self._clock = clock
        self._on_resolved = on_resolved
        self._slice_cost = slice_cost
        self._groups: dict[str, dict[str, _Resolution]] = {}
        self._next: DelayedCall | None = None
        #: The topic names last seen, as a set and in order (shared by resolutions).
        self._names: frozenset[str] = frozenset()
        self._ordered: tuple[str, ...] = ()

    def resolve(
        self,
        group_id: str,
        regexes: Collection[str],
        topics: Collection[str],
        requester: MayDescribe | None,
        *,
        known: Callable[[str], frozenset[str]] | None = None,
    ) -> Mapping[str, frozenset[str]]:
        """The topics each of ``regexes`` matches as far as resolved (a regex still being
        resolved shows its previous answer). The group's other regexes are forgotten.

        :param requester: what the principal of the request that asks may DESCRIBE
            (``None``: no request asks, as on a session timeout or a finished slice;
            nothing is checked now, and a regex new to the group, one restored from
            storage, is left out of the answer until a request asks).
        :param known: the answer a regex new to the resolver starts from while its first
            pass runs (a regex restored from storage keeps the topics it had; without
            it a new regex matches nothing until resolved).
        """
        names = self._snapshot(topics)
        before = self._groups.get(group_id, {})
        current: dict[str, _Resolution] = {}
        for pattern in regexes:
            resolution = before.get(pattern)
            if resolution is None:
                if requester is None:
                    continue
                resolution = _Resolution(compile_regex(pattern), requester)
                if known is not None:
                    resolution.matched = known(pattern)
            resolution.update(names, self._ordered)
            current[pattern] = resolution
        if current:
            self._groups[group_id] = current
        else:
            self._groups.pop(group_id, None)
        # Only this group's regexes can have new work: a heartbeat costs its own group,
        # not a scan of every group's.
        if self._next is None and any(r.pending for r in current.values()):
            self._next = self._clock.callLater(0, self._turn)
        return {pattern: r.trim(names) for pattern, r in current.items()}

    def _snapshot(self, topics: Collection[str]) -> frozenset[str]:
        """The names of ``topics``: the same object as long as they do not change."""
        names = self._names
        if len(topics) != len(names) or any(n not in names for n in topics):
            self._names = names = frozenset(topics)
            self._ordered = tuple(names)
        return names

    def matched(self, group_id: str, pattern: str) -> frozenset[str] | None:
        """What ``pattern`` matches for the group as last resolved (no work); None if
        no request has asked for it yet."""
        resolution = self._groups.get(group_id, {}).get(pattern)
        return None if resolution is None else resolution.matched

    @property
    def busy(self) -> bool:
        """Whether work is left for later slices."""
        return self._next is not None

    def stop(self) -> None:
        if self._next is not None and self._next.active():
            self._next.cancel()
        self._next = None
        self._groups.clear()

    def _all(self) -> Iterator[tuple[str, _Resolution]]:
        for group_id, resolutions in list(self._groups.items()):
            for resolution in resolutions.values():
                yield group_id, resolution

    def _spend(self, work: Iterator[tuple[str, _Resolution]]) -> None:
        """One slice over ``work``, then schedule the next if any is left."""
        budget = self._slice_cost
        resolved: list[str] = []
        for group_id, resolution in work:
            if budget <= 0:
                break
            if not resolution.pending:
                continue
            while resolution.pending and budget > 0:
                budget -= resolution.step()
            if not resolution.pending and group_id not in resolved:
                resolved.append(group_id)
        self._schedule()
        for group_id in resolved:
            self._on_resolved(group_id)

    def _schedule(self) -> None:
        left = any(r.pending for _, r in self._all())
        if left and self._next is None:
            self._next = self._clock.callLater(0, self._turn)

    def _turn(self) -> None:
        self._next = None
        # Round-robin: the groups served first this turn go last the next.
        work = list(self._all())
        if work:
            self._rotate()
        self._spend(iter(work))

    def _rotate(self) -> None:
        first = next(iter(self._groups))
        self._groups[first] = self._groups.pop(first)
