"""The Schema Registry's lookups and the HTTP proxy's produce and consume, in brokerd's
own figures.

Rows: ``GET /schemas/ids/{id}`` (what a deserializer asks for an id it has not cached) and
``POST /subjects/{subject}`` (what a serializer asks to find the id of its schema) per
second over one keep-alive connection, each answer checked; REST Proxy v2 produce of JSON
records in batches (``POST /topics/{topic}``, ``application/vnd.kafka.json.v2+json``) and
a v2 consumer instance's ``GET .../records`` reading them back, in records per second,
the produce checked against the partition's end offset and the consume counted.

No peer is measured beside them: Confluent's Schema Registry and REST Proxy are not on
Maven Central and Karapace is not on PyPI, so none can be installed beside brokerd here;
the rows' notes say so. One fresh broker with both listeners on free loopback ports,
stopped at the end.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

from bench.common import Brokers, Results, Row

from tests.brokerproc import free_port

SECTION = "registry, proxy"
TITLE = "Schema Registry and HTTP proxy"
SYSTEM = "brokerd"
NO_PEER = ("no peer: Confluent's registry and REST Proxy are not on Maven Central, "
           "Karapace is not on PyPI")
REGISTRY_TYPE = "application/vnd.schemaregistry.v1+json"
V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
#: Records per v2 produce request: a batch as a REST client sends one.
BATCH = 100
SIZE = 100
#: Subjects registered for the lookups; the lookups cycle through them.
SUBJECTS = 20
TOPIC = "bench-proxy"
GROUP = "bench-proxy-group"
HTTP_TIMEOUT = 30.0


class Http:
    """One keep-alive HTTP/1.1 connection; every answer must be the expected status."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)

    def call(self, method: str, path: str, body: Any = None, *, content_type: str = V2,
             accept: str = V2, expect: int = 200) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": accept}
        if data is not None:
            headers["Content-Type"] = content_type
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        if response.status != expect:
            raise RuntimeError(f"{method} {path}: {response.status} {raw[:300]!r}")
        return json.loads(raw) if raw else None

    def close(self) -> None:
        self.conn.close()


def _record(i: int) -> dict[str, Any]:
    # About SIZE bytes of JSON per value.
    return {"value": {"n": i, "pad": "x" * (SIZE - 20)}}


def measure(results: Results, brokers: Brokers, *, lookups: int, records: int) -> None:
    registry_port, proxy_port = free_port(), free_port()
    with brokers.fresh(f"--schema-registry=tcp:{registry_port}:interface=127.0.0.1",
                       f"--http-proxy=tcp:{proxy_port}:interface=127.0.0.1"):
        registry_lookups(results, registry_port, lookups)
        proxy_produce_consume(results, proxy_port, records)


def _schema(i: int) -> str:
    fields = [{"name": "name", "type": "string"}, {"name": f"f{i}", "type": "long"}]
    return json.dumps({"type": "record", "name": f"Bench{i}", "fields": fields})


def registry_lookups(results: Results, port: int, lookups: int) -> None:
    client = Http(port)
    try:
        ids: list[int] = []
        bodies: list[dict[str, str]] = []
        for i in range(SUBJECTS):
            body = {"schema": _schema(i)}
            answer = client.call("POST", f"/subjects/bench-{i}-value/versions", body,
                                 content_type=REGISTRY_TYPE, accept=REGISTRY_TYPE)
            ids.append(int(answer["id"]))
            bodies.append(body)

        start = time.perf_counter()
        for n in range(lookups):
            i = n % SUBJECTS
            answer = client.call("GET", f"/schemas/ids/{ids[i]}", accept=REGISTRY_TYPE)
            if "schema" not in answer:
                raise RuntimeError(f"GET /schemas/ids/{ids[i]}: no schema in {answer!r}")
        seconds = time.perf_counter() - start
        results.add(Row(SECTION, SYSTEM, "registry GET /schemas/ids/{id}, one keep-alive "
                        "connection", "", lookups / seconds, "lookups/s",
                        f"{lookups:,} lookups over {SUBJECTS} ids; {NO_PEER}"))

        start = time.perf_counter()
        for n in range(lookups):
            i = n % SUBJECTS
            answer = client.call("POST", f"/subjects/bench-{i}-value", bodies[i],
                                 content_type=REGISTRY_TYPE, accept=REGISTRY_TYPE)
            if answer.get("id") != ids[i]:
                raise RuntimeError(f"POST /subjects/bench-{i}-value: {answer!r}, not id {ids[i]}")
        seconds = time.perf_counter() - start
        results.add(Row(SECTION, SYSTEM, "registry POST /subjects/{subject} (lookup by "
                        "schema), one keep-alive connection", "", lookups / seconds,
                        "lookups/s", f"{lookups:,} lookups over {SUBJECTS} subjects; {NO_PEER}"))
    finally:
        client.close()


def proxy_produce_consume(results: Results, port: int, records: int) -> None:
    records = max(BATCH, records // BATCH * BATCH)
    client = Http(port)
    try:
        start = time.perf_counter()
        last = -1
        for base in range(0, records, BATCH):
            body = {"records": [_record(base + i) for i in range(BATCH)]}
            answer = client.call("POST", f"/topics/{TOPIC}", body, content_type=V2_JSON)
            offsets = answer["offsets"]
            failed = [o for o in offsets if o.get("error_code")]
            if failed or len(offsets) != BATCH:
                raise RuntimeError(f"v2 produce: {failed[:3] or offsets[:3]!r}")
            last = max(last, *(int(o["offset"]) for o in offsets))
        seconds = time.perf_counter() - start
        if last != records - 1:
            raise RuntimeError(f"v2 produce: last offset {last}, expected {records - 1}")
        results.add(Row(SECTION, SYSTEM, f"proxy v2 produce, JSON records, {BATCH} per "
                        "request, one keep-alive connection", "fsync always",
                        records / seconds, "rec/s", f"{records:,} records; {NO_PEER}", SIZE))

        instance = "bench-consumer"
        base_path = f"/consumers/{GROUP}/instances/{instance}"
        client.call("POST", f"/consumers/{GROUP}",
                    {"name": instance, "format": "json", "auto.offset.reset": "earliest"})
        try:
            client.call("POST", f"{base_path}/assignments",
                        {"partitions": [{"topic": TOPIC, "partition": 0}]}, expect=204)
            got = 0
            start = time.perf_counter()
            deadline = time.monotonic() + 120.0
            while got < records:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"v2 records: {got:,} of {records:,} read in 120 s")
                batch = client.call("GET", f"{base_path}/records?timeout=1000", accept=V2_JSON)
                got += len(batch)
            seconds = time.perf_counter() - start
        finally:
            client.call("DELETE", base_path, expect=204)
        results.add(Row(SECTION, SYSTEM, "proxy v2 consumer instance, GET records (json), "
                        "one keep-alive connection", "read (page cache)", got / seconds,
                        "rec/s", f"{got:,} records; {NO_PEER}", SIZE))
    finally:
        client.close()
