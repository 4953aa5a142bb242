"""Kafka's ACL model: matching rules, filters, validation and the acls.json store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
    make_filter,
)
from brokerd.security.acl_store import MAX_ACLS, AclFileError, AclStore, decode, encode

T, G, C, X = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
              ResourceType.TRANSACTIONAL_ID)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
OP = Operation


def acl(
    rtype: ResourceType, name: str, op: Operation, perm: Permission = ALLOW, *,
    pattern: PatternType = LIT, principal: str = "User:alice", host: str = "*",
) -> AclBinding:
    return make_binding(rtype, name, pattern, principal, host, op, perm)


# (acls, principal, host, operation, resource type, name, expected)
CASES: list[tuple[str, list[AclBinding], str, str, Operation, ResourceType, str, bool]] = [
    ("no acl: denied", [], "User:alice", "h", OP.READ, T, "t", False),
    ("literal allow", [acl(T, "t", OP.READ)], "User:alice", "h", OP.READ, T, "t", True),
    ("other topic", [acl(T, "t", OP.READ)], "User:alice", "h", OP.READ, T, "u", False),
    ("other principal", [acl(T, "t", OP.READ)], "User:bob", "h", OP.READ, T, "t", False),
    ("other operation", [acl(T, "t", OP.READ)], "User:alice", "h", OP.WRITE, T, "t", False),
    ("other resource type", [acl(T, "t", OP.READ)], "User:alice", "h", OP.READ, G, "t", False),
    ("wildcard resource", [acl(T, "*", OP.READ)], "User:alice", "h", OP.READ, T, "any", True),
    ("wildcard principal", [acl(T, "t", OP.READ, principal="User:*")],
     "User:bob", "h", OP.READ, T, "t", True),
    ("host match", [acl(T, "t", OP.READ, host="10.0.0.1")],
     "User:alice", "10.0.0.1", OP.READ, T, "t", True),
    ("host mismatch", [acl(T, "t", OP.READ, host="10.0.0.1")],
     "User:alice", "10.0.0.2", OP.READ, T, "t", False),
    ("prefix", [acl(T, "app-", OP.WRITE, pattern=PRE)],
     "User:alice", "h", OP.WRITE, T, "app-orders", True),
    ("prefix mismatch", [acl(T, "app-", OP.WRITE, pattern=PRE)],
     "User:alice", "h", OP.WRITE, T, "ap", False),
    ("prefixed * is not a wildcard", [acl(T, "*", OP.WRITE, pattern=PRE)],
     "User:alice", "h", OP.WRITE, T, "x", False),
    ("ALL grants any", [acl(T, "t", OP.ALL)], "User:alice", "h", OP.DELETE, T, "t", True),
    ("READ implies DESCRIBE", [acl(T, "t", OP.READ)], "User:alice", "h", OP.DESCRIBE, T, "t",
     True),
    ("WRITE implies DESCRIBE", [acl(T, "t", OP.WRITE)], "User:alice", "h", OP.DESCRIBE, T, "t",
     True),
    ("DELETE implies DESCRIBE", [acl(T, "t", OP.DELETE)], "User:alice", "h", OP.DESCRIBE, T, "t",
     True),
    ("ALTER implies DESCRIBE", [acl(T, "t", OP.ALTER)], "User:alice", "h", OP.DESCRIBE, T, "t",
     True),
    ("CREATE does not imply DESCRIBE", [acl(T, "t", OP.CREATE)],
     "User:alice", "h", OP.DESCRIBE, T, "t", False),
    ("DESCRIBE does not imply READ", [acl(T, "t", OP.DESCRIBE)],
     "User:alice", "h", OP.READ, T, "t", False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl(T, "t", OP.ALTER_CONFIGS)],
     "User:alice", "h", OP.DESCRIBE_CONFIGS, T, "t", True),
    ("deny wins", [acl(T, "t", OP.READ), acl(T, "t", OP.READ, DENY)],
     "User:alice", "h", OP.READ, T, "t", False),
    ("deny by wildcard principal wins", [acl(T, "t", OP.READ),
                                         acl(T, "*", OP.READ, DENY, principal="User:*")],
     "User:alice", "h", OP.READ, T, "t", False),
    ("deny ALL wins", [acl(T, "t", OP.READ), acl(T, "t", OP.ALL, DENY, pattern=PRE)],
     "User:alice", "h", OP.READ, T, "t", False),
    ("deny prefix wins over literal allow", [acl(T, "app-x", OP.READ),
                                             acl(T, "app-", OP.READ, DENY, pattern=PRE)],
     "User:alice", "h", OP.READ, T, "app-x", False),
    ("deny READ leaves DESCRIBE", [acl(T, "t", OP.READ), acl(T, "t", OP.READ, DENY)],
     "User:alice", "h", OP.DESCRIBE, T, "t", True),
    ("deny of another host", [acl(T, "t", OP.READ), acl(T, "t", OP.READ, DENY, host="1.2.3.4")],
     "User:alice", "h", OP.READ, T, "t", True),
    ("cluster", [acl(C, "kafka-cluster", OP.ALTER)],
     "User:alice", "h", OP.ALTER, C, "kafka-cluster", True),
    ("transactional id", [acl(X, "tx-", OP.WRITE, pattern=PRE)],
     "User:alice", "h", OP.WRITE, X, "tx-1", True),
]


@pytest.mark.parametrize(
    ("acls", "principal", "host", "op", "rtype", "name", "expected"),
    [c[1:] for c in CASES], ids=[c[0] for c in CASES],
)
def test_authorize(
    acls: list[AclBinding], principal: str, host: str, op: Operation, rtype: ResourceType,
    name: str, expected: bool,
) -> None:
    assert AclAuthorizer(acls).authorize(principal, host, op, rtype, name) is expected


def test_super_user_bypasses_deny() -> None:
    auth = AclAuthorizer([acl(T, "*", OP.ALL, DENY, principal="User:*")], ["User:root"])
    assert auth.authorize("User:root", "h", OP.DELETE, T, "t")
    assert not auth.authorize("User:alice", "h", OP.DESCRIBE, T, "t")


def test_replace_takes_effect() -> None:
    auth = AclAuthorizer()
    assert not auth.authorize("User:alice", "h", OP.READ, T, "t")
    auth.replace([acl(T, "t", OP.READ)])
    assert auth.authorize("User:alice", "h", OP.READ, T, "t")
    auth.replace([])
    assert not auth.authorize("User:alice", "h", OP.READ, T, "t")


def test_authorize_any() -> None:
    auth = AclAuthorizer([acl(T, "orders", OP.WRITE)])
    assert auth.authorize_any("User:alice", "h", OP.WRITE, T)
    assert not auth.authorize_any("User:bob", "h", OP.WRITE, T)
    assert not auth.authorize_any("User:alice", "h", OP.WRITE, G)
    denied = AclAuthorizer([acl(T, "orders", OP.WRITE), acl(T, "*", OP.WRITE, DENY)])
    assert not denied.authorize_any("User:alice", "h", OP.WRITE, T)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ((1, "t", 3, "User:a", "*", 3, 3), "ANY"),
        ((9, "t", 3, "User:a", "*", 3, 3), "unknown resource type"),
        ((2, "t", 2, "User:a", "*", 3, 3), "MATCH"),
        ((2, "t", 3, "User:a", "*", 1, 3), "ANY"),
        ((2, "t", 3, "User:a", "*", 3, 1), "ANY"),
        ((2, "t", 3, "alice", "*", 3, 3), r"User:<name>"),
        ((2, "t", 3, "Group:x", "*", 3, 3), r"User:<name>"),
        ((2, "", 3, "User:a", "*", 3, 3), "resource name"),
        ((2, "t", 3, "User:a", "", 3, 3), "host"),
        ((4, "other", 3, "User:a", "*", 3, 3), "kafka-cluster"),
        ((2, "t" * 2000, 3, "User:a", "*", 3, 3), "resource name"),
    ],
)
def test_invalid_bindings(args: tuple[int, str, int, str, str, int, int], why: str) -> None:
    with pytest.raises(InvalidAcl, match=why):
        make_binding(*args)


STORED = [
    acl(T, "orders", OP.READ),
    acl(T, "orders", OP.WRITE, principal="User:bob"),
    acl(T, "app-", OP.ALL, DENY, pattern=PRE),
    acl(G, "g1", OP.READ, host="10.0.0.1"),
    acl(C, "kafka-cluster", OP.ALTER),
]


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (AclFilter(), STORED),
        (AclFilter(resource_type=T), STORED[:3]),
        (AclFilter(resource_type=T, resource_name="orders"), STORED[:2]),
        (AclFilter(resource_name="orders", pattern_type=PRE), []),
        (AclFilter(resource_name="app-", pattern_type=PRE), [STORED[2]]),
        (AclFilter(resource_name="app-1", pattern_type=PatternType.MATCH), [STORED[2]]),
        (AclFilter(resource_name="app-1", pattern_type=LIT), []),
        (AclFilter(principal="User:bob"), [STORED[1]]),
        (AclFilter(host="10.0.0.1"), [STORED[3]]),
        (AclFilter(operation=OP.READ), [STORED[0], STORED[3]]),
        (AclFilter(permission=DENY), [STORED[2]]),
    ],
)
def test_filters(flt: AclFilter, expected: list[AclBinding]) -> None:
    assert [b for b in STORED if flt.matches(b)] == expected


def test_match_filter_includes_wildcard_literal() -> None:
    star = acl(T, "*", OP.READ)
    assert AclFilter(resource_name="x", pattern_type=PatternType.MATCH).matches(star)
    assert not AclFilter(resource_name="x", pattern_type=PatternType.ANY).matches(star)


def test_filter_validation() -> None:
    assert make_filter(1, None, 1, None, None, 1, 1) == AclFilter()
    with pytest.raises(InvalidAcl):
        make_filter(0, None, 1, None, None, 1, 1)
    with pytest.raises(InvalidAcl):
        make_filter(2, None, 9, None, None, 1, 1)


# -- store -------------------------------------------------------------------------


def test_store_round_trip(tmp_path: Path) -> None:
    store = AclStore.in_directory(str(tmp_path))
    assert store.load() == []
    store.save(STORED)
    assert sorted(map(repr, AclStore(store.path).load())) == sorted(map(repr, STORED))
    doc = json.loads(Path(store.path).read_text())
    assert doc["version"] == 1
    assert {"resource_type": "GROUP", "resource_name": "g1", "pattern_type": "LITERAL",
            "principal": "User:alice", "host": "10.0.0.1", "operation": "READ",
            "permission": "ALLOW"} in doc["acls"]
    store.save([])
    assert store.load() == []
    assert not os.path.exists(store.path + ".tmp")


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"version": 2, "acls": []}',
        b'{"version": 1}',
        b'{"version": 1, "acls": [{"resource_type": "TOPIC"}]}',
        b'{"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "t", '
        b'"pattern_type": "LITERAL", "principal": "User:a", "host": "*", '
        b'"operation": "EAT", "permission": "ALLOW"}]}',
        b'{"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": 5, '
        b'"pattern_type": "LITERAL", "principal": "User:a", "host": "*", '
        b'"operation": "READ", "permission": "ALLOW"}]}',
    ],
)
def test_store_refuses_bad_files(tmp_path: Path, content: bytes) -> None:
    store = AclStore.in_directory(str(tmp_path))
    Path(store.path).write_bytes(content)
    with pytest.raises(AclFileError, match=r"acls\.json"):
        store.load()


def test_store_count_bound() -> None:
    item = json.loads(encode([STORED[0]]))["acls"][0]
    too_many = json.dumps({"version": 1, "acls": [item] * (MAX_ACLS + 1)}).encode()
    with pytest.raises(InvalidAcl, match="more than"):
        decode(too_many)


# -- options -----------------------------------------------------------------------


def test_tap_options() -> None:
    from twisted.python import usage

    from brokerd.tap import Options

    opts = Options()
    opts.parseOptions(["--authorizer", "acl", "--super-users", "User:admin, User:ops"])
    assert opts["authorizer"] == "acl"
    assert opts.settings.authorization.super_users == frozenset({"User:admin", "User:ops"})
    default = Options()
    default.parseOptions([])
    assert default["authorizer"] == "none"
    assert default.settings.authorization.super_users == frozenset()
    for bad in (["--authorizer", "simple"], ["--super-users", "admin"]):
        with pytest.raises(usage.UsageError):
            Options().parseOptions(bad)
