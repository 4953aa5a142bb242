"""Streams groups over a real socket against a real ``twistd broker``: a heartbeat with
a topology creates the internal topics and answers with tasks, a missing source topic is
a status, StreamsGroupDescribe shows the group and (v1) the topology description a
member sent with StreamsGroupTopologyDescriptionUpdate, ListGroups types it ``streams``,
and DeleteGroups deletes it once empty (confluent-kafka's AdminClient).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import group_admin as ga
from brokerd.kafka.wire.messages import streams_groups as sg

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import RawKafka, module_broker

pytestmark = pytest.mark.broker

TOPOLOGY = sg.Topology(epoch=1, subtopologies=(
    sg.Subtopology(subtopology_id="0", source_topics=("w-lines",),
                   repartition_sink_topics=("w-app-rekey-repartition",)),
    sg.Subtopology(
        subtopology_id="1",
        state_changelog_topics=(sg.TopicInfo(
            name="w-app-store-changelog",
            topic_configs=(sg.KeyValue(key="cleanup.policy", value="compact"),)),),
        repartition_source_topics=(sg.TopicInfo(name="w-app-rekey-repartition"),),
    ),
))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "streams-wire")


def join(raw: RawKafka, group: str, member: str, topology: sg.Topology) -> Any:
    return raw.call(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, sg.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30_000,
        topology=topology, active_tasks=(), standby_tasks=(), warmup_tasks=(),
        process_id="process-1",
    ))


def test_a_member_joins_gets_tasks_and_is_described(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    for f in admin.create_topics([NewTopic("w-lines", 3, 1)]).values():
        f.result(10)
    with RawKafka(broker) as raw:
        answer = join(raw, "w-app", "m1", TOPOLOGY)
        assert (answer.error_code, answer.member_epoch, answer.status) == (0, 1, ())
        assert {(t.subtopology_id, t.partitions) for t in answer.active_tasks} == {
            ("0", (0, 1, 2)), ("1", (0, 1, 2))}
        assert answer.topology_description_required
        topics = admin.list_topics(timeout=10).topics
        assert len(topics["w-app-rekey-repartition"].partitions) == 3
        assert len(topics["w-app-store-changelog"].partitions) == 3

        description = sg.TopologyDescription(subtopologies=(sg.TopologyDescriptionSubtopology(
            subtopology_id="0", nodes=(sg.TopologyDescriptionNode(
                name="KSTREAM-SOURCE-0000000000", node_type=sg.NODE_SOURCE,
                source_topics=("w-lines",)),)),))
        pushed = raw.call(
            ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, 0,
            sg.StreamsGroupTopologyDescriptionUpdateRequest(
                group_id="w-app", member_id="m1", topology_epoch=1,
                topology_description=description))
        assert pushed.error_code == 0
        described = raw.call(ApiKey.STREAMS_GROUP_DESCRIBE, 1, sg.StreamsGroupDescribeRequest(
            group_ids=("w-app", "nope"), include_topology_description=True)).groups
        group, missing = described
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert (group.group_state, group.group_epoch, len(group.members)) == ("Stable", 1, 1)
        assert group.topology_description == description
        assert group.topology_description_status == sg.DESCRIPTION_AVAILABLE
        changelog = group.topology.subtopologies[1].state_changelog_topics[0]
        assert (changelog.name, changelog.partitions) == ("w-app-store-changelog", 3)

        listed = raw.call(ApiKey.LIST_GROUPS, 5, ga.ListGroupsRequest(
            types_filter=("streams",))).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in listed if g.group_id == "w-app"] == [
            ("w-app", "streams", "Stable", "streams")]
        refused = admin.delete_consumer_groups(["w-app"])["w-app"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            refused.result(10)
        left = raw.call(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, sg.StreamsGroupHeartbeatRequest(
            group_id="w-app", member_id="m1", member_epoch=-1))
        assert left.error_code == 0
        admin.delete_consumer_groups(["w-app"])["w-app"].result(10)


def test_a_missing_source_topic_is_a_status(broker: BrokerProcess) -> None:
    topology = sg.Topology(epoch=1, subtopologies=(
        sg.Subtopology(subtopology_id="0", source_topics=("w-absent",)),))
    with RawKafka(broker) as raw:
        answer = join(raw, "w-missing", "m1", topology)
    assert answer.error_code == 0
    assert [(s.status_code, s.status_detail) for s in answer.status] == [
        (1, "Source topics w-absent are missing.")]
    assert answer.active_tasks == ()
