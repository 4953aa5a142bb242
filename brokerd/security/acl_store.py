"""The durable ACL set: ``acls.json`` in the data directory.

The file holds every binding as a JSON object of names (``{"version": 1, "acls":
[{"resource_type": "TOPIC", ...}]}``) so an operator can read it; it is replaced as a
whole with :func:`brokerd.storage.fileio.atomic_write` (after a crash it holds the old
set or the new one, never a mix). Loading checks the size and count before parsing
everything and refuses a file it cannot fully understand: an authorizer silently
missing a DENY would grant too much.

Blocking (file I/O): the caller runs :meth:`AclStore.save` in a thread. No Twisted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from brokerd.security.acl import (
    AclBinding,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
    sorted_acls,
)
from brokerd.storage.json_document import DocumentFormat, JsonDocumentFile

ACL_FILE_NAME = "acls.json"
FORMAT_VERSION = 1
#: Most bindings kept; CreateAcls beyond it is refused.
MAX_ACLS = 100_000
#: Largest file read (an average binding takes about 200 bytes).
MAX_FILE_BYTES = 64 * 1024 * 1024

_FORMAT = DocumentFormat("ACL", "acls", list, MAX_FILE_BYTES, FORMAT_VERSION)

_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host",
           "operation", "permission")


class AclFileError(ValueError):
    """An ``acls.json`` that cannot be loaded (its path and what is wrong)."""


def _to_json(b: AclBinding) -> dict[str, str]:
    return {
        "resource_type": b.resource_type.name,
        "resource_name": b.resource_name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission": b.permission.name,
    }


def _from_json(item: object) -> AclBinding:
    if not isinstance(item, dict) or set(item) != set(_FIELDS):
        raise InvalidAcl(f"an ACL must be an object with exactly the keys {_FIELDS}")
    values = [item[k] for k in _FIELDS]
    if not all(isinstance(v, str) for v in values):
        raise InvalidAcl("every ACL field must be a string")
    try:
        return make_binding(
            ResourceType[item["resource_type"]],
            item["resource_name"],
            PatternType[item["pattern_type"]],
            item["principal"],
            item["host"],
            Operation[item["operation"]],
            Permission[item["permission"]],
        )
    except KeyError as e:
        raise InvalidAcl(f"unknown name {e}") from None


def encode(acls: Iterable[AclBinding]) -> bytes:
    return _FORMAT.encode([_to_json(b) for b in sorted_acls(acls)])


def decode(data: bytes) -> list[AclBinding]:
    """The bindings of a file's contents.

    :raises InvalidAcl: anything that is not a version-1 document of valid bindings.
    """
    items = _FORMAT.decode(data, InvalidAcl)
    if len(items) > MAX_ACLS:
        raise InvalidAcl(f"more than {MAX_ACLS} ACLs")
    return [_from_json(item) for item in items]


class AclStore:
    """``acls.json`` at ``path``: :meth:`load` once at start, :meth:`save` per change."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = JsonDocumentFile(path, MAX_FILE_BYTES)

    @classmethod
    def in_directory(cls, data_dir: str) -> AclStore:
        return cls(os.path.join(data_dir, ACL_FILE_NAME))

    def load(self) -> list[AclBinding]:
        """The stored bindings; none when the file does not exist.

        :raises AclFileError: a file that is too large or not a valid ACL document.
        """
        return self._file.load(decode, InvalidAcl, AclFileError) or []

    def save(self, acls: Iterable[AclBinding]) -> None:
        self._file.save(encode(acls))
