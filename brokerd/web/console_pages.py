# -*- test-case-name: tests.web.test_console_pages_inert, tests.web.test_console -*-
"""The console's page bodies: the overview (topics, groups, share groups, the broker),
one topic, one consumer group, one share group, and "not found".

Each function turns views (:mod:`brokerd.operator.views`) and the sampler's history into
a page body, a :mod:`twisted.web.template` tag tree: every text that came from a client
(group ids, client ids, member ids, metadata, config values) is a string in the tree
and the flattener escapes it, so none can become markup. What this module does not do:
HTTP (see :mod:`brokerd.web.console`) or change anything: every page is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote

import attrs
from twisted.web.template import Flattenable, Tag, tags

from brokerd.operator.share_groups import ShareGroupView, SharePartitionView
from brokerd.operator.views import SHARE_GROUP, GroupView, MemberView, PartitionView, TopicView
from brokerd.web import console_history as history
from brokerd.web.console_history import ConsoleSource, Sample
from brokerd.web.console_html import (
    Column,
    cell,
    columns_table,
    count,
    duration,
    explain,
    group_link,
    per_second,
    size,
    stamp,
    table,
    topic_link,
)
from brokerd.web.console_svg import bar, line_chart, sparkline
from brokerd.web.markup import facts

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


def _section(heading: str, *body: Flattenable, id_: str | None = None) -> Tag:
    section = tags.section(tags.h2(heading), *body)
    if id_ is not None:
        section(id=id_)
    return section


# -- overview --------------------------------------------------------------------------


def _topic_row(topic: TopicView, moment: Moment) -> Tag:
    figure = history.topic_end(topic.name)
    offline = sum(1 for p in topic.partitions if p.offline is not None)
    parts: list[Flattenable] = [count(len(topic.partitions))]
    if offline:
        parts += [" ", tags.span(f"({offline} offline)", class_="bad")]
    return tags.tr(class_="offline" if offline else "")(
        cell(topic_link(topic.name)),
        cell(parts, num=True),
        cell(count(topic.records), num=True),
        cell(size(topic.size_bytes), num=True),
        cell(per_second(history.rate(moment.samples, figure)), num=True),
        cell(
            sparkline(
                history.rate_series(moment.samples, figure),
                label=f"produce rate of {topic.name}",
            )
        ),
    )


def _group_row(group: GroupView, moment: Moment) -> Tag:
    consumed = history.rate(moment.samples, history.group_committed(group.group_id))
    return tags.tr(
        cell(group_link(group.group_id)),
        cell(group.state),
        cell(count(len(group.members)), num=True),
        cell(count(group.total_lag), num=True),
        cell(per_second(consumed), num=True),
        cell(
            sparkline(
                history.value_series(moment.samples, history.group_lag(group.group_id)),
                label=f"lag of {group.group_id}",
            )
        ),
    )


def overview(
    source: ConsoleSource,
    moment: Moment,
    *,
    settings: Mapping[str, str],
    started: float,
    share_groups: Sequence[ShareGroupView] | None = None,
    client_quotas: ClientQuotasView | None = None,
) -> list[Flattenable]:
    """``/``: every topic, every group (consumer groups, and the share groups when
    ``share_groups`` is given), the client quotas (when ``client_quotas`` is given: the
    principal may see the broker's configs), and the broker's settings and health."""
    topics = source.topics()
    topics_table = table(
        ("topic", "partitions", "offsets", "size", "produce rate", "last 10 min"),
        (_topic_row(t, moment) for t in topics),
        empty="No topics yet.",
        numeric=(1, 2, 3, 4),
        explained={2: OFFSETS_EXPLAINED},
    )
    groups_body: Tag
    if source.has_groups:
        groups_body = table(
            ("group", "state", "members", "lag", "consume rate", "lag, last 10 min"),
            (_group_row(g, moment) for g in source.groups()),
            empty="No consumer groups yet.",
            numeric=(2, 3, 4),
        )
    else:
        groups_body = tags.p(
            "The Kafka listener is off: consumer groups exist only on the Kafka protocol.",
            class_="muted",
        )
    offline = source.offline_partitions()
    health = (
        tags.span(f"{count(len(offline))} offline", class_="bad")
        if offline
        else tags.span("none offline", class_="good")
    )
    broker: list[Flattenable] = [
        facts(
            [
                ("uptime", duration(moment.now - started)),
                ("topics", count(len(topics))),
                (
                    "partitions",
                    [count(sum(len(t.partitions) for t in topics)), " (", health, ")"],
                ),
            ]
        )
    ]
    if offline:
        offline_rows = (
            tags.tr(cell(topic_link(t)), cell(str(p), num=True), cell(reason))
            for (t, p), reason in sorted(offline.items())
        )
        broker += [
            tags.h2("Offline partitions"),
            table(("topic", "partition", "reason"), offline_rows, empty="", numeric=(1,)),
        ]
    broker.append(tags.h2("Settings"))
    if settings:
        broker.append(
            tags.dl(
                *(
                    tags.div(tags.dt(k), tags.dd(tags.code(v)))
                    for k, v in sorted(settings.items())
                ),
                class_="settings",
            )
        )
    return [
        stamp(moment.render, moment.now),
        _section("Topics", topics_table, id_="topics"),
        _section("Consumer groups", groups_body, id_="groups"),
        _share_groups_section(share_groups) if share_groups is not None else "",
        _quotas_section(client_quotas) if client_quotas is not None else "",
        _section("Broker", *broker, id_="broker"),
    ]


@attrs.frozen
class ClientQuotasView:
    """The configured client quotas (entity label, key, value) and the measured shares
    (key, user, client id, bound, rate, throttled answers)."""

    configured: Sequence[tuple[str, str, float]]
    shares: Sequence[tuple[str, str, str, float, float, int]]


def _quota_value(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def _quotas_section(view: ClientQuotasView) -> Tag:
    configured = table(
        ("entity", "quota", "value"),
        (tags.tr(cell(entity), cell(key), cell(_quota_value(value), num=True))
         for entity, key, value in view.configured),
        empty="No client quotas (kafka-configs --entity-type users|clients sets them).",
        numeric=(2,),
    )
    shares = table(
        ("quota", "user", "client id", "bound", "rate now", "throttled answers"),
        (tags.tr(cell(key), cell(user or "(any)"), cell(client or "(any)"),
                 cell(_quota_value(bound), num=True), cell(f"{rate:,.0f}", num=True),
                 cell(count(throttled), num=True))
         for key, user, client, bound, rate, throttled in view.shares),
        empty="No client measured yet.",
        numeric=(3, 4, 5),
    )
    return _section("Client quotas", configured, tags.h2("Measured"), shares, id_="quotas")


# -- one topic -------------------------------------------------------------------------


def _partition_row(p: PartitionView) -> Tag:
    if p.offline is not None:
        return tags.tr(
            cell(str(p.partition), num=True),
            tags.td(f"offline: {p.offline}", colspan="6", class_="bad"),
            class_="offline",
        )
    return tags.tr(
        cell(str(p.partition), num=True),
        cell(count(p.log_start_offset), num=True),
        cell(count(p.high_watermark), num=True),
        cell(count(p.last_stable_offset), num=True),
        cell(count(p.records), num=True),
        cell(size(p.size_bytes), num=True),
        cell(count(p.segments), num=True),
    )


def topic_page(topic: TopicView, groups: Sequence[GroupView], moment: Moment) -> list[Tag]:
    """``/topics/<name>``: partitions, configs, the produce rate over time and the groups
    that committed offsets of it."""
    figure = history.topic_end(topic.name)
    summary = facts(
        [
            ("topic ID", topic.topic_id),
            ("partitions", count(len(topic.partitions))),
            ("offsets", [count(topic.records), " ", explain("(not records)", OFFSETS_EXPLAINED)]),
            ("size", size(topic.size_bytes)),
            ("produce rate", per_second(history.rate(moment.samples, figure))),
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
        tags.tr(
            cell(key),
            cell(tags.code(value)),
            cell(tags.span("override", class_="tag") if key in topic.overrides else ""),
        )
        for key, value in sorted(topic.configs.items())
    )
    configs = table(("config", "effective value", ""), config_rows, empty="No configs.")
    readers: list[Tag] = []
    for group in groups:
        mine = [o for o in group.offsets if o.topic == topic.name]
        if mine:
            lag = sum(o.lag for o in mine if o.lag is not None)
            readers.append(
                tags.tr(
                    cell(group_link(group.group_id)),
                    cell(group.state),
                    cell(count(len(mine)), num=True),
                    cell(count(lag), num=True),
                )
            )
    groups_table = table(
        ("group", "state", "partitions committed", "lag"),
        readers,
        empty="No consumer group has committed offsets of this topic.",
        numeric=(2, 3),
    )
    return [
        stamp(moment.render, moment.now),
        tags.h1(f"Topic {topic.name}"),
        _section("Summary", summary, chart),
        _section("Partitions", partitions, id_="partitions"),
        _section(
            "Configs",
            tags.p(
                "The broker's defaults with the topic's overrides on top; overrides are "
                "marked.",
                class_="muted",
            ),
            configs,
            id_="configs",
        ),
        _section("Consumer groups", groups_table, id_="readers"),
    ]


# -- one group -------------------------------------------------------------------------


def _assignment(pairs: Sequence[tuple[str, int]]) -> list[Flattenable]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    out: list[Flattenable] = []
    for t, ps in by_topic.items():
        if out:
            out.append(", ")
        out += [topic_link(t), f" [{', '.join(str(p) for p in ps)}]"]
    return out


_MEMBER_COLUMNS: tuple[Column[MemberView], ...] = (
    Column("member", lambda m: m.member_id),
    Column("client id", lambda m: m.client_id),
    Column("host", lambda m: m.client_host),
    Column("instance id", lambda m: m.group_instance_id or ""),
    Column("assigned partitions", lambda m: _assignment(m.assignment)),
)


def _members_table(members: Sequence[MemberView]) -> Tag:
    return columns_table(_MEMBER_COLUMNS, members, empty="No members.")


def group_page(group: GroupView, moment: Moment) -> list[Tag]:
    """``/groups/<id>``: state, members and their assignments, committed offsets and lag
    per partition, and the lag over time (total and per topic). A share group's page has
    its members and, per partition, its start offset and lag
    (:func:`share_group_page`'s figures)."""
    if group.group_type == SHARE_GROUP:
        return _share_group_body(
            group.group_id, group.state, group.members, group.share_partitions, moment
        )
    consumed = history.rate(moment.samples, history.group_committed(group.group_id))
    summary = facts(
        [
            ("state", group.state),
            ("protocol", f"{group.protocol_type or '-'} / {group.protocol or '-'}"),
            ("members", count(len(group.members))),
            ("total lag", count(group.total_lag)),
            ("consume rate", per_second(consumed)),
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
    most = max((o.lag or 0 for o in group.offsets), default=0)
    offsets = table(
        ("topic", "partition", "committed", "end", "lag", "", "metadata"),
        (
            tags.tr(
                cell(topic_link(o.topic)),
                cell(str(o.partition), num=True),
                cell(count(o.committed_offset), num=True),
                cell("-" if o.high_watermark is None else count(o.high_watermark), num=True),
                cell("-" if o.lag is None else count(o.lag), num=True),
                cell(bar(o.lag or 0, most, label=f"lag of {o.topic} {o.partition}")),
                cell(o.metadata or ""),
            )
            for o in group.offsets
        ),
        empty="No committed offsets.",
        numeric=(1, 2, 3, 4),
    )
    return [
        stamp(moment.render, moment.now),
        tags.h1(f"Consumer group {group.group_id}"),
        _section("Summary", summary, chart),
        _section("Members", _members_table(group.members), id_="members"),
        _section("Committed offsets and lag", offsets, id_="offsets"),
    ]


# -- share groups ----------------------------------------------------------------------


def share_group_link(group_id: str) -> Tag:
    return tags.a(group_id, href=f"/share-groups/{quote(group_id, safe='')}")


_SHARE_GROUP_COLUMNS: tuple[Column[ShareGroupView], ...] = (
    Column("share group", lambda g: share_group_link(g.group_id)),
    Column("partitions", lambda g: count(len(g.partitions)), num=True),
    Column("backlog", lambda g: count(g.backlog), num=True),
    Column("in flight", lambda g: count(g.in_flight), num=True),
    Column("redelivered", lambda g: count(g.redelivered_total), num=True),
    Column("archived", lambda g: count(g.archived), num=True),
)
_SHARE_PARTITION_COLUMNS: tuple[Column[SharePartitionView], ...] = (
    Column("topic", lambda p: topic_link(p.topic)),
    Column("partition", lambda p: str(p.partition), num=True),
    Column("start", lambda p: count(p.start_offset), num=True),
    Column("end", lambda p: count(p.end_offset), num=True),
    Column("backlog", lambda p: count(p.backlog), num=True),
    Column("in flight", lambda p: count(p.in_flight), num=True),
    Column("acquired", lambda p: count(p.acquired), num=True),
    Column("redelivered", lambda p: count(p.redelivered_total), num=True),
    Column("archived", lambda p: count(p.archived), num=True),
)


def _share_groups_section(groups: Sequence[ShareGroupView]) -> Tag:
    groups_table = columns_table(_SHARE_GROUP_COLUMNS, groups, empty="No share groups yet.")
    return _section("Share groups", groups_table, id_="share-groups")


def share_group_page(group: ShareGroupView, moment: Moment) -> list[Tag]:
    """``/share-groups/<id>`` (and ``/groups/<id>`` of a share group): the group's state,
    totals and members, and its figures per partition."""
    return _share_group_body(group.group_id, group.state, group.members, group.partitions, moment)


def _share_group_body(
    group_id: str,
    state: str,
    members: Sequence[MemberView],
    partitions: Sequence[SharePartitionView],
    moment: Moment,
) -> list[Tag]:
    summary = facts(
        [
            ("state", state),
            ("members", count(len(members))),
            ("partitions", count(len(partitions))),
            ("backlog", count(sum(p.backlog for p in partitions))),
            ("in flight", count(sum(p.in_flight for p in partitions))),
            ("redelivered", count(sum(p.redelivered_total for p in partitions))),
            ("archived", count(sum(p.archived for p in partitions))),
            ("dead-lettered", count(sum(p.dead_lettered for p in partitions))),
        ]
    )
    partitions_table = columns_table(_SHARE_PARTITION_COLUMNS, partitions, empty="No partitions.")
    return [
        stamp(moment.render, moment.now),
        tags.h1(f"Share group {group_id}"),
        summary,
        _section("Members", _members_table(members), id_="members"),
        _section("Partitions", partitions_table, id_="partitions"),
    ]


def not_found(what: str, name: str) -> list[Tag]:
    """The body of a 404: ``what`` (a topic, a group, a page) named ``name``."""
    return [
        tags.h1("Not found"),
        tags.p(f"There is no {what} ", tags.code(name), " on this broker."),
        tags.p(tags.a("Back to the overview", href="/")),
    ]


__all__ = [
    "ConsoleSource",
    "Moment",
    "group_page",
    "not_found",
    "overview",
    "share_group_page",
    "topic_page",
]
