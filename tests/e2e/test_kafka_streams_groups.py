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
from tests.e2e.test_kafka_streams import (
    CATCH_UP,
    CATEGORY,
    OUTPUTS,
    Lines,
    Outputs,
    create_topics,
    produce_categories,
    run_scenario,
)
from tests.e2e.test_kafka_tools import tool
from tests.kafka_helpers import module_broker, wait_until
from tests.streams_app import StreamsApp, need_streams_app, true_counts

pytestmark = pytest.mark.broker


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


def _members_with_tasks(broker: BrokerProcess, app_id: str) -> list[str]:
    """The describe rows of the group's members that have active tasks."""
    out = tool("kafka-streams-groups.sh", "--bootstrap-server", broker.kafka_bootstrap,
               "--describe", "--group", app_id, "--members", check=False)
    return [line for line in out.splitlines()
            if line.startswith(app_id) and "ACTIVE: " in line
            and line.split("ACTIVE: ")[1].split("TARGET-ACTIVE")[0].strip()]


@pytest.mark.slow
def test_scaled_to_two_members_and_back(broker: BrokerProcess, tmp_path: Path) -> None:
    """exactly_once_v2: a stream thread added (a second member: the tasks are split,
    each moving only after its owner revoked it) and removed again (its tasks go back);
    every count exact throughout."""
    need_streams_app()
    prefix = "sscale-"
    app_id = prefix + "app"
    bootstrap = broker.kafka_bootstrap
    create_topics(bootstrap, prefix)
    lines = Lines(bootstrap, prefix + "lines")
    produce_categories(bootstrap, prefix + "categories", lines.t0)
    app = StreamsApp(bootstrap, app_id, "exactly_once_v2", tmp_path / "state", prefix,
                     "streams")
    outputs = Outputs(bootstrap, prefix, "exactly_once_v2")

    def exact() -> bool:
        outputs.poll()
        want = true_counts(lines.sent, CATEGORY)
        return all(outputs.tables[n] == t for n, t in zip(OUTPUTS, want, strict=True))

    try:
        app.start().wait_for("STATE RUNNING")
        lines.produce(60)
        wait_until(exact, "exact counts with one member", timeout=CATCH_UP)
        app.command("add-thread")
        app.wait_prefix("THREAD-ADDED")
        wait_until(lambda: len(_members_with_tasks(broker, app_id)) == 2,
                   "two members with tasks", timeout=CATCH_UP, interval=2.0)
        lines.produce(60)
        wait_until(exact, "exact counts with two members", timeout=CATCH_UP)
        app.command("remove-thread")
        app.wait_prefix("THREAD-REMOVED")
        lines.produce(60)
        wait_until(exact, "exact counts back to one member", timeout=CATCH_UP)
        assert len(_members_with_tasks(broker, app_id)) == 1
    finally:
        outputs.close()
        app.kill()


@pytest.mark.slow
def test_exactly_once_killed_and_restarted(broker: BrokerProcess, tmp_path: Path) -> None:
    """exactly_once_v2, the app killed -9 mid-stream and restarted on its state
    directory: the killed member keeps its tasks until its session (45 s, Kafka's
    minimum) runs out, then the new one takes them; every count exact."""
    result = run_scenario(broker, tmp_path, "exactly_once_v2", "kill", 100, protocol="streams")
    assert result["excess"] == 0


@pytest.mark.slow
def test_exactly_once_broker_killed(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """exactly_once_v2 with the broker killed -9 and restarted under the running app:
    the group comes back from the offsets journal, every count exact."""
    for own in module_broker(tmp_path_factory, "streams-groups-crash"):
        result = run_scenario(own, tmp_path, "exactly_once_v2", "broker-kill", 100,
                              protocol="streams")
        assert result["excess"] == 0
