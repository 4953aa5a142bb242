"""Client-metrics resources (brokerd/kafka/telemetry/resources.py): Kafka's checks and the
incremental operations (their file: tests/storage/stores/test_client_metrics.py)."""

from __future__ import annotations

import pytest

from brokerd.kafka.regex import MAX_REGEX_LENGTH
from brokerd.kafka.telemetry.resources import (
    ClientFacts,
    InvalidClientMetricsConfig,
    Selector,
    apply_ops,
    parse,
)

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
