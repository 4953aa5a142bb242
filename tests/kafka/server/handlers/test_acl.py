"""The ACL APIs and per-API authorization on the Kafka listener, over StringTransport."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import attrs
from twisted.internet import defer

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS, ListenerSecurity
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.handlers.acl import AclHandlers
from brokerd.kafka.server.handlers.sasl import SASL_API_KEYS
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import acl as acl_apis
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.registry import SPECS
from brokerd.net.connection import ConnectionState
from brokerd.security.acl import (
    AclAuthorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
)
from brokerd.security.acl_store import AclStore

from tests.kafka.listener.test_protocol import KafkaTestCase, batch

OP = Operation
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@attrs.define
class PrincipalState(ConnectionState):
    """A connection state with the principal TLS/SASL set."""

    principal: str = "User:ANONYMOUS"


def creation(
    rtype: int, name: str, op: int, perm: int = 3, *, principal: str = "User:alice",
    pattern: int = 3, host: str = "*",
) -> acl_apis.AclCreation:
    return acl_apis.AclCreation(
        resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
        principal=principal, host=host, operation=op, permission_type=perm,
    )


class AclTestCase(KafkaTestCase):
    """A listener with ``--authorizer acl`` and super user User:root; the test connection
    is User:alice from 10.1.2.3."""

    def setUp(self) -> None:
        super().setUp()
        data_dir = tempfile.mkdtemp(prefix="brokerd-acl-")
        self.addCleanup(shutil.rmtree, data_dir, True)
        self.store = AclStore.in_directory(data_dir)
        self.authorizer = AclAuthorizer([], ["User:root"])
        self.store_fails = False
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=1 << 20),
            security=ListenerSecurity(
                authorizer=self.authorizer,
                acls=AclHandlers(self.authorizer, self.store, run_blocking=self._store_run),
            ),
        )
        self.proto, self.tr = self.connect()
        self.become("User:alice")

    def _store_run(self, f: Any, *args: Any) -> defer.Deferred[Any]:
        if self.store_fails:
            return defer.fail(OSError(28, "No space left on device"))
        return defer.maybeDeferred(f, *args)

    def become(self, principal: str) -> None:
        self.proto.dispatcher.context.state = PrincipalState(
            peer_host="10.1.2.3", principal=principal)

    def grant(self, rtype: ResourceType, name: str, op: Operation, *,
              perm: Permission = Permission.ALLOW, pattern: PatternType = PatternType.LITERAL,
              principal: str = "User:alice") -> None:
        self.authorizer.replace(self.authorizer.acls | {
            make_binding(rtype, name, pattern, principal, "*", op, perm)
        })


class AclApiTests(AclTestCase):
    def test_v3_user_resource_type_matches_nothing_and_is_not_stored(self) -> None:
        self.become("User:root")
        self.send(ApiKey.CREATE_ACLS, 3, acl_apis.CreateAclsRequest(creations=(
            creation(2, "orders", 3), creation(7, "alice", 3),
        )))
        results = self.one().results
        self.assertEqual([r.error_code for r in results], [0, ErrorCode.INVALID_REQUEST])
        self.assertIn("USER", results[1].error_message)
        self.assertEqual(len(self.authorizer.acls), 1)
        self.send(ApiKey.DESCRIBE_ACLS, 3, acl_apis.DescribeAclsRequest(
            resource_type_filter=7, pattern_type_filter=1, operation=1, permission_type=1,
        ))
        described = self.one()
        self.assertEqual((described.error_code, described.resources), (0, ()))
        self.send(ApiKey.DELETE_ACLS, 3, acl_apis.DeleteAclsRequest(filters=(
            acl_apis.DeleteAclsFilter(resource_type_filter=7, pattern_type_filter=1,
                                      operation=1, permission_type=1),
            # The other fields are still checked: UNKNOWN (0) operation.
            acl_apis.DeleteAclsFilter(resource_type_filter=7, pattern_type_filter=1,
                                      operation=0, permission_type=1),
        )))
        results = self.one().filter_results
        self.assertEqual((results[0].error_code, results[0].matching_acls), (0, ()))
        self.assertEqual(results[1].error_code, ErrorCode.INVALID_REQUEST)
        self.assertEqual(len(self.authorizer.acls), 1)

    def test_create_describe_delete_round_trip(self) -> None:
        for version in (1, 2, 3):
            self.become("User:root")
            self.send(ApiKey.CREATE_ACLS, version, acl_apis.CreateAclsRequest(creations=(
                creation(2, "orders", 3),
                creation(2, "app-", 4, pattern=4, principal="User:bob"),
                creation(3, "g", 3, 2),
            )))
            self.assertEqual([r.error_code for r in self.one().results], [0, 0, 0])
            stored = json.loads(Path(self.store.path).read_text())["acls"]
            self.assertEqual(len(stored), 3)
            self.assertEqual(len(self.store.load()), 3)

            self.send(ApiKey.DESCRIBE_ACLS, version, acl_apis.DescribeAclsRequest(
                resource_type_filter=2, pattern_type_filter=1, operation=1, permission_type=1,
            ))
            described = self.one()
            self.assertEqual(described.error_code, 0)
            self.assertEqual(
                [(r.resource_name, r.pattern_type, [(a.principal, a.operation) for a in r.acls])
                 for r in described.resources],
                [("app-", 4, [("User:bob", 4)]), ("orders", 3, [("User:alice", 3)])],
            )
            # MATCH: which ACLs apply to topic app-1.
            self.send(ApiKey.DESCRIBE_ACLS, version, acl_apis.DescribeAclsRequest(
                resource_type_filter=2, resource_name_filter="app-1", pattern_type_filter=2,
                operation=1, permission_type=1,
            ))
            self.assertEqual([r.resource_name for r in self.one().resources], ["app-"])

            self.send(ApiKey.DELETE_ACLS, version, acl_apis.DeleteAclsRequest(filters=(
                acl_apis.DeleteAclsFilter(
                    resource_type_filter=1, pattern_type_filter=1, principal_filter="User:alice",
                    operation=1, permission_type=1,
                ),
                acl_apis.DeleteAclsFilter(
                    resource_type_filter=2, resource_name_filter="nothing",
                    pattern_type_filter=3, operation=1, permission_type=1,
                ),
            )))
            results = self.one().filter_results
            self.assertEqual([r.error_code for r in results], [0, 0])
            self.assertEqual(
                sorted((m.resource_name, m.operation) for m in results[0].matching_acls),
                [("g", 3), ("orders", 3)],
            )
            self.assertEqual(results[1].matching_acls, ())
            self.assertEqual([b.principal for b in self.store.load()], ["User:bob"])
            self.assertEqual([b.principal for b in self.authorizer.acls], ["User:bob"])
            self.authorizer.replace([])

    def test_invalid_creations_refused_others_kept(self) -> None:
        self.become("User:root")
        self.send(ApiKey.CREATE_ACLS, 1, acl_apis.CreateAclsRequest(creations=(
            creation(2, "t", 3, principal="alice"),
            creation(1, "t", 3),
            creation(2, "t", 3),
            creation(2, "t", 3, pattern=2),
        )))
        codes = [r.error_code for r in self.one().results]
        self.assertEqual(codes, [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, 0,
                                 ErrorCode.INVALID_REQUEST])
        self.assertEqual(len(self.authorizer.acls), 1)

    def test_invalid_filter(self) -> None:
        self.become("User:root")
        self.send(ApiKey.DESCRIBE_ACLS, 1, acl_apis.DescribeAclsRequest(
            resource_type_filter=0, pattern_type_filter=1, operation=1, permission_type=1,
        ))
        self.assertEqual(self.one().error_code, ErrorCode.INVALID_REQUEST)

    def test_failed_write_changes_nothing(self) -> None:
        self.become("User:root")
        self.store_fails = True
        self.send(ApiKey.CREATE_ACLS, 1, acl_apis.CreateAclsRequest(creations=(
            creation(2, "t", 3),)))
        self.assertEqual(self.one().results[0].error_code, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.assertEqual(self.authorizer.acls, frozenset())
        self.assertFalse(os.path.exists(self.store.path))
        self.flushLoggedErrors(OSError)

    def test_managing_acls_needs_cluster_rights(self) -> None:
        self.send(ApiKey.CREATE_ACLS, 1, acl_apis.CreateAclsRequest(creations=(
            creation(2, "t", 2, principal="User:alice"),)))
        self.assertEqual(self.one().results[0].error_code,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.assertEqual(self.authorizer.acls, frozenset())
        self.send(ApiKey.DESCRIBE_ACLS, 1, acl_apis.DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1))
        self.assertEqual(self.one().error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.send(ApiKey.DELETE_ACLS, 1, acl_apis.DeleteAclsRequest(filters=(
            acl_apis.DeleteAclsFilter(resource_type_filter=1, pattern_type_filter=1,
                                      operation=1, permission_type=1),)))
        self.assertEqual(self.one().filter_results[0].error_code,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        # DESCRIBE on the cluster is enough to list, ALTER to change.
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.DESCRIBE)
        self.send(ApiKey.DESCRIBE_ACLS, 1, acl_apis.DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1))
        self.assertEqual(len(self.one().resources), 1)
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.ALTER)
        self.send(ApiKey.CREATE_ACLS, 1, acl_apis.CreateAclsRequest(creations=(
            creation(2, "t", 3),)))
        self.assertEqual(self.one().results[0].error_code, 0)

    def test_every_dispatched_api_has_a_rule(self) -> None:
        routes = self.factory.handlers.routes
        unchecked = {key for key, route in routes.items() if route.rule is None}
        # Only ApiVersions: a client asks it before anything else.
        self.assertEqual(unchecked, {ApiKey.API_VERSIONS})

    def test_every_route_is_typed_by_the_registered_spec_of_its_api(self) -> None:
        # A route names its API by the message module's spec (mypy checks its handler
        # and rule against that spec's classes): the spec must be the registry's own.
        for key, route in self.factory.handlers.routes.items():
            self.assertIs(route.spec, SPECS[key], key.name)

    def test_every_registered_api_is_routed_or_answered_by_the_protocol(self) -> None:
        routed = set(self.factory.handlers.routes)
        self.assertEqual(routed | set(SASL_API_KEYS), set(SPECS))
        self.assertEqual(routed & set(SASL_API_KEYS), set())


class DisabledTests(KafkaTestCase):
    def test_acl_apis_answer_security_disabled(self) -> None:
        self.send(ApiKey.CREATE_ACLS, 1, acl_apis.CreateAclsRequest(creations=(
            creation(2, "t", 3),)))
        self.assertEqual(self.one().results[0].error_code, ErrorCode.SECURITY_DISABLED)
        self.send(ApiKey.DESCRIBE_ACLS, 2, acl_apis.DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1))
        self.assertEqual(self.one().error_code, ErrorCode.SECURITY_DISABLED)

    def test_no_authorizer_allows_everything(self) -> None:
        self.core.add_topic("t")
        self.produce("t", 0, batch())
        self.assertEqual(self.one().responses[0].partition_responses[0].error_code, 0)


class DataPathTests(AclTestCase):
    def test_produce_allowed_and_denied(self) -> None:
        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.grant(ResourceType.TOPIC, "ok", OP.WRITE)
        self.send(ApiKey.PRODUCE, 8, apis.ProduceRequest(acks=1, timeout_ms=1000, topic_data=(
            apis.ProduceTopicData(name="ok", partition_data=(
                apis.ProducePartitionData(index=0, records=batch()),)),
            apis.ProduceTopicData(name="secret", partition_data=(
                apis.ProducePartitionData(index=0, records=batch()),)),
            apis.ProduceTopicData(name="missing", partition_data=(
                apis.ProducePartitionData(index=0, records=batch()),)),
        )))
        codes = {t.name: t.partition_responses[0].error_code for t in self.one().responses}
        self.assertEqual(codes, {"ok": 0, "secret": TAF, "missing": TAF})
        self.assertEqual([c[0] for c in self.core.produce_calls], ["ok"])
        self.assertNotIn("missing", self.core.topics())

    def test_produce_v13_checks_write_on_the_topic_the_id_names(self) -> None:
        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.grant(ResourceType.TOPIC, "ok", OP.WRITE)
        ids = {name: info.topic_id for name, info in self.core.topics().items()}
        unknown = uuid.uuid4()
        self.send(ApiKey.PRODUCE, 13, apis.ProduceRequest(acks=1, timeout_ms=1000, topic_data=tuple(
            apis.ProduceTopicData(topic_id=topic_id, partition_data=(
                apis.ProducePartitionData(index=0, records=batch()),))
            for topic_id in (ids["ok"], ids["secret"], unknown)
        )))
        codes = {t.topic_id: t.partition_responses[0].error_code for t in self.one().responses}
        # An ID no topic has: UNKNOWN_TOPIC_ID whatever the ACLs (there is no name).
        self.assertEqual(
            codes, {ids["ok"]: 0, ids["secret"]: TAF, unknown: ErrorCode.UNKNOWN_TOPIC_ID}
        )
        self.assertEqual([c[0] for c in self.core.produce_calls], ["ok"])

    def test_produce_to_unknown_topic_needs_create(self) -> None:
        self.grant(ResourceType.TOPIC, "new", OP.WRITE)
        self.produce("new", 0, batch())
        self.assertEqual(self.one().responses[0].partition_responses[0].error_code, TAF)
        self.assertEqual(self.core.produce_calls, [])
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.CREATE)
        self.produce("new", 0, batch())
        self.one()  # the fake core does not auto-create on produce: the real one does
        self.assertEqual([c[0] for c in self.core.produce_calls], ["new"])

    def test_denied_acks0_produce_closes(self) -> None:
        self.core.add_topic("secret")
        self.produce("secret", 0, batch(), acks=0)
        self.assertTrue(self.tr.disconnecting)
        self.assertEqual(self.core.produce_calls, [])

    def test_transactional_produce_needs_the_transactional_id(self) -> None:
        self.core.add_topic("ok")
        self.grant(ResourceType.TOPIC, "ok", OP.WRITE)
        self.produce("ok", 0, batch(), transactional_id="tx")
        self.assertEqual(self.one().responses[0].partition_responses[0].error_code,
                         ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        self.assertEqual(self.core.produce_calls, [])

    def test_fetch_denied_partition(self) -> None:
        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.grant(ResourceType.TOPIC, "ok", OP.READ)
        self.send(ApiKey.FETCH, 11, self.fetch_request(
            [("ok", 0, 0, 1000), ("secret", 0, 0, 1000)]))
        codes = {t.topic: t.partitions[0].error_code for t in self.one().responses}
        self.assertEqual(codes, {"ok": 0, "secret": TAF})
        self.assertEqual([c[0] for c in self.core.fetch_calls], ["ok"])

    def test_list_offsets_needs_describe(self) -> None:
        self.core.add_topic("secret")
        self.send(ApiKey.LIST_OFFSETS, 5, apis.ListOffsetsRequest(topics=(
            apis.ListOffsetsTopic(name="secret", partitions=(
                apis.ListOffsetsPartition(partition_index=0, timestamp=-1),)),)))
        self.assertEqual(self.one().topics[0].partitions[0].error_code, TAF)

    def test_metadata_hides_and_does_not_reveal(self) -> None:
        for name in ("visible", "hidden", "written"):
            self.core.add_topic(name)
        self.grant(ResourceType.TOPIC, "visible", OP.DESCRIBE)
        self.grant(ResourceType.TOPIC, "written", OP.WRITE)
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))
        self.assertEqual(sorted(t.name for t in self.one().topics), ["visible", "written"])
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=(
            apis.MetadataRequestTopic(name="hidden"),
            apis.MetadataRequestTopic(name="no-such-topic"),
            apis.MetadataRequestTopic(name="visible"),
        )))
        codes = {t.name: t.error_code for t in self.one().topics}
        self.assertEqual(codes, {"hidden": TAF, "no-such-topic": TAF, "visible": 0})
        self.assertNotIn("no-such-topic", self.core.topics())

    def test_metadata_auto_create_needs_create(self) -> None:
        self.grant(ResourceType.TOPIC, "new-", OP.DESCRIBE, pattern=PatternType.PREFIXED)
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=(
            apis.MetadataRequestTopic(name="new-1"),)))
        self.assertEqual(self.one().topics[0].error_code, TAF)
        self.assertNotIn("new-1", self.core.topics())
        self.grant(ResourceType.TOPIC, "new-", OP.CREATE, pattern=PatternType.PREFIXED)
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=(
            apis.MetadataRequestTopic(name="new-1"),)))
        self.assertEqual(self.one().topics[0].error_code, 0)
        self.assertIn("new-1", self.core.topics())

    def test_super_user_sees_everything(self) -> None:
        self.core.add_topic("hidden")
        self.become("User:root")
        self.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))
        self.assertEqual([t.name for t in self.one().topics], ["hidden"])


class AdminAndGroupTests(AclTestCase):
    def test_create_and_delete_topics(self) -> None:
        self.grant(ResourceType.TOPIC, "mine-", OP.CREATE, pattern=PatternType.PREFIXED)
        self.send(ApiKey.CREATE_TOPICS, 4, apis.CreateTopicsRequest(topics=(
            apis.CreatableTopic(name="mine-1", num_partitions=1),
            apis.CreatableTopic(name="other", num_partitions=1),
        )))
        codes = {t.name: t.error_code for t in self.one().topics}
        self.assertEqual(codes, {"mine-1": 0, "other": TAF})
        self.send(ApiKey.DELETE_TOPICS, 3, apis.DeleteTopicsRequest(topic_names=("mine-1",)))
        self.assertEqual(self.one().responses[0].error_code, TAF)
        self.grant(ResourceType.TOPIC, "mine-1", OP.DELETE)
        self.send(ApiKey.DELETE_TOPICS, 3, apis.DeleteTopicsRequest(topic_names=("mine-1",)))
        self.assertEqual(self.one().responses[0].error_code, 0)

    def test_describe_configs(self) -> None:
        self.core.add_topic("t")
        self.grant(ResourceType.TOPIC, "t", OP.ALTER_CONFIGS)
        self.send(ApiKey.DESCRIBE_CONFIGS, 1, apis.DescribeConfigsRequest(resources=(
            apis.DescribeConfigsResource(resource_type=2, resource_name="t"),
            apis.DescribeConfigsResource(resource_type=4, resource_name="0"),
        )))
        codes = {r.resource_type: r.error_code for r in self.one().results}
        self.assertEqual(codes, {2: 0, 4: ErrorCode.CLUSTER_AUTHORIZATION_FAILED})

    def test_client_quotas_need_describe_and_alter_configs_on_the_cluster(self) -> None:
        from brokerd.kafka.wire.messages import quotas as q

        entity = (q.QuotaEntityPart(entity_type="user", entity_name="bob"),)
        alter = q.AlterClientQuotasRequest(entries=(q.QuotaAlteration(
            entity=entity, ops=(q.QuotaOp(key="producer_byte_rate", value=1024.0),)),))
        self.send(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter)
        denied = self.one().entries[0]
        self.assertEqual((denied.error_code, denied.entity),
                         (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, entity))
        self.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, q.DescribeClientQuotasRequest())
        answer = self.one()
        self.assertEqual((answer.error_code, answer.entries),
                         (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.ALTER_CONFIGS)
        self.send(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter)
        self.assertEqual(self.one().entries[0].error_code, 0)
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.DESCRIBE_CONFIGS)
        self.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, q.DescribeClientQuotasRequest())
        (entry,) = self.one().entries
        self.assertEqual((entry.entity, entry.values[0].value), (entity, 1024.0))

    def test_describe_log_dirs_denied_says_why_from_v3(self) -> None:
        for version in (1, 2, 3, 4):
            self.send(ApiKey.DESCRIBE_LOG_DIRS, version,
                      apis.DescribeLogDirsRequest(topics=None))
            resp = self.one()
            self.assertEqual(resp.results, ())
            # v1-2 have no error code on the wire: it decodes as 0.
            want = ErrorCode.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0
            self.assertEqual(resp.error_code, want, version)

    def test_group_apis(self) -> None:
        self.send(ApiKey.JOIN_GROUP, 5, apis.JoinGroupRequest(
            group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer"))
        self.assertEqual(self.one().error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self.assertEqual(self.groups.joins, [])
        self.send(ApiKey.FIND_COORDINATOR, 2, apis.FindCoordinatorRequest(key="g"))
        self.assertEqual(self.one().error_code, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self.grant(ResourceType.GROUP, "g", OP.READ)
        self.send(ApiKey.FIND_COORDINATOR, 2, apis.FindCoordinatorRequest(key="g"))
        self.assertEqual(self.one().error_code, 0)
        self.send(ApiKey.FIND_COORDINATOR, 2, apis.FindCoordinatorRequest(key="tx", key_type=1))
        self.assertEqual(self.one().error_code, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    def test_offset_commit_group_then_topic(self) -> None:
        self.core.add_topic("t")
        req = apis.OffsetCommitRequest(group_id="g", topics=(apis.OffsetCommitTopic(
            name="t", partitions=(apis.OffsetCommitPartition(
                partition_index=0, committed_offset=1),)),))
        self.send(ApiKey.OFFSET_COMMIT, 7, req)
        self.assertEqual(self.one().topics[0].partitions[0].error_code,
                         ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self.grant(ResourceType.GROUP, "g", OP.READ)
        self.send(ApiKey.OFFSET_COMMIT, 7, req)
        self.assertEqual(self.one().topics[0].partitions[0].error_code, TAF)
        self.assertEqual(self.groups.commits, [])

    def test_init_producer_id(self) -> None:
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=1000))
        self.assertEqual(self.one().error_code, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest())
        self.assertEqual(self.one().error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.grant(ResourceType.TOPIC, "some", OP.WRITE)
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest())
        self.assertEqual(self.one().error_code, 0)

    def test_end_txn_and_add_partitions(self) -> None:
        self.send(ApiKey.END_TXN, 3, apis.EndTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0, committed=True))
        self.assertEqual(self.one().error_code, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.grant(ResourceType.TRANSACTIONAL_ID, "tx", OP.WRITE)
        self.grant(ResourceType.TOPIC, "ok", OP.WRITE)
        self.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, apis.AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0, topics=(
                apis.AddPartitionsToTxnTopic(name="ok", partitions=(0,)),
                apis.AddPartitionsToTxnTopic(name="secret", partitions=(0,)),
            )))
        codes = {t.name: t.results_by_partition[0].partition_error_code
                 for t in self.one().results_by_topic}
        self.assertEqual(codes, {"ok": ErrorCode.OPERATION_NOT_ATTEMPTED, "secret": TAF})

    def test_broker_form_of_add_partitions_needs_cluster_action(self) -> None:
        from brokerd.kafka.wire.messages import txn as txn_apis

        # Transactional id and topic ACLs are not what v4+ checks: the sender is a broker.
        self.grant(ResourceType.TRANSACTIONAL_ID, "tx", OP.WRITE)
        body = apis.AddPartitionsToTxnRequest(transactions=(
            txn_apis.AddPartitionsToTxnTransaction(
                transactional_id="tx", producer_id=1, producer_epoch=0, verify_only=True),))
        self.send(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
        resp = self.one()
        self.assertEqual((resp.error_code, resp.results_by_transaction),
                         (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ()))
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.CLUSTER_ACTION)
        self.send(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
        resp = self.one()
        self.assertEqual(resp.error_code, 0)
        self.assertEqual([r.transactional_id for r in resp.results_by_transaction], ["tx"])

    def test_write_txn_markers_needs_cluster_action(self) -> None:
        from brokerd.kafka.wire.messages import txn as txn_apis

        self.core.add_topic("t")
        self.core.transactions.write_txn_markers = (  # type: ignore[attr-defined]
            lambda *a, **k: defer.succeed(None))
        self.core.transactions.describe_producers = (  # type: ignore[attr-defined]
            lambda topic, partition: defer.succeed([]))
        body = txn_apis.WriteTxnMarkersRequest(markers=(txn_apis.WritableTxnMarker(
            producer_id=7, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=(txn_apis.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),)),))
        self.grant(ResourceType.TOPIC, "t", OP.WRITE)
        self.send(ApiKey.WRITE_TXN_MARKERS, 1, body)
        part = self.one().markers[0].topics[0].partitions[0]
        self.assertEqual(part.error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.grant(ResourceType.CLUSTER, "kafka-cluster", OP.CLUSTER_ACTION)
        self.send(ApiKey.WRITE_TXN_MARKERS, 1, body)
        self.assertEqual(self.one().markers[0].topics[0].partitions[0].error_code, 0)

    def test_describe_producers_needs_read_on_the_topic(self) -> None:
        from brokerd.kafka.wire.messages import producers as producer_apis

        self.core.add_topic("ok")
        self.core.add_topic("secret")
        self.core.transactions.describe_producers = (  # type: ignore[attr-defined]
            lambda topic, partition: defer.succeed([]))
        self.grant(ResourceType.TOPIC, "ok", OP.READ)
        self.grant(ResourceType.TOPIC, "secret", OP.DESCRIBE)
        asked = producer_apis.DescribeProducersTopicRequest
        self.send(ApiKey.DESCRIBE_PRODUCERS, 0, producer_apis.DescribeProducersRequest(
            topics=(asked(name="ok", partition_indexes=(0,)),
                    asked(name="secret", partition_indexes=(0,)))))
        codes = {t.name: t.partitions[0].error_code for t in self.one().topics}
        self.assertEqual(codes, {"ok": 0, "secret": TAF})
