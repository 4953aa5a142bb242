"""The web console of a real ``twistd broker`` over loopback HTTP: records produced through
the native protocol and confluent-kafka, a confluent-kafka consumer group committing, and
what the pages show of them; then the same pages in a real headless Chromium (Debian's
``chromium``), whose DOM after the script's live refresh must show the topics and the
group's lag."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess, wait_for_port
from tests.kafka_helpers import WAIT, Poller, module_broker, wait_until

pytestmark = pytest.mark.broker

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "console-orders"
OTHER = "console-audit"
GROUP = "console-billing"
#: Records per partition of TOPIC after the fixture (native 30 + 20, confluent 10 to p0),
#: and what the group commits: lag (40 - 25) + (20 - 15) = 20.
ENDS = (40, 20)
COMMITTED = (25, 15)
LAG = 20
#: Chromium's virtual time: long enough for two refreshes of the page's script (5 s each).
VIRTUAL_TIME_MS = 12_000
CHROMIUM_TIMEOUT = 90.0


def http_get(broker: BrokerProcess, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{broker.http_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def render_counter(html: str) -> int:
    found = re.search(r'id="snapshot" data-render="(\d+)"', html)
    assert found, html[:500]
    return int(found.group(1))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "console")


class Member:
    """The group's one consumer, polled in its own thread."""

    def __init__(self, poller: Poller, consumer: Any) -> None:
        self.poller = poller
        self.consumer = consumer

    def commit(self, offsets: list[Any]) -> None:
        self.poller.call(lambda: self.consumer.commit(offsets=offsets, asynchronous=False))


@pytest.fixture(scope="module")
def group_member(broker: BrokerProcess) -> Iterator[Member]:
    """TOPIC with records from both protocols, OTHER with a few, and GROUP with one live
    member that committed COMMITTED."""
    assert wait_for_port(broker.http_port, time.monotonic() + WAIT), "no HTTP listener"
    with broker.client() as client:
        client.create_topic(TOPIC, 2)
        client.create_topic(OTHER, 1)
        client.produce(TOPIC, 0, [b"n%d" % i for i in range(30)])
        client.produce(TOPIC, 1, [b"m%d" % i for i in range(20)])
        client.produce(OTHER, 0, [b"a", b"b"])
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.kafka_bootstrap, "acks": "all"}
    )
    for i in range(10):
        producer.produce(TOPIC, b"k%d" % i, partition=0)
    assert producer.flush(WAIT) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": GROUP,
            "client.id": "console-test-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe([TOPIC])

    def poll_once() -> list[tuple[int, int, bytes]]:
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            return []
        return [(msg.partition(), msg.offset(), msg.value())]

    poller = Poller("console-consumer", poll_once)
    try:
        wait_until(lambda: len(poller.records()) >= sum(ENDS), "the group consuming everything")
        member = Member(poller, consumer)
        member.commit(
            [confluent_kafka.TopicPartition(TOPIC, p, c) for p, c in enumerate(COMMITTED)]
        )
        yield member
    finally:
        poller.stop(consumer.close)


# -- loopback HTTP -------------------------------------------------------------------


def test_overview_shows_topics_and_the_group(broker: BrokerProcess, group_member: Member) -> None:
    status, body = http_get(broker, "/")
    assert status == 200
    topic_row = re.search(rf'<tr class=""><td><a href="/topics/{TOPIC}">.*?</tr>', body)
    assert topic_row, body
    cells = re.findall(r'<td class="num">([^<]*)</td>', topic_row.group(0))
    assert cells[:2] == ["2", str(sum(ENDS))], cells  # partitions; records (log start 0)
    assert f'<a href="/topics/{OTHER}">{OTHER}</a>' in body
    group_row = re.search(rf'<tr><td><a href="/groups/{GROUP}">.*?</tr>', body)
    assert group_row, body
    assert "<td>Stable</td>" in group_row.group(0)
    assert re.findall(r'<td class="num">([^<]*)</td>', group_row.group(0))[:2] == ["1", str(LAG)]
    assert f"<dt>kafka</dt><dd><code>tcp:{broker.kafka_port}:interface=127.0.0.1</code>" in body


def test_topic_page_has_real_offsets(broker: BrokerProcess, group_member: Member) -> None:
    status, body = http_get(broker, f"/topics/{TOPIC}")
    assert status == 200
    for partition, end in enumerate(ENDS):
        # partition, log start 0, end, last stable = end (no transactions), records.
        row = (
            f'<tr><td class="num">{partition}</td><td class="num">0</td>'
            f'<td class="num">{end}</td><td class="num">{end}</td><td class="num">{end}</td>'
        )
        assert row in body, body
    assert "<td>cleanup.policy</td><td><code>delete</code></td><td></td>" in body
    assert f'<a href="/groups/{GROUP}">{GROUP}</a>' in body


def test_group_page_members_offsets_lag(broker: BrokerProcess, group_member: Member) -> None:
    status, body = http_get(broker, f"/groups/{GROUP}")
    assert status == 200
    assert "<td>console-test-client</td>" in body
    assert f'<a href="/topics/{TOPIC}">{TOPIC}</a> [0, 1]' in body
    for partition, (committed, end) in enumerate(zip(COMMITTED, ENDS, strict=True)):
        row = (
            f'<td class="num">{partition}</td><td class="num">{committed}</td>'
            f'<td class="num">{end}</td><td class="num">{end - committed}</td>'
        )
        assert row in body, body
    assert f"<dt>total lag</dt><dd>{LAG}</dd>" in body
    assert '<svg class="chart"' in body


def test_rates_from_the_sampler(broker: BrokerProcess, group_member: Member) -> None:
    """Records produced and offsets committed between samples show as rates (the sampler
    takes one every 5 s, so this waits up to a few samples)."""

    def rate_of_other() -> float | None:
        _, body = http_get(broker, f"/topics/{OTHER}")
        found = re.search(r"<dt>produce rate</dt><dd>([\d.,]+)/s</dd>", body)
        return float(found.group(1).replace(",", "")) if found else None

    # Records count towards a rate only once the sampler knows the topic (a topic's
    # first sample is its starting point): wait for a rate, then produce.
    wait_until(lambda: rate_of_other() is not None, "the sampler to know the topic", interval=0.5)
    with broker.client() as client:
        client.produce(OTHER, 0, [b"r%d" % i for i in range(500)])
    assert wait_until(rate_of_other, "a produce rate", interval=1.0) > 0

    def consume_rate() -> float:
        _, body = http_get(broker, f"/groups/{GROUP}")
        found = re.search(r"<dt>consume rate</dt><dd>([\d.,]+)/s</dd>", body)
        return float(found.group(1).replace(",", "")) if found else 0.0

    # The group commits everything it consumed: 20 more offsets.
    offsets = [confluent_kafka.TopicPartition(TOPIC, p, e) for p, e in enumerate(ENDS)]
    group_member.commit(offsets)
    assert wait_until(consume_rate, "a consume rate", interval=1.0) > 0
    # Put the commits back where the other tests expect them.
    back = [confluent_kafka.TopicPartition(TOPIC, p, c) for p, c in enumerate(COMMITTED)]
    group_member.commit(back)


def test_resetting_a_group_with_members_is_refused(
    broker: BrokerProcess, group_member: Member
) -> None:
    """The console resets offsets only while the group is inactive, as ``brokerctl``: the
    broker's refusal is shown (409) and nothing is committed."""
    path = f"/groups/{GROUP}/reset-offsets"
    _, form = http_get(broker, path)
    token = re.search(r'name="csrf" value="([0-9a-f]{64})"', form)
    assert token, form
    body = urllib.parse.urlencode(
        {"topic": TOPIC, "mode": "earliest", "csrf": token.group(1), "step": "confirm"}
    ).encode()
    url = f"http://127.0.0.1:{broker.http_port}{path}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, data=body, timeout=WAIT)
    assert refused.value.code == 409
    assert "offsets can be reset only while the group is inactive" in refused.value.read().decode()
    _, group = http_get(broker, f"/groups/{GROUP}")
    assert f'<td class="num">0</td><td class="num">{COMMITTED[0]}</td>' in group


def test_unknown_names_are_404(broker: BrokerProcess) -> None:
    assert http_get(broker, "/topics/no-such-topic")[0] == 404
    assert http_get(broker, "/groups/no-such-group")[0] == 404
    assert http_get(broker, "/no-such-page")[0] == 404


# -- headless Chromium ---------------------------------------------------------------


def chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("chromium is not installed (Debian package chromium; .ci/run installs it)")
    return binary


def run_chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium(),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--virtual-time-budget={VIRTUAL_TIME_MS}",
        *args,
        url,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class _Dom(HTMLParser):
    """The few things the tests read of a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.render = -1
        self.status = ""
        self._in_status = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "body":
            self.body = values
        if values.get("id") == "snapshot":
            self.render = int(values.get("data-render") or -1)
        self._in_status = values.get("id") == "status"

    def handle_data(self, data: str) -> None:
        if self._in_status:
            self.status += data

    def handle_endtag(self, tag: str) -> None:
        self._in_status = False


def test_chromium_refreshes_the_overview_live(
    broker: BrokerProcess, group_member: Member, tmp_path: Path
) -> None:
    before = render_counter(http_get(broker, "/")[1])
    dom_text = run_chromium(tmp_path, f"http://127.0.0.1:{broker.http_port}/", "--dump-dom").stdout
    dom = _Dom()
    dom.feed(dom_text)
    # The script swapped in at least one fresh body: the page load rendered before + 1
    # (or later), every refresh one more.
    refreshes = int(dom.body.get("data-refreshes") or 0)
    assert refreshes >= 1, dom_text[:3000]
    assert dom.render >= before + 1 + refreshes, (before, dom.render, refreshes)
    assert dom.status.startswith("live, updated"), dom.status
    assert f'<a href="/topics/{TOPIC}">{TOPIC}</a>' in dom_text
    group_row = re.search(rf'<tr><td><a href="/groups/{GROUP}">.*?</tr>', dom_text)
    assert group_row, dom_text
    assert f'<td class="num">{LAG}</td>' in group_row.group(0)


def test_chromium_group_page_and_screenshot(
    broker: BrokerProcess, group_member: Member, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{broker.http_port}/groups/{GROUP}"
    dom_text = run_chromium(tmp_path, url, "--dump-dom").stdout
    assert "data-refreshes=" in dom_text and 'data-refreshes="0"' not in dom_text
    assert f"<dt>total lag</dt><dd>{LAG}</dd>" in dom_text
    assert '<svg class="chart"' in dom_text
    shot = tmp_path / "group.png"
    run_chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1024,900")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1024, 900)
