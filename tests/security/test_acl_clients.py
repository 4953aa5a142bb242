"""ACLs with real clients against a twistd broker: confluent-kafka and kafka-python manage
ACLs as a super user; after a restart without super users, User:ANONYMOUS gets exactly
what its ACLs allow (produce, metadata) and clear authorization errors otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

pytestmark = pytest.mark.broker

kafka_admin = pytest.importorskip("kafka.admin")

ANON = "User:ANONYMOUS"


def _produce(bootstrap: str, topic: str) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"value", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(WAIT)
    assert len(outcome) == 1
    return outcome[0]


def test_acls_with_real_clients(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    broker = BrokerProcess(
        data, args=("--authorizer", "acl", "--super-users", ANON, "--no-auto-create")
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
        for f in admin.create_topics(
            [NewTopic("orders", 1, 1), NewTopic("payroll", 1, 1)]
        ).values():
            f.result(WAIT)
        # confluent-kafka: WRITE (implies DESCRIBE) on orders.
        binding = AclBinding(
            ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, ANON, "*",
            AclOperation.WRITE, AclPermissionType.ALLOW,
        )
        for f in admin.create_acls([binding]).values():
            assert f.result(WAIT) is None
        everything = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
            AclOperation.ANY, AclPermissionType.ANY,
        )
        assert admin.describe_acls(everything).result(WAIT) == [binding]

        # kafka-python: a prefixed READ, listed, then a scratch ACL created and deleted.
        ka = kafka_admin
        client = ka.KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
        try:
            read = ka.ACL(ANON, "*", ka.ACLOperation.READ, ka.ACLPermissionType.ALLOW,
                          ka.ResourcePattern(ka.ResourceType.TOPIC, "ord",
                                             ka.ACLResourcePatternType.PREFIXED))
            scratch = ka.ACL("User:bob", "*", ka.ACLOperation.ALL, ka.ACLPermissionType.DENY,
                             ka.ResourcePattern(ka.ResourceType.GROUP, "g"))
            created = client.create_acls([read, scratch])
            assert len(created["succeeded"]) == 2, created
            assert created["failed"] == []
            listed, error = client.describe_acls(ka.ACLFilter(
                None, None, ka.ACLOperation.ANY, ka.ACLPermissionType.ANY,
                ka.ResourcePatternFilter(ka.ResourceType.TOPIC, None,
                                         ka.ACLResourcePatternType.ANY),
            ))
            assert error.errno == 0
            assert sorted((a.resource_pattern.resource_name, a.operation) for a in listed) == [
                ("ord", ka.ACLOperation.READ), ("orders", ka.ACLOperation.WRITE)]
            deleted = client.delete_acls([ka.ACLFilter(
                "User:bob", None, ka.ACLOperation.ANY, ka.ACLPermissionType.ANY,
                ka.ResourcePatternFilter(ka.ResourceType.ANY, None,
                                         ka.ACLResourcePatternType.ANY),
            )])
            assert [len(matches) for _f, matches, _e in deleted] == [1]
        finally:
            client.close()
    finally:
        broker.stop()

    # The same data directory, no super users: User:ANONYMOUS is an ordinary principal.
    broker = BrokerProcess(data, args=("--authorizer", "acl", "--no-auto-create")).start()
    try:
        assert _produce(broker.kafka_bootstrap, "orders") is None
        refused = _produce(broker.kafka_bootstrap, "payroll")
        assert refused is not None
        assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused

        admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
        topics = admin.list_topics(timeout=WAIT).topics
        assert "orders" in topics
        assert "payroll" not in topics  # hidden, not reported as an error
        # Managing ACLs now needs ALTER on the cluster.
        futures = admin.create_acls([AclBinding(
            ResourceType.TOPIC, "payroll", ResourcePatternType.LITERAL, ANON, "*",
            AclOperation.ALL, AclPermissionType.ALLOW,
        )])
        for f in futures.values():
            with pytest.raises(KafkaException) as info:
                f.result(WAIT)
            assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert '"payroll"' not in (data / "acls.json").read_text()
    finally:
        broker.stop()
