# -*- test-case-name: tests.registry.test_validation -*-
"""Broker-side schema validation, as Confluent Server's topic configs name it.

A topic with ``confluent.value.schema.validation=true`` (``confluent.key...`` for keys)
takes a produce only when every record's value (key) is framed as Confluent's
serializers frame it (magic byte 0, then a 4-byte schema id) with an id registered
under the topic's subject by TopicNameStrategy, ``<topic>-value`` (``<topic>-key``), in
a live version. A null value (a tombstone) and a null key pass: they carry no data to
describe. Anything else refuses the whole batch with INVALID_RECORD, naming each
refused record by its index in the batch, and why.

The broker core calls :meth:`SchemaValidator.validate` (its record-validator seam) for
those topics only; the check is a frame read and a lookup in memory per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from brokerd.errors import InvalidRecord
from brokerd.registry.model import unframe

if TYPE_CHECKING:
    from brokerd.registry.service import SchemaRegistry

__all__ = ["SchemaValidator"]

#: Refused records a message names before "...": the record errors carry each.
_SHOWN = 3


class SchemaValidator:
    """The core's record validator over the registry's lookups."""

    def __init__(self, lookup: SchemaRegistry) -> None:
        self._lookup = lookup

    def validate(
        self,
        topic: str,
        records: Sequence[tuple[bytes | None, bytes | None]],
        check_keys: bool,
        check_values: bool,
    ) -> None:
        """Raise :class:`InvalidRecord` unless every checked side carries a schema id
        of its subject."""
        errors: list[tuple[int, str]] = []
        for index, (key, value) in enumerate(records):
            for side, data, enabled in (("key", key, check_keys), ("value", value, check_values)):
                if not enabled or data is None:
                    continue
                why = self._refusal(topic, side, data)
                if why is not None:
                    errors.append((index, why))
        if errors:
            shown = "; ".join(f"record {i}: {why}" for i, why in errors[:_SHOWN])
            more = f"; and {len(errors) - _SHOWN} more" if len(errors) > _SHOWN else ""
            raise InvalidRecord(
                f"schema validation of topic {topic!r} refused the batch: {shown}{more}",
                tuple(errors),
            )

    def _refusal(self, topic: str, side: str, data: bytes) -> str | None:
        subject = f"{topic}-{side}"
        frame = unframe(data)
        if frame is None:
            return (
                f"the {side} is not framed with a schema id (magic byte 0 and a 4-byte id), "
                f"as confluent.{side}.schema.validation requires"
            )
        schema_id = frame[0]
        if not self._lookup.subject_has_id(subject, schema_id):
            return (
                f"the {side}'s schema id {schema_id} is not registered under subject "
                f"{subject!r}"
            )
        return None
