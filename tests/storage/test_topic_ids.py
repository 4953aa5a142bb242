"""Topic IDs: Kafka's text form and rules (pure), the registry keeping them (a real data
directory: created with the topic, new when the name is used again, the same after a
restart, given to the topics of a data directory from before IDs and written back), the
core's lookup by ID, and ``brokerctl topics describe`` showing them (a real broker)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from brokerd.cli import brokerctl as cli
from brokerd.core.broker import Broker
from brokerd.core.policy import FsyncPolicy
from brokerd.storage.logdir.layout import REGISTRY_FILE
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.logdir.registry import read_registry
from brokerd.storage.logdir.registry_journal import JOURNAL_FILE
from brokerd.storage.topic_ids import (
    RESERVED_TOPIC_IDS,
    ZERO_TOPIC_ID,
    format_topic_id,
    new_topic_id,
    parse_topic_id,
)

from tests.brokerproc import BrokerProcess

# -- the text form and the draw ------------------------------------------------------


def test_text_form_is_kafkas_base64url() -> None:
    # Kafka's Uuid(0x0123456789abcdef, 0xfedcba9876543210) prints as this.
    topic_id = uuid.UUID("0123456789abcdef-fedcba9876543210".replace("-", ""))
    assert format_topic_id(topic_id) == "ASNFZ4mrze_-3LqYdlQyEA"
    assert parse_topic_id("ASNFZ4mrze_-3LqYdlQyEA") == topic_id
    assert format_topic_id(ZERO_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.mark.parametrize("bad", ["", "short", "ASNFZ4mrze_-3LqYdlQyE!", "ASNFZ4mrze_-3LqYdlQyEB",
                                 "ASNFZ4mrze_-3LqYdlQyEA=", "ASNFZ4mrze+/3LqYdlQyEA"])
def test_parse_refuses_what_is_not_an_id(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_topic_id(bad)


def test_draw_skips_reserved_dashed_and_taken_ids() -> None:
    dashed = parse_topic_id("-" + "A" * 21)
    # Fixed ids: a random one formats with a leading dash one time in 64, and the draw
    # would then (rightly) skip it too.
    taken = uuid.UUID("6f1c7a2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b")
    fresh = uuid.UUID("1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
    assert not format_topic_id(taken).startswith("-")
    assert not format_topic_id(fresh).startswith("-")
    draws = iter([ZERO_TOPIC_ID, uuid.UUID(int=1), dashed, taken, fresh])
    assert new_topic_id({taken}, draw=lambda: next(draws)) == fresh
    ids = {new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    assert not ids & RESERVED_TOPIC_IDS
    assert all(u.version == 4 and not format_topic_id(u).startswith("-") for u in ids)


# -- the registry --------------------------------------------------------------------


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Callable[[], LogDirectory]]:
    dirs: list[LogDirectory] = []

    def open_dir() -> LogDirectory:
        d = LogDirectory.open(str(tmp_path / "data"))
        dirs.append(d)
        return d

    yield open_dir
    for d in dirs:
        d.close()


def test_created_with_the_topic_kept_by_changes_and_restarts(
    opened: Callable[[], LogDirectory], tmp_path: Path
) -> None:
    d = opened()
    created = d.topic_changes.create_topic("t", 1)
    assert created.topic_id not in RESERVED_TOPIC_IDS
    assert d.topic("t") == created
    assert d.topic_by_id(created.topic_id) == created
    auto = d.get("auto", 0, create=True)
    assert auto is not None
    auto_id = d.topics()["auto"].topic_id
    assert auto_id != created.topic_id
    d.partition_changes.create_partitions("t", 3)
    d.topic_changes.alter_topic_configs("t", lambda _: {"retention.ms": "1000"})
    assert d.topics()["t"].topic_id == created.topic_id  # journal records keep it
    assert d.topic_by_id(created.topic_id) == d.topics()["t"]
    # A crash (no close): the journal alone holds the changes.
    journal = (tmp_path / "data" / JOURNAL_FILE).read_bytes()
    assert format_topic_id(created.topic_id).encode() in journal
    assert read_registry(str(tmp_path / "data"))["t"].topic_id == created.topic_id
    d.close()
    again = opened()
    assert again.topics()["t"].topic_id == created.topic_id
    assert again.topics()["t"].partitions == 3
    assert again.topics()["auto"].topic_id == auto_id
    snapshot = json.loads((tmp_path / "data" / REGISTRY_FILE).read_text())
    assert snapshot["topics"]["t"]["topic_id"] == format_topic_id(created.topic_id)


def test_a_topic_created_again_is_another_topic(opened: Callable[[], LogDirectory]) -> None:
    d = opened()
    first = d.topic_changes.create_topic("t", 2).topic_id
    d.topic_changes.delete_topic("t")
    assert d.topic_by_id(first) is None
    second = d.topic_changes.create_topic("t", 1).topic_id
    assert second != first
    assert d.topic_by_id(first) is None
    assert d.topic_by_id(second) == d.topic("t")
    d.close()
    assert opened().topic("t").topic_id == second  # type: ignore[union-attr]


def _write_old_registry(data: Path, topics: dict[str, Any], journal: list[Any] = ()) -> None:
    """A data directory as a broker before topic IDs left it: no ``topic_id`` anywhere."""
    data.mkdir()
    (data / REGISTRY_FILE).write_text(json.dumps({"version": 2, "topics": topics}))
    if journal:
        from brokerd.storage.journal.records import frame

        (data / JOURNAL_FILE).write_bytes(
            b"".join(frame(json.dumps(r).encode(), 1 << 20, "t") for r in journal)
        )


def test_old_data_directory_gets_ids_once_and_keeps_them(
    opened: Callable[[], LogDirectory], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _write_old_registry(
        data,
        {"old": {"partitions": 2, "configs": {}}},
        # A change to "old" and a topic created after the snapshot, both without IDs.
        [{"put": "old", "partitions": 3, "configs": {}},
         {"put": "later", "partitions": 1, "configs": {}}],
    )
    d = opened()
    ids = {name: info.topic_id for name, info in d.topics().items()}
    assert set(ids) == {"old", "later"} and len(set(ids.values())) == 2
    assert d.topics()["old"].partitions == 3
    # Written back at once (not only at a clean close): a crash now keeps them too.
    on_disk = read_registry(str(data))
    assert {name: info.topic_id for name, info in on_disk.items()} == ids
    assert (data / JOURNAL_FILE).read_bytes() == b""
    d.close()
    again = opened()
    assert {name: info.topic_id for name, info in again.topics().items()} == ids


def test_registry_refuses_a_malformed_or_reserved_id(tmp_path: Path) -> None:
    from brokerd.errors import StorageError

    for n, bad in enumerate([5, "nonsense", format_topic_id(ZERO_TOPIC_ID)]):
        data = tmp_path / f"d{n}"
        _write_old_registry(data, {"t": {"partitions": 1, "configs": {}, "topic_id": bad}})
        with pytest.raises(StorageError, match="topic_id"):
            LogDirectory.open(str(data))


def test_duplicate_ids_are_split(opened: Callable[[], LogDirectory], tmp_path: Path) -> None:
    same = format_topic_id(uuid.uuid4())
    _write_old_registry(
        tmp_path / "data",
        {"a": {"partitions": 1, "configs": {}, "topic_id": same},
         "b": {"partitions": 1, "configs": {}, "topic_id": same}},
    )
    d = opened()
    a, b = d.topics()["a"], d.topics()["b"]
    assert format_topic_id(a.topic_id) == same and b.topic_id != a.topic_id
    assert d.topic_by_id(b.topic_id) == b
    assert read_registry(str(tmp_path / "data"))["b"].topic_id == b.topic_id


# -- the core ------------------------------------------------------------------------


def test_core_looks_topics_up_by_id(opened: Callable[[], LogDirectory]) -> None:
    broker = Broker(
        opened(), reactor=Clock(), fsync=FsyncPolicy.parse("always"), run_read=defer.maybeDeferred,
        run_write=defer.maybeDeferred, retention_check_seconds=0, checkpoint_seconds=0,
    )
    broker.startService()
    try:
        broker.create_topic("t", 2)
        info = broker.topic_registry.topics()["t"]
        assert broker.topic_registry.topic_by_id(info.topic_id) == info
        assert broker.topic_registry.topic_by_id(uuid.uuid4()) is None
        assert broker.topic_registry.topic_by_id(ZERO_TOPIC_ID) is None
        broker.topic_registry.delete_topic("t")
        assert broker.topic_registry.topic_by_id(info.topic_id) is None
    finally:
        broker.stopService()


# -- brokerctl -----------------------------------------------------------------------


def _describe(broker: BrokerProcess, capsys: pytest.CaptureFixture[str], name: str) -> Any:
    capsys.readouterr()
    assert cli.main(["--bootstrap", broker.native_bootstrap, "topics", "describe", name,
                     "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_brokerctl_describe_shows_the_id(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl = ["--bootstrap", broker.native_bootstrap, "topics"]
    assert cli.main([*ctl, "create", "ids", "--partitions", "2"]) == 0
    first = _describe(broker, capsys, "ids")["topic_id"]
    parse_topic_id(first)
    assert cli.main([*ctl, "describe", "ids"]) == 0
    assert f"topic ID {first}" in capsys.readouterr().out.splitlines()[0]
    broker.restart()
    assert _describe(broker, capsys, "ids")["topic_id"] == first
    assert cli.main([*ctl, "delete", "ids"]) == 0
    assert cli.main([*ctl, "create", "ids", "--partitions", "1"]) == 0
    assert _describe(broker, capsys, "ids")["topic_id"] not in ("", first)
