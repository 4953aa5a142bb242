# -*- test-case-name: tests.cli.test_tables -*-
"""Aligned text tables of the admin answers, for ``brokerctl`` (:mod:`brokerd.cli.topics_groups`).

Each ``render_*`` function takes the JSON form of a view (``brokerd.operator.views.to_json``,
as the broker sends it) and returns the lines a person reads. Pure: no I/O; the
``--json`` form is the document itself and does not come through here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TextIO

from brokerd.native.operator_messages import JsonValue

__all__ = [
    "emit",
    "render_group",
    "render_groups",
    "render_resets",
    "render_share_group",
    "render_share_groups",
    "render_table",
    "render_topic",
    "render_topic_configs",
]

JsonObject = Mapping[str, JsonValue]

#: Columns are separated by this many spaces.
_GAP = 2


def _cell(value: JsonValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(_cell(v) for v in value) or "-"
    return str(value)


def _numeric(column: Sequence[JsonValue]) -> bool:
    """A column of integers (missing values allowed) is right-aligned."""
    present = [v for v in column if v is not None]
    return bool(present) and all(isinstance(v, int) and not isinstance(v, bool) for v in present)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[JsonValue]]) -> list[str]:
    """The rows under their headers, each column as wide as its widest cell; numbers
    are right-aligned, text left-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [_numeric([row[i] for row in rows]) for i in range(len(headers))]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = [
            v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return (" " * _GAP).join(padded).rstrip()

    return [line(list(headers)), *(line(r) for r in cells)]


def _int(document: JsonObject, key: str) -> int:
    value = document.get(key)
    return value if isinstance(value, int) else 0


def _objects(value: JsonValue) -> list[JsonObject]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def render_topic_configs(topic: JsonObject) -> list[str]:
    """The topic's effective configs, each marked as its own override or the default."""
    configs = topic.get("configs")
    overrides = topic.get("overrides")
    own = set(overrides) if isinstance(overrides, list) else set()
    rows: list[list[JsonValue]] = [
        [name, value, "override" if name in own else "default"]
        for name, value in sorted(configs.items())
    ] if isinstance(configs, dict) else []
    return render_table(["CONFIG", "VALUE", "SOURCE"], rows)


def render_topic(topic: JsonObject) -> list[str]:
    """A topic: a summary line, its partitions, then its configs. Its size in offsets is
    the high watermark less the log start: transaction markers, aborted records and
    compaction's gaps count (counting records would mean reading the log)."""
    partitions = _objects(topic.get("partitions"))
    head = (
        f"topic {topic.get('name')}: {len(partitions)} partition(s), "
        f"{_int(topic, 'records')} offset(s), {_int(topic, 'size_bytes')} bytes"
    )
    topic_id = topic.get("topic_id")
    if isinstance(topic_id, str) and topic_id:
        head += f", topic ID {topic_id}"
    rows: list[list[JsonValue]] = [
        [
            p.get("partition"),
            p.get("log_start_offset"),
            p.get("high_watermark"),
            p.get("last_stable_offset"),
            p.get("records"),
            p.get("size_bytes"),
            p.get("segments"),
            "online" if p.get("offline") is None else f"offline: {p.get('offline')}",
        ]
        for p in partitions
    ]
    table = render_table(
        ["PARTITION", "LOG-START", "HIGH-WATERMARK", "LSO", "OFFSETS", "BYTES", "SEGMENTS",
         "STATUS"],
        rows,
    )
    return [head, "", *table, "", *render_topic_configs(topic)]


def _group_type(group: JsonObject) -> str:
    """A group's type as Kafka's tools print it (``kafka-groups.sh --list``,
    ``kafka-consumer-groups.sh --list --type``): Classic, Consumer or Share; the JSON
    keeps ListGroups' lower-case name."""
    kind = group.get("group_type")
    return kind.capitalize() if isinstance(kind, str) and kind else "-"


def render_groups(groups: Sequence[JsonObject]) -> list[str]:
    """ListGroups' summaries, one line each: TYPE is the group's type (Classic,
    Consumer, Share), PROTOCOL its protocol type (``consumer`` for both kinds of
    consumer group, none for a group known only by its committed offsets)."""
    if not groups:
        return ["no groups"]
    rows: list[list[JsonValue]] = [
        [
            g.get("group_id"),
            g.get("state"),
            _group_type(g),
            g.get("protocol_type") or "-",
            g.get("member_count"),
            g.get("partitions"),
            g.get("total_lag"),
        ]
        for g in groups
    ]
    return render_table(
        ["GROUP", "STATE", "TYPE", "PROTOCOL", "MEMBERS", "PARTITIONS", "LAG"], rows
    )


def render_group(group: JsonObject) -> list[str]:
    """A group: a summary line, its members with their assignments, then a consumer
    group's committed offsets, or a share group's partitions (start offset, lag)."""
    members = _objects(group.get("members"))
    offsets = _objects(group.get("offsets"))
    shared = _objects(group.get("share_partitions"))
    protocol = "/".join(str(p) for p in (group.get("protocol_type"), group.get("protocol")) if p)
    head = (
        f"group {group.get('group_id')} ({_group_type(group)}): {group.get('state')}"
        f"{', protocol ' + protocol if protocol else ''}, {len(members)} member(s), "
        f"total lag {_int(group, 'total_lag')}"
    )
    lines = [head, ""]
    if members:
        rows: list[list[JsonValue]] = [
            [
                m.get("member_id"),
                m.get("client_id"),
                m.get("client_host"),
                m.get("group_instance_id"),
                [f"{a[0]}/{a[1]}" for a in _pairs(m.get("assignment"))],
            ]
            for m in members
        ]
        lines += render_table(["MEMBER", "CLIENT-ID", "HOST", "INSTANCE", "ASSIGNMENT"], rows)
        lines.append("")
    else:
        lines.append("no members")
    if group.get("group_type") == "share":
        # As kafka-share-groups.sh --describe: the share-partition start offset and the
        # lag (records from it to the log's end not yet acknowledged or archived).
        rows = [
            [p.get("topic"), p.get("partition"), p.get("start_offset"), p.get("end_offset"),
             p.get("backlog"), p.get("in_flight")]
            for p in shared
        ]
        if rows:
            lines += render_table(
                ["TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "LAG", "IN-FLIGHT"], rows
            )
        else:
            lines.append("no partitions read")
    elif offsets:
        rows = [
            [o.get("topic"), o.get("partition"), o.get("committed_offset"),
             o.get("high_watermark"), o.get("lag")]
            for o in offsets
        ]
        lines += render_table(["TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG"], rows)
    else:
        lines.append("no committed offsets")
    return lines


def _pairs(value: JsonValue) -> list[tuple[JsonValue, JsonValue]]:
    if not isinstance(value, list):
        return []
    return [(v[0], v[1]) for v in value if isinstance(v, list) and len(v) == 2]


def render_resets(rows: Sequence[JsonObject], *, dry_run: bool) -> list[str]:
    """ResetOffsets' rows, and what was (or, with ``dry_run``, would be) done."""
    table = render_table(
        ["GROUP", "TOPIC", "PARTITION", "PREVIOUS", "NEW", "LOG-START", "HIGH-WATERMARK"],
        [
            [r.get("group_id"), r.get("topic"), r.get("partition"), r.get("previous_offset"),
             r.get("new_offset"), r.get("log_start_offset"), r.get("high_watermark")]
            for r in rows
        ],
    )
    verb = "would reset (dry run, nothing committed)" if dry_run else "reset"
    return [*table, "", f"{verb} {len(rows)} partition(s)"]


def render_share_groups(groups: Sequence[JsonObject]) -> list[str]:
    """ListShareGroups' summaries, one line each."""
    if not groups:
        return ["no share groups"]
    rows: list[list[JsonValue]] = [
        [
            g.get("group_id"),
            g.get("partitions"),
            g.get("backlog"),
            g.get("in_flight"),
            g.get("redelivered_total"),
            g.get("archived"),
        ]
        for g in groups
    ]
    return render_table(
        ["GROUP", "PARTITIONS", "BACKLOG", "IN-FLIGHT", "REDELIVERED", "ARCHIVED"], rows
    )


def render_share_group(group: JsonObject) -> list[str]:
    """DescribeShareGroup: the group's totals, then one line per partition."""
    lines = [
        f"share group {group.get('group_id')}: backlog {_int(group, 'backlog')}, "
        f"in flight {_int(group, 'in_flight')}, redelivered {_int(group, 'redelivered_total')}, "
        f"archived {_int(group, 'archived')}",
        "",
    ]
    rows: list[list[JsonValue]] = [
        [
            p.get("topic"),
            p.get("partition"),
            p.get("start_offset"),
            p.get("end_offset"),
            p.get("backlog"),
            p.get("in_flight"),
            p.get("acquired"),
            p.get("redelivered_total"),
            p.get("archived"),
        ]
        for p in _objects(group.get("partitions"))
    ]
    headers = ["TOPIC", "PARTITION", "START", "END", "BACKLOG", "IN-FLIGHT", "ACQUIRED",
               "REDELIVERED", "ARCHIVED"]
    return lines + render_table(headers, rows)


def emit(out: TextIO, as_json: bool, document: object, lines: Sequence[str]) -> int:
    """A command's answer on ``out``: ``document`` as JSON (``--json``: for scripts) or
    its table ``lines``; the exit status 0."""
    if as_json:
        out.write(json.dumps(document, sort_keys=True) + "\n")
    else:
        out.write("\n".join(lines) + "\n")
    return 0
