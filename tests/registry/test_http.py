"""The REST API over a real ``twistd broker``: every endpoint and Confluent's error
codes, answered from ``_schemas``; a restart keeps every schema, id and setting."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from brokerd.registry.http import MAX_BODY_BYTES

from tests.brokerproc import BrokerProcess
from tests.registry.rest_helpers import Rest

pytestmark = pytest.mark.broker


def avro(*fields: tuple[str, str] | tuple[str, str, object]) -> str:
    out = []
    for f in fields:
        field: dict[str, object] = {"name": f[0], "type": f[1]}
        if len(f) == 3:
            field["default"] = f[2]
        out.append(field)
    return json.dumps({"type": "record", "name": "User", "namespace": "t", "fields": out})


V1 = avro(("name", "string"))
V2 = avro(("name", "string"), ("age", "int", 0))
BAD = avro(("name", "string"), ("email", "string"))  # a field without default


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("registry") / "data").start()
    try:
        Rest(proc.schema_registry_url).wait_ready()
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def rest(broker: BrokerProcess) -> Rest:
    return Rest(broker.schema_registry_url)


def error(answer: tuple[int, object]) -> tuple[int, object]:
    status, body = answer
    assert isinstance(body, dict), body
    return status, body["error_code"]


def test_small_endpoints(rest: Rest) -> None:
    assert rest("GET", "/") == (200, {})
    assert rest("GET", "/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    assert rest("GET", "/contexts") == (200, ["."])
    status, _raw, headers = rest.raw("GET", "/subjects")
    assert status == 200
    assert headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert error(rest("GET", "/nothing/here")) == (404, 404)


def test_register_evolve_and_read(rest: Rest) -> None:
    assert rest("POST", "/subjects/users-value/versions", {"schema": V1}) == (200, {"id": 1})
    # The same schema again: the same id and version, nothing written.
    assert rest("POST", "/subjects/users-value/versions", {"schema": V1}) == (200, {"id": 1})
    # The same schema under another subject keeps its id.
    assert rest("POST", "/subjects/copy-value/versions", {"schema": V1}) == (200, {"id": 1})
    assert rest("POST", "/subjects/users-value/versions?normalize=true",
                {"schema": V2}) == (200, {"id": 2})
    status, latest = rest("GET", "/subjects/users-value/versions/latest")
    assert status == 200
    assert (latest["subject"], latest["version"], latest["id"]) == ("users-value", 2, 2)
    assert "schemaType" not in latest  # AVRO is left out, as Confluent does
    assert rest("GET", "/subjects/users-value/versions/-1")[1] == latest
    assert rest("GET", "/subjects/users-value/versions/1")[1]["id"] == 1
    status, raw, _ = rest.raw("GET", "/subjects/users-value/versions/1/schema")
    assert status == 200 and json.loads(raw)["fields"][0]["name"] == "name"
    assert rest("GET", "/subjects/users-value/versions") == (200, [1, 2])
    assert rest("GET", "/subjects") == (200, ["copy-value", "users-value"])
    assert rest("GET", "/subjects?subjectPrefix=users") == (200, ["users-value"])
    status, by_id = rest("GET", "/schemas/ids/1")
    assert status == 200 and json.loads(by_id["schema"])["name"] == "User"
    assert rest("GET", "/schemas/ids/1?subject=users-value")[1] == by_id
    status, raw, _ = rest.raw("GET", "/schemas/ids/1/schema")
    assert json.loads(raw)["type"] == "record"
    assert rest("GET", "/schemas/ids/1/subjects") == (200, ["copy-value", "users-value"])
    assert rest("GET", "/schemas/ids/1/versions") == (200, [
        {"subject": "copy-value", "version": 1}, {"subject": "users-value", "version": 1},
    ])
    status, every = rest("GET", "/schemas?subjectPrefix=users&latestOnly=true")
    assert [(s["subject"], s["version"]) for s in every] == [("users-value", 2)]
    # Lookup by schema.
    status, found = rest("POST", "/subjects/users-value", {"schema": V1})
    assert (status, found["version"], found["id"]) == (200, 1, 1)
    assert error(rest("POST", "/subjects/users-value", {"schema": BAD})) == (404, 40403)
    assert error(rest("POST", "/subjects/nobody", {"schema": V1})) == (404, 40401)


def test_incompatible_change_is_refused_with_the_reason(rest: Rest) -> None:
    rest("POST", "/subjects/strict-value/versions", {"schema": V1})
    status, body = rest("POST", "/subjects/strict-value/versions", {"schema": BAD})
    assert (status, body["error_code"]) == (409, 409)
    assert "email" in body["message"]
    status, answer = rest("POST", "/compatibility/subjects/strict-value/versions/latest"
                                  "?verbose=true", {"schema": BAD})
    assert status == 200 and answer["is_compatible"] is False
    assert any("oldSchemaVersion: 1" in m for m in answer["messages"])
    assert rest("POST", "/compatibility/subjects/strict-value/versions",
                {"schema": V2}) == (200, {"is_compatible": True})
    assert error(rest("POST", "/compatibility/subjects/strict-value/versions/7",
                      {"schema": V2})) == (404, 40402)
    assert error(rest("POST", "/compatibility/subjects/nobody/versions/latest",
                      {"schema": V2})) == (404, 40401)
    # With NONE the same change goes in.
    assert rest("PUT", "/config/strict-value", {"compatibility": "NONE"}) == (
        200, {"compatibility": "NONE"})
    assert rest("POST", "/subjects/strict-value/versions", {"schema": BAD})[0] == 200


def test_invalid_input_codes(rest: Rest) -> None:
    assert error(rest("POST", "/subjects/x/versions", {"schema": "{not avro"})) == (422, 42201)
    assert error(rest("POST", "/subjects/x/versions", {"schema": V1, "schemaType": "XML"})) == (
        422, 42201)
    assert error(rest("POST", "/subjects/x/versions", {})) == (422, 42201)
    assert error(rest("GET", "/subjects/users-value/versions/zero")) == (422, 42202)
    assert error(rest("GET", "/subjects/users-value/versions/0")) == (422, 42202)
    assert error(rest("GET", "/subjects/users-value/versions/99")) == (404, 40402)
    assert error(rest("GET", "/subjects/nobody/versions/1")) == (404, 40401)
    assert error(rest("GET", "/subjects/nobody/versions")) == (404, 40401)
    assert error(rest("GET", "/schemas/ids/999")) == (404, 40403)
    assert error(rest("GET", "/schemas/ids/abc")) == (404, 40403)
    assert error(rest("PUT", "/config", {"compatibility": "SOMETIMES"})) == (422, 42203)
    assert error(rest("PUT", "/mode", {"mode": "MAYBE"})) == (422, 42204)
    status, raw, _ = rest.raw("POST", "/subjects/x/versions", b"{]")
    assert status == 400 and json.loads(raw)["error_code"] == 400
    status, raw, _ = rest.raw("POST", "/subjects/x/versions", b"[" * 100_000)
    assert status == 400 and json.loads(raw)["error_code"] == 400
    status, raw, _ = rest.raw("POST", "/subjects/x/versions", b"{}", "text/html")
    assert status == 415
    status, raw, _ = rest.raw("POST", "/subjects/x/versions", b" " * (MAX_BODY_BYTES + 1))
    assert status == 413


def test_config_and_mode(rest: Rest) -> None:
    assert rest("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert error(rest("GET", "/config/users-value")) == (404, 40408)
    assert rest("GET", "/config/users-value?defaultToGlobal=true") == (
        200, {"compatibilityLevel": "BACKWARD"})
    assert rest("PUT", "/config/users-value", {"compatibility": "full_transitive"}) == (
        200, {"compatibility": "FULL_TRANSITIVE"})
    assert rest("GET", "/config/users-value") == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert rest("DELETE", "/config/users-value") == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert error(rest("GET", "/config/users-value")) == (404, 40408)
    assert rest("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert error(rest("GET", "/mode/users-value")) == (404, 40409)
    assert rest("PUT", "/mode/users-value", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert error(rest("POST", "/subjects/users-value/versions", {"schema": V2})) == (422, 42205)
    assert error(rest("DELETE", "/subjects/users-value/versions/1")) == (422, 42205)
    assert rest("DELETE", "/mode/users-value") == (200, {"mode": "READONLY"})
    # IMPORT refuses a registry with subjects unless forced.
    assert error(rest("PUT", "/mode", {"mode": "IMPORT"})) == (422, 42205)


def test_import_mode_keeps_the_given_ids(rest: Rest) -> None:
    assert rest("PUT", "/mode/imported?force=true", {"mode": "IMPORT"}) == (
        200, {"mode": "IMPORT"})
    assert rest("POST", "/subjects/imported/versions",
                {"schema": V1, "id": 500, "version": 3}) == (200, {"id": 500})
    assert rest("GET", "/subjects/imported/versions") == (200, [3])
    assert error(rest("POST", "/subjects/imported/versions", {"schema": V2})) == (422, 42205)
    rest("DELETE", "/mode/imported")
    # Outside IMPORT, a new schema takes the next id after the imported one.
    assert rest("POST", "/subjects/after-import/versions",
                {"schema": avro(("x", "long"))}) == (200, {"id": 501})


def test_soft_and_permanent_deletes(rest: Rest) -> None:
    rest("POST", "/subjects/gone/versions", {"schema": V1})
    rest("POST", "/subjects/gone/versions", {"schema": V2})
    assert error(rest("DELETE", "/subjects/gone/versions/1?permanent=true")) == (404, 40407)
    assert rest("DELETE", "/subjects/gone/versions/1") == (200, 1)
    assert error(rest("DELETE", "/subjects/gone/versions/1")) == (404, 40406)
    assert rest("GET", "/subjects/gone/versions") == (200, [2])
    assert rest("GET", "/subjects/gone/versions?deleted=true") == (200, [1, 2])
    assert error(rest("GET", "/subjects/gone/versions/1")) == (404, 40402)
    assert rest("GET", "/subjects/gone/versions/1?deleted=true")[0] == 200
    assert rest("DELETE", "/subjects/gone/versions/1?permanent=true") == (200, 1)
    assert error(rest("DELETE", "/subjects/gone?permanent=true")) == (404, 40405)
    assert rest("DELETE", "/subjects/gone") == (200, [2])
    assert error(rest("DELETE", "/subjects/gone")) == (404, 40404)
    assert "gone" not in rest("GET", "/subjects")[1]
    assert "gone" in rest("GET", "/subjects?deleted=true")[1]
    assert rest("DELETE", "/subjects/gone?permanent=true") == (200, [2])
    assert "gone" not in rest("GET", "/subjects?deleted=true")[1]
    assert error(rest("DELETE", "/subjects/gone")) == (404, 40401)


def test_references_and_referencedby(rest: Rest) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "t",
                          "fields": [{"name": "city", "type": "string"}]})
    assert rest("POST", "/subjects/address/versions", {"schema": address})[0] == 200
    person = json.dumps({"type": "record", "name": "Person", "namespace": "t",
                         "fields": [{"name": "home", "type": "t.Address"}]})
    refs = [{"name": "t.Address", "subject": "address", "version": 1}]
    status, body = rest("POST", "/subjects/person/versions", {"schema": person,
                                                              "references": refs})
    assert status == 200, body
    assert rest("GET", "/subjects/address/versions/1/referencedby") == (200, [body["id"]])
    assert rest("GET", "/subjects/person/versions/1")[1]["references"] == refs
    assert error(rest("DELETE", "/subjects/address/versions/1")) == (422, 42206)
    missing = [{"name": "t.Address", "subject": "address", "version": 9}]
    assert error(rest("POST", "/subjects/p2/versions",
                      {"schema": person, "references": missing})) == (422, 42201)


def test_restart_and_crash_keep_every_schema_and_id(broker: BrokerProcess, rest: Rest) -> None:
    before = {
        path: rest("GET", path)
        for path in ("/subjects", "/subjects?deleted=true", "/schemas?deleted=true",
                     "/schemas/ids/1/versions", "/schemas/ids/500", "/config",
                     "/config/strict-value")
    }
    broker.restart()
    rest.wait_ready()
    assert {path: rest("GET", path) for path in before} == before
    # After a crash too: every answered write was durable (--fsync always) and applied.
    broker.kill()
    broker.start()
    rest.wait_ready()
    assert {path: rest("GET", path) for path in before} == before
    # Ids go on from where they were.
    status, body = rest("POST", "/subjects/new-after-restart/versions",
                        {"schema": avro(("y", "double"))})
    assert status == 200 and body["id"] > 501


def test_records_someone_else_appends_are_served(broker: BrokerProcess, rest: Rest) -> None:
    # As a MirrorMaker 2 copy of a Confluent registry's _schemas would arrive: Confluent's
    # bytes (no schemaType for Avro, no references field, a newer field), and a key in
    # Karapace's old order, produced by a Kafka client.
    from confluent_kafka import Producer

    schema = avro(("sku", "string"))
    records = [
        (b'{"keytype":"SCHEMA","subject":"mirrored-value","version":1,"magic":1}',
         json.dumps({"subject": "mirrored-value", "version": 1, "id": 9000, "schema": schema,
                     "deleted": False, "metadata": None}).encode()),
        (b'{"subject":"mirrored-value","magic":0,"keytype":"CONFIG"}',
         b'{"compatibilityLevel":"FORWARD"}'),
    ]
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for key, value in records:
        producer.produce("_schemas", key=key, value=value)
    assert producer.flush(10) == 0
    deadline = time.monotonic() + 10
    while rest("GET", "/subjects/mirrored-value/versions")[0] != 200:
        assert time.monotonic() < deadline, "the appended records were never applied"
        time.sleep(0.02)
    assert rest("GET", "/schemas/ids/9000")[1]["schema"] == schema
    assert rest("GET", "/config/mirrored-value") == (200, {"compatibilityLevel": "FORWARD"})
    # The next id follows the largest one read.
    status, body = rest("POST", "/subjects/after-mirror/versions",
                        {"schema": avro(("z", "boolean"))})
    assert (status, body) == (200, {"id": 9001})


def test_deleting_the_topic_forgets_every_schema(broker: BrokerProcess, rest: Rest) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    admin.delete_topics(["_schemas"])["_schemas"].result(10)
    deadline = time.monotonic() + 10
    while rest("GET", "/subjects?deleted=true") != (200, []):
        assert time.monotonic() < deadline, "the registry still serves a deleted topic"
        time.sleep(0.02)
    # The next write creates the topic again and the registry follows it.
    assert rest("POST", "/subjects/reborn/versions", {"schema": V1}) == (200, {"id": 1})
    assert rest("GET", "/subjects") == (200, ["reborn"])
