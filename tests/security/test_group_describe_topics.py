"""The group describe APIs hide the topics a principal may not DESCRIBE, against a real
``twistd broker`` with SASL/SCRAM and ``--authorizer acl``.

The super user ``admin`` runs a consumer-protocol group and share groups on a topic
``secret``; ``alice`` may DESCRIBE those groups and the topic ``open`` only. What she
asks of ConsumerGroupDescribe (confluent-kafka's AdminClient, and raw), of
ShareGroupDescribe and of DescribeShareGroupOffsets (raw: confluent-kafka has no share
admin calls) must not show ``secret``'s name, partitions, start offsets or lag: a group
using it is answered TOPIC_AUTHORIZATION_FAILED without members, its offsets are listed
without it, or refused per partition when named. A group id named twice is answered
once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import consumer_groups as cg
from brokerd.kafka.wire.messages import share as sm
from brokerd.kafka.wire.messages import share_offsets as so

from tests.brokerproc import BrokerProcess
from tests.kafka.server.handlers.test_sasl_clients import PASSWORD, USER, write_credentials
from tests.kafka_helpers import WAIT, RawKafka, module_broker, wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GAF = ErrorCode.GROUP_AUTHORIZATION_FAILED


def sasl(broker: BrokerProcess, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.kafka_bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    creds = write_credentials(tmp_path_factory.mktemp("creds") / "credentials.json")
    yield from module_broker(
        tmp_path_factory, "describe-acl", "--sasl", "SCRAM-SHA-256", "--credentials", creds,
        "--authorizer", "acl", "--super-users", f"User:{ADMIN}", "--allow-anonymous", "native",
    )


@pytest.fixture(scope="module")
def groups(broker: BrokerProcess) -> Iterator[None]:
    """``cg`` (consumer protocol) reads ``secret``; the share group ``sg`` reads ``secret``
    and ``open``, ``sg-open`` only ``open``; each has read, so each has share state."""
    conf = sasl(broker, ADMIN, ADMIN_PASSWORD)
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic("secret", 2, 1), NewTopic("open", 1, 1)]).values():
        f.result(WAIT)
    grants = [("cg", ResourceType.GROUP), ("sg", ResourceType.GROUP),
              ("sg-open", ResourceType.GROUP), ("open", ResourceType.TOPIC)]
    for f in admin.create_acls([
        AclBinding(rtype, name, ResourcePatternType.LITERAL, f"User:{USER}", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for name, rtype in grants
    ]).values():
        assert f.result(WAIT) is None
    for f in admin.incremental_alter_configs([
        ConfigResource(ResourceType.GROUP, g, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])
        for g in ("sg", "sg-open")
    ]).values():
        f.result(WAIT)
    producer = ck.Producer(conf)
    for topic, partition in (("secret", 0), ("secret", 1), ("open", 0)):
        for i in range(3):
            producer.produce(topic, b"v%d" % i, partition=partition)
    assert producer.flush(WAIT) == 0

    consumer = ck.Consumer({**conf, "group.id": "cg", "group.protocol": "consumer"})
    consumer.subscribe(["secret"])
    shares = []
    for group, topics in (("sg", ["secret", "open"]), ("sg-open", ["open"])):
        share = ck.ShareConsumer({**conf, "group.id": group})
        share.subscribe(topics)
        shares.append(share)
    end = time.monotonic() + 60
    got = {0: 0, 1: 0}
    while not (consumer.assignment() and all(got.values())):
        assert time.monotonic() < end, "the groups never read"
        consumer.poll(0.2)
        for i, share in enumerate(shares):
            got[i] += sum(1 for m in share.poll(timeout=0.5) or () if m.error() is None)
    try:
        yield
    finally:
        consumer.close()
        for share in shares:
            share.close()


def alice(broker: BrokerProcess) -> RawKafka:
    conn = RawKafka(broker)
    conn.scram_login(USER, PASSWORD)
    return conn


def test_consumer_group_describe_refuses_a_group_on_a_hidden_topic(
    broker: BrokerProcess, groups: None
) -> None:
    # As the admin sees it: the member, assigned secret's partitions.
    admin = AdminClient(sasl(broker, ADMIN, ADMIN_PASSWORD))
    seen = admin.describe_consumer_groups(["cg"])["cg"].result(WAIT)
    assert {tp.topic for m in seen.members for tp in m.assignment.topic_partitions} == {"secret"}
    # confluent-kafka as alice: an error, not the members.
    mine = AdminClient(sasl(broker, USER, PASSWORD))
    with pytest.raises(ck.KafkaException) as refused:
        mine.describe_consumer_groups(["cg"])["cg"].result(WAIT)
    assert refused.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    with alice(broker) as conn:
        answer = conn.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, cg.ConsumerGroupDescribeRequest(
            group_ids=("cg", "nobody's", "cg", "nobody's")))
    assert [(g.group_id, g.error_code, g.members) for g in answer.groups] == [
        ("cg", TAF, ()), ("nobody's", GAF, ())]
    assert "not authorized to describe" in (answer.groups[0].error_message or "")


def test_share_group_describe_refuses_a_group_on_a_hidden_topic(
    broker: BrokerProcess, groups: None
) -> None:
    with alice(broker) as conn:
        answer = conn.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, sm.ShareGroupDescribeRequest(
            group_ids=("sg", "sg-open", "sg", "other", "other")))
    refused, shown, other = answer.groups
    assert (refused.group_id, refused.error_code, refused.members) == ("sg", TAF, ())
    assert "secret" not in repr(refused)
    assert (shown.group_id, shown.error_code) == ("sg-open", 0)
    assert [t.topic_name for m in shown.members for t in m.assignment.topic_partitions] == [
        "open"]
    assert (other.group_id, other.error_code) == ("other", GAF)


def test_share_group_offsets_leave_out_or_refuse_a_hidden_topic(
    broker: BrokerProcess, groups: None
) -> None:
    def describe(conn: RawKafka, *entries: so.DescribeShareOffsetsGroup) -> Any:
        return conn.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                         so.DescribeShareGroupOffsetsRequest(groups=entries))

    with RawKafka(broker) as admin_conn:
        admin_conn.scram_login(ADMIN, ADMIN_PASSWORD)
        wait_until(lambda: {t.topic_name for t in describe(
            admin_conn, so.DescribeShareOffsetsGroup(group_id="sg")).groups[0].topics}
            == {"secret", "open"}, "sg has state on both topics")
    with alice(broker) as conn:
        # Every topic of the group: the hidden one is left out.
        (everything,) = describe(conn, so.DescribeShareOffsetsGroup(group_id="sg"),
                                 so.DescribeShareOffsetsGroup(group_id="sg")).groups
        assert [t.topic_name for t in everything.topics] == ["open"]
        # Named: refused per partition, with no offsets.
        (named,) = describe(conn, so.DescribeShareOffsetsGroup(group_id="sg", topics=(
            so.DescribeShareOffsetsTopic(topic_name="secret", partitions=(0, 1)),
            so.DescribeShareOffsetsTopic(topic_name="open", partitions=(0,)),
        ))).groups
        by_topic = {t.topic_name: t.partitions for t in named.topics}
        assert [(p.partition_index, p.error_code, p.start_offset, p.lag)
                for p in by_topic["secret"]] == [(0, TAF, -1, -1), (1, TAF, -1, -1)]
        assert [(p.partition_index, p.error_code) for p in by_topic["open"]] == [(0, 0)]
        assert by_topic["open"][0].start_offset >= 0
        refused = describe(conn, so.DescribeShareOffsetsGroup(group_id="nope"),
                           so.DescribeShareOffsetsGroup(group_id="nope")).groups
        assert [(g.group_id, g.error_code) for g in refused] == [("nope", GAF)]
