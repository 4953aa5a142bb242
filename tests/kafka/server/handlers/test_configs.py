"""The config API handlers (brokerd/kafka/server/handlers/configs.py) through the Kafka
protocol with the fake core of test_kafka_protocol: StringTransport, no sockets."""

from __future__ import annotations

from typing import Any

import attrs

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.kafka.listener.test_protocol import KafkaTestCase

TOPIC, BROKER = 2, 4


class DescribeConfigsTests(KafkaTestCase):
    def describe(self, version: int, *resources: tuple[int, str, tuple[str, ...] | None],
                 synonyms: bool = True, docs: bool = False) -> Any:
        self.send(ApiKey.DESCRIBE_CONFIGS, version, apis.DescribeConfigsRequest(
            resources=tuple(
                apis.DescribeConfigsResource(
                    resource_type=t, resource_name=n, configuration_keys=k)
                for t, n, k in resources
            ),
            include_synonyms=synonyms, include_documentation=docs,
        ))
        return self.one().results

    def test_topic_override_and_defaults(self) -> None:
        self.core.add_topic("t")
        topics = self.core._topics
        topics["t"] = attrs.evolve(topics["t"], configs={"retention.ms": "5000"})
        (result,) = self.describe(1, (TOPIC, "t", ("retention.ms", "segment.ms", "unknown")))
        self.assertEqual(result.error_code, 0)
        by_name = {c.name: c for c in result.configs}
        self.assertEqual(sorted(by_name), ["retention.ms", "segment.ms"])
        retention = by_name["retention.ms"]
        self.assertEqual((retention.value, retention.config_source, retention.read_only),
                         ("5000", 1, False))
        self.assertEqual([(s.name, s.value, s.source) for s in retention.synonyms],
                         [("retention.ms", "5000", 1), ("log.retention.ms", "-1", 4),
                          ("log.retention.ms", "604800000", 5)])
        # The fake core's broker rolls by time at Kafka's default: DEFAULT_CONFIG.
        segment_ms = by_name["segment.ms"]
        self.assertEqual((segment_ms.value, segment_ms.config_source), ("604800000", 5))

    def test_v1_default_source_and_v3_v4_types_and_docs(self) -> None:
        self.core.add_topic("t")
        (result,) = self.describe(1, (TOPIC, "t", ("segment.bytes",)), synonyms=False)
        (entry,) = result.configs
        self.assertEqual((entry.config_source, entry.synonyms), (5, ()))  # DEFAULT_CONFIG
        for version in (3, 4):
            (result,) = self.describe(version, (TOPIC, "t", ("cleanup.policy",)), docs=True)
            (entry,) = result.configs
            self.assertEqual(entry.config_type, 7)  # LIST
            self.assertIn("compact", entry.documentation)

    def test_errors_per_resource(self) -> None:
        results = self.describe(
            2, (TOPIC, "missing", None), (TOPIC, "bad name", None), (BROKER, "7", None),
            (8, "logger", None), (BROKER, "", None), (BROKER, "0", ("broker.id",)),
        )
        self.assertEqual([r.error_code for r in results], [
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION,
            ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, 0, 0,
        ])
        self.assertEqual(results[0].error_message, "The topic 'missing' does not exist.")
        self.assertEqual(results[4].configs, ())
        (broker_id,) = results[5].configs
        self.assertEqual((broker_id.value, broker_id.read_only), ("0", True))


class AlterConfigsTests(KafkaTestCase):
    def alter(self, *resources: apis.AlterConfigsResource, validate_only: bool = False) -> Any:
        self.send(ApiKey.ALTER_CONFIGS, 1, apis.AlterConfigsRequest(
            resources=resources, validate_only=validate_only))
        return [(r.resource_name, r.error_code, r.error_message) for r in self.one().responses]

    def incremental(self, name: str, *ops: tuple[str, int, str | None]) -> Any:
        self.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, apis.IncrementalAlterConfigsRequest(
            resources=(apis.IncrementalAlterConfigsResource(
                resource_type=TOPIC, resource_name=name, configs=tuple(
                    apis.IncrementalAlterableConfig(name=n, config_operation=o, value=v)
                    for n, o, v in ops)),),
        ))
        (r,) = self.one().responses
        return r.error_code, r.error_message

    @staticmethod
    def res(kind: int, name: str, **configs: str | None) -> apis.AlterConfigsResource:
        return apis.AlterConfigsResource(resource_type=kind, resource_name=name, configs=tuple(
            apis.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()))

    def test_alter_replaces_the_set(self) -> None:
        self.core.add_topic("t")
        got = self.alter(self.res(TOPIC, "t", retention_ms="100", segment_bytes="2048"))
        self.assertEqual(got, [("t", 0, None)])
        self.alter(self.res(TOPIC, "t", retention_ms="200"))
        self.assertEqual(dict(self.core.topics()["t"].configs), {"retention.ms": "200"})
        self.alter(self.res(TOPIC, "t", retention_ms="300"), validate_only=True)
        self.assertEqual(dict(self.core.topics()["t"].configs), {"retention.ms": "200"})

    def test_alter_errors(self) -> None:
        self.core.add_topic("t")
        got = self.alter(
            self.res(TOPIC, "t", retention_ms="soon"),
            self.res(TOPIC, "gone", retention_ms="1"),
            self.res(BROKER, "0", log_retention_ms="1"),
            self.res(BROKER, "0"),
        )
        self.assertEqual([g[1] for g in got], [
            ErrorCode.INVALID_CONFIG, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,  # broker named twice
        ])
        self.assertIn("retention.ms", got[0][2])
        got = self.alter(self.res(BROKER, "0", log_retention_ms="1"))
        self.assertEqual(got[0][1], ErrorCode.INVALID_CONFIG)
        self.assertIn("log.retention.ms", got[0][2])

    def test_incremental(self) -> None:
        self.core.add_topic("t")
        self.assertEqual(self.incremental("t", ("cleanup.policy", 2, "compact")), (0, None))
        self.assertEqual(self.incremental("t", ("cleanup.policy", 3, "delete"),
                                          ("retention.ms", 0, "5")), (0, None))
        self.assertEqual(dict(self.core.topics()["t"].configs),
                         {"cleanup.policy": "compact", "retention.ms": "5"})
        self.assertEqual(self.incremental("t", ("retention.ms", 1, None)), (0, None))
        self.assertEqual(dict(self.core.topics()["t"].configs), {"cleanup.policy": "compact"})
        code, text = self.incremental("t", ("segment.bytes", 2, "1"))
        self.assertEqual(code, ErrorCode.INVALID_CONFIG)
        self.assertIn("segment.bytes", text)
        self.assertEqual(self.incremental("t", ("retention.ms", 9, "1"))[0],
                         ErrorCode.INVALID_REQUEST)
        self.assertEqual(self.incremental("t", ("retention.ms", 0, "1"),
                                          ("retention.ms", 1, None))[0],
                         ErrorCode.INVALID_REQUEST)


class CreateTopicsWithConfigsTests(KafkaTestCase):
    def test_configs_are_kept_and_validated(self) -> None:
        self.send(ApiKey.CREATE_TOPICS, 4, apis.CreateTopicsRequest(topics=(
            apis.CreatableTopic(name="ok", num_partitions=1, replication_factor=1, configs=(
                apis.CreatableTopicConfig(name="cleanup.policy", value="compact"),)),
            apis.CreatableTopic(name="null", num_partitions=1, replication_factor=1, configs=(
                apis.CreatableTopicConfig(name="retention.ms", value=None),)),
        )))
        got = [(r.name, r.error_code, r.error_message) for r in self.one().topics]
        self.assertEqual(got, [
            ("ok", 0, None),
            ("null", ErrorCode.INVALID_CONFIG,
             "Null value not supported for topic configs: retention.ms"),
        ])
        self.assertEqual(dict(self.core.topics()["ok"].configs), {"cleanup.policy": "compact"})
