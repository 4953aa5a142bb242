"""Client-metrics resources (brokerd/kafka/telemetry/resources.py) and their file
(brokerd/storage/stores/client_metrics.py): Kafka's checks, the incremental operations,
and durability across a reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.kafka.regex import MAX_REGEX_LENGTH
from brokerd.kafka.telemetry.resources import (
    ClientFacts,
    ClientMetricsResources,
    InvalidClientMetricsConfig,
    Selector,
    apply_ops,
    parse,
)
from brokerd.storage.stores.client_metrics import (
    ClientMetricsFileError,
    ClientMetricsStore,
)

from tests.deferreds import result_of

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3




def test_parse_and_match() -> None:
    sub = parse("r", {"metrics": "a., b.,a.", "interval.ms": "1000",
                      "match": "client_id=prod-.*, client_source_port=4\\d+"})
    assert sub.metrics == ("a.", "b.")
    assert sub.interval_ms == 1000
    assert [s for s, _ in sub.match] == [Selector.CLIENT_ID, Selector.CLIENT_SOURCE_PORT]
    facts = ClientFacts("id", "prod-1", "java", "4.4", "127.0.0.1", "40000")
    assert sub.matches(facts)
    assert not sub.matches(ClientFacts("id", "prod-1", "java", "4.4", "127.0.0.1", "5000"))


@pytest.mark.parametrize(("configs", "why"), [
    ({"interval.ms": "99"}, "between 100 and 3600000"),
    ({"interval.ms": "3600001"}, "between 100 and 3600000"),
    ({"interval.ms": "soon"}, "Not a number"),
    ({"match": "client_id"}, "Illegal client matching pattern"),
    ({"match": "user=x"}, "unknown selector"),
    ({"match": "client_id=a,client_id=b"}, "Duplicate"),
    ({"match": "client_id=(a"}, "not a valid regular expression"),
    ({"match": "client_id=(a)\\1"}, "not a valid regular expression"),  # RE2: no backrefs
    ({"match": "client_id=" + "a" * (MAX_REGEX_LENGTH + 1)}, "longer than"),
    ({"retention.ms": "1"}, "Unknown client metrics config"),
])
def test_refused(configs: dict[str, str], why: str) -> None:
    with pytest.raises(InvalidClientMetricsConfig, match=why):
        parse("r", configs)


def test_empty_name_refused() -> None:
    with pytest.raises(InvalidClientMetricsConfig, match="empty"):
        parse("", {})


def test_incremental_operations() -> None:
    current = {"metrics": "a.,b."}
    assert apply_ops(current, [("metrics", APPEND, "b.,c.")]) == {"metrics": "a.,b.,c."}
    assert apply_ops(current, [("metrics", SUBTRACT, "a.")]) == {"metrics": "b."}
    assert apply_ops(current, [("metrics", DELETE, None), ("interval.ms", SET, "100")]) == {
        "interval.ms": "100"}
    with pytest.raises(InvalidClientMetricsConfig, match="append is not allowed"):
        apply_ops(current, [("interval.ms", APPEND, "5")])


@pytest.mark.parametrize(
    ("ops", "why"),
    [
        ([("bogus", 9, "x")], "Unknown client metrics config: bogus"),
        ([("bogus", SET, "x"), ("metrics", 9, "y")], "Unknown client metrics config: bogus"),
        ([("metrics", 9, "y"), ("bogus", SET, "x")], "Unknown config operation 9 for metrics"),
        ([("metrics", SET, None), ("metrics", 9, "y")], "Null value not supported for: metrics"),
    ],
)
def test_incremental_refusals_in_request_order(
    ops: list[tuple[str, int, str | None]], why: str
) -> None:
    """Each entry is checked whole (its name, then its operation, then its value)
    before the next one, so the first bad entry is the one reported."""
    with pytest.raises(InvalidClientMetricsConfig, match=why):
        apply_ops({}, ops)


def test_durable_across_reopen_and_deleted_when_empty(tmp_path: Path) -> None:
    store = ClientMetricsStore.in_directory(str(tmp_path))
    resources = ClientMetricsResources(store)
    result_of(resources.alter("r", [("metrics", SET, "x."), ("match", SET, "client_id=a")],
                        validate_only=False))
    result_of(resources.alter("dry", [("metrics", SET, "y.")], validate_only=True))
    assert resources.version == 1
    reopened = ClientMetricsResources(ClientMetricsStore.in_directory(str(tmp_path)))
    assert reopened.names() == ["r"]
    assert reopened.configs("r") == {"metrics": "x.", "match": "client_id=a"}
    (sub,) = reopened.subscriptions()
    assert sub.metrics == ("x.",)
    result_of(reopened.alter("r", [("metrics", DELETE, None), ("match", DELETE, None)],
                       validate_only=False))
    assert ClientMetricsResources(ClientMetricsStore.in_directory(str(tmp_path))).names() == []


def test_refused_change_stores_nothing(tmp_path: Path) -> None:
    resources = ClientMetricsResources(ClientMetricsStore.in_directory(str(tmp_path)))
    with pytest.raises(InvalidClientMetricsConfig):
        result_of(resources.alter("r", [("interval.ms", SET, "1")], validate_only=False))
    assert resources.names() == [] and resources.version == 0
    assert not (tmp_path / "client-metrics.json").exists()


def test_a_damaged_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "client-metrics.json").write_text('{"version": 1, "resources": {"r": 5}}')
    with pytest.raises(ClientMetricsFileError):
        ClientMetricsStore.in_directory(str(tmp_path)).load()
