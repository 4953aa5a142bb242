# -*- test-case-name: tests.registry.test_compat -*-
"""The three schema languages of the registry, behind :class:`~brokerd.registry.model.
SchemaFormat`: ``AVRO`` (:mod:`.avro`), ``JSON`` (:mod:`.json_schema`) and ``PROTOBUF``
(:mod:`.protobuf`).

:func:`for_type` imports a format's module on its first use, and the module imports its
library then: a broker that never sees a schema never loads Avro, jsonschema or protobuf.
Each costs resident memory once loaded (measured on CPython 3.11): Avro about 3 MiB,
JSON Schema about 4 MiB, Protobuf about 5 MiB, and 12 MiB once protoc's compiler has
compiled a first ``.proto`` text.
"""

from __future__ import annotations

import importlib

from brokerd.registry.model import SchemaFormat, SchemaType

__all__ = ["for_type"]

#: Where each type's format lives; the module has a ``FORMAT`` instance.
_MODULES = {
    SchemaType.AVRO: "brokerd.registry.formats.avro",
    SchemaType.JSON: "brokerd.registry.formats.json_schema",
    SchemaType.PROTOBUF: "brokerd.registry.formats.protobuf",
}

_loaded: dict[SchemaType, SchemaFormat] = {}


def for_type(schema_type: SchemaType) -> SchemaFormat:
    """The format of ``schema_type``, its module imported on first use."""
    found = _loaded.get(schema_type)
    if found is None:
        module = importlib.import_module(_MODULES[schema_type])
        found = module.FORMAT
        _loaded[schema_type] = found
    return found
