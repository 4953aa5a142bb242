"""The console's message browser and schema registry pages over a real in-process broker
core (its thread pools, its files) and real HTTP on 127.0.0.1, in the test's reactor:
offsets, ``latest``, timestamps, limits, the server-side filters, the scan's byte and
time bounds with the link to continue, values decoded through a schema source (an
in-memory stand-in for :class:`~brokerd.web.schema_face.SchemaSource`,
:mod:`tests.web.memory_registry`),
hostile keys, values and headers shown inert, the produce form's schema encoding."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import attrs
import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from twisted.web.client import Agent, readBody
from twisted.web.http_headers import Headers
from twisted.web.server import Site

from brokerd.core import Broker, FsyncPolicy
from brokerd.operator.inspect import Inspector
from brokerd.operator.operations import OperatorOps
from brokerd.registry.model import Compatibility, Schema, SchemaType, framed
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.types import Record
from brokerd.web import browse
from brokerd.web.browse import BrowseQuery, ScanStop, SchemaNames, Start, StartAt
from brokerd.web.console import make_console
from brokerd.web.csrf import CsrfGuard
from brokerd.web.data_face import BrokerData
from brokerd.web.permits import DataPages
from brokerd.web.scope import EVERYTHING
from brokerd.web.site import MAX_FORM_BYTES, BoundedRequest

from tests.web.memory_registry import MemoryRegistry, avro

pytest.importorskip("fastavro")
pytestmark = pytest.mark.filterwarnings("ignore:Using readBody")

BASE_MS = 1_700_000_000_000
HOSTILE_KEY = b'<script>alert("k")</script>'
HOSTILE_VALUE = b'"><img src=x onerror=alert(1)>'
HOSTILE_HEADER = "<b>h</b>"
INVALID_UTF8 = b"\xff\xfe\x00abc"
HUGE = b"x" * 300_000
#: The byte bound of the test's console: two of "big"'s 100 kB values pass it.
SCAN_BYTES = 150_000


@attrs.define
class Console:
    broker: Broker
    registry: MemoryRegistry
    port: Any
    csrf: CsrfGuard
    pages: DataPages

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port.getHost().port}"


def record(key: bytes | None, value: bytes | None,
           headers: tuple[tuple[str, bytes | None], ...] = ()) -> Record:
    return Record(0, 0, key, value, headers)


async def fill(broker: Broker, registry: MemoryRegistry) -> None:
    await broker.create_topic("orders", 1)
    await broker.create_topic("big", 1)
    data = BrokerData(broker, OperatorOps(broker, Inspector(broker)))
    for i in range(10):
        source = b"web" if i % 2 == 0 else b"batch"
        await data.produce("orders", 0, [record(b"k%d" % i, b'{"n": %d}' % i,
                                                (("source", source),))], BASE_MS + 1000 * i)
    registry.add("orders-value", avro({"id": "long"}))
    second = registry.add("orders-value", avro({"id": "long", "note": "string"}),
                          Compatibility.FULL)
    parsed = registry.parsed_by_id(second.schema_id)
    assert parsed is not None
    body = parsed.encode({"id": 7, "note": "<b>bold</b>"})
    later = [
        record(b"avro", framed(second.schema_id, body)),  # 10
        record(b"unknown-id", framed(999, b"\x01\x02")),  # 11
        record(b"invalid", INVALID_UTF8),  # 12
        record(HOSTILE_KEY, HOSTILE_VALUE, ((HOSTILE_HEADER, b"<i>"),)),  # 13
        record(b"huge", HUGE),  # 14
    ]
    for i, r in enumerate(later, start=10):
        await data.produce("orders", 0, [r], BASE_MS + 1000 * i)
    for _ in range(5):
        await data.produce("big", 0, [record(None, b"y" * 100_000)], BASE_MS)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    data_dir: Path = tmp_path_factory.mktemp("console-data") / "data"
    logdir = LogDirectory.open(str(data_dir), default_partitions=1)
    broker = Broker(logdir, reactor=reactor, fsync=FsyncPolicy("always"),
                    retention_check_seconds=0, checkpoint_seconds=0)
    broker.startService()
    registry = MemoryRegistry()
    pytest_twisted.blockon(defer.ensureDeferred(fill(broker, registry)))
    inspector = Inspector(broker)
    csrf = CsrfGuard()
    pages = DataPages(
        BrokerData(broker, OperatorOps(broker, inspector)), registry, reactor,
        lambda request: EVERYTHING, inspector, csrf, scan_bytes=SCAN_BYTES,
    )
    root = make_console(inspector, clock=reactor, settings={}, data=pages)
    port = reactor.listenTCP(  # type: ignore[attr-defined]
        0, Site(root, requestFactory=BoundedRequest), interface="127.0.0.1"
    )
    yield Console(broker, registry, port, csrf, pages)
    pytest_twisted.blockon(defer.gatherResults(
        [defer.maybeDeferred(port.stopListening), broker.stopService()]
    ))


async def request(console: Console, method: str, path: str,
                  form: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None) -> tuple[int, str]:
    import io

    from twisted.web.client import FileBodyProducer

    agent = Agent(reactor)
    sent = Headers({k: [v] for k, v in (headers or {}).items()})
    body = None
    if form is not None:
        sent.setRawHeaders("content-type", ["application/x-www-form-urlencoded"])
        body = FileBodyProducer(io.BytesIO(urlencode(form).encode()))
    response = await agent.request(method.encode(), (console.base + path).encode(), sent, body)
    return response.code, (await readBody(response)).decode()


async def get(console: Console, path: str) -> tuple[int, str]:
    return await request(console, "GET", path)


def offsets_shown(html: str) -> list[int]:
    rows = re.findall(r'<tr class="record"><td class="num">\d+</td><td class="num">(\d+)</td>',
                      html)
    return [int(r) for r in rows]


@pytest_twisted.ensureDeferred
async def test_earliest_with_a_limit_and_the_next_page(console: Console) -> None:
    status, html = await get(console, "/topics/orders/messages?limit=3")
    assert status == 200
    assert offsets_shown(html) == [0, 1, 2]
    assert 'id="next"' in html and "offset=3" in html
    status, html = await get(console, "/topics/orders/messages?offset=3&limit=2")
    assert offsets_shown(html) == [3, 4]
    earlier = re.search(r'<a id="earlier" href="([^"]+)">Earlier records from offset 1</a>',
                        html)
    assert earlier, html
    _, html = await get(console, earlier.group(1).replace("&amp;", "&"))
    assert offsets_shown(html) == [1, 2]


@pytest_twisted.ensureDeferred
async def test_latest_shows_the_last_records(console: Console) -> None:
    _, html = await get(console, "/topics/orders/messages?offset=latest&limit=2")
    assert offsets_shown(html) == [13, 14]
    assert "the end of the partition" in html


@pytest_twisted.ensureDeferred
async def test_timestamp_in_ms_and_iso(console: Console) -> None:
    _, html = await get(console, f"/topics/orders/messages?timestamp={BASE_MS + 5000}&limit=1")
    assert offsets_shown(html) == [5]
    # 2023-11-14T22:13:24Z is BASE_MS + 4000 ms (rounded down to the second: record 4 is
    # at .000, so the first at or after is 4... BASE_MS itself is at 22:13:20).
    _, html = await get(console, "/topics/orders/messages?timestamp=2023-11-14T22:13:24&limit=1")
    assert offsets_shown(html) == [4]
    _, html = await get(console, f"/topics/orders/messages?timestamp={BASE_MS * 2}")
    assert offsets_shown(html) == []


@pytest_twisted.ensureDeferred
async def test_filters_on_key_value_and_headers(console: Console) -> None:
    path = "/topics/orders/messages?"
    assert offsets_shown((await get(console, path + "key=k3"))[1]) == [3]
    assert offsets_shown((await get(console, path + urlencode({"value": '"n": 7'})))[1]) == [7]
    by_header = (await get(console, path + "header=source&header_value=web"))[1]
    assert offsets_shown(by_header) == [0, 2, 4, 6, 8]
    assert offsets_shown((await get(console, path + "header=source"))[1]) == list(range(10))
    # A value decoded through the registry matches by its bytes, and by its JSON.
    assert offsets_shown((await get(console, path + "value=bold"))[1]) == [10]
    by_json = (await get(console, path + urlencode({"value": '{"id": 7, "note"'})))[1]
    assert offsets_shown(by_json) == [10]


@pytest_twisted.ensureDeferred
async def test_bad_queries_are_400(console: Console) -> None:
    for query in ("offset=abc", "partition=5", "limit=100000", "limit=0",
                  "timestamp=yesterday", "show=pdf"):
        status, html = await get(console, "/topics/orders/messages?" + query)
        assert status == 400, query
        assert 'id="error"' in html
    assert (await get(console, "/topics/nope/messages"))[0] == 404


@pytest_twisted.ensureDeferred
async def test_the_byte_bound_stops_the_scan_with_a_link_to_continue(console: Console) -> None:
    status, html = await get(console, "/topics/big/messages?value=never-there")
    assert status == 200
    assert "the scan&#x27;s bound on bytes examined" in html or "bound on bytes" in html
    found = re.search(r'<a href="([^"]+)" id="continue">Continue from offset (\d+)</a>', html)
    assert found and found.group(2) == "2", html[-2000:]
    assert "offset=2" in found.group(1) and "value=never-there" in found.group(1)
    _, rest = await get(console, found.group(1).replace("&amp;", "&"))
    assert "Continue from offset 4" in rest
    _, last = await get(console, "/topics/big/messages?value=never-there&offset=4")
    assert "the end of the partition" in last and 'id="continue"' not in last


class SteppingClock:
    """Time that moves one second each time it is read (the scan's deadline comes after
    a few records); timers run on the real reactor."""

    def __init__(self) -> None:
        self.now = 0.0

    def seconds(self) -> float:
        self.now += 1.0
        return self.now

    def callLater(self, delay: float, f: Any, *args: Any, **kw: Any) -> Any:
        return reactor.callLater(delay, f, *args, **kw)  # type: ignore[attr-defined]


@pytest_twisted.ensureDeferred
async def test_the_time_bound_stops_the_scan(console: Console) -> None:
    data = console.pages.data
    assert data is not None
    query = BrowseQuery(0, Start(StartAt.EARLIEST), 50, value="never-there")
    found = await browse.scan(data, SteppingClock(), "orders", query, None, max_seconds=3.5)
    assert found.stop is ScanStop.TIME and found.bounded
    assert found.records == () and 0 < found.next_offset < 15


@pytest_twisted.ensureDeferred
async def test_values_through_the_registry_json_text_and_hex(console: Console) -> None:
    _, html = await get(console, "/topics/orders/messages?offset=10&limit=3")
    assert "schema id 2, subject orders-value (AVRO)" in html
    assert "&quot;note&quot;: &quot;&lt;b&gt;bold&lt;/b&gt;&quot;" in html or (
        '"note": "&lt;b&gt;bold&lt;/b&gt;"' in html)
    assert "framed with schema id 999, which the registry does not know" in html
    assert "00 00 00 03 e7 01 02" in html  # shown as hex
    assert "ff fe 00 61 62 63" in html  # invalid UTF-8: hex
    _, forced = await get(console, "/topics/orders/messages?offset=0&limit=1&show=hex")
    assert '7b 22 6e 22 3a 20 30 7d' in forced  # {"n": 0}
    _, as_json = await get(console, "/topics/orders/messages?offset=0&limit=1")
    assert '<td class="value json"><pre>{\n  "n": 0\n}</pre>' in as_json


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.attributes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)
        self.attributes.extend(name for name, _ in attrs)


@pytest_twisted.ensureDeferred
async def test_hostile_records_are_inert_and_huge_values_cut(console: Console) -> None:
    _, html = await get(console, "/topics/orders/messages?offset=13&limit=2")
    parsed = Tags()
    parsed.feed(html)
    assert "script" not in parsed.seen and "img" not in parsed.seen
    assert "onerror" not in parsed.attributes
    assert "&lt;script&gt;alert(\"k\")&lt;/script&gt;" in html
    assert '"&gt;&lt;img src=x onerror=alert(1)&gt;' in html
    assert "&lt;b&gt;h&lt;/b&gt;" in html and "&lt;i&gt;" in html
    assert "(cut: only the start is shown)" in html
    assert len(html) < 20_000  # a 300 kB value shown as at most its first few kB
    assert "x" * browse.MAX_SHOWN_CHARS in html and "x" * (browse.MAX_SHOWN_CHARS + 1) not in html


@pytest_twisted.ensureDeferred
async def test_schema_pages_list_versions_and_diff(console: Console) -> None:
    status, html = await get(console, "/schemas")
    assert status == 200
    row = re.search(r'<tr><td><a href="/schemas/orders-value">orders-value</a></td>.*?</tr>', html)
    assert row, html
    assert '<td class="num">2</td>' in row.group(0) and "<td>AVRO</td>" in row.group(0)
    assert "<td>FULL</td>" in row.group(0)
    status, html = await get(console, "/schemas/orders-value")
    assert status == 200
    assert 'id="version-1"' in html and 'id="version-2"' in html
    assert '<ins>+    {</ins>' in html or "<ins>" in html
    assert '&quot;note&quot;' in html or '"note"' in html
    _, same = await get(console, "/schemas/orders-value?from=1&to=1")
    assert "The two versions&#x27; texts are the same." in same or "texts are the same" in same
    assert (await get(console, "/schemas/nope"))[0] == 404


@pytest_twisted.ensureDeferred
async def test_produce_encodes_with_the_subjects_latest_schema(console: Console) -> None:
    token = console.csrf.token("User:ANONYMOUS")
    form = {"key": "typed", "value": json.dumps({"id": 42, "note": "from the form"}),
            "value_subject": "orders-value", "partition": "0", "headers": "via: console",
            "csrf": token}
    status, html = await request(console, "POST", "/topics/orders/produce", form)
    assert status == 200 and "encoded with orders-value version 2" in html
    status, html = await request(console, "POST", "/topics/orders/produce",
                                 {**form, "step": "confirm"})
    assert status == 200, html
    offset = int(re.search(r"at offset (\d+)", html).group(1))  # type: ignore[union-attr]
    _, shown = await get(console, f"/topics/orders/messages?offset={offset}&limit=1")
    assert "schema id 2, subject orders-value (AVRO)" in shown
    assert "from the form" in shown and "<code>via</code>: console" in shown
    bad = {**form, "value": json.dumps({"id": "not a long"})}
    status, html = await request(console, "POST", "/topics/orders/produce", bad)
    assert status == 400 and "does not fit orders-value version 2" in html


def test_schema_names_find_a_subject_per_id() -> None:
    registry = MemoryRegistry()
    registry.add("a-value", Schema(SchemaType.JSON, '{"type": "object"}'))
    names = SchemaNames(registry)
    assert names.subject_of(1) == "a-value" and names.subject_of(2) == ""


@pytest_twisted.ensureDeferred
async def test_a_read_only_console_refuses_every_action(console: Console) -> None:
    pages = attrs.evolve(console.pages, actions=False)
    inspector = Inspector(console.broker)
    root = make_console(inspector, clock=reactor, settings={}, data=pages)
    port = reactor.listenTCP(0, Site(root), interface="127.0.0.1")  # type: ignore[attr-defined]
    try:
        readonly = attrs.evolve(console, port=port)
        token = console.csrf.token("User:ANONYMOUS")
        for path in ("/topics/orders/produce", "/topics/orders/configs", "/topics/orders/delete",
                     "/new-topic"):
            status, html = await get(readonly, path)
            assert status == 403 and "read-only" in html, path
            status, _ = await request(readonly, "POST", path, {"csrf": token, "step": "confirm"})
            assert status == 403, path
        status, html = await get(readonly, "/topics/orders")
        assert 'id="browse"' in html and 'id="produce"' not in html
        assert (await get(readonly, "/topics/orders/messages?limit=1"))[0] == 200
    finally:
        await port.stopListening()


class RawClient(Protocol):
    def __init__(self) -> None:
        self.received = b""
        self.done: defer.Deferred[bytes] = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.done.callback(self.received)


@pytest_twisted.ensureDeferred
async def test_a_body_over_the_bound_is_refused_before_it_is_read(console: Console) -> None:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", console.port.getHost().port)
    client = await connectProtocol(endpoint, RawClient())
    assert client.transport is not None
    client.transport.write(
        b"POST /new-topic HTTP/1.1\r\nHost: console\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: %d\r\n\r\nname=x" % (MAX_FORM_BYTES + 1)
    )
    answer = await client.done
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


@pytest_twisted.ensureDeferred
async def test_a_chunked_body_growing_over_the_bound_is_cut_off(console: Console) -> None:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", console.port.getHost().port)
    client = await connectProtocol(endpoint, RawClient())
    assert client.transport is not None
    client.transport.write(
        b"POST /new-topic HTTP/1.1\r\nHost: console\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (1 << 20, b"a" * (1 << 20))
    for _ in range(MAX_FORM_BYTES // (1 << 20) + 1):
        client.transport.write(chunk)
    answer = await client.done
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


@pytest_twisted.ensureDeferred
async def test_paths_below_a_page_are_404(console: Console) -> None:
    assert (await get(console, "/topics/orders/messages/more"))[0] == 404
    assert (await get(console, "/topics/orders/produce/more"))[0] == 404
    assert (await request(console, "POST", "/topics/orders/messages", {}))[0] == 405
