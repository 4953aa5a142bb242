"""Group configs (the GROUP config resource, type 32): the table, Kafka's validation
against the broker's bounds, durability through the offsets journal, and Kafka's
``kafka-configs.sh --entity-type groups`` altering and describing them on a real broker,
with a live consumer-protocol member told the new heartbeat interval.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet import defer, task
from twisted.internet.defer import Deferred

from brokerd.kafka.groups.consumer.coordinator import GroupSettings, HeartbeatInput
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.group_configs import (
    GROUP_CONFIG_TABLE,
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    STREAMS_HEARTBEAT_INTERVAL,
    STREAMS_NUM_STANDBYS,
    STREAMS_SESSION_TIMEOUT,
    GroupConfigOp,
    GroupConfigs,
    InvalidGroupConfig,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.consumer_groups import ConsumerGroupHeartbeatRequest
from brokerd.storage.stores.offsets import OffsetStore

from tests.brokerproc import BrokerProcess
from tests.e2e.test_kafka_tools import tool, tool_ready
from tests.kafka_helpers import RawKafka, module_broker

pytestmark = pytest.mark.broker

SET, DELETE, APPEND = GroupConfigOp.SET, GroupConfigOp.DELETE, GroupConfigOp.APPEND


def _configs(**broker: int) -> tuple[GroupConfigs, dict[str, dict[str, str]]]:
    written: dict[str, dict[str, str]] = {}

    def write(group_id: str, configs: dict[str, str]) -> Deferred[int]:
        written[group_id] = configs
        return defer.succeed(0)

    values = {SESSION_TIMEOUT: broker.get("session", 45_000),
              HEARTBEAT_INTERVAL: broker.get("heartbeat", 5_000)}
    return GroupConfigs(broker_values=values, stored={}, write=write), written


def test_the_table_has_kafkas_consumer_and_streams_configs() -> None:
    assert set(GROUP_CONFIG_TABLE) == {
        SESSION_TIMEOUT, HEARTBEAT_INTERVAL, STREAMS_SESSION_TIMEOUT,
        STREAMS_HEARTBEAT_INTERVAL, STREAMS_NUM_STANDBYS,
    }
    assert GROUP_CONFIG_TABLE[STREAMS_NUM_STANDBYS].maximum == 2
    assert GROUP_CONFIG_TABLE[SESSION_TIMEOUT].kafka_default == 45_000
    assert (GROUP_CONFIG_TABLE[HEARTBEAT_INTERVAL].minimum,
            GROUP_CONFIG_TABLE[HEARTBEAT_INTERVAL].maximum) == (5_000, 15_000)


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([("nope", SET, "1")], "Unknown group config name: nope"),
        ([(HEARTBEAT_INTERVAL, SET, "x")],
         "Invalid value x for configuration consumer.heartbeat.interval.ms: "
         "Not a number of type INT"),
        ([(HEARTBEAT_INTERVAL, SET, "4999")],
         "consumer.heartbeat.interval.ms must be greater than or equal to "
         "group.consumer.min.heartbeat.interval.ms 5000"),
        ([(SESSION_TIMEOUT, SET, "60001")],
         "consumer.session.timeout.ms must be less than or equal to "
         "group.consumer.max.session.timeout.ms 60000"),
        ([(HEARTBEAT_INTERVAL, APPEND, "6000")],
         "Config consumer.heartbeat.interval.ms of type INT does not support "
         "operation APPEND"),
    ],
)
def test_invalid_alterations(ops: list[tuple[str, int, str]], message: str) -> None:
    configs, written = _configs()
    with pytest.raises(InvalidGroupConfig) as refused:
        configs.alter("g", ops, validate_only=False)
    assert str(refused.value) == message
    assert written == {}


def test_set_validate_only_and_delete() -> None:
    configs, written = _configs()
    configs.alter("g", [(HEARTBEAT_INTERVAL, SET, "7000")], validate_only=True)
    assert written == {} and configs.value("g", HEARTBEAT_INTERVAL) == 5_000
    configs.alter("g", [(HEARTBEAT_INTERVAL, SET, "7000")], validate_only=False)
    assert written == {"g": {HEARTBEAT_INTERVAL: "7000"}}
    assert configs.consumer_settings("g") == GroupSettings(45_000, 7_000)
    assert configs.consumer_settings("other") == GroupSettings(45_000, 5_000)
    (described,) = configs.describe("g", [HEARTBEAT_INTERVAL])
    assert (described.value, described.overridden, described.broker_value) == (
        "7000", True, "5000")
    configs.alter("g", [(HEARTBEAT_INTERVAL, DELETE, None)], validate_only=False)
    assert written["g"] == {} and configs.value("g", HEARTBEAT_INTERVAL) == 5_000


def test_a_short_broker_value_widens_the_bounds() -> None:
    configs, _ = _configs(heartbeat=500, session=6_000)
    assert configs.bounds(HEARTBEAT_INTERVAL) == (500, 15_000)
    assert configs.bounds(SESSION_TIMEOUT) == (6_000, 60_000)
    configs.alter("g", [(HEARTBEAT_INTERVAL, SET, "800")], validate_only=False)
    with pytest.raises(InvalidGroupConfig, match="must be less than"):
        configs.alter("g", [(HEARTBEAT_INTERVAL, SET, "6000")], validate_only=False)


def test_configs_are_durable_and_steer_the_coordinator(tmp_path: Path) -> None:
    path = str(tmp_path / "offsets.log")
    store = OffsetStore.open(path)
    coord = GroupCoordinator(clock=task.Clock(), offsets=store, run_blocking=defer.maybeDeferred)
    done: list[int] = []
    coord.group_configs.alter("g", [(HEARTBEAT_INTERVAL, SET, "9000")],
                              validate_only=False).addCallback(done.append)
    assert done == [0]
    coord.stop()
    store.close()
    store = OffsetStore.open(path)
    coord = GroupCoordinator(clock=task.Clock(), offsets=store, run_blocking=defer.maybeDeferred)
    answer = coord.consumer.heartbeat(
        HeartbeatInput(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=1,
                       subscribed_topic_names=("t",), owned={}),
        {"t": (uuid.UUID(int=1), 1)},
    )
    assert answer.heartbeat_interval_ms == 9000
    coord.stop()
    store.close()


# -- Kafka's tool on a real broker ------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tool_ready()
    yield from module_broker(tmp_path_factory, "group-configs")


def _heartbeat_interval(broker: BrokerProcess, group: str) -> int:
    with RawKafka(broker) as raw:
        answer = raw.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
            rebalance_timeout_ms=1000, subscribed_topic_names=("none",), topic_partitions=(),
        ))
    assert answer.error_code == 0, answer
    return int(answer.heartbeat_interval_ms)


def test_kafka_configs_tool_alters_and_describes_group_configs(broker: BrokerProcess) -> None:
    bs, group = broker.kafka_bootstrap, "kip848-configured"
    entity = ("--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", group)
    tool("kafka-configs.sh", *entity, "--alter", "--add-config",
         "consumer.heartbeat.interval.ms=6000,consumer.session.timeout.ms=50000")
    described = tool("kafka-configs.sh", *entity, "--describe")
    assert "consumer.heartbeat.interval.ms=6000" in described, described
    assert "consumer.session.timeout.ms=50000" in described, described
    assert _heartbeat_interval(broker, group) == 6000
    # Below the broker's bound: refused (INVALID_CONFIG), nothing changed.
    tool("kafka-configs.sh", *entity, "--alter", "--add-config",
         "consumer.heartbeat.interval.ms=100", check=False)
    assert _heartbeat_interval(broker, group) == 6000
    tool("kafka-configs.sh", *entity, "--alter", "--delete-config",
         "consumer.heartbeat.interval.ms")
    assert _heartbeat_interval(broker, group) == 5000
