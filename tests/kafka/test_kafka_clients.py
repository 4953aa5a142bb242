"""Broker behaviour the four-client matrix depends on but no client API shows
deterministically, checked with raw Kafka requests against a real ``twistd broker``.

The matrix itself is test_kafka_scenarios.py (one scenario suite run with every client
through tests/kafka_drivers.py), plus test_cross_protocol.py and test_idempotence.py.
"""

from __future__ import annotations

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import RawKafka, committed_offsets

pytestmark = pytest.mark.clients

GROUP, TOPIC = "raw-group", "raw-topic"


def _join_and_sync(conn: RawKafka) -> tuple[str, int]:
    """One member joins GROUP (JoinGroup v3: no MEMBER_ID_REQUIRED round) and syncs;
    returns its member id and generation."""
    joined = conn.call(
        ApiKey.JOIN_GROUP,
        3,
        apis.JoinGroupRequest(
            group_id=GROUP,
            session_timeout_ms=30_000,
            rebalance_timeout_ms=30_000,
            member_id="",
            protocol_type="consumer",
            protocols=(apis.JoinGroupProtocol(name="range", metadata=b"\x00\x00"),),
        ),
    )
    assert joined.error_code == 0, joined
    synced = conn.call(
        ApiKey.SYNC_GROUP,
        3,
        apis.SyncGroupRequest(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=(apis.SyncGroupAssignment(member_id=joined.member_id, assignment=b"a"),),
        ),
    )
    assert synced.error_code == 0 and synced.assignment == b"a", synced
    return joined.member_id, joined.generation_id


def _commit(conn: RawKafka, member: str, generation: int, offset: int) -> int:
    response = conn.call(
        ApiKey.OFFSET_COMMIT,
        7,
        apis.OffsetCommitRequest(
            group_id=GROUP,
            generation_id=generation,
            member_id=member,
            topics=(
                apis.OffsetCommitTopic(
                    name=TOPIC,
                    partitions=(
                        apis.OffsetCommitPartition(partition_index=0, committed_offset=offset),
                    ),
                ),
            ),
        ),
    )
    [topic] = response.topics
    [part] = topic.partitions
    code: int = part.error_code
    return code


def _heartbeat(conn: RawKafka, member: str, generation: int) -> int:
    response = conn.call(
        ApiKey.HEARTBEAT,
        3,
        apis.HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member),
    )
    code: int = response.error_code
    return code


def test_group_member_commits_and_offsets_survive_restart(make_broker: object) -> None:
    """What the matrix's group tests rely on: a member's commits are durable, and a new
    member after a restart finds them."""
    broker: BrokerProcess = make_broker()  # type: ignore[operator]
    with broker.client() as native:
        native.create_topic(TOPIC, 1)
        native.produce(TOPIC, 0, [b"x"] * 5)
    with RawKafka(broker) as conn:
        member, generation = _join_and_sync(conn)
        assert _heartbeat(conn, member, generation) == 0
        assert _commit(conn, member, generation, 3) == 0
    broker.restart()
    assert committed_offsets(broker, GROUP, TOPIC, [0]) == {0: 3}


def test_group_membership_survives_restart(make_broker: object) -> None:
    """As in Kafka (groups restored from __consumer_offsets): a member of a Stable group
    carries on with its generation after a broker restart, without re-joining."""
    broker: BrokerProcess = make_broker()  # type: ignore[operator]
    with broker.client() as native:
        native.create_topic(TOPIC, 1)
    with RawKafka(broker) as conn:
        member, generation = _join_and_sync(conn)
    broker.restart()
    with RawKafka(broker) as conn:
        assert _heartbeat(conn, member, generation) == 0
        assert _commit(conn, member, generation, 1) == 0
