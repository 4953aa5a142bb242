"""Authorized operations: the pure decision (every operation of the type without an
authorizer or for a super user, implied operations, DENY), the fields of the Metadata
and DescribeGroups answers (filled only when asked), and confluent-kafka's admin client
reading them from a real broker with and without ``--authorizer acl``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.security.acl import (
    CLUSTER_NAME,
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.security.authorized_ops import (
    OMITTED,
    SUPPORTED_OPERATIONS,
    allowed_operations,
    authorized_operations,
    operations_field,
)

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT, RawKafka

pytestmark = pytest.mark.broker

ANON = "User:ANONYMOUS"
Op = Operation


def allow(rtype: ResourceType, name: str, op: Operation, who: str = "User:alice",
          permission: Permission = Permission.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, who, "*", op, permission)


# -- the decision --------------------------------------------------------------------


def test_field_is_kafkas_bits() -> None:
    assert operations_field([Op.READ, Op.DESCRIBE]) == (1 << 3) | (1 << 8) == 264
    assert operations_field([]) == 0
    assert OMITTED == -2147483648


def test_no_authorizer_or_super_user_gets_every_operation_of_the_type() -> None:
    assert len(SUPPORTED_OPERATIONS[ResourceType.TOPIC]) == 8
    assert len(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == 7
    assert len(SUPPORTED_OPERATIONS[ResourceType.GROUP]) == 5
    for rtype, ops in SUPPORTED_OPERATIONS.items():
        assert allowed_operations(None, "User:x", "h", rtype, "n") == ops
        boss = AclAuthorizer((), super_users=["User:boss"])
        assert allowed_operations(boss, "User:boss", "h", rtype, "n") == ops
        assert allowed_operations(boss, "User:x", "h", rtype, "n") == frozenset()
    # A topic's field without an authorizer: READ..ALTER_CONFIGS, no CLUSTER_ACTION.
    assert authorized_operations(None, "User:x", "h", ResourceType.TOPIC, "t") == 0b110111111000
    with pytest.raises(ValueError):
        allowed_operations(None, "User:x", "h", ResourceType.ANY, "t")


def test_implied_all_and_deny() -> None:
    t = ResourceType.TOPIC
    auth = AclAuthorizer([
        allow(t, "t", Op.READ), allow(t, "t", Op.ALTER_CONFIGS),
        allow(t, "all", Op.ALL), allow(t, "all", Op.WRITE, permission=Permission.DENY),
        allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE),
    ])
    assert allowed_operations(auth, "User:alice", "h", t, "t") == {
        Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert allowed_operations(auth, "User:alice", "h", t, "all") == (
        SUPPORTED_OPERATIONS[t] - {Op.WRITE})
    assert allowed_operations(auth, "User:bob", "h", t, "t") == frozenset()
    # IDEMPOTENT_WRITE implies nothing else.
    assert allowed_operations(auth, "User:alice", "h", ResourceType.CLUSTER, CLUSTER_NAME) == {
        Op.IDEMPOTENT_WRITE}


# -- the wire fields, from a real broker ---------------------------------------------


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


def metadata(kafka: RawKafka, version: int, *, topics: bool, cluster: bool) -> Any:
    return kafka.call(ApiKey.METADATA, version, apis.MetadataRequest(
        topics=(apis.MetadataRequestTopic(name="t"),), allow_auto_topic_creation=True,
        include_topic_authorized_operations=topics,
        include_cluster_authorized_operations=cluster))


def test_metadata_fills_the_fields_only_when_asked(plain: BrokerProcess) -> None:
    every_topic = operations_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
    every_cluster = operations_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
    with RawKafka(plain) as kafka:
        asked = metadata(kafka, 8, topics=True, cluster=True)
        assert asked.topics[0].topic_authorized_operations == every_topic
        assert asked.cluster_authorized_operations == every_cluster
        quiet = metadata(kafka, 8, topics=False, cluster=False)
        assert quiet.topics[0].topic_authorized_operations == OMITTED
        assert quiet.cluster_authorized_operations == OMITTED
        # The answer (the cache) is not changed by an earlier request that asked.
        assert metadata(kafka, 8, topics=False, cluster=True).topics[
            0].topic_authorized_operations == OMITTED


def test_describe_groups_fills_the_field_only_when_asked(plain: BrokerProcess) -> None:
    every_group = operations_field(SUPPORTED_OPERATIONS[ResourceType.GROUP])
    with RawKafka(plain) as kafka:
        for version, asked, expected in ((4, True, every_group), (4, False, OMITTED),
                                         (3, True, every_group)):
            answer = kafka.call(ApiKey.DESCRIBE_GROUPS, version, apis.DescribeGroupsRequest(
                groups=("g",), include_authorized_operations=asked))
            assert answer.groups[0].authorized_operations == expected, (version, asked)


# -- confluent-kafka's admin client --------------------------------------------------

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicCollection, TopicPartition  # noqa: E402
from confluent_kafka.admin import AclBinding as CkBinding  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as CkType  # noqa: E402


def _names(ops: Any) -> set[str]:
    return {op.name for op in ops or ()}


def _topic_ops(admin: AdminClient, topic: str) -> set[str]:
    futures = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    return _names(futures[topic].result(WAIT).authorized_operations)


def _group_ops(admin: AdminClient, group: str) -> set[str]:
    futures = admin.describe_consumer_groups([group], include_authorized_operations=True)
    return _names(futures[group].result(WAIT).authorized_operations)


def _make_group(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


TOPIC_OPS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
             "ALTER_CONFIGS"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def test_confluent_without_authorizer_sees_every_operation(plain: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": plain.kafka_bootstrap})
    for f in admin.create_topics([NewTopic("ops", 1, 1)]).values():
        f.result(WAIT)
    _make_group(plain.kafka_bootstrap, "ops", "ops-group")
    assert _topic_ops(admin, "ops") == TOPIC_OPS  # librdkafka's admin test: 8
    assert _group_ops(admin, "ops-group") == GROUP_OPS


CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
               "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}


def test_confluent_describe_cluster_operations(plain: BrokerProcess) -> None:
    # librdkafka asks DescribeCluster (advertised, so Metadata v11+ has no cluster
    # field), with include_cluster_authorized_operations.
    admin = AdminClient({"bootstrap.servers": plain.kafka_bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(WAIT)
    assert _names(cluster.authorized_operations) == CLUSTER_OPS  # librdkafka's test: 7


def test_confluent_with_acls_sees_what_the_acls_allow(tmp_path: Path) -> None:
    data = tmp_path / "data"
    boss = BrokerProcess(data, args=("--authorizer", "acl", "--super-users", ANON)).start()
    try:
        admin = AdminClient({"bootstrap.servers": boss.kafka_bootstrap})
        for f in admin.create_topics([NewTopic("ops", 1, 1)]).values():
            f.result(WAIT)
        _make_group(boss.kafka_bootstrap, "ops", "ops-group")
        assert _topic_ops(admin, "ops") == TOPIC_OPS  # a super user: everything
        assert _group_ops(admin, "ops-group") == GROUP_OPS
        bindings = [
            CkBinding(CkType.TOPIC, "ops", ResourcePatternType.LITERAL, ANON, "*", op,
                      AclPermissionType.ALLOW)
            for op in (AclOperation.READ, AclOperation.ALTER_CONFIGS)
        ] + [
            CkBinding(CkType.GROUP, "ops-group", ResourcePatternType.LITERAL, ANON, "*",
                      AclOperation.DESCRIBE, AclPermissionType.ALLOW),
            CkBinding(CkType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ANON, "*",
                      AclOperation.ALTER, AclPermissionType.ALLOW),
        ]
        for f in admin.create_acls(bindings).values():
            assert f.result(WAIT) is None
    finally:
        boss.kill()
    # The same data directory, no super users: User:ANONYMOUS has only its ACLs.
    broker = BrokerProcess(data, args=("--authorizer", "acl")).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
        # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS.
        assert _topic_ops(admin, "ops") == {"READ", "DESCRIBE", "ALTER_CONFIGS",
                                            "DESCRIBE_CONFIGS"}
        assert _group_ops(admin, "ops-group") == {"DESCRIBE"}
        cluster = admin.describe_cluster(include_authorized_operations=True).result(WAIT)
        assert _names(cluster.authorized_operations) == {"ALTER", "DESCRIBE"}
    finally:
        broker.kill()
