"""The REST Proxy of a real ``twistd broker`` (one per module), through real sockets:
the curl flows of Confluent's REST Proxy v2 and v3 documentation (a few with the real
``curl``), a proxy consumer sharing a group with a confluent-kafka consumer, and the
limits a client meets."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess, wait_for_port
from tests.proxy.proxy_http import BINARY_V2, JSON_V2, V2, call

pytestmark = pytest.mark.broker

CLUSTER = "brokerd-single-node"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("proxy") / "data"
    data.mkdir()
    # Short heartbeats: a group's partitions move within a second, not five.
    proc = BrokerProcess(data, args=(
        "--group-consumer-heartbeat-interval-ms=200", "--fsync=never",
        # One connection for clients from 127.0.0.2 (the limits test), across listeners.
        "--max-connections-per-ip-overrides=127.0.0.2:1",
    )).start()
    # start() waits for the native and Kafka listeners; the proxy's binds beside them.
    assert wait_for_port(proc.http_proxy_port, time.monotonic() + 30), proc.log()
    try:
        yield proc
    finally:
        proc.stop()


def curl(*args: str) -> tuple[int, str]:
    """Real curl: the HTTP status and the body."""
    assert shutil.which("curl"), "curl is needed"
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "15", "-w", "\n%{http_code}", *args],
        capture_output=True, text=True, check=True,
    )
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def test_the_v2_quick_start_with_curl(broker: BrokerProcess) -> None:
    base = f"http://127.0.0.1:{broker.http_proxy_port}"
    status, body = curl(
        "-X", "POST", "-H", f"Content-Type: {JSON_V2}",
        "--data", '{"records":[{"value":{"foo":"bar"}}]}', f"{base}/topics/jsontest")
    assert status == 200, body
    assert json.loads(body) == {"key_schema_id": None, "value_schema_id": None, "offsets": [
        {"partition": 0, "offset": 0, "error_code": None, "error": None}]}
    status, body = curl(
        "-X", "POST", "-H", f"Content-Type: {V2}",
        "--data", '{"name": "my_consumer_instance", "format": "json", '
                  '"auto.offset.reset": "earliest"}',
        f"{base}/consumers/my_json_consumer")
    assert json.loads(body) == {
        "instance_id": "my_consumer_instance",
        "base_uri": f"{base}/consumers/my_json_consumer/instances/my_consumer_instance"}
    instance = f"{base}/consumers/my_json_consumer/instances/my_consumer_instance"
    status, body = curl("-X", "POST", "-H", f"Content-Type: {V2}",
                        "--data", '{"topics":["jsontest"]}', f"{instance}/subscription")
    assert (status, body) == (204, "")
    status, body = curl("-X", "GET", "-H", f"Accept: {JSON_V2}", f"{instance}/records")
    assert status == 200, body
    assert json.loads(body) == [
        {"topic": "jsontest", "key": None, "value": {"foo": "bar"}, "partition": 0, "offset": 0}]
    status, body = curl("-X", "POST", "-H", f"Content-Type: {V2}", f"{instance}/offsets")
    assert status == 200, body
    status, body = curl("-X", "GET", "-H", f"Content-Type: {V2}",
                        "--data", '{"partitions":[{"topic":"jsontest","partition":0}]}',
                        f"{instance}/offsets")
    assert json.loads(body) == {"offsets": [
        {"topic": "jsontest", "partition": 0, "offset": 1, "metadata": ""}]}
    status, body = curl("-X", "DELETE", "-H", f"Content-Type: {V2}", instance)
    assert (status, body) == (204, "")
    status, body = curl("-X", "DELETE", "-H", f"Content-Type: {V2}", instance)
    assert status == 404 and json.loads(body)["error_code"] == 40403


def test_binary_produce_metadata_and_a_manual_assignment(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    answer = call(port, "POST", "/v3/clusters/" + CLUSTER + "/topics",
                  {"topic_name": "bin", "partitions_count": 3}, content_type="application/json")
    assert answer.status == 201, answer
    first = call(port, "POST", "/topics/bin", {"records": [
        {"value": "a2Fma2E=", "partition": 1}]}, content_type=BINARY_V2).json["offsets"]
    assert first == [{"partition": 1, "offset": 0, "error_code": None, "error": None}]
    records = {"records": [{"key": "a2V5", "value": "Y29uZmx1ZW50"}, {"value": "bG9ncw=="}]}
    offsets = call(port, "POST", "/topics/bin", records, content_type=BINARY_V2).json["offsets"]
    # The keyed record went where a Kafka producer's default partitioner puts "key".
    from brokerd.proxy.produce import key_partition
    assert offsets[0]["partition"] == key_partition(b"key", 3)
    assert all(o["error_code"] is None for o in offsets)
    to_two = call(port, "POST", "/topics/bin/partitions/2", {"records": [{"value": "AA=="}]},
                  content_type=BINARY_V2).json["offsets"]
    assert [o["partition"] for o in to_two] == [2]
    assert "bin" in call(port, "GET", "/topics").json
    topic = call(port, "GET", "/topics/bin").json
    assert topic["name"] == "bin" and len(topic["partitions"]) == 3
    assert topic["configs"]["cleanup.policy"] == "delete"
    assert call(port, "GET", "/topics/bin/partitions/1").json == {
        "partition": 1, "leader": 0, "replicas": [{"broker": 0, "leader": True, "in_sync": True}]}
    ends = [call(port, "GET", f"/topics/bin/partitions/{p}/offsets").json["end_offset"]
            for p in range(3)]
    assert sum(ends) == 4 and ends[1] >= 1
    assert call(port, "GET", "/brokers").json == {"brokers": [0]}

    base = "/consumers/binary_group/instances/manual"
    assert call(port, "POST", "/consumers/binary_group",
                {"name": "manual", "format": "binary"}).status == 200
    assert call(port, "POST", base + "/assignments",
                {"partitions": [{"topic": "bin", "partition": 1}]}).status == 204
    assert call(port, "GET", base + "/assignments").json == {
        "partitions": [{"topic": "bin", "partition": 1}]}
    assert call(port, "POST", base + "/positions/beginning",
                {"partitions": [{"topic": "bin", "partition": 1}]}).status == 204
    got = call(port, "GET", base + "/records", accept=BINARY_V2)
    assert got.headers["content-type"] == BINARY_V2
    assert got.json[0] == {"topic": "bin", "key": None, "value": "a2Fma2E=", "partition": 1,
                           "offset": 0}
    assert call(port, "POST", base + "/positions",
                {"offsets": [{"topic": "bin", "partition": 1, "offset": 0}]}).status == 204
    assert call(port, "GET", base + "/records", accept=BINARY_V2).json[0]["offset"] == 0
    # The instance's format is binary: asking it for JSON is refused.
    refused = call(port, "GET", base + "/records", accept=JSON_V2)
    assert (refused.status, refused.json["error_code"]) == (406, 40601)
    assert call(port, "POST", base + "/offsets",
                {"offsets": [{"topic": "bin", "partition": 1, "offset": 0}]}).status == 200
    assert call(port, "GET", base + "/offsets",
                {"partitions": [{"topic": "bin", "partition": 1}]}).json["offsets"][0][
        "offset"] == 1
    assert call(port, "DELETE", base).status == 204


def test_v2_errors(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    call(port, "POST", f"/v3/clusters/{CLUSTER}/topics", {
        "topic_name": "small", "partitions_count": 2,
        "configs": [{"name": "max.message.bytes", "value": "1000"}]},
        content_type="application/json")
    for path, code in (("/topics/nope", 40401), ("/topics/small/partitions/9", 40402),
                       ("/consumers/g/instances/nobody/assignments", 40403)):
        answer = call(port, "GET", path)
        assert (answer.status, answer.json["error_code"]) == (404, code), path
    wrong = call(port, "POST", "/topics/small", {"records": [{"value": 1}]},
                 content_type="text/plain")
    assert (wrong.status, wrong.json["error_code"]) == (415, 40601)
    bad = call(port, "POST", "/topics/small", raw=b"{not json", content_type=JSON_V2)
    assert bad.status == 400
    assert call(port, "PATCH", "/topics").status == 405
    # Errors per record: a partition that does not exist, a batch over max.message.bytes.
    answer = call(port, "POST", "/topics/small", {"records": [
        {"value": "ok", "partition": 0}, {"value": "x" * 2000, "partition": 1},
        {"value": "nowhere", "partition": 7}]}, content_type=JSON_V2)
    assert answer.status == 200
    ok, big, nowhere = answer.json["offsets"]
    assert (ok["offset"], ok["error_code"]) == (0, None)
    assert (big["offset"], big["error_code"]) == (None, 413) and big["error"]
    assert (nowhere["offset"], nowhere["error_code"]) == (None, 40402)


def test_the_v3_flows(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    j = "application/json"
    clusters = call(port, "GET", "/v3/clusters").json
    assert clusters["kind"] == "KafkaClusterList"
    (cluster,) = clusters["data"]
    assert cluster["cluster_id"] == CLUSTER
    assert cluster["metadata"]["self"] == f"http://127.0.0.1:{port}/v3/clusters/{CLUSTER}"
    c = f"/v3/clusters/{CLUSTER}"
    created = call(port, "POST", c + "/topics", {
        "topic_name": "v3topic", "partitions_count": 2, "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}]}, content_type=j)
    assert created.status == 201, created
    assert created.json["kind"] == "KafkaTopic" and created.json["partitions_count"] == 2
    again = call(port, "POST", c + "/topics", {"topic_name": "v3topic"}, content_type=j)
    assert again.status == 400 and "already exists" in again.json["message"]
    names = [t["topic_name"] for t in call(port, "GET", c + "/topics").json["data"]]
    assert "v3topic" in names
    assert call(port, "GET", c + "/topics/v3topic/partitions").json["data"][1][
        "partition_id"] == 1
    config = call(port, "GET", c + "/topics/v3topic/configs/cleanup.policy").json
    assert (config["value"], config["is_default"]) == ("compact", False)
    assert call(port, "PUT", c + "/topics/v3topic/configs/retention.ms", {"value": "60000"},
                content_type=j).status == 204
    assert call(port, "POST", c + "/topics/v3topic/configs:alter", {"data": [
        {"name": "cleanup.policy", "operation": "DELETE"},
        {"name": "max.message.bytes", "value": "200000"}]}, content_type=j).status == 204
    configs = {e["name"]: e for e in call(port, "GET", c + "/topics/v3topic/configs").json[
        "data"]}
    assert configs["retention.ms"]["value"] == "60000"
    assert configs["cleanup.policy"]["is_default"] is True
    assert configs["max.message.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    bad = call(port, "PUT", c + "/topics/v3topic/configs/no.such.config", {"value": "1"},
               content_type=j)
    assert bad.status == 400

    one = call(port, "POST", c + "/topics/v3topic/records", {
        "partition_id": 1, "headers": [{"name": "h", "value": "aGk="}],
        "key": {"type": "JSON", "data": "k"}, "value": {"type": "JSON", "data": {"n": 1}},
    }, content_type=j)
    assert one.status == 200, one
    assert one.json["partition_id"] == 1 and one.json["offset"] == 0
    assert one.json["value"] == {"type": "JSON", "size": 7}
    stream = b'{"value": {"type": "BINARY", "data": "Im9rIg=="}}\n' \
             b'{"value": {"type": "AVRO", "data": 1}, "partition_id": 0}\n' \
             b'{"value": {"type": "JSON", "data": [2]}, "partition_id": 0}'
    answers = call(port, "POST", c + "/topics/v3topic/records", raw=stream, content_type=j)
    decoder, text, results, index = json.JSONDecoder(), answers.raw.decode(), [], 0
    while index < len(text):
        value, index = decoder.raw_decode(text, index)
        results.append(value)
    assert [r["error_code"] for r in results] == [200, 400, 200]
    # An AVRO value without a schema: the subject has none yet.
    assert "no schema for subject v3topic-value" in results[1]["message"]

    # The group the REST consumer made: its lag, read through v3.
    g = "/consumers/v3group/instances/i"
    call(port, "POST", "/consumers/v3group", {"name": "i", "format": "json",
                                               "auto.offset.reset": "earliest"})
    call(port, "POST", g + "/subscription", {"topics": ["v3topic"]})
    read = call(port, "GET", g + "/records?timeout=1000", accept=JSON_V2).json
    assert isinstance(read, list), read
    assert len(read) == 3 and {"n": 1} in [r["value"] for r in read]
    assert call(port, "POST", g + "/offsets").status == 200
    assert call(port, "POST", c + "/topics/v3topic/records",
                {"value": {"type": "JSON", "data": 3}, "partition_id": 1},
                content_type=j).status == 200
    group = call(port, "GET", c + "/consumer-groups/v3group").json
    assert group["kind"] == "KafkaConsumerGroup" and group["state"] == "STABLE"
    consumers = call(port, "GET", c + "/consumer-groups/v3group/consumers").json["data"]
    assert [m["client_id"] for m in consumers] == ["rest-proxy-i"]
    lags = {(x["topic_name"], x["partition_id"]): x
            for x in call(port, "GET", c + "/consumer-groups/v3group/lags").json["data"]}
    assert lags[("v3topic", 1)]["lag"] == 1 and lags[("v3topic", 0)]["lag"] == 0
    assert call(port, "GET", c + "/consumer-groups/v3group/lag-summary").json[
        "total_lag"] == 1
    assert lags[("v3topic", 1)]["consumer_id"] == consumers[0]["consumer_id"]
    one_lag = call(port, "GET", c + "/consumer-groups/v3group/lags/v3topic/partitions/1").json
    assert one_lag == lags[("v3topic", 1)]
    member = consumers[0]["consumer_id"]
    assert call(port, "GET", c + f"/consumer-groups/v3group/consumers/{member}").json == (
        consumers[0])
    # A record JSON cannot decode is an error, and nothing is skipped.
    call(port, "POST", "/topics/v3topic/partitions/1", {"records": [{"value": "/w=="}]},
         content_type=BINARY_V2)
    for _ in range(2):
        failed = call(port, "GET", g + "/records", accept=JSON_V2)
        assert (failed.status, failed.json["error_code"]) == (500, 50002), failed
    assert "v3group" in [x["consumer_group_id"] for x in call(
        port, "GET", c + "/consumer-groups").json["data"]]
    assert call(port, "DELETE", g).status == 204
    assert call(port, "GET", c + "/brokers").json["data"][0]["port"] == broker.kafka_port
    assert call(port, "DELETE", c + "/topics/v3topic").status == 204
    assert call(port, "GET", c + "/topics/v3topic").status == 404


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_proxy_consumer_and_a_kafka_consumer_split_a_group(
    broker: BrokerProcess, protocol: str
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    port = broker.http_proxy_port
    c = f"/v3/clusters/{CLUSTER}"
    topic, group = f"shared-{protocol}", f"shared-{protocol}"
    call(port, "POST", c + "/topics", {"topic_name": topic, "partitions_count": 2},
         content_type="application/json")
    base = f"/consumers/{group}/instances/rest"
    assert call(port, "POST", f"/consumers/{group}",
                {"name": "rest", "format": "json", "auto.offset.reset": "earliest"}).status == 200
    assert call(port, "POST", base + "/subscription", {"topics": [topic]}).status == 204
    assert len(call(port, "GET", base + "/assignments").json["partitions"]) == 2
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": group,
        "group.protocol": protocol, "auto.offset.reset": "earliest",
    })
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        kafka_side: set[int] = set()
        rest_side: set[int] = {0, 1}
        while time.monotonic() < deadline:
            consumer.poll(0.2)
            kafka_side = {tp.partition for tp in consumer.assignment()}
            rest_side = {p["partition"] for p in call(
                port, "GET", base + "/assignments").json["partitions"]}
            if len(kafka_side) == 1 and len(rest_side) == 1:
                break
        assert kafka_side | rest_side == {0, 1} and not kafka_side & rest_side, (
            kafka_side, rest_side)
        (rest_partition,) = rest_side
        for p in (0, 1):
            call(port, "POST", f"/topics/{topic}/partitions/{p}",
                 {"records": [{"value": f"to {p}"}]}, content_type=JSON_V2)
        read = call(port, "GET", base + "/records?timeout=2000", accept=JSON_V2).json
        assert [(r["partition"], r["value"]) for r in read] == [
            (rest_partition, f"to {rest_partition}")]
    finally:
        consumer.close()
        call(port, "DELETE", base)


def test_limits(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    too_large = call(port, "POST", "/topics/bin", content_type=JSON_V2,
                     raw=b'{"records":[{"value":"' + b"x" * (4 * 1024 * 1024) + b'"}]}')
    assert (too_large.status, too_large.json["error_code"]) == (413, 413)
    made = []
    try:
        for i in range(16):
            answer = call(port, "POST", "/consumers/crowd", {"name": f"c{i}"})
            assert answer.status == 200, answer
            made.append(f"c{i}")
        refused = call(port, "POST", "/consumers/crowd", {"name": "one-too-many"})
        assert (refused.status, refused.json["error_code"]) == (429, 429)
        assert "16 consumer instances" in refused.json["message"]
    finally:
        for name in made:
            call(port, "DELETE", f"/consumers/crowd/instances/{name}")
    assert call(port, "POST", "/consumers/crowd", {"name": "room-again"}).status == 200
    call(port, "DELETE", "/consumers/crowd/instances/room-again")
    many = {"records": [{"value": 1}] * 10_001}
    assert call(port, "POST", "/topics/bin", many, content_type=JSON_V2).status == 422


def test_the_log_names_the_proxy(broker: BrokerProcess) -> None:
    assert "REST Proxy (Confluent v2, v3) on" in broker.log()
    assert Path(broker.data_dir).exists()


AVRO_USER = json.dumps({"type": "record", "name": "User", "namespace": "example",
                        "fields": [{"name": "name", "type": "string"},
                                   {"name": "age", "type": ["null", "int"], "default": None}]})


def test_avro_through_the_registry_both_ways(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    avro = "application/vnd.kafka.avro.v2+json"
    first = call(port, "POST", "/topics/avrotest", {
        "value_schema": AVRO_USER,
        "records": [{"value": {"name": "testUser", "age": {"int": 31}}}],
    }, content_type=avro)
    assert first.status == 200, first
    schema_id = first.json["value_schema_id"]
    assert isinstance(schema_id, int)
    # Registered under TopicNameStrategy's subject, in the broker's own registry.
    versions = call(broker.schema_registry_port, "GET", "/subjects/avrotest-value/versions")
    assert versions.json == [1]
    again = call(port, "POST", "/topics/avrotest", {
        "value_schema_id": schema_id,
        "records": [{"value": {"name": "second", "age": None}}, {"value": {"nom": 1}}],
    }, content_type=avro)
    assert (again.status, again.json["error_code"]) == (422, 42203)
    assert "nom" in again.json["message"]
    missing = call(port, "POST", "/topics/avrotest", {"records": [{"value": {"name": "x"}}]},
                   content_type=avro)
    assert (missing.status, missing.json["error_code"]) == (422, 42202)

    base = "/consumers/avro_group/instances/a"
    call(port, "POST", "/consumers/avro_group",
         {"name": "a", "format": "avro", "auto.offset.reset": "earliest"})
    call(port, "POST", base + "/subscription", {"topics": ["avrotest"]})
    read = call(port, "GET", base + "/records", accept=avro)
    assert read.json == [{"topic": "avrotest", "key": None,
                          "value": {"name": "testUser", "age": {"int": 31}},
                          "partition": 0, "offset": 0}], read
    call(port, "DELETE", base)

    # confluent-kafka's own Avro deserializer reads what the proxy wrote.
    schema_registry = pytest.importorskip("confluent_kafka.schema_registry")
    avro_module = pytest.importorskip("confluent_kafka.schema_registry.avro")
    from confluent_kafka import Consumer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = schema_registry.SchemaRegistryClient(
        {"url": f"http://127.0.0.1:{broker.schema_registry_port}"})
    deserializer = avro_module.AvroDeserializer(client)
    consumer = Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": "avro-k",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["avrotest"])
        message = None
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None
        value = deserializer(message.value(),
                             SerializationContext("avrotest", MessageField.VALUE))
        assert value == {"name": "testUser", "age": 31}
    finally:
        consumer.close()


def test_json_schema_and_protobuf_and_v3_schemas(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    js = "application/vnd.kafka.jsonschema.v2+json"
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                         "required": ["n"]})
    produced = call(port, "POST", "/topics/jstest", {
        "value_schema": schema, "records": [{"value": {"n": 7}}]}, content_type=js)
    assert produced.status == 200, produced
    refused = call(port, "POST", "/topics/jstest", {
        "value_schema_id": produced.json["value_schema_id"], "records": [{"value": {"m": 1}}]},
        content_type=js)
    assert refused.status == 422, refused

    pb = "application/vnd.kafka.protobuf.v2+json"
    proto = 'syntax = "proto3";\nmessage Order {\n  int32 id = 1;\n  string item = 2;\n}\n'
    produced = call(port, "POST", "/topics/pbtest", {
        "value_schema": proto, "key_schema": proto,
        "records": [{"key": {"id": 1}, "value": {"id": 5, "item": "book"}}]}, content_type=pb)
    assert produced.status == 200, produced
    assert produced.json["key_schema_id"] is not None

    c = f"/v3/clusters/{CLUSTER}/topics/jstest/records"
    v3 = call(port, "POST", c, {"value": {"type": "JSONSCHEMA", "data": {"n": 8}}},
              content_type="application/json")
    assert v3.status == 200 and v3.json["value"]["type"] == "JSONSCHEMA", v3

    for topic, kind, expected in (("jstest", "jsonschema", [{"n": 7}, {"n": 8}]),
                                  ("pbtest", "protobuf", [{"id": 5, "item": "book"}])):
        base = f"/consumers/{topic}_g/instances/c"
        call(port, "POST", f"/consumers/{topic}_g",
             {"name": "c", "format": kind, "auto.offset.reset": "earliest"})
        call(port, "POST", base + "/subscription", {"topics": [topic]})
        read = call(port, "GET", base + "/records",
                    accept=f"application/vnd.kafka.{kind}.v2+json")
        assert [r["value"] for r in read.json] == expected, read
        call(port, "DELETE", base)


def test_a_pattern_subscription(broker: BrokerProcess) -> None:
    port = broker.http_proxy_port
    for topic in ("pat-a", "pat-b", "other-c"):
        call(port, "POST", f"/topics/{topic}", {"records": [{"value": topic}]},
             content_type=JSON_V2)
    base = "/consumers/pattern_group/instances/p"
    call(port, "POST", "/consumers/pattern_group",
         {"name": "p", "format": "json", "auto.offset.reset": "earliest"})
    assert call(port, "POST", base + "/subscription", {"topic_pattern": "pat-.*"}).status == 204
    seen: list[str] = []
    # The coordinator resolves a regex after the heartbeat that brought it (as Kafka 4).
    for _ in range(20):
        seen += [r["value"] for r in call(port, "GET", base + "/records?timeout=200",
                                          accept=JSON_V2).json]
        if len(seen) == 2:
            break
    assert sorted(seen) == ["pat-a", "pat-b"]
    assert call(port, "GET", base + "/subscription").json == {"topics": ["pat-a", "pat-b"]}
    call(port, "DELETE", base)


def test_a_records_call_waits_for_data_and_max_bytes_bounds_it(broker: BrokerProcess) -> None:
    import threading

    port = broker.http_proxy_port
    call(port, "POST", f"/v3/clusters/{CLUSTER}/topics", {"topic_name": "waits"},
         content_type="application/json")
    base = "/consumers/wait_group/instances/w"
    call(port, "POST", "/consumers/wait_group",
         {"name": "w", "format": "binary", "auto.offset.reset": "earliest",
          "consumer.request.timeout.ms": "10000"})
    call(port, "POST", base + "/assignments", {"partitions": [{"topic": "waits",
                                                               "partition": 0}]})
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(call(
        port, "GET", base + "/records?timeout=10000", accept=BINARY_V2)))
    started = time.monotonic()
    reader.start()
    # A parked call shows only in its timing: give it the time to park.
    time.sleep(0.3)
    call(port, "POST", "/topics/waits", {"records": [{"value": "AAAA"}] * 50},
         content_type=BINARY_V2)
    reader.join(15)
    assert time.monotonic() - started < 5, "answered on the append, not at the timeout"
    (answer,) = got
    assert len(answer.json) >= 1  # type: ignore[attr-defined]
    # 3 value bytes + 64 per record: a budget of 200 bytes holds 2 records.
    call(port, "POST", base + "/positions/beginning",
         {"partitions": [{"topic": "waits", "partition": 0}]})
    small = call(port, "GET", base + "/records?max_bytes=200", accept=BINARY_V2).json
    assert [r["offset"] for r in small] == [0, 1]
    # A budget smaller than one record still answers that record.
    assert len(call(port, "GET", base + "/records?max_bytes=1", accept=BINARY_V2).json) == 1
    call(port, "DELETE", base)


def test_connections_are_counted_with_the_other_listeners(broker: BrokerProcess) -> None:
    import socket

    def connect() -> socket.socket:
        sock = socket.socket()
        sock.settimeout(5)
        sock.bind(("127.0.0.2", 0))
        sock.connect(("127.0.0.1", broker.http_proxy_port))
        return sock

    request = b"GET /brokers HTTP/1.1\r\nHost: x\r\n\r\n"
    first = connect()
    try:
        first.sendall(request)
        assert first.recv(4096).startswith(b"HTTP/1.1 200")
        with connect() as second:
            # Refused: closed at once, unanswered (a reset if the request was sent).
            try:
                second.sendall(request)
                assert second.recv(4096) == b""
            except ConnectionResetError:
                pass
    finally:
        first.close()
    for _ in range(50):  # the close reaches the broker soon after
        with connect() as third:
            try:
                third.sendall(request)
                if third.recv(4096).startswith(b"HTTP/1.1 200"):
                    break
            except ConnectionResetError:
                time.sleep(0.02)
    else:
        raise AssertionError("the address's slot did not come back")
