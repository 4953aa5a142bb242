"""brokerd.cli.tables: the admin answers as aligned text tables, and ``emit``'s choice
between them and the JSON document."""

from __future__ import annotations

import io
import json

from brokerd.cli.tables import (
    emit,
    render_group,
    render_groups,
    render_resets,
    render_share_group,
    render_share_groups,
    render_table,
    render_topic,
)


def test_render_table_aligns_text_left_and_numbers_right() -> None:
    lines = render_table(["NAME", "COUNT", "NOTE"], [["a", 5, None], ["long-name", 12345, "x"]])
    assert lines == [
        "NAME       COUNT  NOTE",
        "a              5  -",
        "long-name  12345  x",
    ]


def test_share_group_tables() -> None:
    assert render_share_groups([]) == ["no share groups"]
    lines = render_share_groups([{"group_id": "g", "partitions": 1, "backlog": 10,
                                  "in_flight": 2, "redelivered_total": 3, "archived": 1}])
    assert lines[0].split() == ["GROUP", "PARTITIONS", "BACKLOG", "IN-FLIGHT", "REDELIVERED",
                                "ARCHIVED"]
    assert lines[1].split() == ["g", "1", "10", "2", "3", "1"]
    group = {"group_id": "g", "backlog": 10, "in_flight": 2, "redelivered_total": 3,
             "archived": 1, "partitions": [{
                 "topic": "t", "partition": 0, "start_offset": 5, "end_offset": 15,
                 "backlog": 10, "in_flight": 2, "acquired": 1, "redelivered_total": 3,
                 "archived": 1}]}
    lines = render_share_group(group)  # type: ignore[arg-type]
    assert lines[0] == "share group g: backlog 10, in flight 2, redelivered 3, archived 1"
    assert lines[-1].split() == ["t", "0", "5", "15", "10", "2", "1", "3", "1"]


def test_cells_of_bools_lists_and_missing_values() -> None:
    assert render_table(["A", "B", "C"], [[True, [1, 2], []], [False, None, ["x"]]]) == [
        "A    B    C",
        "yes  1,2  -",
        "no   -    x",
    ]


def test_a_topic_summary_partitions_and_configs() -> None:
    topic = {"name": "t", "records": 7, "size_bytes": 900, "topic_id": "abc",
             "partitions": [{"partition": 0, "log_start_offset": 0, "high_watermark": 7,
                             "last_stable_offset": 7, "records": 7, "size_bytes": 900,
                             "segments": 1, "offline": None},
                            {"partition": 1, "offline": "disk"}],
             "configs": {"retention.ms": "1000", "cleanup.policy": "delete"},
             "overrides": ["retention.ms"]}
    lines = render_topic(topic)
    assert lines[0] == "topic t: 2 partition(s), 7 offset(s), 900 bytes, topic ID abc"
    assert lines[3].split()[-1] == "online"
    assert lines[4].endswith("offline: disk")
    assert lines[-2:] == ["cleanup.policy  delete  default", "retention.ms    1000    override"]


def test_groups_listed_and_described() -> None:
    assert render_groups([]) == ["no groups"]
    listed = render_groups([{"group_id": "g", "state": "Stable", "group_type": "consumer",
                             "protocol_type": "consumer", "member_count": 1,
                             "partitions": 2, "total_lag": 3}])
    assert listed[1].split() == ["g", "Stable", "Consumer", "consumer", "1", "2", "3"]
    group = {"group_id": "g", "group_type": "classic", "state": "Stable",
             "protocol_type": "consumer", "protocol": "range", "total_lag": 4,
             "members": [{"member_id": "m", "client_id": "c", "client_host": "/h",
                          "group_instance_id": None, "assignment": [["t", 0], ["t", 1]]}],
             "offsets": [{"topic": "t", "partition": 0, "committed_offset": 1,
                          "high_watermark": 5, "lag": 4}]}
    lines = render_group(group)
    assert lines[0] == (
        "group g (Classic): Stable, protocol consumer/range, 1 member(s), total lag 4")
    assert lines[3].split() == ["m", "c", "/h", "-", "t/0,t/1"]
    assert lines[-1].split() == ["t", "0", "1", "5", "4"]
    empty = render_group({"group_id": "s", "group_type": "share", "state": "Empty"})
    assert empty[0] == "group s (Share): Empty, 0 member(s), total lag 0"
    assert empty[2:] == ["no members", "no partitions read"]
    assert render_group({"group_id": "o"})[-1] == "no committed offsets"


def test_resets_say_whether_anything_was_done() -> None:
    row = {"group_id": "g", "topic": "t", "partition": 0, "previous_offset": 9,
           "new_offset": 0, "log_start_offset": 0, "high_watermark": 9}
    assert render_resets([row], dry_run=True)[-1] == (
        "would reset (dry run, nothing committed) 1 partition(s)")
    done = render_resets([row], dry_run=False)
    assert done[-1] == "reset 1 partition(s)"
    assert done[1].split() == ["g", "t", "0", "9", "0", "0", "9"]


def test_emit_writes_json_or_the_table() -> None:
    out = io.StringIO()
    assert emit(out, True, {"b": 1, "a": [2]}, ["ignored"]) == 0
    assert json.loads(out.getvalue()) == {"a": [2], "b": 1}
    assert out.getvalue() == '{"a": [2], "b": 1}\n'
    text = io.StringIO()
    emit(text, False, {"ignored": 1}, ["one", "two"])
    assert text.getvalue() == "one\ntwo\n"
