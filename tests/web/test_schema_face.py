"""The console's restatement of the registry's rules (:mod:`brokerd.web.schema_face`)
agrees with the registry's own: the wire framing and the subject's topic under the ACLs;
and the registry's lookup is a source the console can read."""

from __future__ import annotations

import pytest

from brokerd.registry import acl, model
from brokerd.registry.service import SchemaRegistry
from brokerd.web import schema_face
from brokerd.web.schema_face import SchemaSource

from tests.web.memory_registry import MemoryRegistry


@pytest.mark.parametrize(
    "value",
    [b"", b"\x00", b"\x00\x00\x00\x00\x07", b"\x00\x00\x00\x01\x02body",
     b"\x01\x00\x00\x00\x01x", b"plain"],
)
def test_framing_agrees(value: bytes) -> None:
    assert schema_face.unframe(value) == model.unframe(value)
    assert schema_face.framed(258, value) == model.framed(258, value)


@pytest.mark.parametrize("subject", ["orders-value", "orders-key", "-value", "-key",
                                     "com.acme.Order", "a-value-key", "value"])
def test_subject_topics_agree(subject: str) -> None:
    assert schema_face.subject_topic(subject) == acl.subject_topic(subject)


def test_the_registries_are_sources() -> None:
    # mypy checks the broker's registry against SchemaSource where the wiring passes it
    # to the console; here, that both have every method the console calls.
    for registry in (SchemaRegistry, MemoryRegistry):
        for method in ("parsed_by_id", "subjects", "versions", "latest", "compatibility_of"):
            assert callable(getattr(registry, method)), (registry, method)
    source: SchemaSource = MemoryRegistry()
    assert source.subjects() == []
