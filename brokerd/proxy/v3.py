# -*- test-case-name: tests.proxy.test_site_broker -*-
"""Confluent REST Proxy v3 (``/v3/clusters/...``, ``application/json``): the cluster,
its brokers, topics (list, create, delete), partitions, topic configs (read, set, reset,
alter in a batch), consumer groups (read: consumers, lags) and records produce.

Every resource answers in Confluent's v3 shape: a ``kind``, ``metadata`` with ``self``
(the URL it is read at, built from the request's Host) and ``resource_name`` (a CRN),
and lists as ``{"kind": "...List", "metadata": {...}, "data": [...]}``. There is one
cluster, the broker's, and one broker, this one. A records produce takes one record, or
a stream of JSON records one after the other, and answers one result per record in the
same order, as Confluent's streaming produce does (a failed record answers its error and
the ones after it are still tried).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from brokerd.operator.views import GroupView, MemberView, TopicView
from brokerd.proxy.context import ProxyContext
from brokerd.proxy.embedded import decode_base64, encode_with
from brokerd.proxy.errors import (
    ProxyError,
    bad_request,
    from_broker,
    partition_not_found,
    topic_not_found,
)
from brokerd.proxy.http import Answer, Call, Route, too_deep
from brokerd.proxy.produce import OutRecord
from brokerd.registry.acl import subject_topic
from brokerd.registry.model import RegistryError, Schema, SchemaType
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.config.topic_config import TOPIC_CONFIGS

_JSON = "application/json"
_C = "/v3/clusters/{cluster}"
_T = _C + "/topics/{topic}"
_G = _C + "/consumer-groups/{group}"
_SCHEMA_TYPES = {"AVRO": SchemaType.AVRO, "PROTOBUF": SchemaType.PROTOBUF,
                 "JSONSCHEMA": SchemaType.JSON}


def _listing(kind: str, url: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}


def _upper_snake(state: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", state).upper()


class V3Api:
    """The v3 endpoints over ``ctx``."""

    def __init__(self, ctx: ProxyContext) -> None:
        self._ctx = ctx

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/v3/clusters", self.clusters),
            Route("GET", _C, self.cluster),
            Route("GET", _C + "/brokers", self.brokers),
            Route("GET", _C + "/brokers/{broker}", self.broker),
            Route("GET", _C + "/topics", self.topics),
            Route("POST", _C + "/topics", self.create_topic),
            Route("GET", _T, self.topic),
            Route("DELETE", _T, self.delete_topic),
            Route("GET", _T + "/partitions", self.partitions),
            Route("GET", _T + "/partitions/{partition}", self.partition),
            Route("GET", _T + "/configs", self.configs),
            Route("GET", _T + "/configs/{name}", self.config),
            Route("PUT", _T + "/configs/{name}", self.set_config),
            Route("DELETE", _T + "/configs/{name}", self.reset_config),
            Route("POST", _T + "/configs:alter", self.alter_configs),
            Route("POST", _T + "/records", self.produce),
            Route("GET", _C + "/consumer-groups", self.groups),
            Route("GET", _G, self.group),
            Route("GET", _G + "/consumers", self.consumers),
            Route("GET", _G + "/consumers/{consumer}", self.consumer),
            Route("GET", _G + "/lags", self.lags),
            Route("GET", _G + "/lags/{topic}/partitions/{partition}", self.lag),
            Route("GET", _G + "/lag-summary", self.lag_summary),
        ]

    # -- shapes -------------------------------------------------------------------------

    def _check_cluster(self, cluster: str) -> str:
        if cluster != self._ctx.cluster_id:
            raise ProxyError(404, 404, f"Cluster {cluster} cannot be found.")
        return f"/v3/clusters/{cluster}"

    def _crn(self, *parts: str) -> str:
        return "crn:///" + "/".join((f"kafka={self._ctx.cluster_id}", *parts))

    def _cluster_json(self, base: str) -> dict[str, Any]:
        cid = self._ctx.cluster_id
        url = f"{base}/v3/clusters/{cid}"
        return {
            "kind": "KafkaCluster",
            "metadata": {"self": url, "resource_name": self._crn()},
            "cluster_id": cid,
            "controller": {"related": f"{url}/brokers/{self._ctx.node_id}"},
            "acls": {"related": f"{url}/acls"},
            "brokers": {"related": f"{url}/brokers"},
            "broker_configs": {"related": f"{url}/broker-configs"},
            "consumer_groups": {"related": f"{url}/consumer-groups"},
            "topics": {"related": f"{url}/topics"},
            "partition_reassignments": {
                "related": f"{url}/topics/-/partitions/-/reassignment"},
        }

    def _broker_json(self, base: str) -> dict[str, Any]:
        cid, node = self._ctx.cluster_id, self._ctx.node_id
        url = f"{base}/v3/clusters/{cid}/brokers/{node}"
        return {
            "kind": "KafkaBroker",
            "metadata": {"self": url, "resource_name": self._crn(f"broker={node}")},
            "cluster_id": cid,
            "broker_id": node,
            "host": self._ctx.kafka_host,
            "port": self._ctx.kafka_port,
            "rack": None,
            "configs": {"related": f"{url}/configs"},
            "partition_replicas": {"related": f"{url}/partition-replicas"},
        }

    def _topic_json(self, base: str, name: str, partitions: int) -> dict[str, Any]:
        cid = self._ctx.cluster_id
        url = f"{base}/v3/clusters/{cid}/topics/{name}"
        return {
            "kind": "KafkaTopic",
            "metadata": {"self": url, "resource_name": self._crn(f"topic={name}")},
            "cluster_id": cid,
            "topic_name": name,
            "is_internal": name.startswith("__"),
            "replication_factor": 1,
            "partitions_count": partitions,
            "partitions": {"related": f"{url}/partitions"},
            "configs": {"related": f"{url}/configs"},
            "partition_reassignments": {"related": f"{url}/partitions/-/reassignment"},
            "authorized_operations": [],
        }

    def _partition_json(self, base: str, topic: str, partition: int) -> dict[str, Any]:
        cid, node = self._ctx.cluster_id, self._ctx.node_id
        url = f"{base}/v3/clusters/{cid}/topics/{topic}/partitions/{partition}"
        return {
            "kind": "KafkaPartition",
            "metadata": {"self": url,
                         "resource_name": self._crn(f"topic={topic}", f"partition={partition}")},
            "cluster_id": cid,
            "topic_name": topic,
            "partition_id": partition,
            "leader": {"related": f"{url}/replicas/{node}"},
            "replicas": {"related": f"{url}/replicas"},
            "reassignment": {"related": f"{url}/reassignment"},
        }

    def _config_json(self, base: str, view: TopicView, name: str) -> dict[str, Any]:
        cid = self._ctx.cluster_id
        url = f"{base}/v3/clusters/{cid}/topics/{view.name}/configs/{name}"
        overridden = name in view.overrides
        return {
            "kind": "KafkaTopicConfig",
            "metadata": {"self": url,
                         "resource_name": self._crn(f"topic={view.name}", f"config={name}")},
            "cluster_id": cid,
            "topic_name": view.name,
            "name": name,
            "value": view.configs.get(name),
            "is_default": not overridden,
            "is_read_only": False,
            "is_sensitive": False,
            "source": "DYNAMIC_TOPIC_CONFIG" if overridden else "DEFAULT_CONFIG",
            "synonyms": [],
        }

    def _group_json(self, base: str, view: GroupView) -> dict[str, Any]:
        cid = self._ctx.cluster_id
        url = f"{base}/v3/clusters/{cid}/consumer-groups/{view.group_id}"
        return {
            "kind": "KafkaConsumerGroup",
            "metadata": {"self": url,
                         "resource_name": self._crn(f"consumer-group={view.group_id}")},
            "cluster_id": cid,
            "consumer_group_id": view.group_id,
            "is_simple": not view.members and not view.protocol,
            "partition_assignor": view.protocol or "",
            "state": _upper_snake(view.state),
            "type": view.group_type.upper(),
            "coordinator": {"related": f"{base}/v3/clusters/{cid}/brokers/{self._ctx.node_id}"},
            "consumers": {"related": f"{url}/consumers"},
            "lag_summary": {"related": f"{url}/lag-summary"},
        }

    # -- cluster and brokers ------------------------------------------------------------

    async def clusters(self, call: Call) -> Answer:
        return Answer(_listing("KafkaClusterList", f"{call.base_url}/v3/clusters",
                               [self._cluster_json(call.base_url)]), content_type=_JSON)

    async def cluster(self, call: Call, cluster: str) -> Answer:
        self._check_cluster(cluster)
        return Answer(self._cluster_json(call.base_url), content_type=_JSON)

    async def brokers(self, call: Call, cluster: str) -> Answer:
        path = self._check_cluster(cluster)
        return Answer(_listing("KafkaBrokerList", f"{call.base_url}{path}/brokers",
                               [self._broker_json(call.base_url)]), content_type=_JSON)

    async def broker(self, call: Call, cluster: str, broker: str) -> Answer:
        self._check_cluster(cluster)
        if broker != str(self._ctx.node_id):
            raise ProxyError(404, 404, f"Broker {broker} cannot be found.")
        return Answer(self._broker_json(call.base_url), content_type=_JSON)

    # -- topics -------------------------------------------------------------------------

    async def topics(self, call: Call, cluster: str) -> Answer:
        path = self._check_cluster(cluster)
        data = [
            self._topic_json(call.base_url, name, info.partitions)
            for name, info in sorted(self._ctx.core.topic_registry.topics().items())
            if call.access.may_describe_topic(name)
        ]
        return Answer(_listing("KafkaTopicList", f"{call.base_url}{path}/topics", data),
                      content_type=_JSON)

    async def topic(self, call: Call, cluster: str, topic: str) -> Answer:
        self._check_cluster(cluster)
        count = self._ctx.visible_partitions(call.access, topic)
        return Answer(self._topic_json(call.base_url, topic, count), content_type=_JSON)

    async def create_topic(self, call: Call, cluster: str) -> Answer:
        self._check_cluster(cluster)
        body = call.json()
        if not isinstance(body, dict):
            raise bad_request("the body must be a JSON object")
        name = body.get("topic_name")
        if not isinstance(name, str) or not name:
            raise bad_request("topic_name must be a non-empty string")
        call.access.create_topic(name)
        partitions = body.get("partitions_count", 1)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise bad_request("partitions_count must be a positive integer")
        if partitions > 100_000:
            raise bad_request("partitions_count is at most 100000")
        replication = body.get("replication_factor")
        if replication not in (None, 1, -1):
            raise ProxyError(400, 40002, "replication_factor is 1 on this single broker")
        configs: dict[str, str | None] = {}
        raw_configs = body.get("configs") or []
        if not isinstance(raw_configs, list) or len(raw_configs) > len(TOPIC_CONFIGS):
            raise bad_request("configs must be a list of {name, value}")
        for entry in raw_configs:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise bad_request("configs must be a list of {name, value}")
            value = entry.get("value")
            configs[entry["name"]] = None if value is None else str(value)
        if name in self._ctx.core.topic_registry.topics():
            raise ProxyError(400, 40002, f"Topic '{name}' already exists.")
        try:
            await self._ctx.core.create_topic(
                name, partitions, configs, validate_only=bool(body.get("validate_only")))
        except Exception as e:
            raise from_broker(e) from None
        return Answer(self._topic_json(call.base_url, name, partitions), status=201,
                      content_type=_JSON)

    async def delete_topic(self, call: Call, cluster: str, topic: str) -> Answer:
        self._check_cluster(cluster)
        self._ctx.visible_partitions(call.access, topic)
        call.access.topic(Operation.DELETE, topic)
        try:
            await self._ctx.admin.delete_topic(topic)
        except Exception as e:
            raise from_broker(e) from None
        return Answer(status=204)

    async def partitions(self, call: Call, cluster: str, topic: str) -> Answer:
        path = self._check_cluster(cluster)
        count = self._ctx.visible_partitions(call.access, topic)
        data = [self._partition_json(call.base_url, topic, p) for p in range(count)]
        return Answer(_listing("KafkaPartitionList",
                               f"{call.base_url}{path}/topics/{topic}/partitions", data),
                      content_type=_JSON)

    async def partition(self, call: Call, cluster: str, topic: str, partition: str) -> Answer:
        self._check_cluster(cluster)
        count = self._ctx.visible_partitions(call.access, topic)
        if not partition.isdigit() or int(partition) >= count:
            raise partition_not_found(topic, -1 if not partition.isdigit() else int(partition))
        return Answer(self._partition_json(call.base_url, topic, int(partition)),
                      content_type=_JSON)

    # -- configs ------------------------------------------------------------------------

    def _view(self, call: Call, topic: str, operation: Operation) -> TopicView:
        self._ctx.visible_partitions(call.access, topic)
        call.access.topic(operation, topic)
        view = self._ctx.inspector.topic(topic)
        if view is None:
            raise topic_not_found(topic)
        return view

    async def configs(self, call: Call, cluster: str, topic: str) -> Answer:
        path = self._check_cluster(cluster)
        view = self._view(call, topic, Operation.DESCRIBE_CONFIGS)
        data = [self._config_json(call.base_url, view, name) for name in sorted(view.configs)]
        return Answer(_listing("KafkaTopicConfigList",
                               f"{call.base_url}{path}/topics/{topic}/configs", data),
                      content_type=_JSON)

    async def config(self, call: Call, cluster: str, topic: str, name: str) -> Answer:
        self._check_cluster(cluster)
        view = self._view(call, topic, Operation.DESCRIBE_CONFIGS)
        if name not in view.configs:
            raise ProxyError(404, 404, f"Config {name} cannot be found for topic {topic}.")
        return Answer(self._config_json(call.base_url, view, name), content_type=_JSON)

    async def _alter(
        self, call: Call, topic: str, set_configs: Mapping[str, str], delete: list[str]
    ) -> Answer:
        self._view(call, topic, Operation.ALTER_CONFIGS)
        try:
            await self._ctx.admin.alter_topic_configs(topic, set_configs, delete)
        except Exception as e:
            raise from_broker(e) from None
        return Answer(status=204)

    async def set_config(self, call: Call, cluster: str, topic: str, name: str) -> Answer:
        self._check_cluster(cluster)
        body = call.json()
        value = body.get("value") if isinstance(body, dict) else None
        if value is None:
            raise bad_request("the body must be {\"value\": ...}")
        return await self._alter(call, topic, {name: str(value)}, [])

    async def reset_config(self, call: Call, cluster: str, topic: str, name: str) -> Answer:
        self._check_cluster(cluster)
        return await self._alter(call, topic, {}, [name])

    async def alter_configs(self, call: Call, cluster: str, topic: str) -> Answer:
        self._check_cluster(cluster)
        body = call.json()
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) > len(TOPIC_CONFIGS) * 2:
            raise bad_request("the body must be {\"data\": [{\"name\", \"value\"|\"operation\"}]}")
        set_configs: dict[str, str] = {}
        delete: list[str] = []
        for entry in data:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise bad_request("each alteration needs a name")
            operation = str(entry.get("operation") or "SET").upper()
            if operation == "DELETE":
                delete.append(entry["name"])
            elif operation == "SET" and entry.get("value") is not None:
                set_configs[entry["name"]] = str(entry["value"])
            else:
                raise bad_request(f"alteration of {entry['name']}: SET with a value, "
                                  "or DELETE")
        return await self._alter(call, topic, set_configs, delete)

    # -- consumer groups ----------------------------------------------------------------

    def _visible_group(self, call: Call, group: str) -> GroupView:
        view = self._ctx.inspector.group(group)
        if view is None or not call.access.may(Operation.DESCRIBE, ResourceType.GROUP, group):
            raise ProxyError(404, 404, f"Consumer group {group} cannot be found.")
        return view

    async def groups(self, call: Call, cluster: str) -> Answer:
        path = self._check_cluster(cluster)
        data = [
            self._group_json(call.base_url, view)
            for view in self._ctx.inspector.groups()
            if call.access.may(Operation.DESCRIBE, ResourceType.GROUP, view.group_id)
        ]
        return Answer(_listing("KafkaConsumerGroupList",
                               f"{call.base_url}{path}/consumer-groups", data),
                      content_type=_JSON)

    async def group(self, call: Call, cluster: str, group: str) -> Answer:
        self._check_cluster(cluster)
        return Answer(self._group_json(call.base_url, self._visible_group(call, group)),
                      content_type=_JSON)

    def _consumer_json(self, base: str, group: str, m: MemberView) -> dict[str, Any]:
        return {
            "kind": "KafkaConsumer",
            "metadata": {"self": f"{base}/{m.member_id}",
                         "resource_name": self._crn(f"consumer-group={group}",
                                                    f"consumer={m.member_id}")},
            "cluster_id": self._ctx.cluster_id,
            "consumer_group_id": group,
            "consumer_id": m.member_id,
            "instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "assignments": {"related": f"{base}/{m.member_id}/assignments"},
        }

    async def consumers(self, call: Call, cluster: str, group: str) -> Answer:
        path = self._check_cluster(cluster)
        view = self._visible_group(call, group)
        base = f"{call.base_url}{path}/consumer-groups/{group}/consumers"
        data = [self._consumer_json(base, group, m) for m in view.members]
        return Answer(_listing("KafkaConsumerList", base, data), content_type=_JSON)

    async def consumer(self, call: Call, cluster: str, group: str, consumer: str) -> Answer:
        path = self._check_cluster(cluster)
        view = self._visible_group(call, group)
        base = f"{call.base_url}{path}/consumer-groups/{group}/consumers"
        for m in view.members:
            if m.member_id == consumer:
                return Answer(self._consumer_json(base, group, m), content_type=_JSON)
        raise ProxyError(404, 404, f"Consumer {consumer} cannot be found.")

    def _owners(self, view: GroupView) -> dict[tuple[str, int], tuple[str, str | None, str]]:
        return {
            tp: (m.member_id, m.group_instance_id, m.client_id)
            for m in view.members for tp in m.assignment
        }

    def _lags(self, call: Call, path: str, group: str) -> list[dict[str, Any]]:
        view = self._visible_group(call, group)
        owners = self._owners(view)
        base = f"{call.base_url}{path}/consumer-groups/{group}/lags"
        data = []
        for o in view.offsets:
            if not call.access.may_describe_topic(o.topic):
                continue
            owner = owners.get((o.topic, o.partition), ("", None, ""))
            data.append({
                "kind": "KafkaConsumerLag",
                "metadata": {"self": f"{base}/{o.topic}/partitions/{o.partition}",
                             "resource_name": self._crn(
                                 f"consumer-group={group}", f"lag={o.topic}",
                                 f"partition={o.partition}")},
                "cluster_id": self._ctx.cluster_id,
                "consumer_group_id": group,
                "topic_name": o.topic,
                "partition_id": o.partition,
                "current_offset": o.committed_offset,
                "log_end_offset": o.high_watermark,
                "lag": o.lag,
                "consumer_id": owner[0],
                "instance_id": owner[1],
                "client_id": owner[2],
            })
        return data

    async def lags(self, call: Call, cluster: str, group: str) -> Answer:
        path = self._check_cluster(cluster)
        base = f"{call.base_url}{path}/consumer-groups/{group}/lags"
        return Answer(_listing("KafkaConsumerLagList", base, self._lags(call, path, group)),
                      content_type=_JSON)

    async def lag(
        self, call: Call, cluster: str, group: str, topic: str, partition: str
    ) -> Answer:
        path = self._check_cluster(cluster)
        for entry in self._lags(call, path, group):
            if entry["topic_name"] == topic and str(entry["partition_id"]) == partition:
                return Answer(entry, content_type=_JSON)
        raise ProxyError(404, 404, f"No committed offset of {topic}-{partition} in group "
                                   f"{group}.")

    async def lag_summary(self, call: Call, cluster: str, group: str) -> Answer:
        path = self._check_cluster(cluster)
        view = self._visible_group(call, group)
        shown = [o for o in view.offsets
                 if o.lag is not None and call.access.may_describe_topic(o.topic)]
        top = max(shown, key=lambda o: o.lag or 0, default=None)
        url = f"{call.base_url}{path}/consumer-groups/{group}/lag-summary"
        return Answer({
            "kind": "KafkaConsumerGroupLagSummary",
            "metadata": {"self": url,
                         "resource_name": self._crn(f"consumer-group={group}", "lag-summary")},
            "cluster_id": self._ctx.cluster_id,
            "consumer_group_id": group,
            "max_lag": top.lag if top is not None else 0,
            "total_lag": sum(o.lag or 0 for o in shown),
            "max_lag_topic_name": top.topic if top is not None else None,
            "max_lag_partition_id": top.partition if top is not None else None,
        }, content_type=_JSON)

    # -- records ------------------------------------------------------------------------

    async def produce(self, call: Call, cluster: str, topic: str) -> Answer:
        self._check_cluster(cluster)
        call.access.topic(Operation.WRITE, topic)
        records = _json_stream(call.body, self._ctx.limits.max_records_per_produce)
        # The topic first (40401 for the whole stream when it is missing).
        await self._ctx.appender.topic(topic)
        answers: list[dict[str, Any]] = []
        for record in records:
            try:
                answers.append(await self._produce_one(call, topic, record))
            except ProxyError as e:
                answers.append({"error_code": e.http_status if e.error_code >= 1000
                                else e.error_code, "message": e.message})
        if len(answers) == 1:
            status = answers[0]["error_code"]
            return Answer(answers[0], status=status if isinstance(status, int) and
                          status >= 400 else 200, content_type=_JSON)
        raw = b"".join(json.dumps(a, separators=(",", ":")).encode() for a in answers)
        return Answer(raw=raw, content_type=_JSON)

    async def _produce_one(self, call: Call, topic: str, record: object) -> dict[str, Any]:
        if not isinstance(record, dict):
            raise bad_request("a record is a JSON object")
        partition = record.get("partition_id")
        if partition is not None and (isinstance(partition, bool) or not isinstance(
                partition, int)):
            raise bad_request("partition_id must be an integer")
        key, key_type = await self._data(call, topic, "key", record.get("key"))
        value, value_type = await self._data(call, topic, "value", record.get("value"))
        headers = []
        raw_headers = record.get("headers") or []
        if not isinstance(raw_headers, list) or len(raw_headers) > 1000:
            raise bad_request("headers is a list of {name, value}")
        for h in raw_headers:
            if not isinstance(h, dict) or not isinstance(h.get("name"), str):
                raise bad_request("headers is a list of {name, value}")
            headers.append((h["name"], None if h.get("value") is None else _b64(h["value"])))
        timestamp = record.get("timestamp")
        stamp_ms = None
        if isinstance(timestamp, str) and timestamp:
            stamp_ms = _parse_time(timestamp)
        placed = (await self._ctx.appender.append(
            topic, [OutRecord(key, value, partition, tuple(headers), stamp_ms)]))[0]
        if placed.error is not None:
            raise placed.error
        answer: dict[str, Any] = {
            "error_code": 200,
            "cluster_id": self._ctx.cluster_id,
            "topic_name": topic,
            "partition_id": placed.partition,
            "offset": placed.offset,
            "timestamp": _format_time(placed.timestamp_ms),
        }
        answer["key"] = None if key_type is None else {
            "type": key_type, "size": len(key) if key is not None else 0}
        answer["value"] = None if value_type is None else {
            "type": value_type, "size": len(value) if value is not None else 0}
        return answer

    async def _data(
        self, call: Call, topic: str, part: str, data: object
    ) -> tuple[bytes | None, str | None]:
        """A v3 record's key or value: its bytes and the type answered."""
        if data is None:
            return None, None
        if not isinstance(data, dict):
            raise bad_request(f"{part} must be an object with type and data")
        kind = str(data.get("type") or "").upper()
        value = data.get("data")
        if kind == "BINARY":
            if value is None:
                return None, kind
            return _b64(value), kind
        if kind == "STRING":
            if value is None:
                return None, kind
            if not isinstance(value, str):
                raise bad_request(f"{part} of type STRING needs a string")
            return value.encode("utf-8"), kind
        if kind == "JSON":
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), kind
        if kind in _SCHEMA_TYPES or "schema_id" in data or "schema" in data:
            return await self._schema_data(call, topic, part, kind, data)
        raise bad_request(f"{part} type {kind or 'missing'}: BINARY, JSON, STRING, AVRO, "
                          "PROTOBUF or JSONSCHEMA")

    async def _schema_data(
        self, call: Call, topic: str, part: str, kind: str, data: Mapping[str, Any]
    ) -> tuple[bytes | None, str]:
        registry = self._ctx.registry
        if registry is None:
            raise ProxyError(400, 400, "schema types need the Schema Registry "
                                       "(--schema-registry)")
        subject = str(data.get("subject") or f"{topic}-{part}")
        schema_id = data.get("schema_id")
        if schema_id is None and isinstance(data.get("schema"), str):
            # The registry's own rule for registering: WRITE on the subject's topic.
            call.access.topic(Operation.WRITE, subject_topic(subject))
            schema_type = _SCHEMA_TYPES.get(kind)
            if schema_type is None:
                raise bad_request(f"{part}: a schema needs type AVRO, PROTOBUF or JSONSCHEMA")
            try:
                registered = await registry.register(subject,
                                                     Schema(schema_type, data["schema"]))
            except RegistryError as e:
                raise ProxyError(e.http_status, e.error_code, e.message) from None
            schema_id = registered.schema_id
        elif schema_id is None:
            call.access.topic(Operation.READ, subject_topic(subject))
            latest = registry.latest(subject)
            if latest is None:
                raise ProxyError(400, 40403, f"no schema for subject {subject}")
            schema_id = latest.schema_id
        if isinstance(schema_id, bool) or not isinstance(schema_id, int):
            raise bad_request(f"{part}.schema_id must be an integer")
        parsed = registry.parsed_by_id(schema_id)
        if parsed is None:
            raise ProxyError(400, 40403, f"Schema {schema_id} not found")
        encoded = encode_with(schema_id, parsed, data.get("data"))
        name = {SchemaType.AVRO: "AVRO", SchemaType.PROTOBUF: "PROTOBUF",
                SchemaType.JSON: "JSONSCHEMA"}[parsed.schema_type]
        return encoded, name


def _b64(value: object) -> bytes:
    return decode_base64(value, 400, "BINARY data is a base64 string")


def _json_stream(body: bytes, most: int) -> list[object]:
    """One JSON record or several one after the other (whitespace between)."""
    text = body.decode("utf-8", "replace")
    if not text.strip():
        raise bad_request("the body holds no record")
    if too_deep(body):
        raise bad_request("a record is nested too deeply")
    decoder = json.JSONDecoder()
    records: list[object] = []
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return records
        if len(records) >= most:
            raise bad_request(f"more than {most} records in one request")
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError as e:
            raise ProxyError(400, 400, f"a record is not JSON: {e}") from None
        records.append(value)


def _format_time(ms: int) -> str:
    import datetime

    if ms < 0:
        ms = 0
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _parse_time(text: str) -> int:
    import datetime

    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise bad_request(f"timestamp {text!r} is not ISO 8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)
