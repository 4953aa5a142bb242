"""ACLs on the native listener: the checks themselves (pure), and a real ``twistd broker``
whose native listener is TLS with client certificates, so the certificate's subject is
the principal the ACLs name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeError
from brokerd.errors import AuthorizationFailed
from brokerd.native.acl_checks import NativeAccess
from brokerd.native.commands import authorize
from brokerd.native.messages import (
    CreateTopicRequest,
    ErrorCode,
    FetchRequest,
    ListOffsetsRequest,
    ListTopicsRequest,
    LongPollFetchRequest,
    ProduceRequest,
)
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.security.acl_store import AclStore
from brokerd.storage.types import TopicInfo

from tests.tls_helpers import ALICE_SUBJECT, Pki, TlsBroker, make_pki

pytestmark = pytest.mark.broker

ALICE = f"User:{ALICE_SUBJECT}"


def allow(name: str, op: Operation, pattern: PatternType = PatternType.PREFIXED) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, ALICE, "*", op, Permission.ALLOW)


ALICE_ACLS = [
    allow("alice-", Operation.WRITE),
    allow("alice-", Operation.READ),
    allow("alice-", Operation.CREATE),
    allow("shared", Operation.DESCRIBE, PatternType.LITERAL),
]


def access(principal: str = ALICE, existing: frozenset[str] = frozenset()) -> NativeAccess:
    return NativeAccess(AclAuthorizer(ALICE_ACLS, frozenset()), principal, "127.0.0.1",
                        lambda: existing)


@pytest.mark.parametrize(
    "request_, allowed",
    [
        (ProduceRequest("alice-a", 0, (b"x",)), True),
        (ProduceRequest("payroll", 0, (b"x",)), False),
        (FetchRequest("alice-a", 0, 0), True),
        (FetchRequest("shared", 0, 0), False),  # DESCRIBE does not imply READ
        (LongPollFetchRequest("alice-a", 0, 0, 1024, 1, 10), True),
        (ListOffsetsRequest("alice-a", 0), True),  # READ implies DESCRIBE
        (ListOffsetsRequest("shared", 0), True),
        (ListOffsetsRequest("payroll", 0), False),
        (CreateTopicRequest("alice-new", 1), True),
        (CreateTopicRequest("payroll", 1), False),
        (ListTopicsRequest(), True),
    ],
)
def test_each_request_needs_its_operation(request_: object, allowed: bool) -> None:
    if allowed:
        authorize(access(), request_)
    else:
        with pytest.raises(AuthorizationFailed):
            authorize(access(), request_)
    if not isinstance(request_, ListTopicsRequest):  # ListTopics is filtered instead
        with pytest.raises(AuthorizationFailed):  # someone else: no ACL at all
            authorize(access("User:bob"), request_)


def test_a_produce_that_would_auto_create_needs_create_too() -> None:
    only_write = NativeAccess(
        AclAuthorizer([allow("w-", Operation.WRITE)], frozenset()), ALICE, "h",
        lambda: frozenset({"w-existing"}),
    )
    authorize(only_write, ProduceRequest("w-existing", 0, (b"x",)))
    with pytest.raises(AuthorizationFailed):
        authorize(only_write, ProduceRequest("w-new", 0, (b"x",)))


def test_list_topics_shows_only_what_the_principal_may_describe() -> None:
    topics = [TopicInfo(name, 1) for name in ("alice-a", "payroll", "shared")]
    assert [t.name for t in access().visible(topics)] == ["alice-a", "shared"]
    assert access("User:bob").visible(topics) == []


# -- a real broker ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    tmp: Path = tmp_path_factory.mktemp("native-acl")
    pki: Pki = make_pki(tmp / "pki")
    data = tmp / "data"
    data.mkdir()
    AclStore.in_directory(str(data)).save(ALICE_ACLS)
    proc = TlsBroker(
        data,
        pki,
        args=(
            "--ssl-client-auth=requested",
            f"--ssl-client-ca={pki.ca}",
            "--authorizer=acl",
            "--super-users=User:CN=nobody",
        ),
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()


def test_native_clients_reach_what_their_certificate_is_allowed(broker: TlsBroker) -> None:
    pki = broker.pki
    with broker.tls_client(cert=pki.alice_cert, key=pki.alice_key) as alice:
        alice.create_topic("alice-orders")
        assert alice.produce("alice-orders", 0, [b"a", b"b"]) == 0
        assert alice.fetch("alice-orders", 0, 0) == [b"a", b"b"]
        with pytest.raises(NativeError) as denied:
            alice.produce("payroll", 0, [b"raise"])
        assert denied.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        names = [t.name for t in alice.list_topics()]
        assert names == ["alice-orders"]
    # No certificate: User:ANONYMOUS, who may do nothing, and is told the same thing
    # about a topic that exists as about one that does not.
    with broker.tls_client() as anonymous:
        for topic in ("alice-orders", "no-such-topic"):
            with pytest.raises(NativeError) as denied:
                anonymous.fetch(topic, 0, 0)
            assert denied.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert anonymous.list_topics() == []
