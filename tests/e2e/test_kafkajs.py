"""kafkajs 2.2.4, unmodified, against a real ``twistd broker``: every admin call a
Kafka tool needs, and a consumer group of two members.

The node scripts are in tests/node/ (installed by ``make node-deps`` from its lockfile):
``admin.js`` runs a list of admin calls and prints each outcome as JSON, ``group.js``
runs the group scenario and prints what happened. The assertions are here, and they are
Kafka's semantics (values, error types), not just "no exception". Records and group
commits that a test needs beforehand come from confluent-kafka (the scripts only do what
is being tested).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import REPO, BrokerProcess
from tests.control_plane_helpers import (
    confluent,
    group_with_commits,
    produce_keyed,
    read_partition,
)
from tests.kafka_helpers import WAIT, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

NODE_DIR = REPO / "tests" / "node"
NODE = shutil.which("node")
#: kafkajs' numbers for DescribeConfigs/AlterConfigs resource types and config sources.
TOPIC, BROKER = 2, 4
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def need_kafkajs() -> str:
    if NODE is None:
        pytest.skip("node is not installed (CI has node 20 and npm)")
    if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        pytest.skip("kafkajs is not installed: run `make node-deps` (npm ci in tests/node)")
    return NODE


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    need_kafkajs()
    confluent()
    yield from module_broker(tmp_path_factory, "kafkajs")


# -- running the scripts ---------------------------------------------------------------


def run_script(script: str, *args: str, timeout: float = 2 * WAIT) -> Any:
    done = subprocess.run(
        [need_kafkajs(), str(NODE_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=NODE_DIR,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(lines[-1])
    assert not (isinstance(result, dict) and "fatal" in result), (result, done.stderr[-2000:])
    return result


def admin(broker: BrokerProcess, *steps: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Run admin calls in order on one kafkajs admin client: each step is
    ``(method, *arguments)``; returns one ``{"ok": ...}`` or ``{"error": ...}`` each."""
    payload = [{"call": call, "args": list(args)} for call, *args in steps]
    outcomes: list[dict[str, Any]] = run_script(
        "admin.js", broker.kafka_bootstrap, json.dumps(payload)
    )
    assert len(outcomes) == len(steps)
    return outcomes


def ok(outcome: dict[str, Any]) -> Any:
    assert "error" not in outcome, f"kafkajs failed: {outcome['error']}"
    return outcome["ok"]


def assert_error(outcome: dict[str, Any], kafka_type: str, code: int) -> None:
    """The call failed with Kafka error ``kafka_type`` (``code``); for an aggregate error
    (createTopics, deleteGroups), its only item did."""
    assert "error" in outcome, f"expected {kafka_type}, kafkajs returned {outcome.get('ok')!r}"
    error: dict[str, Any] = outcome["error"]
    # Unwrap what kafkajs wraps: an aggregate of one, "retries exceeded" around the cause.
    while error.get("type") is None:
        if error.get("errors") and len(error["errors"]) == 1:
            error = error["errors"][0]
        elif error.get("originalError") or error.get("cause"):
            error = error.get("originalError") or error["cause"]
        else:
            break
    assert (error.get("type"), error.get("code")) == (kafka_type, code), (
        f"expected {kafka_type} ({code}), kafkajs failed with {outcome['error']}"
    )


def call(broker: BrokerProcess, method: str, *args: Any) -> Any:
    """One admin call that must succeed; its result."""
    return ok(admin(broker, (method, *args))[0])


def configs(broker: BrokerProcess, resource_type: int, name: str) -> dict[str, dict[str, Any]]:
    """describeConfigs of one resource: config name -> entry."""
    described = call(
        broker,
        "describeConfigs",
        {"includeSynonyms": False, "resources": [{"type": resource_type, "name": name}]},
    )
    (resource,) = described["resources"]
    assert resource["errorCode"] == 0, resource
    return {entry["configName"]: entry for entry in resource["configEntries"]}


def create(broker: BrokerProcess, topic: str, partitions: int = 1, **config: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"topic": topic, "numPartitions": partitions, "replicationFactor": 1}
    if config:
        spec["configEntries"] = [
            {"name": k.replace("_", "."), "value": v} for k, v in config.items()
        ]
    return admin(broker, ("createTopics", {"topics": [spec]}))[0]


def partition_ids(broker: BrokerProcess, topic: str) -> list[int]:
    metadata = call(broker, "fetchTopicMetadata", {"topics": [topic]})
    (described,) = metadata["topics"]
    return sorted(p["partitionId"] for p in described["partitions"])


def offsets(broker: BrokerProcess, topic: str) -> dict[int, tuple[int, int]]:
    """fetchTopicOffsets: partition -> (low, high)."""
    return {
        p["partition"]: (int(p["low"]), int(p["high"]))
        for p in call(broker, "fetchTopicOffsets", topic)
    }


def group_offsets(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    (fetched,) = call(broker, "fetchOffsets", {"groupId": group, "topics": [topic]})
    return {p["partition"]: int(p["offset"]) for p in fetched["partitions"]}


def records(broker: BrokerProcess, topic: str, count: int, partition: int = 0) -> None:
    produce_keyed(
        broker,
        topic,
        [(f"k{i}".encode(), f"v{i}".encode()) for i in range(count)],
        partition=partition,
    )


# -- topics ----------------------------------------------------------------------------


def test_create_and_delete_topics(broker: BrokerProcess) -> None:
    assert ok(create(broker, "kjs-plain", 3)) is True
    assert ok(create(broker, "kjs-plain", 3)) is False  # TOPIC_ALREADY_EXISTS, as kafkajs says
    assert partition_ids(broker, "kjs-plain") == [0, 1, 2]
    assert "kjs-plain" in call(broker, "listTopics")
    call(broker, "deleteTopics", {"topics": ["kjs-plain"]})
    assert "kjs-plain" not in call(broker, "listTopics")


def test_create_topics_with_configs(broker: BrokerProcess) -> None:
    created = create(broker, "kjs-compact", 1, cleanup_policy="compact", retention_ms="60000")
    assert ok(created) is True
    assert partition_ids(broker, "kjs-compact") == [0]


def test_create_topics_with_an_invalid_config(broker: BrokerProcess) -> None:
    assert_error(create(broker, "kjs-bad-config", 1, cleanup_policy="shred"), "INVALID_CONFIG", 40)
    assert "kjs-bad-config" not in call(broker, "listTopics")


def test_create_topics_validate_only(broker: BrokerProcess) -> None:
    topics = [
        {"topic": "kjs-validate", "numPartitions": 2, "replicationFactor": 1},
        {
            "topic": "kjs-validate-configs",
            "numPartitions": 1,
            "replicationFactor": 1,
            "configEntries": [{"name": "cleanup.policy", "value": "compact"}],
        },
    ]
    # waitForLeaders: there are no leaders to wait for when nothing is created.
    for topic in topics:
        outcome = admin(
            broker,
            ("createTopics", {"validateOnly": True, "waitForLeaders": False, "topics": [topic]}),
        )[0]
        assert ok(outcome) is True, topic
    listed = call(broker, "listTopics")
    assert "kjs-validate" not in listed
    assert "kjs-validate-configs" not in listed


# -- configs ---------------------------------------------------------------------------


def test_describe_configs_of_a_topic(broker: BrokerProcess) -> None:
    ok(create(broker, "kjs-describe", 1, cleanup_policy="compact", retention_ms="60000"))
    entries = configs(broker, TOPIC, "kjs-describe")
    assert entries["cleanup.policy"]["configValue"] == "compact"
    assert entries["cleanup.policy"]["configSource"] == TOPIC_CONFIG
    assert entries["cleanup.policy"]["isDefault"] is False
    assert entries["retention.ms"]["configValue"] == "60000"
    assert entries["retention.ms"]["configSource"] == TOPIC_CONFIG
    # Not set on the topic: the broker's value (Kafka's default segment size, 1 GiB).
    assert entries["segment.bytes"]["configValue"] == "1073741824"
    assert entries["segment.bytes"]["configSource"] in (STATIC_BROKER_CONFIG, DEFAULT_CONFIG)


def test_describe_configs_of_an_unknown_topic(broker: BrokerProcess) -> None:
    outcome = admin(
        broker,
        (
            "describeConfigs",
            {"includeSynonyms": False, "resources": [{"type": TOPIC, "name": "kjs-none"}]},
        ),
    )[0]
    assert_error(outcome, "UNKNOWN_TOPIC_OR_PARTITION", 3)


def test_describe_configs_of_the_broker(broker: BrokerProcess) -> None:
    entries = configs(broker, BROKER, "0")
    assert entries["log.cleanup.policy"]["configValue"] == "delete"
    assert entries["log.segment.bytes"]["configValue"] == "1073741824"


def test_alter_configs_replaces_the_topic_config(broker: BrokerProcess) -> None:
    ok(create(broker, "kjs-alter", 1, cleanup_policy="compact", retention_ms="60000"))
    resource = {
        "type": TOPIC,
        "name": "kjs-alter",
        "configEntries": [{"name": "retention.ms", "value": "120000"}],
    }
    altered = call(broker, "alterConfigs", {"validateOnly": True, "resources": [resource]})
    assert [r["errorCode"] for r in altered["resources"]] == [0]
    assert configs(broker, TOPIC, "kjs-alter")["retention.ms"]["configValue"] == "60000"

    call(broker, "alterConfigs", {"validateOnly": False, "resources": [resource]})
    entries = configs(broker, TOPIC, "kjs-alter")
    assert entries["retention.ms"]["configValue"] == "120000"
    # AlterConfigs sets the whole topic config: what it leaves out returns to the default.
    assert entries["cleanup.policy"]["configValue"] == "delete"
    assert entries["cleanup.policy"]["configSource"] != TOPIC_CONFIG

    bad = {**resource, "configEntries": [{"name": "cleanup.policy", "value": "shred"}]}
    assert_error(admin(broker, ("alterConfigs", {"resources": [bad]}))[0], "INVALID_CONFIG", 40)


# -- partitions and records -------------------------------------------------------------


def test_create_partitions(broker: BrokerProcess) -> None:
    ok(create(broker, "kjs-grow", 1))
    call(broker, "createPartitions", {"topicPartitions": [{"topic": "kjs-grow", "count": 3}]})
    assert partition_ids(broker, "kjs-grow") == [0, 1, 2]
    records(broker, "kjs-grow", 2, partition=2)  # the new partition takes records
    assert offsets(broker, "kjs-grow")[2] == (0, 2)

    shrink = {"topicPartitions": [{"topic": "kjs-grow", "count": 2}]}
    assert_error(admin(broker, ("createPartitions", shrink))[0], "INVALID_PARTITIONS", 37)


def test_fetch_topic_offsets(broker: BrokerProcess) -> None:
    ok(create(broker, "kjs-offsets", 2))
    records(broker, "kjs-offsets", 5, partition=1)
    assert offsets(broker, "kjs-offsets") == {0: (0, 0), 1: (0, 5)}


def test_delete_topic_records(broker: BrokerProcess) -> None:
    ok(create(broker, "kjs-truncate", 1))
    records(broker, "kjs-truncate", 10)
    # kafkajs looks the partition leaders up in metadata it already has, so a fresh admin
    # client must have asked about the topic before (here: its offsets).
    deleted = admin(
        broker,
        ("fetchTopicOffsets", "kjs-truncate"),
        (
            "deleteTopicRecords",
            {"topic": "kjs-truncate", "partitions": [{"partition": 0, "offset": "4"}]},
        ),
    )
    ok(deleted[1])
    assert offsets(broker, "kjs-truncate") == {0: (4, 10)}
    assert [o for o, _, _ in read_partition(broker, "kjs-truncate")] == list(range(4, 10))


# -- groups ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_group(broker: BrokerProcess) -> tuple[str, str]:
    """A group left Empty with commits on a 2-partition topic of 10 records each."""
    topic, group = "kjs-grouped", "kjs-empty-group"
    ok(create(broker, topic, 2))
    for partition in (0, 1):
        records(broker, topic, 10, partition=partition)
    group_with_commits(broker, group, topic, {0: 7, 1: 3})
    return group, topic


def test_fetch_offsets(broker: BrokerProcess, empty_group: tuple[str, str]) -> None:
    group, topic = empty_group
    assert group_offsets(broker, group, topic) == {0: 7, 1: 3}
    assert group_offsets(broker, "kjs-no-such-group", topic) == {0: -1, 1: -1}


def test_list_groups(broker: BrokerProcess, empty_group: tuple[str, str]) -> None:
    group, _ = empty_group
    listed = call(broker, "listGroups")["groups"]
    assert {"groupId": group, "protocolType": "consumer"} in listed


def test_describe_groups(broker: BrokerProcess, empty_group: tuple[str, str]) -> None:
    group, _ = empty_group
    (described,) = call(broker, "describeGroups", [group])["groups"]
    assert described["errorCode"] == 0
    assert described["groupId"] == group
    assert described["state"] == "Empty"
    assert described["protocolType"] == "consumer"
    assert described["members"] == []
    (unknown,) = call(broker, "describeGroups", ["kjs-never-seen"])["groups"]
    assert (unknown["errorCode"], unknown["state"]) == (0, "Dead")


def test_set_offsets(broker: BrokerProcess) -> None:
    topic, group = "kjs-set", "kjs-set-group"
    ok(create(broker, topic, 2))
    records(broker, topic, 10, partition=0)
    group_with_commits(broker, group, topic, {0: 9, 1: 0})
    call(
        broker,
        "setOffsets",
        {"groupId": group, "topic": topic, "partitions": [{"partition": 0, "offset": "2"}]},
    )
    assert group_offsets(broker, group, topic) == {0: 2, 1: 0}


def test_reset_offsets(broker: BrokerProcess) -> None:
    topic, group = "kjs-reset", "kjs-reset-group"
    ok(create(broker, topic, 2))
    records(broker, topic, 10, partition=0)
    records(broker, topic, 4, partition=1)
    group_with_commits(broker, group, topic, {0: 10, 1: 4})
    call(broker, "resetOffsets", {"groupId": group, "topic": topic, "earliest": True})
    # kafkajs commits -2 ("earliest") and resolves it against the log start when asked.
    (fetched,) = call(
        broker, "fetchOffsets", {"groupId": group, "topics": [topic], "resolveOffsets": True}
    )
    assert {p["partition"]: int(p["offset"]) for p in fetched["partitions"]} == {0: 0, 1: 0}
    assert group_offsets(broker, group, topic) == {0: 0, 1: 0}

    call(broker, "resetOffsets", {"groupId": group, "topic": topic, "earliest": False})
    (fetched,) = call(
        broker, "fetchOffsets", {"groupId": group, "topics": [topic], "resolveOffsets": True}
    )
    assert {p["partition"]: int(p["offset"]) for p in fetched["partitions"]} == {0: 10, 1: 4}


def test_delete_groups(broker: BrokerProcess) -> None:
    topic, group = "kjs-delete-group", "kjs-doomed-group"
    ok(create(broker, topic, 1))
    records(broker, topic, 3)
    group_with_commits(broker, group, topic, {0: 3})
    deleted = call(broker, "deleteGroups", [group])
    assert deleted == [{"groupId": group, "errorCode": 0}]
    assert group not in [g["groupId"] for g in call(broker, "listGroups")["groups"]]
    assert group_offsets(broker, group, topic) == {0: -1}

    assert_error(admin(broker, ("deleteGroups", ["kjs-never-seen"]))[0], "GROUP_ID_NOT_FOUND", 69)


# -- a consumer group ------------------------------------------------------------------

GROUP_PARTITIONS = 4
GROUP_COUNT = 40


@pytest.fixture(scope="module")
def group_run(broker: BrokerProcess) -> dict[str, Any]:
    """group.js once per module: two members, one leaving, commits, admin probes."""
    result: dict[str, Any] = run_script(
        "group.js",
        broker.kafka_bootstrap,
        "kjs-members",
        "kjs-members-group",
        str(GROUP_PARTITIONS),
        str(GROUP_COUNT),
        timeout=4 * WAIT,
    )
    return result


def test_consumer_group(group_run: dict[str, Any]) -> None:
    assert "error" not in group_run, group_run.get("error")
    everything = set(range(GROUP_PARTITIONS))
    # While both were in the group they split the partitions between them...
    split = group_run["split"]
    assert split["a"] and split["b"], split
    assert set(split["a"]).isdisjoint(split["b"]), split
    assert set(split["a"]) | set(split["b"]) == everything, split
    # ...and after b left, a owned them all.
    assert set(group_run["joins"]["a"][-1]) == everything
    consumed = group_run["consumed"]
    keys = [(partition, offset) for _, partition, offset, _ in consumed]
    assert len(keys) == len(set(keys)), "a record was consumed twice"
    produced = {int(p): n for p, n in group_run["produced"].items()}
    assert sum(produced.values()) == 2 * GROUP_COUNT
    assert sorted(keys) == sorted((p, o) for p, n in produced.items() for o in range(n))
    assert {name for name, *_ in consumed} == {"a", "b"}
    (committed,) = group_run["committed"]
    assert {p["partition"]: int(p["offset"]) for p in committed["partitions"]} == produced


def test_list_and_describe_a_live_group(group_run: dict[str, Any]) -> None:
    listed = ok(group_run["listGroups"])["groups"]
    assert {"groupId": "kjs-members-group", "protocolType": "consumer"} in listed
    (described,) = ok(group_run["describeGroups"])["groups"]
    assert described["state"] == "Stable"
    assert described["protocolType"] == "consumer"
    assert len(described["members"]) == 2
    assert {m["clientId"] for m in described["members"]} == {"brokerd-kafkajs-group"}


def test_delete_groups_refuses_a_live_group(group_run: dict[str, Any]) -> None:
    assert_error(group_run["deleteGroups"], "NON_EMPTY_GROUP", 68)
