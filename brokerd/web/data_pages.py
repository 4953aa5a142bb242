"""Where the console's data pages hang in its URL tree, and the links to them from the
overview, topic and group pages.

The links are the one piece of the data pages written into the live pages
(:mod:`brokerd.web.console_pages`): tags like theirs, with names URL-quoted.
Which pages exist: :data:`TOPIC_PAGES` below ``/topics/NAME/``, :data:`ROOT_PAGES` at
the root, and ``/groups/ID/reset-offsets``.
"""

from __future__ import annotations

from urllib.parse import quote

from twisted.web.resource import Resource
from twisted.web.template import Flattenable, Tag, tags

from brokerd.operator.views import SHARE_GROUP, GroupView, TopicView
from brokerd.web.actions import ActionPage, CreateTopic, DeleteTopic, EditConfigs, Produce
from brokerd.web.actions import ResetOffsets as ResetAction
from brokerd.web.browse_page import MessagesPage
from brokerd.web.permits import DataPages
from brokerd.web.schema_pages import SchemasPage

__all__ = [
    "ROOT_PAGES",
    "TOPIC_PAGES",
    "group_links",
    "overview_links",
    "reset_page",
    "root_page",
    "topic_links",
    "topic_page",
]

TOPIC_PAGES = frozenset({b"messages", b"produce", b"configs", b"delete"})
ROOT_PAGES = frozenset({b"schemas", b"new-topic"})


def topic_page(pages: DataPages, which: str, topic: TopicView) -> Resource:
    name = topic.name
    if which == "messages":
        return MessagesPage(pages, name)
    if which == "produce":
        return ActionPage(pages, Produce(pages, name, len(topic.partitions)))
    if which == "configs":
        overrides = {k: v for k, v in topic.configs.items() if k in topic.overrides}
        return ActionPage(pages, EditConfigs(pages, name, overrides))
    return ActionPage(pages, DeleteTopic(pages, name))


def root_page(pages: DataPages, which: str) -> Resource:
    if which == "schemas":
        return SchemasPage(pages)
    return ActionPage(pages, CreateTopic(pages))


def reset_page(pages: DataPages, group: GroupView) -> Resource:
    topics = sorted({o.topic for o in group.offsets})
    return ActionPage(pages, ResetAction(pages, group.group_id, topics))


def _links(*items: tuple[str, str, str]) -> Tag:
    """``(href, label, id)`` as one line of links (hrefs already quoted)."""
    line: list[Flattenable] = []
    for href, label, id_ in items:
        if line:
            line.append(" \u00b7 ")
        line.append(tags.a(label, href=href, id=id_))
    return tags.p(*line, class_="actions")


def topic_links(pages: DataPages, name: str) -> Tag:
    base = "/topics/" + quote(name, safe="")
    items = [(f"{base}/messages", "Browse messages", "browse")]
    if pages.actions:
        items += [
            (f"{base}/produce", "Produce", "produce"),
            (f"{base}/configs", "Edit configs", "edit-configs"),
            (f"{base}/delete", "Delete topic", "delete"),
        ]
    return _links(*items)


def group_links(group: GroupView) -> Flattenable:
    if group.group_type == SHARE_GROUP:
        return ""
    href = "/groups/" + quote(group.group_id, safe="") + "/reset-offsets"
    return _links((href, "Reset offsets", "reset-offsets"))


def overview_links(pages: DataPages) -> Tag:
    items = [("/schemas", "Schema registry", "schemas")]
    if pages.actions and pages.data is not None:
        items.append(("/new-topic", "Create a topic", "new-topic"))
    return _links(*items)
