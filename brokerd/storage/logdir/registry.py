"""The topic registry's file, ``topics.json``: its format, reading it (with the journal
of changes since, ``logdir/registry_journal.py``) and encoding a snapshot of it.

Version 2 stores each topic's partition count, config overrides and topic ID; an entry
without ``topic_id`` is from before topic IDs and gets one (written back by the log
directory at open, so it stays the same from then on); version 1 (retention_bytes and
retention_ms only) is still read. Pure apart from :func:`read_registry`; no Twisted.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping

import attrs

from brokerd.errors import InvalidConfig
from brokerd.names import validate_topic_name
from brokerd.storage.config.topic_config import validate_overrides
from brokerd.storage.logdir.layout import MAX_PARTITIONS, REGISTRY_FILE, read_small
from brokerd.storage.logdir.registry_journal import JOURNAL_FILE, EntryParser, apply_journal
from brokerd.storage.topic_ids import (
    RESERVED_TOPIC_IDS,
    format_topic_id,
    new_topic_id,
    parse_topic_id,
)
from brokerd.storage.types import TopicInfo

__all__ = [
    "encode_registry",
    "journal_parser",
    "parse_registry",
    "read_registry",
    "unique_ids",
]

log = logging.getLogger("brokerd.storage")

_REGISTRY_VERSION = 2
_OLD_REGISTRY_VERSION = 1


def _registry_configs(name: str, entry: Mapping[str, object], version: int) -> dict[str, str]:
    """A registry entry's config overrides, validated (version 1 kept two fields)."""
    if version == _OLD_REGISTRY_VERSION:
        configs: dict[str, str] = {}
        for field in ("retention_bytes", "retention_ms"):
            key = field.replace("_", ".")
            value = entry.get(field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"topic {name!r}: {field} {value!r}")
            if value is not None and value >= 0:
                configs[key] = str(value)
        return configs
    raw = entry.get("configs", {})
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"topic {name!r}: configs {raw!r}")
    try:
        return validate_overrides(raw.items())
    except InvalidConfig as exc:
        raise ValueError(f"topic {name!r}: {exc}") from exc


def _registry_topic_id(
    name: str, entry: Mapping[str, object], previous: TopicInfo | None, assigned: set[str]
) -> uuid.UUID:
    """An entry's topic ID. An entry from before topic IDs has none: it keeps the ID
    its topic already has in the registry (a journal record of a change to it), else
    draws one and adds ``name`` to ``assigned`` (the caller writes it back)."""
    raw = entry.get("topic_id")
    if raw is None:
        if previous is not None:
            return previous.topic_id
        assigned.add(name)
        return new_topic_id()
    if not isinstance(raw, str):
        raise ValueError(f"topic {name!r}: topic_id {raw!r}")
    try:
        topic_id = parse_topic_id(raw)
    except ValueError as exc:
        raise ValueError(f"topic {name!r}: topic_id: {exc}") from exc
    if topic_id in RESERVED_TOPIC_IDS:
        raise ValueError(f"topic {name!r}: reserved topic_id {raw!r}")
    return topic_id


def _parse_entry(
    name: str,
    entry: Mapping[str, object],
    version: int,
    previous: TopicInfo | None,
    assigned: set[str],
) -> TopicInfo:
    """One topic of the registry (snapshot or journal); raises on anything invalid."""
    validate_topic_name(name)
    partitions = entry["partitions"]
    if not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"topic {name!r}: partitions {partitions!r}")
    return TopicInfo(
        name,
        partitions,
        _registry_configs(name, entry, version),
        topic_id=_registry_topic_id(name, entry, previous, assigned),
    )


def journal_parser(assigned: set[str]) -> EntryParser:
    def parse(name: str, entry: Mapping[str, object], previous: TopicInfo | None) -> TopicInfo:
        return _parse_entry(name, entry, _REGISTRY_VERSION, previous, assigned)

    return parse


def parse_registry(raw: bytes, assigned: set[str]) -> dict[str, TopicInfo]:
    """The topics of a registry file (either version); raises on anything invalid.
    Names of topics that had no ID (and got one now) are added to ``assigned``."""
    doc = json.loads(raw)
    version = doc.get("version")
    if version not in (_REGISTRY_VERSION, _OLD_REGISTRY_VERSION):
        raise ValueError(f"unknown version {version!r}")
    return {
        name: _parse_entry(name, entry, version, None, assigned)
        for name, entry in doc["topics"].items()
    }


def read_registry(path: str) -> dict[str, TopicInfo]:
    """The topics the registry of data directory ``path`` names (snapshot and journal),
    read without opening the directory (inspection, tests). A registry from before topic
    IDs gets IDs here that are not written: only opening the directory fixes them."""
    assigned: set[str] = set()
    raw = read_small(os.path.join(path, REGISTRY_FILE))
    topics = {} if raw is None else parse_registry(raw, assigned)
    journal = os.path.join(path, JOURNAL_FILE)
    apply_journal(read_small(journal) or b"", topics, journal_parser(assigned), journal)
    return topics


def unique_ids(topics: dict[str, TopicInfo], assigned: set[str]) -> dict[uuid.UUID, str]:
    """The index of ``topics`` by ID. A second topic holding an ID already taken (a
    registry edited by hand) gets a new one, added to ``assigned``: one ID, one topic."""
    ids: dict[uuid.UUID, str] = {}
    for name in sorted(topics):
        info = topics[name]
        if info.topic_id in ids:
            log.warning(
                "topics %s and %s have the same topic ID; %s gets a new one",
                ids[info.topic_id], name, name,
            )
            info = attrs.evolve(info, topic_id=new_topic_id(ids))
            topics[name] = info
            assigned.add(name)
        ids[info.topic_id] = name
    return ids


def encode_registry(topics: Mapping[str, TopicInfo]) -> bytes:
    """A snapshot of ``topics`` as the registry file holds it."""
    doc = {
        "version": _REGISTRY_VERSION,
        "topics": {
            name: {
                "partitions": info.partitions,
                "configs": dict(info.configs),
                "topic_id": format_topic_id(info.topic_id),
            }
            for name, info in sorted(topics.items())
        },
    }
    # No indent: json's C encoder (an indented dump runs in Python, ~10x slower).
    return json.dumps(doc).encode() + b"\n"
