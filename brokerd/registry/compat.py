# -*- test-case-name: tests.registry.test_compat -*-
"""The compatibility levels, as Confluent applies them to a subject's versions.

A new schema is checked against the subject's live versions (soft-deleted ones do not
count): the latest only, or every one for the ``*_TRANSITIVE`` levels. ``BACKWARD``: the
new schema reads what the old ones wrote; ``FORWARD``: the old ones read what the new
one writes; ``FULL``: both; ``NONE``: nothing is checked. The rule of each schema
language (a field added without a default, a type narrowed, ...) is its format's
(:meth:`~brokerd.registry.model.ParsedSchema.incompatibilities`); this module only
decides which pairs are checked in which direction, and words the answer as Confluent's
verbose messages do: the formats' messages, then the old version they concern, then the
level. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.registry.model import Compatibility, ParsedSchema

__all__ = ["incompatibilities"]

_BACKWARD = frozenset({
    Compatibility.BACKWARD, Compatibility.BACKWARD_TRANSITIVE,
    Compatibility.FULL, Compatibility.FULL_TRANSITIVE,
})
_FORWARD = frozenset({
    Compatibility.FORWARD, Compatibility.FORWARD_TRANSITIVE,
    Compatibility.FULL, Compatibility.FULL_TRANSITIVE,
})
_TRANSITIVE = frozenset({
    Compatibility.BACKWARD_TRANSITIVE, Compatibility.FORWARD_TRANSITIVE,
    Compatibility.FULL_TRANSITIVE,
})


def incompatibilities(
    level: Compatibility,
    new: ParsedSchema,
    previous: Sequence[tuple[int, ParsedSchema]],
) -> list[str]:
    """Why ``new`` may not follow ``previous`` (``(version, schema)``, oldest first) at
    ``level``; empty when it may."""
    if level is Compatibility.NONE or not previous:
        return []
    checked = previous if level in _TRANSITIVE else previous[-1:]
    messages: list[str] = []
    for version, old in reversed(checked):
        found: list[str] = []
        if level in _BACKWARD:
            found += new.incompatibilities(old)
        if level in _FORWARD:
            found += [m for m in old.incompatibilities(new) if m not in found]
        if found:
            messages += found
            messages.append(f"{{oldSchemaVersion: {version}}}")
    if messages:
        messages.append(f"{{compatibility: '{level.value}'}}")
    return messages
