"""A small versioned JSON document kept durably in one file (ACLs, client quotas,
client-metrics resources).

Such a file holds ``{"version": 1, "<key>": <body>}``, indented so an operator can read
it. :class:`DocumentFormat` is the envelope: it writes the version beside the body and,
reading, bounds the size before parsing and checks the version and the body's shape, so
a caller only validates its own items. :class:`JsonDocumentFile` is the file: it is
replaced as a whole with :func:`brokerd.storage.fileio.atomic_write` (after a crash it
holds the old document or the new one, never a mix), and a load refuses what it cannot
fully understand with an error naming the path: a store that silently dropped part of
its file would lose an operator's settings (or grant too much, for ACLs).

Each caller keeps its own error types, passed in, so its messages and ``except`` clauses
stay its own. Blocking (file I/O): callers save in a thread. No Twisted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from brokerd.storage.fileio import atomic_write

__all__ = ["DocumentFormat", "JsonDocumentFile"]

_Body = TypeVar("_Body", list[Any], dict[str, Any])
_T = TypeVar("_T")


@attrs.frozen
class DocumentFormat(Generic[_Body]):
    """The envelope of one kind of document: ``{"version": version, key: body}``."""

    #: What the document holds, for errors ("not a version 1 ACL document").
    name: str
    #: The body's key beside ``"version"``.
    key: str
    #: ``list`` or ``dict``: the body's JSON shape.
    body_type: type[_Body]
    #: Largest document read; a larger one is refused before parsing.
    max_bytes: int
    version: int = 1

    def encode(self, body: _Body) -> bytes:
        document = {"version": self.version, self.key: body}
        return (json.dumps(document, indent=1) + "\n").encode()

    def decode(self, data: bytes, invalid: Callable[[str], Exception]) -> _Body:
        """The body of ``data``, still to be validated item by item by the caller.

        :raises: ``invalid(why)`` for a document too large, not JSON, of another version
            or with a body of the wrong shape.
        """
        if len(data) > self.max_bytes:
            raise invalid(f"larger than {self.max_bytes} bytes")
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise invalid(f"not JSON: {e}") from None
        if not isinstance(document, dict) or document.get("version") != self.version:
            raise invalid(f"not a version {self.version} {self.name} document")
        body = document.get(self.key)
        if not isinstance(body, self.body_type):
            shape = "a list" if self.body_type is list else "an object"
            raise invalid(f'"{self.key}" must be {shape}')
        return body


@attrs.frozen
class JsonDocumentFile:
    """The file at ``path`` holding one document of at most ``max_bytes``."""

    path: str
    max_bytes: int

    def load(
        self,
        decode: Callable[[bytes], _T],
        invalid: type[Exception],
        file_error: Callable[[str], Exception],
    ) -> _T | None:
        """``decode`` of the file's contents; None when there is no file.

        :raises: ``file_error("<path>: <why>")`` when ``decode`` raises ``invalid``.
        """
        try:
            with open(self.path, "rb") as f:
                # One byte more than allowed, so that decode sees the file is too large.
                data = f.read(self.max_bytes + 1)
        except FileNotFoundError:
            return None
        try:
            return decode(data)
        except invalid as e:
            raise file_error(f"{self.path}: {e}") from None

    def save(self, data: bytes) -> None:
        atomic_write(self.path, data)
