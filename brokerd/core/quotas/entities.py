# -*- test-case-name: tests.core.quotas.test_entities -*-
"""Client quota entities and their configured values, as Kafka keeps them.

A quota entity is a user, a client id, or both, each either named or the type's
*default* (the name None); :class:`QuotaEntity` is one, :class:`QuotaConfigs` maps the
entities to their values of the four quota keys (:data:`QUOTA_KEYS`). Two questions are
answered here, both as Kafka answers them:

* which configured quota applies to a connection's (user, client id) for one key
  (:meth:`QuotaConfigs.resolve`): Kafka's eight-step precedence, from
  ``user + client-id`` down to the default client id, each key resolved on its own; the
  answer carries the *share* the quota is measured over (the user and client id that
  entity's level names: a quota set on a user is shared by all of that user's clients);
* which entities a DescribeClientQuotas filter selects (:func:`describe`).

An alteration is validated in full before anything changes (:meth:`QuotaConfigs.check`).
Pure: no I/O, no Twisted; the durable copy is :mod:`brokerd.core.quotas.store`'s job.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence

import attrs

USER = "user"
CLIENT_ID = "client-id"
#: Kafka's third entity type (connection creation rate per IP), not kept by brokerd.
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: The quota keys and whether Kafka types each as a whole number (LONG) or a DOUBLE.
QUOTA_KEYS: Mapping[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
#: Most entities kept (each costs a few hundred bytes); an alteration adding more is
#: refused.
MAX_ENTITIES = 100_000
#: Longest user or client id name accepted in an entity.
MAX_NAME_CHARS = 1024
#: How close to a whole number a LONG key's value must be (Kafka's tolerance).
_LONG_EPSILON = 1e-6


class MatchType(enum.IntEnum):
    """DescribeClientQuotas' filter component match types."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


class InvalidQuota(ValueError):
    """A quota entity, key, value or filter Kafka refuses (INVALID_REQUEST)."""


@attrs.frozen
class QuotaEntity:
    """A user and/or a client id; each ``None`` when the entity does not name that type,
    and :data:`DEFAULT` when it names the type's default."""

    user: str | Default | None = None
    client_id: str | Default | None = None

    def parts(self) -> tuple[tuple[str, str | None], ...]:
        """(entity type, name or None for the default), Kafka's wire form."""
        out: list[tuple[str, str | None]] = []
        if self.user is not None:
            out.append((USER, None if isinstance(self.user, Default) else self.user))
        if self.client_id is not None:
            out.append(
                (CLIENT_ID, None if isinstance(self.client_id, Default) else self.client_id)
            )
        return tuple(out)

    def label(self) -> str:
        """A readable form: ``user=alice,client-id=<default>``."""
        return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in self.parts())


@attrs.frozen
class Default:
    """The default entity of a type (Kafka's null name, ``<default>`` in its tools)."""


DEFAULT = Default()


def entity_of(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of wire (type, name) pairs; :class:`InvalidQuota` for what Kafka
    refuses (no part, a type named twice, an unknown type, ``ip``)."""
    found: dict[str, str | Default] = {}
    for entity_type, name in parts:
        if entity_type == IP:
            raise InvalidQuota("brokerd keeps no ip quotas (connection_creation_rate)")
        if entity_type not in ENTITY_TYPES:
            raise InvalidQuota(f"Unknown entity type {entity_type!r}")
        if entity_type in found:
            raise InvalidQuota(f"Entity type {entity_type} appears more than once")
        if name is not None and len(name) > MAX_NAME_CHARS:
            raise InvalidQuota(f"{entity_type} name longer than {MAX_NAME_CHARS} characters")
        found[entity_type] = DEFAULT if name is None else name
    if not found:
        raise InvalidQuota("Invalid empty client quota entity")
    return QuotaEntity(user=found.get(USER), client_id=found.get(CLIENT_ID))


def check_value(key: str, value: float) -> None:
    """Refuse a value Kafka refuses for ``key`` (unknown key, LONG key not whole)."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuota(f"Configuration {key} must be a positive number, not {value}")
    if whole and abs(round(value) - value) > _LONG_EPSILON:
        raise InvalidQuota(f"Configuration {key} must be a Long value")


@attrs.frozen
class Applied:
    """The quota that applies to a connection for one key: its bound, the entity it was
    set on, and the (user, client id) share measured against it ("" = not part of it)."""

    bound: float
    entity: QuotaEntity
    share: tuple[str, str]


def _levels(user: str, client_id: str) -> tuple[tuple[QuotaEntity, tuple[str, str]], ...]:
    """Kafka's precedence: the entities that may apply to (user, client id), highest
    first, each with the share it is measured over."""
    both = (user, client_id)
    return (
        (QuotaEntity(user, client_id), both),
        (QuotaEntity(user, DEFAULT), both),
        (QuotaEntity(user, None), (user, "")),
        (QuotaEntity(DEFAULT, client_id), both),
        (QuotaEntity(DEFAULT, DEFAULT), both),
        (QuotaEntity(DEFAULT, None), (user, "")),
        (QuotaEntity(None, client_id), ("", client_id)),
        (QuotaEntity(None, DEFAULT), ("", client_id)),
    )


@attrs.frozen
class Change:
    """One alteration of an entity: keys set to values, keys removed."""

    entity: QuotaEntity
    sets: Mapping[str, float]
    removals: frozenset[str]


class QuotaConfigs:
    """Every configured client quota, by entity (in memory; see the store)."""

    def __init__(self, stored: Mapping[QuotaEntity, Mapping[str, float]] | None = None) -> None:
        self._by_entity: dict[QuotaEntity, dict[str, float]] = {
            entity: dict(values) for entity, values in (stored or {}).items() if values
        }
        #: Keys some entity sets: a key nobody sets costs nothing to enforce.
        self.keys_set: frozenset[str] = frozenset()
        self._refresh()

    def _refresh(self) -> None:
        self.keys_set = frozenset(k for values in self._by_entity.values() for k in values)

    def entities(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._by_entity

    def resolve(self, key: str, user: str, client_id: str) -> Applied | None:
        """The quota of ``key`` that applies to (user, client id), or None."""
        if key not in self.keys_set:
            return None
        by_entity = self._by_entity
        for entity, share in _levels(user, client_id):
            values = by_entity.get(entity)
            if values is not None:
                bound = values.get(key)
                if bound is not None:
                    return Applied(bound, entity, share)
        return None

    def check(self, entries: Sequence[tuple[Sequence[tuple[str, str | None]],
                                            Sequence[tuple[str, float, bool]]]]
              ) -> list[Change | InvalidQuota]:
        """Validate each entry (entity parts; ops of key, value, remove) on its own, as
        Kafka does: a bad entry fails alone and the others are applied."""
        out: list[Change | InvalidQuota] = []
        growth = 0
        for parts, ops in entries:
            try:
                entity = entity_of(parts)
                sets: dict[str, float] = {}
                removals: set[str] = set()
                for key, value, remove in ops:
                    if key in sets or key in removals:
                        raise InvalidQuota(f"Duplicate quota key {key} in one entity")
                    if remove:
                        if key not in QUOTA_KEYS:
                            raise InvalidQuota(f"Invalid configuration key {key}")
                        removals.add(key)
                    else:
                        check_value(key, value)
                        sets[key] = float(value)
                if sets and entity not in self._by_entity:
                    growth += 1
                    if len(self._by_entity) + growth > MAX_ENTITIES:
                        raise InvalidQuota(f"more than {MAX_ENTITIES} quota entities")
                out.append(Change(entity, sets, frozenset(removals)))
            except InvalidQuota as e:
                out.append(e)
        return out

    def apply(self, changes: Iterable[Change]) -> None:
        for change in changes:
            values = self._by_entity.setdefault(change.entity, {})
            for key in change.removals:
                values.pop(key, None)
            values.update(change.sets)
            if not values:
                del self._by_entity[change.entity]
        self._refresh()

    def snapshot(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(values) for entity, values in self._by_entity.items()}


@attrs.frozen
class Component:
    entity_type: str
    match_type: int
    match: str | None


def describe(configs: QuotaConfigs, components: Sequence[Component], strict: bool
             ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities a DescribeClientQuotas filter selects, with their values, or
    :class:`InvalidQuota` for a filter Kafka refuses."""
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise InvalidQuota("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in any_of:
            raise InvalidQuota(
                f"Entity type {c.entity_type} cannot appear more than once in the filter."
            )
        if c.entity_type not in (*ENTITY_TYPES, IP):
            raise InvalidQuota(f"Unknown entity type {c.entity_type}")
        if c.match_type == MatchType.EXACT:
            if c.match is None:
                raise InvalidQuota(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MatchType.DEFAULT:
            if c.match is not None:
                raise InvalidQuota(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MatchType.SPECIFIED:
            if c.match is not None:
                raise InvalidQuota(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                    "string.")
            any_of.add(c.entity_type)
        else:
            raise InvalidQuota(f"Unknown match type {c.match_type}")
    if IP in exact or IP in any_of:
        if len(exact) + len(any_of) > 1:
            raise InvalidQuota("Invalid entity filter component combination, IP filter "
                               "component should not be used with user or clientId filter "
                               "component.")
        return []  # brokerd keeps no ip quotas
    named = len(exact) + len(any_of)
    found: list[tuple[QuotaEntity, Mapping[str, float]]] = []
    for entity, values in sorted(configs.entities().items(), key=lambda e: e[0].label()):
        parts = dict(entity.parts())
        if strict and len(parts) != named:
            continue
        if any(t not in parts or parts[t] != name for t, name in exact.items()):
            continue
        if any(t not in parts for t in any_of):
            continue
        found.append((entity, dict(values)))
    return found
