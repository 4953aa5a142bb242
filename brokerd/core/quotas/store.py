# -*- test-case-name: tests.core.quotas.test_store -*-
"""The durable client quotas: ``client-quotas.json`` in the data directory.

Kept as the broker keeps its ACLs (``acls.json``): one readable JSON document
(``{"version": 1, "quotas": [{"entity": {"user": "alice", "client-id": null},
"values": {"producer_byte_rate": 1048576.0}}]}``, a null name being the type's default),
replaced as a whole with :func:`brokerd.storage.fileio.atomic_write` before an
alteration is answered, so after a crash or kill -9 it holds the old quotas or the new,
never a mix. Loading bounds the size and count before parsing and refuses a file it
cannot fully understand (the broker does not start on a quota file it would misread).

Blocking (file I/O): the caller runs :meth:`QuotaStore.save` in a thread. No Twisted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from brokerd.core.quotas.entities import (
    MAX_ENTITIES,
    InvalidQuota,
    QuotaEntity,
    check_value,
    entity_of,
)
from brokerd.storage.json_document import DocumentFormat, JsonDocumentFile

QUOTA_FILE_NAME = "client-quotas.json"
FORMAT_VERSION = 1
#: Largest file read (an entity takes about 150 bytes).
MAX_FILE_BYTES = 64 * 1024 * 1024

_FORMAT = DocumentFormat("client quota", "quotas", list, MAX_FILE_BYTES, FORMAT_VERSION)


class QuotaFileError(ValueError):
    """A ``client-quotas.json`` that cannot be loaded (its path and what is wrong)."""


def encode(quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> bytes:
    items = [
        {"entity": dict(entity.parts()), "values": dict(sorted(values.items()))}
        for entity, values in sorted(quotas.items(), key=lambda e: e[0].label())
    ]
    return _FORMAT.encode(items)


def decode(data: bytes) -> dict[QuotaEntity, dict[str, float]]:
    """The quotas of a file's contents.

    :raises InvalidQuota: anything that is not a version-1 document of valid quotas.
    """
    items = _FORMAT.decode(data, InvalidQuota)
    if len(items) > MAX_ENTITIES:
        raise InvalidQuota(f"more than {MAX_ENTITIES} entities")
    out: dict[QuotaEntity, dict[str, float]] = {}
    for item in items:
        if not isinstance(item, dict) or set(item) != {"entity", "values"}:
            raise InvalidQuota('each quota must be an object of "entity" and "values"')
        parts, values = item["entity"], item["values"]
        if not isinstance(parts, dict) or not isinstance(values, dict):
            raise InvalidQuota('"entity" and "values" must be objects')
        if not all(isinstance(t, str) and (n is None or isinstance(n, str))
                   for t, n in parts.items()):
            raise InvalidQuota("entity names must be strings or null")
        entity = entity_of(parts.items())
        if entity in out:
            raise InvalidQuota(f"entity {entity.label()} is listed twice")
        checked: dict[str, float] = {}
        for key, value in values.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InvalidQuota(f"{key} of {entity.label()} is not a number")
            check_value(key, float(value))
            checked[key] = float(value)
        if checked:
            out[entity] = checked
    return out


class QuotaStore:
    """``client-quotas.json`` at ``path``: :meth:`load` once at start, :meth:`save` per
    change."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = JsonDocumentFile(path, MAX_FILE_BYTES)

    @classmethod
    def in_directory(cls, data_dir: str) -> QuotaStore:
        return cls(os.path.join(data_dir, QUOTA_FILE_NAME))

    def load(self) -> dict[QuotaEntity, dict[str, float]]:
        """The stored quotas; none when the file does not exist.

        :raises QuotaFileError: a file that is too large or not a valid quota document.
        """
        return self._file.load(decode, InvalidQuota, QuotaFileError) or {}

    def save(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._file.save(encode(quotas))
