"""Kafka Streams 4.4 with ``group.protocol=streams`` (KIP-1071) against brokerd: the
broker's streams group coordinator assigns the tasks and creates the internal topics.

The application is the one of :mod:`tests.e2e.test_kafka_streams` (a word count into a
RocksDB store with its changelog, a windowed count, a stream-table join; three
repartition topics, one of them copartitioned with the table's topic), run with the
streams protocol, so none of its internal topics exist before the broker makes them
from the topology the first heartbeat brings. What is checked: the outputs end exactly
equal to an independent count (read ``read_committed`` under exactly_once_v2), the
internal topics exist with the partition counts the coordinator derived, and Kafka's
``kafka-streams-groups.sh`` (the tools jar's StreamsGroupCommand) describes the group
with its member and tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.brokerproc import BrokerProcess
from tests.e2e.test_kafka_streams import run_scenario
from tests.e2e.test_kafka_tools import tool
from tests.kafka_helpers import module_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "streams-groups")


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_word_count_exact(broker: BrokerProcess, tmp_path: Path, guarantee: str) -> None:
    """One instance, the streams protocol: every count exact; the internal topics made
    by the broker with the source topics' partition count."""
    described: list[str] = []

    def describe(app_id: str) -> None:
        bs = broker.kafka_bootstrap
        described.append(tool("kafka-streams-groups.sh", "--bootstrap-server", bs, "--list"))
        described.append(tool("kafka-streams-groups.sh", "--bootstrap-server", bs,
                              "--describe", "--group", app_id, "--members", "--verbose"))

    result = run_scenario(broker, tmp_path, guarantee, "none", 100, protocol="streams",
                          while_running=describe if guarantee == "at_least_once" else None)
    assert result["excess"] == 0
    if described:
        listed, members = described
        app = f"s{guarantee.replace('_', '')}-none-100-app"
        assert app in listed.split()
        rows = [line.split() for line in members.splitlines() if line.startswith(app)]
        assert len(rows) == 1, members
        # One member, "streams" protocol, every task of the five subtopologies active.
        assert "streams" in rows[0], members
        active = members[members.index("ACTIVE:"):members.index("TARGET-ACTIVE:")]
        assert active.split() == ["ACTIVE:", *(f"{s}:[0,1];" for s in range(5))], members
    topics = AdminClient({"bootstrap.servers": broker.kafka_bootstrap}).list_topics(
        timeout=10).topics
    app = f"s{guarantee.replace('_', '')}-none-100-app"
    internal = {n: len(t.partitions) for n, t in topics.items() if n.startswith(app + "-")}
    assert internal[f"{app}-word-counts-changelog"] == 2, internal
    assert internal[f"{app}-to-join-repartition"] == 2, internal
