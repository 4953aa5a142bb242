"""brokerctl's admin commands against a live ``twistd broker`` (tests/brokerproc.py): every
pinned command in both output forms (aligned table, ``--json``), errors and exit codes,
a broker without the Kafka listener, and the table renderer itself."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.cli import brokerctl as cli
from brokerd.cli.topics_groups import parse_datetime_ms
from brokerd.client import NativeClient
from brokerd.testing import LaunchedBroker

from tests.brokerproc import BROKERCTL, BrokerProcess, env, free_port
from tests.kafka_helpers import WAIT, module_broker, wait_until


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "cli-admin")


class Ctl:
    """brokerctl run in this process against one broker."""

    def __init__(self, native_address: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.native_address = native_address
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main(["--bootstrap", self.native_address, *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, err
        assert out.count("\n") == 1  # one line per answer
        return json.loads(out)


@pytest.fixture
def ctl(broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> Ctl:
    return Ctl(broker.native_bootstrap, capsys)


def produce(native_address: str, topic: str, partition: int, count: int) -> None:
    host, _, port = native_address.rpartition(":")
    with NativeClient(host, int(port), timeout=10.0) as client:
        client.produce(topic, partition, [b"v%d" % i for i in range(count)])


def test_topics_describe(broker: BrokerProcess, ctl: Ctl) -> None:
    assert ctl("topics", "create", "cli-desc", "--partitions", "2")[0] == 0
    produce(broker.native_bootstrap, "cli-desc", 1, 3)
    code, out, _ = ctl("topics", "describe", "cli-desc")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("topic cli-desc: 2 partition(s), 3 offset(s), ")
    header = lines[2].split()
    assert header[:5] == ["PARTITION", "LOG-START", "HIGH-WATERMARK", "LSO", "OFFSETS"]
    assert lines[4].split()[:5] == ["1", "0", "3", "3", "3"]
    assert lines[4].split()[-1] == "online"
    # Columns line up: every row is as wide as the header's columns.
    assert len({line.index("online") for line in lines[3:5]}) == 1
    assert any(line.split() == ["cleanup.policy", "delete", "default"] for line in lines)
    doc = ctl.json("topics", "describe", "cli-desc")
    assert doc["name"] == "cli-desc" and doc["records"] == 3
    assert [p["high_watermark"] for p in doc["partitions"]] == [0, 3]
    assert doc["overrides"] == []


def test_topics_alter_sets_and_deletes(ctl: Ctl) -> None:
    ctl("topics", "create", "cli-alter")
    code, out, _ = ctl("topics", "alter", "cli-alter", "--config", "retention.ms=60000",
                       "--config", "cleanup.policy=compact")
    assert code == 0
    assert out.startswith("altered topic cli-alter: retention.ms=60000, cleanup.policy=compact")
    assert any(line.split() == ["retention.ms", "60000", "override"] for line in out.splitlines())
    doc = ctl.json("topics", "alter", "cli-alter", "--config", "cleanup.policy=")
    assert doc["overrides"] == ["retention.ms"]
    assert doc["configs"]["cleanup.policy"] == "delete"
    code, _, err = ctl("topics", "alter", "cli-alter", "--config", "no.such=1")
    assert code == cli.EXIT_ERROR and "INVALID_CONFIG" in err and "no.such" in err
    code, _, err = ctl("topics", "alter", "cli-alter", "--config", "retention.ms=soon")
    assert code == cli.EXIT_ERROR and "INVALID_CONFIG" in err
    assert ctl.json("topics", "describe", "cli-alter")["overrides"] == ["retention.ms"]


def test_topics_add_partitions(ctl: Ctl) -> None:
    ctl("topics", "create", "cli-grow", "--partitions", "2")
    code, out, _ = ctl("topics", "add-partitions", "cli-grow", "--count", "3")
    assert (code, out) == (0, "topic cli-grow: 2 -> 5 partition(s)\n")
    doc = ctl.json("topics", "add-partitions", "cli-grow", "--count", "1")
    assert len(doc["partitions"]) == 6
    code, _, err = ctl("topics", "add-partitions", "nosuch", "--count", "1")
    assert code == cli.EXIT_ERROR and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_topics_delete(ctl: Ctl) -> None:
    ctl("topics", "create", "cli-del")
    ctl("topics", "create", "cli-del2")
    assert ctl("topics", "delete", "cli-del")[:2] == (0, "deleted topic cli-del\n")
    assert ctl.json("topics", "delete", "cli-del2") == {"topic": "cli-del2", "deleted": True}
    code, _, err = ctl("topics", "describe", "cli-del")
    assert code == cli.EXIT_ERROR and "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, _, err = ctl("topics", "delete", "cli-del")
    assert code == cli.EXIT_ERROR and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_groups_reset_list_describe_delete(broker: BrokerProcess, ctl: Ctl) -> None:
    ctl("topics", "create", "cli-g", "--partitions", "2")
    produce(broker.native_bootstrap, "cli-g", 0, 5)
    code, out, _ = ctl("groups", "reset-offsets", "cli-group", "--topic", "cli-g",
                       "--to-offset", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "PREVIOUS", "NEW", "LOG-START",
                                "HIGH-WATERMARK"]
    assert lines[1].split() == ["cli-group", "cli-g", "0", "-", "3", "0", "5"]
    assert lines[2].split() == ["cli-group", "cli-g", "1", "-", "0", "0", "0"]  # clamped
    assert lines[-1] == "reset 2 partition(s)"
    rows = ctl.json("groups", "reset-offsets", "cli-group", "--topic", "cli-g:0", "--to-earliest",
                    "--dry-run")
    assert rows == [{"group_id": "cli-group", "topic": "cli-g", "partition": 0,
                     "previous_offset": 3, "new_offset": 0, "log_start_offset": 0,
                     "high_watermark": 5}]
    rows = ctl.json("groups", "reset-offsets", "cli-group", "--topic", "cli-g:0",
                    "--to-datetime", "2999-01-01T00:00:00+00:00")
    assert rows[0]["new_offset"] == 5  # nothing that new: latest
    ctl.json("groups", "reset-offsets", "cli-group", "--topic", "cli-g:0", "--to-offset", "3")

    code, out, _ = ctl("groups", "list")
    row = next(line.split() for line in out.splitlines() if line.startswith("cli-group "))
    assert row == ["cli-group", "Empty", "Classic", "-", "0", "2", "2"]
    listed = ctl.json("groups", "list")
    assert {"group_id": "cli-group", "group_type": "classic", "state": "Empty",
            "protocol_type": "", "protocol": "", "member_count": 0, "partitions": 2,
            "total_lag": 2} in listed

    code, out, _ = ctl("groups", "describe", "cli-group")
    assert code == 0
    assert out.splitlines()[0] == "group cli-group (Classic): Empty, 0 member(s), total lag 2"
    assert "no members" in out
    assert ["cli-g", "0", "3", "5", "2"] in [line.split() for line in out.splitlines()]
    doc = ctl.json("groups", "describe", "cli-group")
    assert (doc["state"], doc["total_lag"], doc["members"]) == ("Empty", 2, [])

    assert ctl("groups", "delete", "cli-group")[:2] == (0, "deleted group cli-group\n")
    code, _, err = ctl("groups", "describe", "cli-group")
    assert code == cli.EXIT_ERROR and "GROUP_ID_NOT_FOUND" in err
    code, _, err = ctl("groups", "delete", "cli-group")
    assert code == cli.EXIT_ERROR and "GROUP_ID_NOT_FOUND" in err


def test_groups_of_every_type_listed_and_a_share_group_described(
    broker: BrokerProcess, ctl: Ctl
) -> None:
    """A share group (a confluent-kafka ShareConsumer) and a consumer-protocol group
    (KIP-848) are listed with Kafka's tools' types, Share and Consumer; the share group
    is described with its member, its assignment, and its start offset and lag."""
    ck = pytest.importorskip("confluent_kafka")
    bootstrap = broker.kafka_bootstrap
    assert ctl("topics", "create", "cli-sq")[0] == 0
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("cli-sq", b"v%d" % i)
    assert producer.flush(WAIT) == 0
    share = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "cli-share"})
    modern = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-modern",
                          "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        share.subscribe(["cli-sq"])
        modern.subscribe(["cli-sq"])

        def joined() -> bool:
            share.poll(timeout=0.2)  # the share-partition starts at the log's end (latest)
            modern.poll(timeout=0.2)
            doc = ctl.json("groups", "describe", "cli-share")
            return bool(doc["members"] and doc["share_partitions"] and modern.assignment())

        wait_until(joined, "the share group and the consumer group to have a member")
        for i in range(3):  # not polled: the share group's lag
            producer.produce("cli-sq", b"late-%d" % i)
        assert producer.flush(WAIT) == 0

        code, out, _ = ctl("groups", "list")
        assert code == 0
        rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
        assert out.splitlines()[0].split() == [
            "GROUP", "STATE", "TYPE", "PROTOCOL", "MEMBERS", "PARTITIONS", "LAG"]
        assert rows["cli-share"] == ["cli-share", "Stable", "Share", "share", "1", "1", "3"]
        assert rows["cli-modern"][:5] == ["cli-modern", "Stable", "Consumer", "consumer", "1"]
        types = {g["group_id"]: g["group_type"] for g in ctl.json("groups", "list")}
        assert (types["cli-share"], types["cli-modern"]) == ("share", "consumer")

        code, out, _ = ctl("groups", "describe", "cli-share")
        assert code == 0, out
        lines = [line.split() for line in out.splitlines()]
        assert out.splitlines()[0].startswith(
            "group cli-share (Share): Stable, protocol share, 1 member(s), total lag 3")
        assert lines[lines.index(["MEMBER", "CLIENT-ID", "HOST", "INSTANCE", "ASSIGNMENT"]) + 1][
            -1] == "cli-sq/0"
        header = ["TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "LAG", "IN-FLIGHT"]
        assert lines[lines.index(header) + 1][:5] == ["cli-sq", "0", "10", "13", "3"]
    finally:
        share.close()
        modern.close()


def test_groups_errors(ctl: Ctl) -> None:
    ctl("topics", "create", "cli-gerr")
    code, _, err = ctl("groups", "reset-offsets", "g", "--topic", "nosuch", "--to-latest")
    assert code == cli.EXIT_ERROR and "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, _, err = ctl("groups", "reset-offsets", "g", "--topic", "cli-gerr:4", "--to-latest")
    assert code == cli.EXIT_ERROR and "no partition 4" in err
    code, _, err = ctl("groups", "describe", "x" * 300)
    assert code == cli.EXIT_ERROR and "INVALID_GROUP_ID" in err


@pytest.mark.parametrize(
    "args",
    [
        ["groups", "reset-offsets", "g", "--topic", "t"],  # no target
        ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"],
        ["groups", "reset-offsets", "g", "--topic", "t", "--to-offset", "-1"],
        ["groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"],
        ["groups", "reset-offsets", "g", "--topic", "t:x", "--to-latest"],
        ["groups", "reset-offsets", "g", "--to-latest"],  # no topic
        ["topics", "alter", "t"],  # no --config
        ["topics", "alter", "t", "--config", "novalue"],
        ["topics", "add-partitions", "t", "--count", "0"],
        ["topics", "add-partitions", "t"],
        ["groups"],
    ],
)
def test_bad_usage_exits_2(ctl: Ctl, args: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        ctl(*args)
    assert exited.value.code == cli.EXIT_USAGE


@pytest.mark.brokerd(kafka="none")
def test_groups_on_a_broker_without_the_kafka_listener(
    brokerd: LaunchedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --kafka none the group coordinator is still there: an operator resets a
    group's offsets (which creates them), lists, describes and deletes the group."""
    assert "kafka" not in brokerd.addresses
    ctl = Ctl(brokerd.native_address, capsys)
    ctl("topics", "create", "t")
    produce(brokerd.native_address, "t", 0, 4)
    reset = ctl.json("groups", "reset-offsets", "g", "--topic", "t", "--to-latest")
    assert [(r["partition"], r["new_offset"]) for r in reset] == [(0, 4)]
    assert [g["group_id"] for g in ctl.json("groups", "list")] == ["g"]
    described = ctl.json("groups", "describe", "g")
    assert [(o["topic"], o["committed_offset"], o["lag"]) for o in described["offsets"]] == [
        ("t", 4, 0)
    ]
    assert ctl("groups", "delete", "g")[0] == 0
    assert ctl.json("groups", "list") == []


def test_entry_point_and_unreachable_broker(broker: BrokerProcess, tmp_path: Path) -> None:
    r = subprocess.run(
        [str(BROKERCTL), "--bootstrap", broker.native_bootstrap, "groups", "list", "--json"],
        capture_output=True, env=env(), timeout=30, check=False,
    )
    assert r.returncode == 0, r.stderr
    assert isinstance(json.loads(r.stdout), list)
    r = subprocess.run(
        [str(BROKERCTL), "--bootstrap", f"127.0.0.1:{free_port()}", "topics", "describe", "t"],
        capture_output=True, env=env(), timeout=30, check=False,
    )
    assert r.returncode == cli.EXIT_UNREACHABLE
    assert b"cannot reach the broker" in r.stderr


# --------------------------------------------------------------------------- pure parts


def test_datetime_parsing() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01Z") == 1000
    assert parse_datetime_ms("2024-05-01T12:00:00+02:00") == 1714557600000
    assert parse_datetime_ms("2024-05-01T10:00:00.250+00:00") == 1714557600250
