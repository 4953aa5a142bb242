"""The shared envelope and file of the broker's small JSON documents (ACLs, quotas,
client-metrics resources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brokerd.storage.json_document import DocumentFormat, JsonDocumentFile

FORMAT = DocumentFormat("test", "items", list, 64)


class Invalid(ValueError):
    pass


class FileBroken(ValueError):
    pass


def test_round_trip_through_the_file(tmp_path: Path) -> None:
    file = JsonDocumentFile(str(tmp_path / "doc.json"), 64)
    assert file.load(lambda d: FORMAT.decode(d, Invalid), Invalid, FileBroken) is None
    file.save(FORMAT.encode([1, "a"]))
    assert json.loads((tmp_path / "doc.json").read_text()) == {"version": 1, "items": [1, "a"]}
    assert file.load(lambda d: FORMAT.decode(d, Invalid), Invalid, FileBroken) == [1, "a"]


@pytest.mark.parametrize(("data", "why"), [
    (b"x" * 65, "larger than 64 bytes"),
    (b"{", "not JSON"),
    (b"\xff", "not JSON"),
    (b'{"version": 2, "items": []}', "not a version 1 test document"),
    (b"[]", "not a version 1 test document"),
    (b'{"version": 1, "items": {}}', '"items" must be a list'),
    (b'{"version": 1}', '"items" must be a list'),
])
def test_a_bad_document_is_refused_naming_the_path(tmp_path: Path, data: bytes,
                                                   why: str) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(data)
    file = JsonDocumentFile(str(path), 64)
    with pytest.raises(FileBroken, match=f"^{path}: .*{why}"):
        file.load(lambda d: FORMAT.decode(d, Invalid), Invalid, FileBroken)


def test_an_object_body() -> None:
    objects = DocumentFormat("test", "things", dict, 64)
    assert objects.decode(objects.encode({"a": "b"}), Invalid) == {"a": "b"}
    with pytest.raises(Invalid, match='"things" must be an object'):
        objects.decode(b'{"version": 1, "things": []}', Invalid)
