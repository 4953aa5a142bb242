"""The registry under ``--http-auth basic`` and ``--authorizer acl``: subjects map to
their topics' ACLs, global settings to the cluster's; a refusal is Confluent's 403 with
error code 40301, and lists show only what the principal may read."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from brokerd.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from brokerd.security.acl_store import AclStore
from brokerd.security.credentials import CredentialChange, CredentialStore
from brokerd.security.scram import SCRAM_SHA_256

from tests.brokerproc import BrokerProcess
from tests.registry.rest_helpers import Rest

pytestmark = pytest.mark.broker

USERS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}
SCHEMA = json.dumps({"type": "record", "name": "O", "fields": [{"name": "a", "type": "int"}]})
SCHEMA2 = json.dumps({"type": "record", "name": "O", "fields": [
    {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}]})
SECRET = json.dumps({"type": "record", "name": "S", "fields": [{"name": "s", "type": "int"}]})


def allow(user: str, operation: Operation, rtype: ResourceType = ResourceType.TOPIC,
          name: str = "orders") -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, f"User:{user}", "*", operation,
                      Permission.ALLOW)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("registry-acl")
    data = tmp / "data"
    data.mkdir()
    credentials = tmp / "credentials.json"
    CredentialStore.open(str(credentials), create=True).alter(
        CredentialChange(name, SCRAM_SHA_256.name, SCRAM_SHA_256.credential(password))
        for name, password in USERS.items()
    )
    AclStore.in_directory(str(data)).save([
        allow("alice", Operation.READ), allow("alice", Operation.WRITE),
        allow("bob", Operation.READ),
        allow("alice", Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"),
    ])
    proc = BrokerProcess(data, native=False, args=(
        "--credentials", str(credentials), "--authorizer", "acl",
        "--super-users", "User:admin", "--http-auth", "basic",
    )).start()
    try:
        Rest(proc.schema_registry_url, "admin", "admin-pw").wait_ready()
        yield proc
    finally:
        proc.kill()


def as_user(broker: BrokerProcess, user: str | None) -> Rest:
    return Rest(broker.schema_registry_url, user, USERS.get(user or "", ""))


def code(answer: tuple[int, object]) -> tuple[int, object]:
    status, body = answer
    assert isinstance(body, dict), body
    return status, body["error_code"]


def test_the_mapping_onto_topic_and_cluster_acls(broker: BrokerProcess) -> None:
    admin, alice, bob = (as_user(broker, u) for u in ("admin", "alice", "bob"))
    assert code(as_user(broker, None)("GET", "/subjects")) == (401, 401)
    assert code(Rest(broker.schema_registry_url, "bob", "wrong")("GET", "/subjects")) == (
        401, 401)
    assert admin("POST", "/subjects/orders-value/versions", {"schema": SCHEMA}) == (
        200, {"id": 1})
    assert admin("POST", "/subjects/secret-value/versions", {"schema": SECRET}) == (
        200, {"id": 2})
    # Bob reads orders (READ on its topic) but may not register or delete.
    assert bob("GET", "/subjects/orders-value/versions") == (200, [1])
    status, body = bob("POST", "/subjects/orders-value/versions", {"schema": SCHEMA2})
    assert (status, body["error_code"]) == (403, 40301)
    assert "WRITE" in body["message"] and "'orders'" in body["message"]
    assert code(bob("DELETE", "/subjects/orders-value")) == (403, 40301)
    # Lists leave out what he may not read; a schema id only through a readable subject.
    assert bob("GET", "/subjects") == (200, ["orders-value"])
    assert [s["subject"] for s in bob("GET", "/schemas")[1]] == ["orders-value"]
    assert bob("GET", "/schemas/ids/1")[0] == 200
    assert code(bob("GET", "/schemas/ids/2")) == (403, 40301)
    assert code(bob("GET", "/subjects/secret-value/versions/1")) == (403, 40301)
    # Global settings are the cluster's configs.
    assert code(bob("GET", "/config")) == (403, 40301)
    assert alice("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert code(alice("PUT", "/config", {"compatibility": "NONE"})) == (403, 40301)
    # Alice may WRITE orders: her registration goes in.
    assert alice("POST", "/subjects/orders-value/versions", {"schema": SCHEMA2}) == (
        200, {"id": 3})
    # Schema types and the root say nothing about data: any authenticated principal.
    assert bob("GET", "/schemas/types")[0] == 200


def test_confluent_client_sees_the_refusal(broker: BrokerProcess) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    bob = SchemaRegistryClient({"url": broker.schema_registry_url,
                                "basic.auth.user.info": "bob:bob-pw"})
    with pytest.raises(SchemaRegistryError) as refused:
        bob.register_schema("orders-key", Schema(SCHEMA, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    assert bob.get_latest_version("orders-value").version == 2


def test_failed_logins_count_across_the_http_listeners(broker: BrokerProcess) -> None:
    # Last in the module: it gets 127.0.0.1 refused for a minute.
    import urllib.error
    import urllib.request

    wrong = Rest(broker.schema_registry_url, "bob", "wrong")
    # Five failures within a minute (one was the first test's) refuse the address.
    statuses = [wrong("GET", "/subjects")[0] for _ in range(5)]
    assert statuses == [401] * 4 + [429]
    # The console (--http) refuses the address too: one identity for both listeners.
    request = urllib.request.Request(f"http://127.0.0.1:{broker.http_port}/",
                                     headers={"authorization": wrong.auth or ""})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 429
