"""The topic registry's journal: each topic change appended as one record, so that a
create, grow, config change or delete costs the same with ten topics or ten thousand.

The registry lives in two files of the data directory:

- ``topics.json``, a snapshot of every topic (written atomically, see ``logdir/log_directory.py``);
- ``topics.journal``, the changes since that snapshot, in the framing the broker's other
  journals share (``journal/records.py``: ``u32 length, u32 crc32, body``). A body is a
  JSON object, ``{"put": NAME, "partitions": N, "configs": {...}, "topic_id": ID}`` (the
  topic's whole state after a create, a grow or a config change; ``topic_ids.py`` has
  the ID's text form, and a record written before topic IDs existed has none) or
  ``{"delete": NAME}``.

Every record says the whole state of one topic, so replaying the journal over any
snapshot taken after some prefix of it gives the same registry: a crash between writing
a new snapshot and emptying the journal loses nothing and doubles nothing. At open the
journal is replayed over the snapshot and a torn tail (an append a crash cut short) is
cut off. Once the journal holds more records than the registry has topics (and at least
:data:`COMPACT_MIN_RECORDS`), the directory writes a fresh snapshot instead of the next
record and empties the journal: rewriting the registry costs O(topics) but happens at
most once per O(topics) changes, so each change costs O(1) amortised. A clean close does
the same, so after it ``topics.json`` alone is complete.

What it does not do: validate a topic's fields (the directory passes its parser in),
hold locks (the directory calls it under its own), or anything with Twisted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from brokerd.errors import StorageError
from brokerd.names import validate_topic_name
from brokerd.storage.fileio import (
    FILE_MODE,
    ReplaceFailed,
    cut_back,
    datasync,
    read_file,
    rewrite_for_append,
    write_all,
)
from brokerd.storage.journal.records import frame, iter_frames
from brokerd.storage.topic_ids import format_topic_id
from brokerd.storage.types import TopicInfo

__all__ = ["COMPACT_MIN_RECORDS", "JOURNAL_FILE", "RegistryJournal", "apply_journal"]

log = logging.getLogger("brokerd.storage")

JOURNAL_FILE = "topics.journal"
#: A record is one topic's name, count and config overrides: far below this.
MAX_RECORD_BYTES = 1 << 20
#: Below this many records the journal is never folded into a new snapshot.
COMPACT_MIN_RECORDS = 1000

#: Parses one topic's registry entry (``{"partitions": N, "configs": {...}, ...}``), given
#: the topic of that name the registry holds before it (None if none).
EntryParser = Callable[[str, Mapping[str, Any], TopicInfo | None], TopicInfo]


def _put_body(info: TopicInfo) -> bytes:
    doc = {
        "put": info.name,
        "partitions": info.partitions,
        "configs": dict(info.configs),
        "topic_id": format_topic_id(info.topic_id),
    }
    return json.dumps(doc, sort_keys=True).encode()


def _delete_body(name: str) -> bytes:
    return json.dumps({"delete": name}).encode()


def _apply(body: bytes, topics: dict[str, TopicInfo], parse_entry: EntryParser) -> None:
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise ValueError(f"record {body[:80]!r} is not an object")
    if "delete" in doc:
        topics.pop(validate_topic_name(str(doc["delete"])), None)
        return
    name = validate_topic_name(str(doc["put"]))
    topics[name] = parse_entry(name, doc, topics.get(name))


def apply_journal(
    data: bytes, topics: dict[str, TopicInfo], parse_entry: EntryParser, path: str
) -> tuple[int, int]:
    """Apply the intact records of journal bytes ``data`` to ``topics`` (in place);
    returns (bytes intact, records). Raises :class:`StorageError` on an intact record
    that does not parse (corruption that is not a torn write)."""
    end = records = 0
    for body, _start, stop in iter_frames(data, 0, MAX_RECORD_BYTES):
        try:
            _apply(body, topics, parse_entry)
        except Exception as exc:
            raise StorageError(f"corrupt topic journal {path}: {exc}") from exc
        end, records = stop, records + 1
    return end, records


class RegistryJournal:
    """The open ``topics.journal`` of one data directory (module docstring)."""

    def __init__(self, path: str, fd: int, size: int, records: int) -> None:
        self.path = path
        self._fd = fd
        self._size = size
        #: Records since the last snapshot.
        self.records = records
        # An append failed: the file may end in a partial record, so nothing more is
        # appended until a snapshot has replaced it.
        self._broken = False

    @classmethod
    def replay(
        cls, directory: str, topics: dict[str, TopicInfo], parse_entry: EntryParser
    ) -> RegistryJournal:
        """Apply the journal of ``directory`` to ``topics`` (in place), cut a torn tail,
        and open it for appends (creating it if absent). Raises :class:`StorageError` on
        an intact record that does not parse (corruption that is not a torn write)."""
        path = os.path.join(directory, JOURNAL_FILE)
        try:
            data = read_file(path) or b""
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        end, records = apply_journal(data, topics, parse_entry, path)
        try:
            fd = os.open(
                path,
                os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                FILE_MODE,
            )
        except OSError as exc:
            raise StorageError(f"cannot open {path}: {exc}") from exc
        if end < len(data):
            log.warning("%s: cutting a torn tail of %d bytes", path, len(data) - end)
            try:
                os.ftruncate(fd, end)
            except OSError as exc:
                os.close(fd)
                raise StorageError(f"cannot truncate {path}: {exc}") from exc
        return cls(path, fd, end, records)

    def due(self, topics: int) -> bool:
        """True when the next change should be a snapshot rather than a record."""
        return self._broken or self.records >= max(COMPACT_MIN_RECORDS, topics)

    def record_put(self, info: TopicInfo) -> None:
        """Append (and fdatasync) the whole state of topic ``info``."""
        self._append(_put_body(info))

    def record_delete(self, name: str) -> None:
        """Append (and fdatasync) the deletion of topic ``name``."""
        self._append(_delete_body(name))

    def _append(self, body: bytes) -> None:
        if self._broken:
            raise StorageError(f"{self.path}: an earlier append failed")
        data = frame(body, MAX_RECORD_BYTES, "topic registry")
        try:
            write_all(self._fd, data)
            datasync(self._fd)
        except OSError as exc:
            # Best effort: replay drops a torn record anyway, and a broken journal is
            # replaced by a snapshot at the next change.
            cut_back(self._fd, self._size)
            self._broken = True
            raise StorageError(f"cannot append to {self.path}: {exc}") from exc
        self._size += len(data)
        self.records += 1

    def reset(self) -> None:
        """Empty the journal once a snapshot holds everything it said. A failure is only
        logged: the old records replay to the same state over the new snapshot, and the
        next change writes a snapshot again."""
        try:
            fd = rewrite_for_append(self.path, b"")
        except (OSError, ReplaceFailed) as exc:
            log.warning(
                "cannot empty %s (%s); the next change rewrites the snapshot", self.path, exc
            )
            self._broken = True
            return
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd, self._size, self.records, self._broken = fd, 0, 0, False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)
