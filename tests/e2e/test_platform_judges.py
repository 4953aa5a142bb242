"""The platform's judges: clients of Confluent's Schema Registry API that brokerd was not
written against, each installed by the project's own files, against one real ``twistd
broker`` with its registry and HTTP proxy on.

- python-schema-registry-client (PyPI): register, look up, compatibility levels and
  checks, a refused incompatible change, and its Avro and JSON message serializers around a
  produce and a consume through confluent-kafka;
- @kafkajs/confluent-schema-registry (npm, ``tests/node/schema_registry.js``): Avro, JSON
  Schema and Protobuf, each registered, encoded, decoded by a client with an empty cache,
  evolved, and refused an incompatible change; an Avro schema referencing another
  subject's;
- franz-go's ``pkg/sr`` (``tests/go/schemaregistry.go``): register, by id, lookup by schema,
  compatibility checks, Serde encode and decode;
- a Faust app (``tests/apps/faust_registry.py``) with python-schema-registry-client's
  Faust codecs, reading and writing Avro records framed with registry ids;
- Spring Cloud Stream's ``ConfluentSchemaRegistryClient`` (Maven Central has no Confluent
  client), with Apache Avro and Kafka's Java client (``tests/jvm``): a record produced with
  Confluent's framing and decoded by a reader that fetched the writer's schema by id;
- curl, making the requests of the REST Proxy's documentation: v2 produce in the json,
  binary and avro formats, a consumer instance's life, topic metadata; v3 clusters, topics,
  configs, records and consumer groups.

Every judge's claims are checked against what the registry itself answers, read here with
plain HTTP (the id's schema, the subject's versions), and records against what the broker
stored. One broker for the module; each test its own subjects and topics.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.registry.model import unframe

from tests.brokerproc import REPO, BrokerProcess, wait_for_port
from tests.faust_process import FaustProcess
from tests.judge_drivers import GO_BINARY, NODE_DIR, SCENARIO_TIMEOUT, JavaJudge, answer, missing
from tests.kafka_helpers import WAIT, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.broker]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FAUST_APP = REPO / "tests" / "apps" / "faust_registry.py"
#: A Faust worker's start (joining its group, making its topics) and first records.
FAUST_WAIT = 60.0

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "brokerd.judge",
    "fields": [{"name": "name", "type": "string"}],
}
#: A field added with a default: BACKWARD compatible with USER_V1.
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "age", "type": "int", "default": 0}]}
#: A field added without a default: a reader of it cannot read USER_V1's data.
USER_V3 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}


class Platform:
    """The module's broker and the addresses of its registry and proxy."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.registry_url = f"http://127.0.0.1:{broker.schema_registry_port}"
        self.proxy_url = f"http://127.0.0.1:{broker.http_proxy_port}"

    def get(self, path: str) -> Any:
        """A registry answer read with plain HTTP: the judges' independent witness."""
        request = urllib.request.Request(self.registry_url + path, headers={"Accept": CONTENT_TYPE})
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return json.loads(response.read())

    def schema_of(self, schema_id: int) -> Any:
        """The registered schema text of an id, parsed (Avro and JSON Schema are JSON)."""
        return json.loads(self.get(f"/schemas/ids/{schema_id}")["schema"])

    def versions(self, subject: str) -> list[int]:
        return list(self.get(f"/subjects/{subject}/versions"))


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    pytest.importorskip("confluent_kafka")
    broker = BrokerProcess(tmp_path_factory.mktemp("platform") / "data").start()
    try:
        deadline = time.monotonic() + WAIT
        for port in (broker.schema_registry_port, broker.http_proxy_port):
            assert wait_for_port(port, deadline), f"port {port} never listened:\n{broker.log()}"
        platform = Platform(broker)
        wait_until(lambda: _answers(platform), "the registry's first answer")
        yield platform
    finally:
        broker.kill()


def _answers(platform: Platform) -> bool:
    """True once the registry answers (it serves after reading ``_schemas``)."""
    try:
        platform.get("/subjects")
        return True
    except OSError:
        return False


def consumed(broker: BrokerProcess, topic: str, count: int, timeout: float = WAIT) -> list[bytes]:
    """The first ``count`` values of partition 0, read by confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": "platform-reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        for _ in range(int(timeout / 0.5)):
            m = c.poll(0.5)
            if m is not None and m.error() and m.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue  # a topic the app under test has not made yet
            if m is not None:
                assert not m.error(), m.error()
                values.append(m.value())
            if len(values) >= count:
                return values
        raise AssertionError(f"read {len(values)} of {count} records of {topic}")
    finally:
        c.close()


def produced(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 0})
    for value in values:
        p.produce(topic, value, partition=0)
    assert p.flush(WAIT) == 0


# -- python-schema-registry-client ------------------------------------------------------


def test_python_schema_registry_client_registers_evolves_and_refuses(platform: Platform) -> None:
    from schema_registry.client import SchemaRegistryClient, errors

    client = SchemaRegistryClient(platform.registry_url)
    subject = "py-user-value"
    first = client.register(subject, USER_V1)
    assert platform.schema_of(first) == USER_V1
    # A fresh client (no cache) asks the registry: the same schema, the same id.
    again = SchemaRegistryClient(platform.registry_url)
    assert again.register(subject, USER_V1) == first
    version = again.check_version(subject, USER_V1)
    assert version is not None and (version.schema_id, version.version) == (first, 1)
    by_id = again.get_by_id(first)
    assert by_id is not None and by_id.raw_schema == USER_V1
    latest = again.get_schema(subject)
    assert latest is not None and (latest.schema_id, latest.version) == (first, 1)

    assert client.get_compatibility() == "BACKWARD"
    assert client.test_compatibility(subject, USER_V2) is True
    assert client.test_compatibility(subject, USER_V3) is False
    with pytest.raises(errors.ClientError) as refused:
        client.register(subject, USER_V3)
    assert refused.value.http_code == 409
    assert platform.versions(subject) == [1]

    second = client.register(subject, USER_V2)
    assert second != first and platform.versions(subject) == [1, 2]
    assert client.get_versions(subject) == [1, 2]
    # Under NONE the change the default level refused is taken, as a third version.
    assert client.update_compatibility("NONE", subject)
    assert client.get_compatibility(subject) == "NONE"
    third = client.register(subject, USER_V3)
    assert platform.versions(subject) == [1, 2, 3]
    assert platform.get(f"/subjects/{subject}/versions/latest")["id"] == third
    assert subject in client.get_subjects()


def test_python_serializers_frame_produce_and_decode(platform: Platform) -> None:
    from schema_registry.client import SchemaRegistryClient, schema
    from schema_registry.serializers import AvroMessageSerializer, JsonMessageSerializer

    client = SchemaRegistryClient(platform.registry_url)
    avro = AvroMessageSerializer(client)
    as_json = JsonMessageSerializer(client)
    users = [{"name": "ada"}, {"name": "grace"}]
    people = [{"name": "edsger", "age": 72}]
    encoded = [avro.encode_record_with_schema("py-ser-avro-value", schema.AvroSchema(USER_V1), u)
               for u in users]
    encoded += [as_json.encode_record_with_schema("py-ser-json-value", schema.JsonSchema(PERSON), p)
                for p in people]
    topic = "py-serialized"
    produced(platform.broker, topic, encoded)

    stored = consumed(platform.broker, topic, 3)
    assert stored == encoded
    avro_id = platform.get("/subjects/py-ser-avro-value/versions/latest")["id"]
    json_id = platform.get("/subjects/py-ser-json-value/versions/latest")["id"]
    assert [unframe(v)[0] for v in stored] == [avro_id, avro_id, json_id]  # type: ignore[index]
    assert platform.get(f"/schemas/ids/{json_id}").get("schemaType") == "JSON"
    # Readers with empty caches fetch each writer's schema by the id in the record.
    reader = SchemaRegistryClient(platform.registry_url)
    assert [AvroMessageSerializer(reader).decode_message(v) for v in stored[:2]] == users
    assert JsonMessageSerializer(reader).decode_message(stored[2]) == people[0]


# -- @kafkajs/confluent-schema-registry -------------------------------------------------


def test_kafkajs_schema_registry_avro_json_protobuf(platform: Platform) -> None:
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (CI has node 20 and npm)")
    package = NODE_DIR / "node_modules" / "@kafkajs" / "confluent-schema-registry"
    if not package.exists():
        missing("@kafkajs/confluent-schema-registry is not installed: run `make node-deps`")
    command = [str(node), "schema_registry.js", platform.registry_url, "js"]
    done = subprocess.run(command, cwd=NODE_DIR, capture_output=True, text=True,
                          timeout=SCENARIO_TIMEOUT, check=False)
    lines = done.stdout.strip().splitlines()
    result = answer("kafkajs-sr", "flow", lines[-1] if lines else "", done.stderr)

    for kind, schema_type in (("avro", None), ("json", "JSON"), ("protobuf", "PROTOBUF")):
        seen = result[kind]
        assert "error" not in seen, (kind, seen)
        subject, first = seen["subject"], seen["id"]
        registered = platform.get(f"/schemas/ids/{first}")
        assert registered.get("schemaType") == schema_type, (kind, registered)
        assert seen["again"] == seen["latest"] == seen["byVersion"] == seen["bySchema"] == first
        # (Its Protobuf frames carry no message indexes after the id, unlike Confluent's
        # serializers: a client's own choice, decoded by the same client.)
        assert unframe(bytes.fromhex(seen["encoded"]))[0] == first  # type: ignore[index]
        assert seen["decoded"] == {"name": "ada"}, (kind, seen)
        assert "ok" in seen["v2"], (kind, seen["v2"])
        assert seen["v3"]["error"]["status"] == 409, (kind, seen["v3"])
        assert seen["latestAfter"] == seen["v2"]["ok"] != first
        assert platform.versions(subject) == [1, 2], kind
        # The client sets the subject's level to its own default when it first registers.
        assert platform.get(f"/config/{subject}")["compatibilityLevel"] == "BACKWARD"

    refs = result["references"]
    assert "error" not in refs, refs
    registered = platform.get(f"/subjects/{refs['subject']}/versions/latest")
    assert registered["id"] == refs["id"] and registered["references"] == [refs["reference"]]
    assert platform.get("/subjects/js-address/versions/1/referencedby") == [refs["id"]]
    assert unframe(bytes.fromhex(refs["encoded"]))[0] == refs["id"]  # type: ignore[index]
    assert refs["decoded"] == {"name": "ada", "address": {"city": "London"}}


# -- franz-go pkg/sr --------------------------------------------------------------------


def test_franz_go_sr_client_and_serde(platform: Platform) -> None:
    if not GO_BINARY.exists():
        missing("the Go judge is not built: run `make go-deps` (needs go)")
    command = [str(GO_BINARY), "sr", "flow", platform.registry_url, "go"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT,
                          check=False)
    lines = done.stdout.strip().splitlines()
    seen = answer("sr", "flow", lines[-1] if lines else "", done.stderr)

    subject = "go-avro-value"
    first = seen["created"]["id"]
    assert seen["created"] == {"subject": subject, "version": 1, "id": first}
    assert set(seen["types"]) >= {"AVRO", "JSON", "PROTOBUF"}
    assert seen["again"] == first
    assert seen["by_id"]["type"] == "AVRO" and json.loads(seen["by_id"]["schema"]) == USER_V1
    assert seen["lookup"] == {"subject": subject, "version": 1, "id": first}
    assert subject in seen["subjects_by_id"]
    assert seen["compatible_v2"] is True and seen["compatible_v3"] is False
    assert seen["register_v3"]["status"] == 409 and seen["register_v3"]["error_code"] == 409
    assert seen["versions"] == [1, 2] == platform.versions(subject)
    assert seen["latest"] == {"version": 2, "id": seen["v2"]}
    assert seen["global_level"] == "BACKWARD"
    assert seen["missing_id"]["status"] == 404 and seen["missing_id"]["error_code"] == 40403

    serde = seen["serde"]
    assert serde["decoded_id"] == serde["id"]
    schema_id, body = unframe(bytes.fromhex(serde["encoded"]))  # type: ignore[misc]
    assert schema_id == serde["id"] and json.loads(body) == {"name": "ada", "age": 36}
    assert serde["decoded"] == {"name": "ada", "age": 36}
    assert platform.get(f"/schemas/ids/{schema_id}")["schemaType"] == "JSON"


# -- a JVM client of the Confluent API ------------------------------------------------


def test_spring_confluent_client_with_avro_and_the_java_client(platform: Platform) -> None:
    JavaJudge.require()
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "jvm-avro"
    admin = AdminClient({"bootstrap.servers": platform.broker.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(WAIT)
    java = JavaJudge(platform.broker)
    try:
        seen = java.run("registry", platform.registry_url, "jvm-user", topic)
    finally:
        java.close()

    subject, first = "jvm-user-value", seen["id"]
    assert (seen["subject"], seen["version"], seen["again"]) == (subject, 1, first)
    assert json.loads(seen["by_id"]) == json.loads(seen["by_version"]) == USER_V1
    assert platform.schema_of(first) == USER_V1
    (record,) = seen["read"]
    assert record == {"offset": 0, "magic": 0, "id": first, "name": "ada"}
    (value,) = consumed(platform.broker, topic, 1)
    assert unframe(value)[0] == first and len(value) == seen["framed_length"]  # type: ignore[index]
    assert seen["v3"]["status"] == 409 and json.loads(seen["v3"]["body"])["error_code"] == 409
    assert "id" in seen["v2"] and platform.versions(subject) == [1, 2]
    assert seen["missing_id"] == {"error": "SchemaNotFoundException"}


# -- a Faust app with a schema-registry codec ----------------------------------------------


def test_faust_app_with_schema_registry_codecs(platform: Platform, tmp_path: Path) -> None:
    pytest.importorskip("faust", reason="faust-streaming is a test extra: `make install`")
    from schema_registry.client import SchemaRegistryClient, schema
    from schema_registry.serializers import AvroMessageSerializer

    writer = AvroMessageSerializer(SchemaRegistryClient(platform.registry_url))
    user = schema.AvroSchema({**USER_V1})
    produced(platform.broker, "sr-users", [
        writer.encode_record_with_schema("sr-users-value", user, {"name": name})
        for name in ("ada", "grace")])
    worker = FaustProcess(FAUST_APP, platform.broker, tmp_path, "brokerd-registry",
                          log_name="faust-worker.log",
                          env={"SCHEMA_REGISTRY_URL": platform.registry_url})
    worker.start()
    try:
        values = consumed(platform.broker, "sr-greetings", 2, timeout=FAUST_WAIT)
    except AssertionError as e:
        raise AssertionError(f"{e}; worker log:\n{worker.log_tail()}") from None
    finally:
        worker.kill()
    greeting_id = platform.get("/subjects/sr-greetings-value/versions/latest")["id"]
    assert [unframe(v)[0] for v in values] == [greeting_id] * 2  # type: ignore[index]
    reader = AvroMessageSerializer(SchemaRegistryClient(platform.registry_url))
    decoded = [reader.decode_message(v) for v in values]
    assert [(d["text"], d["length"]) for d in decoded] == [  # type: ignore[index]
        ("hello, ada", 10), ("hello, grace", 12)]


# -- curl: the REST Proxy's documented flows ----------------------------------------------

V2 = "application/vnd.kafka.v2+json"


def curl(method: str, url: str, *, data: Any = None, content_type: str | None = None,
         accept: str | None = None) -> tuple[int, Any]:
    """One request as the REST Proxy's documentation makes it, with curl: the status and
    the body (parsed JSON, or None when empty)."""
    if shutil.which("curl") is None:
        missing("curl is not installed")
    command = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", "--max-time", str(int(WAIT))]
    if content_type:
        command += ["-H", f"Content-Type: {content_type}"]
    if accept:
        command += ["-H", f"Accept: {accept}"]
    if data is not None:
        command += ["--data", data if isinstance(data, str) else json.dumps(data)]
    done = subprocess.run([*command, url], capture_output=True, text=True, timeout=WAIT + 5,
                          check=True)
    body, _, code = done.stdout.rpartition("\n")
    return int(code), json.loads(body) if body.strip() else None


def test_curl_rest_proxy_v2_json_binary_and_consumer(platform: Platform) -> None:
    base = platform.proxy_url
    status, produced_json = curl(
        "POST", f"{base}/topics/jsontest", data='{"records":[{"value":{"foo":"bar"}}]}',
        content_type="application/vnd.kafka.json.v2+json", accept=V2)
    assert status == 200, produced_json
    assert produced_json["offsets"] == [
        {"partition": 0, "offset": 0, "error_code": None, "error": None}]
    status, produced_binary = curl(
        "POST", f"{base}/topics/binarytest", data='{"records":[{"value":"S2Fma2E="}]}',
        content_type="application/vnd.kafka.binary.v2+json", accept=V2)
    assert status == 200 and produced_binary["offsets"][0]["offset"] == 0, produced_binary
    assert [json.loads(v) for v in consumed(platform.broker, "jsontest", 1)] == [{"foo": "bar"}]
    assert consumed(platform.broker, "binarytest", 1) == [b"Kafka"]

    status, topics = curl("GET", f"{base}/topics", accept=V2)
    assert status == 200 and {"jsontest", "binarytest"} <= set(topics), topics
    status, topic = curl("GET", f"{base}/topics/jsontest", accept=V2)
    assert status == 200 and topic["name"] == "jsontest", topic
    status, partitions = curl("GET", f"{base}/topics/jsontest/partitions", accept=V2)
    assert status == 200 and [p["partition"] for p in partitions] == [0], partitions

    group, name = "my_json_consumer", "my_consumer_instance"
    status, created = curl(
        "POST", f"{base}/consumers/{group}", content_type=V2,
        data={"name": name, "format": "json", "auto.offset.reset": "earliest"})
    assert status == 200 and created["instance_id"] == name, created
    assert created["base_uri"].endswith(f"/consumers/{group}/instances/{name}")
    instance = f"{base}/consumers/{group}/instances/{name}"
    status, _ = curl("POST", f"{instance}/subscription", data='{"topics":["jsontest"]}',
                     content_type=V2)
    assert status == 204
    records: list[Any] = []
    for _ in range(20):  # the first fetches may come before the group's assignment
        status, batch = curl("GET", f"{instance}/records?timeout=500",
                             accept="application/vnd.kafka.json.v2+json")
        assert status == 200, batch
        records += batch
        if records:
            break
    assert records == [
        {"topic": "jsontest", "key": None, "value": {"foo": "bar"}, "partition": 0, "offset": 0}]
    status, _ = curl("POST", f"{instance}/offsets", content_type=V2)
    assert status == 200 or status == 204
    status, committed = curl(
        "GET", f"{instance}/offsets", content_type=V2, accept=V2,
        data={"partitions": [{"topic": "jsontest", "partition": 0}]})
    assert status == 200 and committed["offsets"][0]["offset"] == 1, committed
    status, _ = curl("DELETE", instance, content_type=V2)
    assert status == 204
    status, gone = curl("GET", f"{instance}/records", accept="application/vnd.kafka.json.v2+json")
    assert status == 404 and gone["error_code"] == 40403, gone


def test_curl_rest_proxy_v2_avro_through_the_registry(platform: Platform) -> None:
    base = platform.proxy_url
    value_schema = json.dumps({"type": "record", "name": "User",
                               "fields": [{"name": "name", "type": "string"}]})
    status, produced = curl(
        "POST", f"{base}/topics/avrotest", content_type="application/vnd.kafka.avro.v2+json",
        accept=V2,
        data={"value_schema": value_schema, "records": [{"value": {"name": "testUser"}}]})
    assert status == 200, produced
    schema_id = produced["value_schema_id"]
    assert platform.get("/subjects/avrotest-value/versions/latest")["id"] == schema_id
    (value,) = consumed(platform.broker, "avrotest", 1)
    assert unframe(value) == (schema_id, b"\x10testUser")

    group, name = "my_avro_consumer", "my_consumer_instance"
    status, _ = curl("POST", f"{base}/consumers/{group}", content_type=V2,
                     data={"name": name, "format": "avro", "auto.offset.reset": "earliest"})
    assert status == 200
    instance = f"{base}/consumers/{group}/instances/{name}"
    status, _ = curl("POST", f"{instance}/assignments", content_type=V2,
                     data={"partitions": [{"topic": "avrotest", "partition": 0}]})
    assert status == 204
    records: list[Any] = []
    for _ in range(20):
        status, batch = curl("GET", f"{instance}/records?timeout=500",
                             accept="application/vnd.kafka.avro.v2+json")
        assert status == 200, batch
        records += batch
        if records:
            break
    assert [(r["value"], r["offset"]) for r in records] == [({"name": "testUser"}, 0)]
    status, _ = curl("DELETE", instance, content_type=V2)
    assert status == 204


def test_curl_rest_proxy_v3_clusters_topics_configs_records(platform: Platform) -> None:
    base = f"{platform.proxy_url}/v3/clusters"
    status, clusters = curl("GET", base)
    assert status == 200 and clusters["kind"] == "KafkaClusterList", clusters
    (cluster,) = clusters["data"]
    topics = f"{base}/{cluster['cluster_id']}/topics"
    status, created = curl(
        "POST", topics, content_type="application/json",
        data={"topic_name": "v3-topic", "partitions_count": 2,
              "configs": [{"name": "cleanup.policy", "value": "compact"}]})
    assert status == 201 and created["topic_name"] == "v3-topic", created
    status, listed = curl("GET", topics)
    assert status == 200 and "v3-topic" in [t["topic_name"] for t in listed["data"]]
    status, config = curl("GET", f"{topics}/v3-topic/configs/cleanup.policy")
    assert status == 200 and config["value"] == "compact", config

    status, record = curl(
        "POST", f"{topics}/v3-topic/records", content_type="application/json",
        data={"partition_id": 1, "key": {"type": "JSON", "data": "k"},
              "value": {"type": "JSON", "data": {"foo": "bar"}}})
    assert status == 200 and record["error_code"] == 200, record
    assert (record["partition_id"], record["offset"]) == (1, 0)

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": platform.broker.kafka_bootstrap, "group.id": "v3-reader"})
    try:
        c.assign([TopicPartition("v3-topic", 1, OFFSET_BEGINNING)])
        m = None
        for _ in range(int(WAIT / 0.5)):
            m = c.poll(0.5)
            if m is not None:
                break
        assert m is not None and not m.error()
        assert (json.loads(m.key()), json.loads(m.value())) == ("k", {"foo": "bar"})
    finally:
        c.close()

    status, groups = curl("GET", f"{base}/{cluster['cluster_id']}/consumer-groups")
    assert status == 200 and groups["kind"] == "KafkaConsumerGroupList", groups
    status, _ = curl("DELETE", f"{topics}/v3-topic")
    assert status == 204
    status, gone = curl("GET", f"{topics}/v3-topic")
    assert status == 404, gone
