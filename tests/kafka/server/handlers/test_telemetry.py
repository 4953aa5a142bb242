"""The telemetry handlers (brokerd/kafka/server/handlers/telemetry.py) and the
client-metrics config resource through the Kafka protocol: StringTransport, a fake
clock, the fake core of test_protocol."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS, ClientServices
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.telemetry.clients import ClientTelemetry
from brokerd.kafka.telemetry.resources import ClientMetricsResources
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.api_versions import ApiVersionsRequest
from brokerd.kafka.wire.messages.telemetry import (
    GetTelemetrySubscriptionsRequest,
    ListConfigResourcesRequest,
    PushTelemetryRequest,
)
from brokerd.kafka.wire.requests import apis
from brokerd.security.acl import Operation, ResourceType

from tests.kafka.listener.test_protocol import KafkaTestCase
from tests.kafka.server.handlers.test_acl import AclTestCase
from tests.kafka.telemetry import otlp_encode as enc

CLIENT_METRICS, TOPIC, BROKER, GROUP = 16, 2, 4, 32
ZERO = uuid.UUID(int=0)


class TelemetryHandlerTests(KafkaTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.clock.advance(1_000_000)
        self.telemetry = ClientTelemetry(ClientMetricsResources(), clock=self.clock,
                                         max_bytes=1000)
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=1 << 16),
            clients=ClientServices(telemetry=self.telemetry),
        )
        self.proto, self.tr = self.connect()

    def alter(self, name: str, *configs: tuple[str, int, str | None],
              validate_only: bool = False) -> Any:
        self.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, apis.IncrementalAlterConfigsRequest(
            resources=(apis.IncrementalAlterConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name,
                configs=tuple(apis.IncrementalAlterableConfig(
                    name=n, config_operation=op, value=v) for n, op, v in configs),
            ),),
            validate_only=validate_only,
        ))
        (result,) = self.one().responses
        return result

    def get(self, instance: uuid.UUID = ZERO) -> Any:
        self.send(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0,
                  GetTelemetrySubscriptionsRequest(client_instance_id=instance))
        return self.one()

    def push(self, got: Any, data: bytes, **kw: Any) -> Any:
        self.send(ApiKey.PUSH_TELEMETRY, 0, PushTelemetryRequest(
            client_instance_id=got.client_instance_id,
            subscription_id=kw.pop("subscription_id", got.subscription_id),
            metrics=data, **kw))
        return self.one()

    def test_subscription_matched_on_the_connections_software_and_pushed(self) -> None:
        self.assertEqual(self.alter(
            "java", ("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "1000"),
            ("match", 0, "client_software_name=apache-kafka-java,client_source_address=10\\..*"),
        ).error_code, 0)
        self.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="apache-kafka-java", client_software_version="4.4.0"))
        self.one()
        got = self.get()
        self.assertEqual(got.error_code, 0)
        self.assertEqual(got.requested_metrics, ("org.apache.kafka.producer.",))
        self.assertEqual((got.push_interval_ms, got.telemetry_max_bytes), (1000, 1000))
        self.assertEqual(got.accepted_compression_types, (4, 3, 1, 2))
        self.assertTrue(got.delta_temporality)
        data = enc.metrics_data(enc.gauge("org.apache.kafka.producer.x", enc.number_point(4)))
        self.assertEqual(self.push(got, data).error_code, 0)
        (client,) = self.telemetry.clients()
        self.assertEqual((client.client_id, client.software, client.address),
                         ("test-client", "apache-kafka-java 4.4.0", "10.1.2.3:5555"))
        self.assertEqual([(s.name, s.value) for s in client.series],
                         [("org.apache.kafka.producer.x", 4.0)])
        # Too early, too large, unknown subscription: each its code.
        self.assertEqual(self.push(got, b"").error_code, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        self.clock.advance(1)
        self.assertEqual(self.push(got, b"x" * 1001).error_code, ErrorCode.TELEMETRY_TOO_LARGE)
        self.clock.advance(1)
        self.assertEqual(self.push(got, b"", subscription_id=got.subscription_id + 1)
                         .error_code, ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        self.assertEqual(self.get(got.client_instance_id).subscription_id,
                         got.subscription_id)

    def test_the_broker_describes_telemetry_max_bytes(self) -> None:
        self.send(ApiKey.DESCRIBE_CONFIGS, 4, apis.DescribeConfigsRequest(resources=(
            apis.DescribeConfigsResource(resource_type=BROKER, resource_name="0",
                                         configuration_keys=("telemetry.max.bytes",)),
        )))
        (entry,) = self.one().results[0].configs
        self.assertEqual((entry.value, entry.read_only, entry.config_source), ("1000", True, 4))

    def test_another_software_is_not_matched(self) -> None:
        self.alter("java", ("metrics", 0, "*"), ("match", 0, "client_software_name=java"))
        got = self.get()
        self.assertEqual((got.requested_metrics, got.push_interval_ms), ((), 300_000))
        self.assertEqual(self.get(got.client_instance_id).error_code,
                         ErrorCode.THROTTLING_QUOTA_EXCEEDED)

    def test_describe_alter_and_list_client_metrics(self) -> None:
        self.assertEqual(self.alter("r", ("interval.ms", 0, "5")).error_code,
                         ErrorCode.INVALID_CONFIG)
        self.assertEqual(self.alter("", ("interval.ms", 0, "500")).error_code,
                         ErrorCode.INVALID_REQUEST)
        self.assertEqual(self.alter("dry", ("metrics", 0, "a."), validate_only=True)
                         .error_code, 0)
        self.assertEqual(self.alter("r", ("metrics", 0, "a."), ("metrics", 2, "b.")).error_code,
                         ErrorCode.INVALID_REQUEST)  # duplicate keys
        self.assertEqual(self.alter("r", ("metrics", 0, "a.")).error_code, 0)
        self.assertEqual(self.alter("r", ("metrics", 2, "b.")).error_code, 0)
        self.send(ApiKey.DESCRIBE_CONFIGS, 4, apis.DescribeConfigsRequest(resources=(
            apis.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name="r"),
            apis.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name="none"),
        )))
        found, missing = self.one().results
        self.assertEqual([(c.name, c.value, c.config_source, c.config_type)
                          for c in found.configs], [("metrics", "a.,b.", 7, 7)])
        self.assertEqual((missing.error_code, missing.configs), (0, ()))
        self.core.add_topic("t")
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest())
        self.assertEqual([(r.resource_name, r.resource_type)
                          for r in self.one().config_resources], [("r", 16)])
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest())
        listed = [(r.resource_name, r.resource_type) for r in self.one().config_resources]
        self.assertEqual(listed, [("t", TOPIC), ("0", BROKER), ("r", CLIENT_METRICS)])
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 1,
                  ListConfigResourcesRequest(resource_types=(BROKER,)))
        self.assertEqual([r.resource_name for r in self.one().config_resources], ["0"])
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 1,
                  ListConfigResourcesRequest(resource_types=(8,)))
        self.assertEqual(self.one().error_code, ErrorCode.INVALID_REQUEST)
        # Deleting the last config deletes the resource.
        self.assertEqual(self.alter("r", ("metrics", 1, None)).error_code, 0)
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest())
        self.assertEqual(self.one().config_resources, ())


class TelemetryAclTests(AclTestCase):
    """With ``--authorizer acl``: the telemetry APIs need nothing (a client pushes its
    own metrics); ListConfigResources and the client-metrics configs need the cluster."""

    def test_telemetry_unchecked_listing_and_configs_need_the_cluster(self) -> None:
        self.send(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest())
        self.assertEqual(self.one().error_code, 0)
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest())
        self.assertEqual(self.one().error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.send(ApiKey.DESCRIBE_CONFIGS, 4, apis.DescribeConfigsRequest(resources=(
            apis.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name="r"),)))
        self.assertEqual(self.one().results[0].error_code,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.grant(ResourceType.CLUSTER, "kafka-cluster", Operation.DESCRIBE_CONFIGS)
        self.send(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest())
        self.assertEqual(self.one().error_code, 0)
