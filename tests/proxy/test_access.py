"""The REST Proxy under ``--http-auth basic`` and ``--authorizer acl`` (one real broker):
it acts as the request's principal, with the ACLs a Kafka client would need."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import pytest

from brokerd.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from brokerd.security.acl_store import AclStore

from tests.brokerproc import BrokerProcess, wait_for_port
from tests.proxy.proxy_http import BINARY_V2, JSON_V2, call
from tests.web.test_auth import write_credentials

pytestmark = pytest.mark.broker

ALICE = ("alice", "alice-secret")
ADMIN = ("admin", "admin-secret")
CLUSTER = "/v3/clusters/brokerd-single-node"


def grant(rtype: ResourceType, name: str, operation: Operation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, "User:alice", "*", operation,
                      Permission.ALLOW)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("proxy-acl")
    data = tmp / "data"
    data.mkdir()
    AclStore.in_directory(str(data)).save([
        grant(ResourceType.TOPIC, "open", Operation.WRITE),
        grant(ResourceType.TOPIC, "open", Operation.READ),
        grant(ResourceType.GROUP, "alice-group", Operation.READ),
        grant(ResourceType.TOPIC, "readonly", Operation.DESCRIBE),
    ])
    proc = BrokerProcess(data, native=False, args=(
        "--credentials", write_credentials(tmp / "credentials.json"),
        "--authorizer", "acl", "--super-users", "User:admin", "--http-auth", "basic",
    )).start()
    # start() waits for the Kafka listener; the proxy's binds beside it.
    assert wait_for_port(proc.http_proxy_port, time.monotonic() + 30), proc.log()
    try:
        for topic in ("open", "secret", "readonly"):
            assert call(proc.http_proxy_port, "POST", CLUSTER + "/topics",
                        {"topic_name": topic}, content_type="application/json",
                        user=ADMIN).status == 201
        yield proc
    finally:
        proc.stop()


def test_who_is_asking(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    for user in (None, ("alice", "wrong")):
        answer = call(port, "GET", "/topics", user=user)
        assert (answer.status, answer.json["error_code"]) == (401, 40101)
        assert answer.headers["www-authenticate"].startswith("Basic")


def test_metadata_shows_what_the_principal_may_describe(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    # WRITE and READ imply DESCRIBE, as in Kafka.
    assert call(port, "GET", "/topics", user=ALICE).json == ["open", "readonly"]
    assert call(port, "GET", "/topics", user=ADMIN).json == ["open", "readonly", "secret"]
    assert call(port, "GET", "/topics/secret", user=ALICE).status == 404
    names = [t["topic_name"] for t in call(port, "GET", CLUSTER + "/topics",
                                           user=ALICE).json["data"]]
    assert names == ["open", "readonly"]


def test_produce_needs_write(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    records = {"records": [{"value": {"n": 1}}]}
    assert call(port, "POST", "/topics/open", records, content_type=JSON_V2,
                user=ALICE).status == 200
    for topic in ("readonly", "secret"):
        refused = call(port, "POST", f"/topics/{topic}", records, content_type=JSON_V2,
                       user=ALICE)
        assert (refused.status, refused.json["error_code"]) == (403, 40301), topic
    v3 = call(port, "POST", CLUSTER + "/topics/secret/records",
              {"value": {"type": "JSON", "data": 1}}, content_type="application/json",
              user=ALICE)
    assert v3.status == 403
    # A schema registered on the way needs the registry's own rule: WRITE on the
    # subject's topic (here another topic's subject).
    schema = '{"type": "string"}'
    other = call(port, "POST", CLUSTER + "/topics/open/records", {"value": {
        "type": "AVRO", "subject": "secret-value", "schema": schema, "data": "x"}},
        content_type="application/json", user=ALICE)
    assert (other.status, other.json["error_code"]) == (403, 403), other
    own = call(port, "POST", CLUSTER + "/topics/open/records", {"value": {
        "type": "AVRO", "schema": schema, "data": "x"}},
        content_type="application/json", user=ALICE)
    assert own.status == 200, own


def test_topic_administration_needs_kafkas_acls(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    j = "application/json"
    assert call(port, "POST", CLUSTER + "/topics", {"topic_name": "mine"}, content_type=j,
                user=ALICE).status == 403
    assert call(port, "DELETE", CLUSTER + "/topics/open", user=ALICE).status == 403
    assert call(port, "PUT", CLUSTER + "/topics/open/configs/retention.ms", {"value": "1000"},
                content_type=j, user=ALICE).status == 403
    assert call(port, "GET", CLUSTER + "/topics/open/configs", user=ALICE).status == 403


def test_consumers_need_group_and_topic_read(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    refused = call(port, "POST", "/consumers/other-group", {"name": "c"}, user=ALICE)
    assert refused.status == 403
    base = "/consumers/alice-group/instances/c"
    assert call(port, "POST", "/consumers/alice-group",
                {"name": "c", "format": "binary", "auto.offset.reset": "earliest"},
                user=ALICE).status == 200
    try:
        assert call(port, "POST", base + "/subscription", {"topics": ["secret"]},
                    user=ALICE).status == 403
        # Another principal's instance is not told to exist.
        assert call(port, "GET", base + "/assignments", user=ADMIN).status == 404
        assert call(port, "POST", base + "/subscription", {"topics": ["open"]},
                    user=ALICE).status == 204
        read = call(port, "GET", base + "/records", accept=BINARY_V2, user=ALICE)
        assert read.status == 200, read
        assert json.loads(base64.b64decode(read.json[0]["value"])) == {"n": 1}
        assert call(port, "POST", base + "/offsets", user=ALICE).status == 200
    finally:
        call(port, "DELETE", base, user=ALICE)
