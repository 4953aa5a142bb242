"""The durable ACL set: ``acls.json`` round-trips the bindings sorted, and a file the
broker cannot fully understand is refused rather than half-loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brokerd.security.acl import (
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
)
from brokerd.security.acl_store import (
    ACL_FILE_NAME,
    MAX_ACLS,
    AclFileError,
    AclStore,
    decode,
    encode,
)

READ = make_binding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
    Operation.READ, Permission.ALLOW,
)
DENY = make_binding(
    ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:bob", "10.0.0.1",
    Operation.ALL, Permission.DENY,
)


def test_bindings_round_trip_through_the_file_by_name(tmp_path: Path) -> None:
    store = AclStore.in_directory(str(tmp_path))
    assert store.load() == []
    store.save([READ, DENY])
    document = json.loads((tmp_path / ACL_FILE_NAME).read_text())
    assert document["version"] == 1
    assert {"resource_type": "GROUP", "resource_name": "g-", "pattern_type": "PREFIXED",
            "principal": "User:bob", "host": "10.0.0.1", "operation": "ALL",
            "permission": "DENY"} in document["acls"]
    assert sorted(store.load(), key=repr) == sorted([READ, DENY], key=repr)
    assert encode([READ, DENY]) == encode([DENY, READ])  # stored sorted


@pytest.mark.parametrize(
    "change",
    [
        lambda item: item.pop("host"),
        lambda item: item.update(extra="x"),
        lambda item: item.update(operation="FLY"),
        lambda item: item.update(permission=1),
        lambda item: item.update(pattern_type="ANY"),  # a filter value, not a binding's
    ],
)
def test_a_binding_it_cannot_understand_is_refused(change: object) -> None:
    document = json.loads(encode([READ]))
    change(document["acls"][0])  # type: ignore[operator]
    with pytest.raises(InvalidAcl):
        decode(json.dumps(document).encode())


def test_too_many_bindings_are_refused() -> None:
    item = json.loads(encode([READ]))["acls"][0]
    document = {"version": 1, "acls": [item] * (MAX_ACLS + 1)}
    with pytest.raises(InvalidAcl, match=f"more than {MAX_ACLS}"):
        decode(json.dumps(document).encode())


def test_a_bad_file_is_an_acl_file_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / ACL_FILE_NAME).write_bytes(b'{"version": 2, "acls": []}')
    with pytest.raises(AclFileError, match=ACL_FILE_NAME):
        AclStore.in_directory(str(tmp_path)).load()
