# -*- test-case-name: tests.web.test_browse -*-
"""The message browser's logic: its query (``GET /topics/NAME/messages``), the bounded
scan of one partition with the server-side filters, and how a key, value or header is
shown.

The query: ``partition`` (default 0); ``offset`` a number, ``earliest`` (default) or
``latest`` (the last ``limit`` records before the end); ``timestamp`` (milliseconds
since the epoch, or an ISO 8601 time, UTC unless it says otherwise) starts at the first
record at or after it and takes precedence over ``offset``; ``limit`` records shown
(default :data:`DEFAULT_LIMIT`, at most :data:`MAX_LIMIT`); filters ``key`` (key
contains), ``value`` (value contains), ``header`` (a header of that name) and
``header_value`` (that header's value contains), all case-sensitive substrings, matched
against the raw bytes and, for a key or value framed with a schema the registry knows,
against its decoded JSON written on one line; ``show`` ``auto`` (default), ``text`` or ``hex``.

A scan reads forward from the start in reads of :data:`READ_BYTES` and stops at the
first of: ``limit`` matching records, the end of the committed records, then
:data:`MAX_SCAN_BYTES` of keys and values examined, or :data:`MAX_SCAN_SECONDS` of wall
time. The page says which bound stopped it and links to the same query from the next
offset. The reactor gets a turn after every read and every :data:`SLICE_SECONDS` of
work, so a long scan holds up no other client.

How a value is shown (``auto``): a value framed as Confluent's (magic byte 0, schema id)
whose id the registry knows, decoded by its schema, as JSON, with the schema id and
subject; else a JSON object or array, pretty-printed; else UTF-8 text (without control
characters but tab, newline and carriage return); else hex. Only
:data:`MAX_DECODE_BYTES` of a value are ever decoded and :data:`MAX_SHOWN_CHARS` of it
shown (the page says a value was cut).

What this module does not do: render HTML (:mod:`brokerd.web.browse_page`), or know the
broker beyond :class:`~brokerd.web.data_face.BrokerData`.
"""

from __future__ import annotations

import datetime
import enum
import json
import re
from collections.abc import Mapping, Sequence

import attrs
from twisted.internet.defer import Deferred

from brokerd.clock import Clock
from brokerd.storage.types import PartitionOffsets, Record
from brokerd.web.data_face import BrokerData
from brokerd.web.schema_face import SchemaSource, Serializer, unframe

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_DECODE_BYTES",
    "MAX_FILTER_CHARS",
    "MAX_LIMIT",
    "MAX_SCAN_BYTES",
    "MAX_SCAN_SECONDS",
    "MAX_SHOWN_CHARS",
    "READ_BYTES",
    "BadQuery",
    "BrowseQuery",
    "Scan",
    "ScanStop",
    "SchemaNames",
    "ShowAs",
    "Shown",
    "Start",
    "StartAt",
    "first_offset",
    "matches",
    "parse_query",
    "parse_time",
    "scan",
    "shown",
]

#: Records shown when the query does not say, and the most a query may ask for.
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: Keys and values examined by one scan before it stops (filters that match little).
MAX_SCAN_BYTES = 32 * 1024 * 1024
#: Wall time one scan may take before it stops.
MAX_SCAN_SECONDS = 2.0
#: Bytes of values asked of one read of the log.
READ_BYTES = 1024 * 1024
#: The longest value decoded (by a schema, as JSON or as text); longer ones are shown
#: as their first bytes, as text or hex.
MAX_DECODE_BYTES = 256 * 1024
#: Characters of a shown key, value or header value.
MAX_SHOWN_CHARS = 4096
#: Parsed schemas one page keeps (a scan over records of many schema ids asks the
#: registry again for those beyond).
MAX_SCHEMAS_PER_PAGE = 64
#: The longest the scan works on the reactor thread without a turn for other clients.
SLICE_SECONDS = 0.02
#: The longest filter text accepted (a URL's query is bounded by the HTTP server too).
MAX_FILTER_CHARS = 1024


class BadQuery(ValueError):
    """A query the browser cannot run; the message says which parameter and why."""


class StartAt(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSET = "offset"
    TIMESTAMP = "timestamp"


@attrs.frozen
class Start:
    """Where a scan starts: ``value`` is the offset or the time in ms."""

    at: StartAt
    value: int = 0


class ShowAs(enum.Enum):
    AUTO = "auto"
    TEXT = "text"
    HEX = "hex"


@attrs.frozen
class BrowseQuery:
    partition: int = 0
    start: Start = Start(StartAt.EARLIEST)
    limit: int = DEFAULT_LIMIT
    key: str = ""
    value: str = ""
    header: str = ""
    header_value: str = ""
    show: ShowAs = ShowAs.AUTO

    @property
    def filtered(self) -> bool:
        return bool(self.key or self.value or self.header or self.header_value)

    def arguments(self, **changes: str) -> dict[str, str]:
        """The query as URL arguments (defaults left out), with ``changes`` applied."""
        out: dict[str, str] = {"partition": str(self.partition)}
        if self.start.at is StartAt.TIMESTAMP:
            out["timestamp"] = str(self.start.value)
        elif self.start.at is StartAt.OFFSET:
            out["offset"] = str(self.start.value)
        else:
            out["offset"] = self.start.at.value
        if self.limit != DEFAULT_LIMIT:
            out["limit"] = str(self.limit)
        for name in ("key", "value", "header", "header_value"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.show is not ShowAs.AUTO:
            out["show"] = self.show.value
        out.update(changes)
        if "offset" in changes:
            out.pop("timestamp", None)
        return out


def _one(args: Mapping[bytes, Sequence[bytes]], name: str) -> str | None:
    values = args.get(name.encode())
    if not values or values[0] == b"":
        return None
    try:
        text = values[0].decode("utf-8")
    except UnicodeDecodeError:
        raise BadQuery(f"{name}: not UTF-8") from None
    if len(text) > MAX_FILTER_CHARS:
        raise BadQuery(f"{name}: longer than {MAX_FILTER_CHARS} characters")
    return text


def _integer(name: str, text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadQuery(f"{name}: {text!r} is not a number") from None
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise BadQuery(f"{name}: {value} is out of range ({bound})")
    return value


def parse_time(text: str) -> int:
    """Milliseconds since the epoch of ``text``: a number of ms, or an ISO 8601 time
    (UTC unless it has an offset)."""
    if text.lstrip("-").isdigit():
        return _integer("timestamp", text, 0)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadQuery(
            f"timestamp: {text!r} is neither milliseconds nor an ISO 8601 time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def parse_query(args: Mapping[bytes, Sequence[bytes]], partitions: int) -> BrowseQuery:
    """The browser's query from a request's arguments, for a topic of ``partitions``."""
    partition_text = _one(args, "partition")
    partition = 0 if partition_text is None else _integer(
        "partition", partition_text, 0, partitions - 1
    )
    start = Start(StartAt.EARLIEST)
    offset_text = _one(args, "offset")
    if offset_text in ("earliest", "latest"):
        start = Start(StartAt(offset_text))
    elif offset_text is not None:
        start = Start(StartAt.OFFSET, _integer("offset", offset_text, 0))
    time_text = _one(args, "timestamp")
    if time_text is not None:
        start = Start(StartAt.TIMESTAMP, parse_time(time_text))
    limit_text = _one(args, "limit")
    limit = DEFAULT_LIMIT if limit_text is None else _integer("limit", limit_text, 1, MAX_LIMIT)
    show_text = _one(args, "show") or "auto"
    try:
        show = ShowAs(show_text)
    except ValueError:
        raise BadQuery(f"show: {show_text!r} is not one of auto, text, hex") from None
    return BrowseQuery(
        partition, start, limit,
        key=_one(args, "key") or "",
        value=_one(args, "value") or "",
        header=_one(args, "header") or "",
        header_value=_one(args, "header_value") or "",
        show=show,
    )


# -- showing bytes ---------------------------------------------------------------------


@attrs.frozen
class Shown:
    """Bytes as the page shows them: ``kind`` is ``null``, ``schema``, ``json``,
    ``text`` or ``hex``; ``note`` says more (the schema id and subject, why a framed
    value was not decoded); ``cut`` whether ``text`` is only the start."""

    kind: str
    text: str
    note: str = ""
    cut: bool = False


def _bounded(kind: str, text: str, note: str, cut: bool) -> Shown:
    if len(text) > MAX_SHOWN_CHARS:
        return Shown(kind, text[:MAX_SHOWN_CHARS], note, True)
    return Shown(kind, text, note, cut)


def _hex(data: bytes, note: str = "") -> Shown:
    head = data[: MAX_SHOWN_CHARS // 3]
    return _bounded("hex", head.hex(" "), note, len(head) < len(data))


#: Control characters other than tab, newline and carriage return: bytes holding them
#: are binary, shown as hex unless text is asked for.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _text(data: bytes, note: str = "", *, binary_ok: bool = False) -> Shown | None:
    head = data[:MAX_DECODE_BYTES]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A cut through a multi-byte character at the bound is still text.
        if len(head) < len(data) and e.start >= len(head) - 3:
            text = head[: e.start].decode("utf-8")
        else:
            return None
    if not binary_ok and _CONTROL.search(text):
        return None
    return _bounded("text", text, note, len(head) < len(data))


class SchemaNames:
    """Schema id -> a subject that has it, asked of the registry once per page."""

    def __init__(self, lookup: SchemaSource) -> None:
        self.lookup = lookup
        self._subjects: dict[int, str] | None = None
        self._parsed: dict[int, Serializer | None] = {}

    def parsed(self, schema_id: int) -> Serializer | None:
        """The schema of that id, asked of the registry once per page."""
        if schema_id not in self._parsed:
            if len(self._parsed) >= MAX_SCHEMAS_PER_PAGE:
                return self.lookup.parsed_by_id(schema_id)
            self._parsed[schema_id] = self.lookup.parsed_by_id(schema_id)
        return self._parsed[schema_id]

    def subject_of(self, schema_id: int) -> str:
        if self._subjects is None:
            found: dict[int, str] = {}
            for subject in self.lookup.subjects():
                for version in self.lookup.versions(subject):
                    found.setdefault(version.schema_id, subject)
            self._subjects = found
        return self._subjects.get(schema_id, "")


def shown(data: bytes | None, show: ShowAs, names: SchemaNames | None) -> Shown:
    """How ``data`` (a key, value or header value) is shown."""
    if data is None:
        return Shown("null", "null")
    if show is ShowAs.HEX:
        return _hex(data)
    if show is ShowAs.TEXT:
        return _text(data, binary_ok=True) or _bounded(
            "text", data[:MAX_DECODE_BYTES].decode("utf-8", "replace"),
            "not UTF-8: undecodable bytes shown as \ufffd", len(data) > MAX_DECODE_BYTES,
        )
    note = ""
    framed = unframe(data) if names is not None else None
    if framed is not None and names is not None:
        schema_id, body = framed
        note, decoded = _by_schema(schema_id, body, names, len(data))
        if decoded is not None:
            return decoded
    if len(data) <= MAX_DECODE_BYTES and data[:1] in (b"{", b"["):
        try:
            value = json.loads(data)
        except ValueError:
            pass
        else:
            return _bounded("json", json.dumps(value, indent=2, ensure_ascii=False), note, False)
    return _text(data, note) or _hex(data, note)


def _by_schema(
    schema_id: int, body: bytes, names: SchemaNames, size: int
) -> tuple[str, Shown | None]:
    if size > MAX_DECODE_BYTES:
        return f"schema id {schema_id}: not decoded (over {MAX_DECODE_BYTES} bytes)", None
    parsed = names.parsed(schema_id)
    if parsed is None:
        return f"framed with schema id {schema_id}, which the registry does not know", None
    try:
        value = parsed.decode(body)
    except ValueError as e:
        return f"schema id {schema_id} does not decode it: {e}", None
    subject = names.subject_of(schema_id)
    note = f"schema id {schema_id}" + (f", subject {subject}" if subject else "")
    note += f" ({parsed.schema_type.value})"
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return note, _bounded("schema", text, note, False)


# -- the scan --------------------------------------------------------------------------


class ScanStop(enum.Enum):
    """Why a scan stopped."""

    LIMIT = "the limit of records shown"
    END = "the end of the partition's committed records"
    BYTES = "the scan's bound on bytes examined"
    TIME = "the scan's bound on time"


@attrs.frozen
class Scan:
    """What a scan found: ``records`` matching, ``next_offset`` where the next page
    starts, why it stopped, what it examined, the partition's offsets when it began,
    and the offset it began at."""

    records: tuple[Record, ...]
    next_offset: int
    stop: ScanStop
    examined_records: int
    examined_bytes: int
    offsets: PartitionOffsets
    first_offset: int

    @property
    def bounded(self) -> bool:
        """Whether a bound, not the limit or the end, stopped the scan."""
        return self.stop in (ScanStop.BYTES, ScanStop.TIME)


def _decoded_text(data: bytes, names: SchemaNames | None) -> str:
    """A framed value's JSON as its schema decodes it, compact (no layout to match
    across); empty when it is not framed with a known schema, or too long to decode."""
    framed = unframe(data) if names is not None and len(data) <= MAX_DECODE_BYTES else None
    if framed is None or names is None:
        return ""
    parsed = names.parsed(framed[0])
    if parsed is None:
        return ""
    try:
        return json.dumps(parsed.decode(framed[1]), ensure_ascii=False, default=str)
    except ValueError:
        return ""


def _contains(needle: str, data: bytes | None, names: SchemaNames | None) -> bool:
    """Whether ``data``'s bytes, or else its JSON as the registry decodes it, contain
    ``needle`` (the decoding only when the bytes do not match)."""
    if data is None:
        return False
    return needle.encode("utf-8") in data or (
        names is not None and needle in _decoded_text(data, names)
    )


def matches(record: Record, query: BrowseQuery, names: SchemaNames | None) -> bool:
    """Whether ``record`` passes the query's filters."""
    if query.key and not _contains(query.key, record.key, names):
        return False
    if query.value and not _contains(query.value, record.value, names):
        return False
    if query.header or query.header_value:
        for name, value in record.headers:
            if query.header and name != query.header:
                continue
            if not query.header_value or _contains(query.header_value, value, None):
                break
        else:
            return False
    return True


async def first_offset(
    data: BrokerData, topic: str, query: BrowseQuery, offsets: PartitionOffsets
) -> int:
    """Where the query's scan starts, within [log start, last stable offset]."""
    low, high = offsets.log_start_offset, offsets.last_stable_offset
    start = query.start
    if start.at is StartAt.EARLIEST:
        wanted = low
    elif start.at is StartAt.LATEST:
        wanted = high - query.limit
    elif start.at is StartAt.OFFSET:
        wanted = start.value
    else:
        found = await data.reads.offset_for_timestamp(topic, query.partition, start.value)
        wanted = high if found is None else found[0]
    return min(max(wanted, low), high)


async def scan(
    data: BrokerData,
    clock: Clock,
    topic: str,
    query: BrowseQuery,
    names: SchemaNames | None,
    *,
    max_bytes: int = MAX_SCAN_BYTES,
    max_seconds: float = MAX_SCAN_SECONDS,
) -> Scan:
    """Run ``query`` over ``topic``'s partition (bounds overridable for tests)."""
    offsets = await data.reads.offsets(topic, query.partition)
    offset = begin = await first_offset(data, topic, query, offsets)
    deadline = clock.seconds() + max_seconds
    turn_at = clock.seconds() + SLICE_SECONDS
    found: list[Record] = []
    examined = examined_bytes = 0
    stop = ScanStop.END
    while True:
        if offset >= offsets.last_stable_offset:
            stop = ScanStop.END
            break
        read = await data.read(topic, query.partition, offset, READ_BYTES)
        if not read.decoded:
            stop = ScanStop.END
            break
        for record in read.decoded:
            examined += 1
            examined_bytes += len(record.key or b"") + len(record.value or b"")
            offset = record.offset + 1
            if matches(record, query, names):
                found.append(record)
                if len(found) >= query.limit:
                    break
            now = clock.seconds()
            if examined_bytes >= max_bytes or now >= deadline:
                break
            if now >= turn_at:
                await _turn(clock)
                turn_at = clock.seconds() + SLICE_SECONDS
        if len(found) >= query.limit:
            stop = ScanStop.LIMIT
            break
        if examined_bytes >= max_bytes:
            stop = ScanStop.BYTES
            break
        if clock.seconds() >= deadline:
            stop = ScanStop.TIME
            break
        # A turn of the reactor between reads too: other clients go on meanwhile.
        await _turn(clock)
        turn_at = clock.seconds() + SLICE_SECONDS
    if stop is ScanStop.LIMIT and offset >= offsets.last_stable_offset:
        stop = ScanStop.END  # nothing is left to page to
    if stop is ScanStop.END:
        # Past control records or an aborted transaction's, the next read starts at the end.
        offset = max(offset, offsets.last_stable_offset)
    return Scan(tuple(found), offset, stop, examined, examined_bytes, offsets, begin)


async def _turn(clock: Clock) -> None:
    """Let the reactor run whatever else is due, then go on."""
    turn: Deferred[None] = Deferred()
    clock.callLater(0, turn.callback, None)
    await turn
