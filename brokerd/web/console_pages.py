"""The console's page bodies: the overview (topics, groups, share groups, the broker),
one topic, one consumer group, one share group, and "not found".

Each function turns views (:mod:`brokerd.admin.views`) and the sampler's history into
the HTML of a page body; every text that came from a client (group ids, client ids,
member ids, metadata, config values) is escaped here or by the helpers of
:mod:`brokerd.web.console_html`. What this module does not do: HTTP (see
:mod:`brokerd.web.console`) or change anything: every page is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import quote

import attrs

from brokerd.admin.share_groups import ShareGroupView, SharePartitionView
from brokerd.admin.views import SHARE_GROUP, GroupView, MemberView, PartitionView, TopicView
from brokerd.web import console_history as history
from brokerd.web.console_history import ConsoleSource, Sample
from brokerd.web.console_html import (
    cell,
    count,
    duration,
    explain,
    group_link,
    per_second,
    raw_cell,
    size,
    stamp,
    table,
    topic_link,
)
from brokerd.web.console_svg import bar, line_chart, sparkline

#: What the "offsets" figures count: they are not records (counting those would read
#: the logs; Kafka's UIs show the same difference as "messages", with the same caveat).
OFFSETS_EXPLAINED = (
    "Offsets from the log start to the end (high watermark). Not a record count: "
    "transaction markers and aborted records take offsets too, and compaction leaves "
    "gaps, so a topic holds at most this many records."
)


@attrs.frozen
class Moment:
    """What every page body is rendered against: the time, the history, and the render
    counter (a fresh body has a larger one)."""

    now: float
    render: int
    samples: Sequence[Sample] = ()


def _facts(items: Sequence[tuple[str, str]]) -> str:
    """A definition list of ``(name, markup)``; names escaped, values already markup."""
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f'<dl class="facts">{rows}</dl>'


# -- overview --------------------------------------------------------------------------


def _topic_row(topic: TopicView, moment: Moment) -> str:
    figure = history.topic_end(topic.name)
    offline = sum(1 for p in topic.partitions if p.offline is not None)
    parts = count(len(topic.partitions))
    if offline:
        parts += f' <span class="bad">({offline} offline)</span>'
    return (
        f'<tr class="{"offline" if offline else ""}">'
        + raw_cell(topic_link(topic.name))
        + raw_cell(parts, num=True)
        + cell(count(topic.records), num=True)
        + cell(size(topic.size_bytes), num=True)
        + cell(per_second(history.rate(moment.samples, figure)), num=True)
        + raw_cell(
            sparkline(
                history.rate_series(moment.samples, figure),
                label=f"produce rate of {topic.name}",
            )
        )
        + "</tr>"
    )


def _group_row(group: GroupView, moment: Moment) -> str:
    consumed = history.rate(moment.samples, history.group_committed(group.group_id))
    return (
        "<tr>"
        + raw_cell(group_link(group.group_id))
        + cell(group.state)
        + cell(count(len(group.members)), num=True)
        + cell(count(group.total_lag), num=True)
        + cell(per_second(consumed), num=True)
        + raw_cell(
            sparkline(
                history.value_series(moment.samples, history.group_lag(group.group_id)),
                label=f"lag of {group.group_id}",
            )
        )
        + "</tr>"
    )


def overview(
    source: ConsoleSource,
    moment: Moment,
    *,
    settings: Mapping[str, str],
    started: float,
    share_groups: Sequence[ShareGroupView] | None = None,
) -> str:
    """``/``: every topic, every group (consumer groups, and the share groups when
    ``share_groups`` is given), and the broker's settings and health."""
    topics = source.topics()
    topic_rows = (_topic_row(t, moment) for t in topics)
    topics_html = table(
        ("topic", "partitions", "offsets", "size", "produce rate", "last 10 min"),
        topic_rows,
        empty="No topics yet.",
        numeric=(1, 2, 3, 4),
        explained={2: OFFSETS_EXPLAINED},
    )
    if source.has_groups:
        groups_html = table(
            ("group", "state", "members", "lag", "consume rate", "lag, last 10 min"),
            (_group_row(g, moment) for g in source.groups()),
            empty="No consumer groups yet.",
            numeric=(2, 3, 4),
        )
    else:
        groups_html = (
            '<p class="muted">The Kafka listener is off: consumer groups exist only on '
            "the Kafka protocol.</p>"
        )
    offline = source.offline_partitions()
    offline_rows = (
        "<tr>" + raw_cell(topic_link(t)) + cell(str(p), num=True) + cell(reason) + "</tr>"
        for (t, p), reason in sorted(offline.items())
    )
    health = (
        f'<span class="bad">{count(len(offline))} offline</span>'
        if offline
        else '<span class="good">none offline</span>'
    )
    broker = _facts(
        [
            ("uptime", escape(duration(moment.now - started))),
            ("topics", count(len(topics))),
            ("partitions", count(sum(len(t.partitions) for t in topics)) + f" ({health})"),
        ]
    )
    settings_html = "".join(
        f"<div><dt>{escape(k)}</dt><dd><code>{escape(v)}</code></dd></div>"
        for k, v in sorted(settings.items())
    )
    return (
        stamp(moment.render, moment.now)
        + f'<section id="topics"><h2>Topics</h2>{topics_html}</section>'
        + f'<section id="groups"><h2>Consumer groups</h2>{groups_html}</section>'
        + (_share_groups_section(share_groups) if share_groups is not None else "")
        + f'<section id="broker"><h2>Broker</h2>{broker}'
        + (
            "<h2>Offline partitions</h2>"
            + table(("topic", "partition", "reason"), offline_rows, empty="", numeric=(1,))
            if offline
            else ""
        )
        + "<h2>Settings</h2>"
        + (f'<dl class="settings">{settings_html}</dl>' if settings else "")
        + "</section>"
    )


# -- one topic -------------------------------------------------------------------------


def _partition_row(p: PartitionView) -> str:
    if p.offline is not None:
        return (
            '<tr class="offline">'
            + cell(str(p.partition), num=True)
            + f'<td colspan="6" class="bad">offline: {escape(p.offline)}</td></tr>'
        )
    return (
        "<tr>"
        + cell(str(p.partition), num=True)
        + cell(count(p.log_start_offset), num=True)
        + cell(count(p.high_watermark), num=True)
        + cell(count(p.last_stable_offset), num=True)
        + cell(count(p.records), num=True)
        + cell(size(p.size_bytes), num=True)
        + cell(count(p.segments), num=True)
        + "</tr>"
    )


def topic_page(topic: TopicView, groups: Sequence[GroupView], moment: Moment) -> str:
    """``/topics/<name>``: partitions, configs, the produce rate over time and the groups
    that committed offsets of it."""
    figure = history.topic_end(topic.name)
    facts = _facts(
        [
            ("topic ID", escape(topic.topic_id)),
            ("partitions", count(len(topic.partitions))),
            # _facts escapes names; this one's tooltip is markup, so it is a value's.
            ("offsets", count(topic.records) + " " + explain("(not records)", OFFSETS_EXPLAINED)),
            ("size", escape(size(topic.size_bytes))),
            ("produce rate", escape(per_second(history.rate(moment.samples, figure)))),
        ]
    )
    chart = line_chart(
        [("records/s produced", history.rate_series(moment.samples, figure))],
        now=moment.now,
        title=f"produce rate of {topic.name}, records per second",
    )
    partitions = table(
        (
            "partition",
            "log start",
            "end (high watermark)",
            "last stable",
            "offsets",
            "size",
            "segments",
        ),
        (_partition_row(p) for p in topic.partitions),
        empty="No partitions.",
        numeric=range(7),
        explained={4: OFFSETS_EXPLAINED},
    )
    config_rows = (
        "<tr>"
        + cell(key)
        + f"<td><code>{escape(value)}</code></td>"
        + raw_cell('<span class="tag">override</span>' if key in topic.overrides else "")
        + "</tr>"
        for key, value in sorted(topic.configs.items())
    )
    configs = table(("config", "effective value", ""), config_rows, empty="No configs.")
    readers: list[str] = []
    for group in groups:
        mine = [o for o in group.offsets if o.topic == topic.name]
        if mine:
            lag = sum(o.lag for o in mine if o.lag is not None)
            readers.append(
                "<tr>"
                + raw_cell(group_link(group.group_id))
                + cell(group.state)
                + cell(count(len(mine)), num=True)
                + cell(count(lag), num=True)
                + "</tr>"
            )
    groups_html = table(
        ("group", "state", "partitions committed", "lag"),
        readers,
        empty="No consumer group has committed offsets of this topic.",
        numeric=(2, 3),
    )
    return (
        stamp(moment.render, moment.now)
        + f"<h1>Topic {escape(topic.name)}</h1>"
        + f"<section><h2>Summary</h2>{facts}{chart}</section>"
        + f'<section id="partitions"><h2>Partitions</h2>{partitions}</section>'
        + '<section id="configs"><h2>Configs</h2><p class="muted">The broker\'s defaults '
        + "with the topic's overrides on top; overrides are marked.</p>"
        + f"{configs}</section>"
        + f'<section id="readers"><h2>Consumer groups</h2>{groups_html}</section>'
    )


# -- one group -------------------------------------------------------------------------


def _assignment(pairs: Sequence[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(
        f"{topic_link(t)} [{', '.join(str(p) for p in ps)}]" for t, ps in by_topic.items()
    )


def _members_table(members: Sequence[MemberView]) -> str:
    return table(
        ("member", "client id", "host", "instance id", "assigned partitions"),
        (
            "<tr>"
            + cell(m.member_id)
            + cell(m.client_id)
            + cell(m.client_host)
            + cell(m.group_instance_id or "")
            + raw_cell(_assignment(m.assignment))
            + "</tr>"
            for m in members
        ),
        empty="No members.",
    )


def group_page(group: GroupView, moment: Moment) -> str:
    """``/groups/<id>``: state, members and their assignments, committed offsets and lag
    per partition, and the lag over time (total and per topic). A share group's page has
    its members and, per partition, its start offset and lag
    (:func:`share_group_page`'s figures)."""
    if group.group_type == SHARE_GROUP:
        return _share_group_body(
            group.group_id, group.state, group.members, group.share_partitions, moment
        )
    consumed = history.rate(moment.samples, history.group_committed(group.group_id))
    facts = _facts(
        [
            ("state", escape(group.state)),
            ("protocol", escape(f"{group.protocol_type or '-'} / {group.protocol or '-'}")),
            ("members", count(len(group.members))),
            ("total lag", count(group.total_lag)),
            ("consume rate", escape(per_second(consumed))),
        ]
    )
    topics = sorted({o.topic for o in group.offsets})
    series = [
        (t, history.value_series(moment.samples, history.group_topic_lag(group.group_id, t)))
        for t in topics
    ]
    if len(topics) != 1:
        # With one topic its line is the total: drawn once.
        total = history.value_series(moment.samples, history.group_lag(group.group_id))
        series.insert(0, ("total", total))
    chart = line_chart(series, now=moment.now, title=f"lag of {group.group_id}, records")
    members = _members_table(group.members)
    most = max((o.lag or 0 for o in group.offsets), default=0)
    offsets = table(
        ("topic", "partition", "committed", "end", "lag", "", "metadata"),
        (
            "<tr>"
            + raw_cell(topic_link(o.topic))
            + cell(str(o.partition), num=True)
            + cell(count(o.committed_offset), num=True)
            + cell("-" if o.high_watermark is None else count(o.high_watermark), num=True)
            + cell("-" if o.lag is None else count(o.lag), num=True)
            + raw_cell(bar(o.lag or 0, most, label=f"lag of {o.topic} {o.partition}"))
            + cell(o.metadata or "")
            + "</tr>"
            for o in group.offsets
        ),
        empty="No committed offsets.",
        numeric=(1, 2, 3, 4),
    )
    return (
        stamp(moment.render, moment.now)
        + f"<h1>Consumer group {escape(group.group_id)}</h1>"
        + f"<section><h2>Summary</h2>{facts}{chart}</section>"
        + f'<section id="members"><h2>Members</h2>{members}</section>'
        + f'<section id="offsets"><h2>Committed offsets and lag</h2>{offsets}</section>'
    )


# -- share groups ----------------------------------------------------------------------


def share_group_link(group_id: str) -> str:
    return f'<a href="/share-groups/{quote(group_id, safe="")}">{escape(group_id)}</a>'


def _share_groups_section(groups: Sequence[ShareGroupView]) -> str:
    rows = (
        "<tr>"
        + raw_cell(share_group_link(g.group_id))
        + cell(count(len(g.partitions)), num=True)
        + cell(count(g.backlog), num=True)
        + cell(count(g.in_flight), num=True)
        + cell(count(g.redelivered_total), num=True)
        + cell(count(g.archived), num=True)
        + "</tr>"
        for g in groups
    )
    html = table(
        ("share group", "partitions", "backlog", "in flight", "redelivered", "archived"),
        rows,
        empty="No share groups yet.",
        numeric=(1, 2, 3, 4, 5),
    )
    return f'<section id="share-groups"><h2>Share groups</h2>{html}</section>'


def share_group_page(group: ShareGroupView, moment: Moment) -> str:
    """``/share-groups/<id>`` (and ``/groups/<id>`` of a share group): the group's state,
    totals and members, and its figures per partition."""
    return _share_group_body(group.group_id, group.state, group.members, group.partitions, moment)


def _share_group_body(
    group_id: str,
    state: str,
    members: Sequence[MemberView],
    partitions: Sequence[SharePartitionView],
    moment: Moment,
) -> str:
    facts = _facts(
        [
            ("state", escape(state)),
            ("members", count(len(members))),
            ("partitions", count(len(partitions))),
            ("backlog", count(sum(p.backlog for p in partitions))),
            ("in flight", count(sum(p.in_flight for p in partitions))),
            ("redelivered", count(sum(p.redelivered_total for p in partitions))),
            ("archived", count(sum(p.archived for p in partitions))),
        ]
    )
    rows = (
        "<tr>"
        + raw_cell(topic_link(p.topic))
        + cell(str(p.partition), num=True)
        + cell(count(p.start_offset), num=True)
        + cell(count(p.end_offset), num=True)
        + cell(count(p.backlog), num=True)
        + cell(count(p.in_flight), num=True)
        + cell(count(p.acquired), num=True)
        + cell(count(p.redelivered_total), num=True)
        + cell(count(p.archived), num=True)
        + "</tr>"
        for p in partitions
    )
    partitions_html = table(
        ("topic", "partition", "start", "end", "backlog", "in flight", "acquired",
         "redelivered", "archived"),
        rows,
        empty="No partitions.",
        numeric=(1, 2, 3, 4, 5, 6, 7, 8),
    )
    return (
        stamp(moment.render, moment.now)
        + f"<h1>Share group {escape(group_id)}</h1>"
        + facts
        + f'<section id="members"><h2>Members</h2>{_members_table(members)}</section>'
        + f'<section id="partitions"><h2>Partitions</h2>{partitions_html}</section>'
    )


def not_found(what: str, name: str) -> str:
    """The body of a 404: ``what`` (a topic, a group, a page) named ``name``."""
    return (
        f"<h1>Not found</h1><p>There is no {escape(what)} "
        f"<code>{escape(name)}</code> on this broker.</p>"
        '<p><a href="/">Back to the overview</a></p>'
    )


__all__ = [
    "ConsoleSource",
    "Moment",
    "group_page",
    "not_found",
    "overview",
    "share_group_page",
    "topic_page",
]
