"""The storage value types' own rules: a read spec's validation, a stored payload's
size, a topic's frozen configs and its identity."""

from __future__ import annotations

import attrs
import pytest

from brokerd.storage.types import (
    COMMITTED_RECORDS,
    AppendInfo,
    Delivery,
    Isolation,
    ReadSpec,
    StoredRecords,
    TopicInfo,
)


def test_decoded_records_are_read_committed_only() -> None:
    with pytest.raises(ValueError, match="committed records only"):
        ReadSpec(Isolation.READ_UNCOMMITTED, Delivery.RECORDS)
    assert COMMITTED_RECORDS.committed
    assert not ReadSpec().committed
    assert ReadSpec(Isolation.READ_COMMITTED).committed


def test_a_stored_payload_size_is_its_bytes_or_its_region_length() -> None:
    assert StoredRecords(b"abc").size == 3

    class Region:
        position = 10
        length = 42

    assert StoredRecords(Region()).size == 42  # type: ignore[arg-type]


def test_topic_configs_are_sorted_read_only_and_the_id_is_drawn_per_topic() -> None:
    info = TopicInfo("t", 1, {"b": "2", "a": "1"})
    assert list(info.configs) == ["a", "b"]
    with pytest.raises(TypeError):
        info.configs["c"] = "3"  # type: ignore[index]
    assert TopicInfo("t", 1).topic_id != TopicInfo("t", 1).topic_id
    assert attrs.evolve(info, partitions=2).topic_id == info.topic_id


def test_a_duplicate_append_equals_the_original() -> None:
    assert AppendInfo(5, 7, 0, duplicate=True) == AppendInfo(5, 7, 0)
