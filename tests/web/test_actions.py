"""The console's actions on a real ``twistd broker`` over loopback HTTP: each behind a
confirmation step and a CSRF token, each checked against the principal's ACLs under
``--authorizer acl``; and a real headless Chromium (DevTools protocol) that browses a
topic's records, submits the produce form through its confirmation, and has a form
posted from another site refused.

Records come from confluent-kafka (keys and headers) and the native client; what an
action did is checked through ``brokerctl``'s native client, not through the console.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from brokerd.native.operator_messages import ResetMode
from brokerd.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from brokerd.security.acl_store import AclStore

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT, module_broker
from tests.web.cdp import Browser, fill
from tests.web.test_auth import write_credentials

pytestmark = pytest.mark.broker

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "actions-orders"
GROUP = "actions-billing"


def call(
    port: int, method: str, path: str, form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None, user: tuple[str, str] | None = None,
) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    sent = dict(headers or {})
    body = None
    if form is not None:
        body = urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    if user is not None:
        sent["Authorization"] = "Basic " + base64.b64encode(":".join(user).encode()).decode()
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def token_of(port: int, path: str, user: tuple[str, str] | None = None) -> str:
    status, html = call(port, "GET", path, user=user)
    assert status == 200, html
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert found, html
    return found.group(1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "console-actions")


@pytest.fixture(scope="module")
def seeded(broker: BrokerProcess) -> BrokerProcess:
    """TOPIC (2 partitions) with keyed records with headers from confluent-kafka, and
    GROUP's committed offsets of it (no members)."""
    with broker.client() as client:
        client.create_topic(TOPIC, 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for i in range(6):
        producer.produce(TOPIC, value=b'{"order": %d}' % i, key=b"customer-%d" % (i % 3),
                         partition=i % 2, headers=[("origin", b"shop")])
    assert producer.flush(WAIT) == 0
    with broker.client() as client:
        client.reset_offsets(GROUP, TOPIC, ResetMode.OFFSET, value=2)
    return broker


def ends(broker: BrokerProcess, topic: str = TOPIC) -> list[int]:
    with broker.client() as client:
        return [client.list_offsets(topic, p)[1] for p in range(2)]


# -- plain HTTP ------------------------------------------------------------------------


def test_a_post_without_the_token_or_from_another_origin_is_refused(
    seeded: BrokerProcess,
) -> None:
    port = seeded.http_port
    path = f"/topics/{TOPIC}/produce"
    form = {"key": "x", "value": "forged", "partition": "0", "step": "confirm"}
    before = ends(seeded)
    status, html = call(port, "POST", path, form)
    assert status == 403 and "token is missing or stale" in html
    token = token_of(port, path)
    status, html = call(port, "POST", path, {**form, "csrf": "0" * 64})
    assert status == 403
    status, html = call(port, "POST", path, {**form, "csrf": token},
                        headers={"Origin": "http://evil.example"})
    assert status == 403 and "another origin" in html
    status, html = call(port, "POST", path, {**form, "csrf": token},
                        headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 403 and "another site" in html
    assert ends(seeded) == before
    # The same form with its token from the console itself goes through.
    status, html = call(port, "POST", path, {**form, "csrf": token},
                        headers={"Origin": f"http://127.0.0.1:{port}",
                                 "Sec-Fetch-Site": "same-origin"})
    assert status == 200 and "Produced to" in html
    assert sum(ends(seeded)) == sum(before) + 1


def test_nothing_changes_before_the_confirmation(seeded: BrokerProcess) -> None:
    port = seeded.http_port
    token = token_of(port, "/new-topic")
    form = {"name": "actions-created", "partitions": "3", "configs": "retention.ms=3600000",
            "csrf": token}
    status, html = call(port, "POST", "/new-topic", form)
    assert status == 200 and 'id="confirm-form"' in html
    assert "Create topic actions-created with 3 partition(s)." in html
    with seeded.client() as client:
        assert "actions-created" not in {t.name for t in client.list_topics()}
    status, html = call(port, "POST", "/new-topic", {**form, "step": "confirm"})
    assert status == 200 and 'id="done"' in html
    with seeded.client() as client:
        described = client.describe_topic("actions-created")
    assert len(described["partitions"]) == 3, described
    assert described["configs"]["retention.ms"] == "3600000", described


def test_edit_configs_shows_the_change_then_applies_it(seeded: BrokerProcess) -> None:
    port = seeded.http_port
    path = f"/topics/{TOPIC}/configs"
    token = token_of(port, path)
    form = {"configs": "retention.ms=7200000\ncleanup.policy=compact", "csrf": token}
    status, html = call(port, "POST", path, form)
    assert status == 200
    assert "<td>retention.ms</td><td>(default)</td><td>7200000</td>" in html
    status, html = call(port, "POST", path, {**form, "step": "confirm"})
    assert status == 200 and "Changed 2 config(s)" in html
    with seeded.client() as client:
        configs = client.describe_topic(TOPIC)["configs"]
    assert configs["retention.ms"] == "7200000" and configs["cleanup.policy"] == "compact"
    # A line removed is an override deleted; a bad value is the broker's refusal (400).
    status, html = call(port, "POST", path, {"configs": "retention.ms=7200000",
                                             "csrf": token, "step": "confirm"})
    assert status == 200
    with seeded.client() as client:
        assert client.describe_topic(TOPIC)["configs"]["cleanup.policy"] == "delete"
    status, html = call(port, "POST", path, {"configs": "retention.ms=soon", "csrf": token,
                                             "step": "confirm"})
    assert status == 400 and "The broker refused it" in html


def test_delete_needs_the_name_typed(seeded: BrokerProcess) -> None:
    port = seeded.http_port
    with seeded.client() as client:
        client.create_topic("actions-doomed", 1)
    path = "/topics/actions-doomed/delete"
    token = token_of(port, path)
    status, html = call(port, "POST", path, {"confirm_name": "actions-doome", "csrf": token,
                                             "step": "confirm"})
    assert status == 400 and "type the topic&#x27;s name" in html.replace("'", "&#x27;")
    status, html = call(port, "POST", path, {"confirm_name": "actions-doomed", "csrf": token})
    assert status == 200 and 'id="confirm-form"' in html
    status, html = call(port, "POST", path, {"confirm_name": "actions-doomed", "csrf": token,
                                             "step": "confirm"})
    assert status == 200 and "Deleted topic actions-doomed." in html
    assert call(port, "GET", "/topics/actions-doomed")[0] == 404


def test_reset_offsets_of_an_inactive_group(seeded: BrokerProcess) -> None:
    port = seeded.http_port
    path = f"/groups/{GROUP}/reset-offsets"
    token = token_of(port, path)
    form = {"topic": TOPIC, "mode": "earliest", "csrf": token}
    status, html = call(port, "POST", path, form)
    assert status == 200
    # The dry run: committed 2 now, 0 after, on each partition.
    assert html.count('<td class="num">2</td><td class="num">0</td>') == 2, html
    status, html = call(port, "POST", path, {**form, "step": "confirm"})
    assert status == 200 and "Committed these offsets" in html
    with seeded.client() as client:
        offsets = client.describe_group(GROUP)["offsets"]
    assert {o["committed_offset"] for o in offsets} == {0}, offsets
    status, html = call(port, "POST", path, {**form, "mode": "offset", "value": "x"})
    assert status == 400 and "is not an offset" in html


def test_xss_payloads_in_records_are_inert(seeded: BrokerProcess) -> None:
    port = seeded.http_port
    producer = confluent_kafka.Producer({"bootstrap.servers": seeded.kafka_bootstrap})
    producer.produce(TOPIC, value=b"<script>alert(1)</script>", key=b"\"'><svg onload=x>",
                     partition=1, headers=[("<img src=x>", b"\xff\xfe")])
    assert producer.flush(WAIT) == 0
    status, html = call(port, "GET", f"/topics/{TOPIC}/messages?partition=1&offset=latest&limit=1")
    assert status == 200
    assert "<script>alert(1)" not in html and "<svg" not in html and "<img src=x>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;svg onload=x&gt;" in html and "ff fe" in html


# -- the broker's own schema registry --------------------------------------------------

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "note", "type": "string", "default": ""}]}


def test_records_decoded_through_the_registry_and_its_pages(seeded: BrokerProcess) -> None:
    """A record written by confluent-kafka's AvroSerializer against the broker's registry
    is shown decoded; the produce form encodes with the subject's latest schema; the
    registry pages list the subject, its versions and their diff."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.registry.rest_helpers import Rest

    topic, subject = "actions-avro", "actions-avro-value"
    Rest(seeded.schema_registry_url).wait_ready()
    with seeded.client() as client:
        client.create_topic(topic, 1)
    registry = SchemaRegistryClient({"url": seeded.schema_registry_url})
    serializer = AvroSerializer(registry, json.dumps(ORDER_V1))
    value = serializer({"id": 41}, SerializationContext(topic, MessageField.VALUE))
    producer = confluent_kafka.Producer({"bootstrap.servers": seeded.kafka_bootstrap})
    producer.produce(topic, value=value, key=b"first")
    assert producer.flush(WAIT) == 0
    v1_id = registry.get_latest_version(subject).schema_id
    port = seeded.http_port
    _, html = call(port, "GET", f"/topics/{topic}/messages")
    assert f"schema id {v1_id}, subject {subject} (AVRO)" in html
    assert "<pre>{\n  &quot;id&quot;: 41\n}</pre>" in html.replace('"', "&quot;")
    # Version 2 (a field with a default: BACKWARD compatible), then the form's encoding.
    v2_id = registry.register_schema(subject, Schema(json.dumps(ORDER_V2), "AVRO"))
    token = token_of(port, f"/topics/{topic}/produce")
    status, html = call(port, "POST", f"/topics/{topic}/produce", {
        "key": "second", "value": json.dumps({"id": 42, "note": "<from the form>"}),
        "value_subject": subject, "partition": "0", "csrf": token, "step": "confirm"})
    assert status == 200, html
    _, html = call(port, "GET", f"/topics/{topic}/messages?offset=1")
    assert f"schema id {v2_id}, subject {subject} (AVRO)" in html
    assert "&lt;from the form&gt;" in html
    status, html = call(port, "GET", "/schemas")
    row = re.search(rf'<tr><td><a href="/schemas/{subject}">{subject}</a></td>.*?</tr>', html)
    assert status == 200 and row, html
    assert '<td class="num">2</td>' in row.group(0) and "<td>BACKWARD</td>" in row.group(0)
    status, html = call(port, "GET", f"/schemas/{subject}")
    assert status == 200 and 'id="version-2"' in html
    diff = re.search(r'<pre class="diff" id="diff">(.*?)</pre>', html, re.S)
    assert diff, html
    added = re.findall(r"<ins>(.*?)</ins>", diff.group(1), re.S)
    assert any("&quot;note&quot;" in line.replace('"', "&quot;") for line in added), added
    # With the topic's schema validation on (set from the console), a value that is not
    # framed with the subject's schema is refused, as from any producer.
    path = f"/topics/{topic}/configs"
    status, html = call(port, "POST", path, {
        "configs": "confluent.value.schema.validation=true", "csrf": token, "step": "confirm"})
    assert status == 200, html
    status, html = call(port, "POST", f"/topics/{topic}/produce", {
        "value": "not framed", "partition": "0", "csrf": token, "step": "confirm"})
    assert status == 400 and "The broker refused it" in html, html
    assert "schema" in html.split('id="error"')[1][:400]


# -- Chromium --------------------------------------------------------------------------


def test_chromium_browses_and_produces_through_the_form(
    seeded: BrokerProcess, tmp_path: Path
) -> None:
    base = f"http://127.0.0.1:{seeded.http_port}"

    async def session() -> None:
        async with Browser(tmp_path / "profile") as browser:
            dom = await browser.open(f"{base}/topics/{TOPIC}/messages?partition=0")
            assert "customer-0" in dom and "&quot;order&quot;: 0" in dom.replace('"', "&quot;")
            assert "<code>origin</code>: shop" in dom
            # The query form: a key filter, run by the broker.
            dom = await browser.submit(
                fill("input[name=key]", "customer-2")
                + "document.querySelector('form.inline button').click();"
            )
            keys = re.findall(r'<td class="value text"><pre>(customer-\d)</pre>', dom)
            assert keys and set(keys) == {"customer-2"}, dom[-3000:]
            await browser.open(f"{base}/topics/{TOPIC}/produce")
            dom = await browser.submit(
                fill("input[name=key]", "from-chromium")
                + fill("textarea[name=value]", 'line one\nline two "chromium"')
                + fill("textarea[name=headers]", "via: chromium\nlang: <en>")
                + "document.getElementById('continue').click();"
            )
            assert 'id="confirm-form"' in dom, dom[-3000:]
            dom = await browser.submit("document.getElementById('confirm').click();")
            found = re.search(r"Produced to \S+ partition (\d) at offset (\d+)\.", dom)
            assert found, dom[-3000:]
            dom = await browser.submit("document.getElementById('see-it').click();")
            # The textarea's line break arrives as the newline it showed (not CRLF).
            assert "from-chromium" in dom and 'line one\nline two "chromium"' in dom
            assert "<code>lang</code>: &lt;en&gt;" in dom
            # A form on another origin (a data: page) posting to the console is refused.
            forged = (
                f'<form method="post" action="{base}/topics/{TOPIC}/produce">'
                '<input name="value" value="forged"><input name="step" value="confirm">'
                '<input name="csrf" value=""><button id="go">go</button></form>'
            )
            await browser.open("data:text/html," + quote(forged))
            dom = await browser.submit("document.getElementById('go').click();")
            assert "Refused: a request from another site" in dom, dom[-2000:]

    before = sum(ends(seeded))
    asyncio.run(session())
    assert sum(ends(seeded)) == before + 1


# -- ACLs ------------------------------------------------------------------------------


def _allow(rtype: ResourceType, name: str, op: Operation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, "User:alice", "*", op,
                      Permission.ALLOW)


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """``alice`` may DESCRIBE and READ ``open`` (not WRITE, ALTER_CONFIGS or DELETE it),
    DESCRIBE and WRITE ``mine``, nothing on the cluster; ``admin`` is a super user."""
    tmp = tmp_path_factory.mktemp("console-acl")
    data = tmp / "data"
    data.mkdir()
    proc = BrokerProcess(data, kafka=False).start()
    try:
        with proc.client() as client:
            client.produce("open", 0, [b"visible"])
            client.produce("closed", 0, [b"hidden"])
            client.produce("mine", 0, [b"alices"])
    finally:
        proc.stop()
    AclStore.in_directory(str(data)).save([
        _allow(ResourceType.TOPIC, "open", Operation.DESCRIBE),
        _allow(ResourceType.TOPIC, "open", Operation.READ),
        _allow(ResourceType.TOPIC, "mine", Operation.DESCRIBE),
        _allow(ResourceType.TOPIC, "mine", Operation.WRITE),
    ])
    proc = BrokerProcess(data, native=False, args=(
        "--sasl", "SCRAM-SHA-256",
        "--credentials", write_credentials(tmp / "credentials.json"),
        "--authorizer", "acl", "--super-users", "User:admin", "--http-auth", "basic",
    )).start()
    try:
        yield proc
    finally:
        proc.kill()


ALICE = ("alice", "alice-secret")
ADMIN = ("admin", "admin-secret")


def test_actions_are_checked_against_the_acls(acl_broker: BrokerProcess) -> None:
    port = acl_broker.http_port
    status, html = call(port, "GET", "/topics/open/messages", user=ALICE)
    assert status == 200 and "visible" in html
    assert call(port, "GET", "/topics/closed/messages", user=ALICE)[0] == 404
    for action in ("produce", "configs", "delete"):
        status, html = call(port, "GET", f"/topics/open/{action}", user=ALICE)
        assert status == 403 and "Not allowed" in html, action
    # A token alice got from a form she may use does not help: the POST is checked too.
    token = token_of(port, "/topics/mine/produce", user=ALICE)
    status, html = call(port, "POST", "/topics/open/produce",
                        {"value": "no", "partition": "0", "csrf": token, "step": "confirm"},
                        user=ALICE)
    assert status == 403 and "WRITE on topic open" in html
    status, html = call(port, "POST", "/new-topic",
                        {"name": "alices", "partitions": "1", "csrf": token, "step": "confirm"},
                        user=ALICE)
    assert status == 403 and "CREATE on the cluster" in html
    status, html = call(port, "POST", "/topics/mine/produce",
                        {"value": "ok", "partition": "0", "csrf": token, "step": "confirm"},
                        user=ALICE)
    assert status == 200 and "Produced to mine partition 0 at offset 1." in html
    # She may WRITE mine but not READ it.
    assert call(port, "GET", "/topics/mine/messages", user=ALICE)[0] == 403
    # A token is the principal's own: admin's form token is not alice's.
    admin_token = token_of(port, "/topics/open/produce", user=ADMIN)
    assert admin_token != token
    status, html = call(port, "POST", "/topics/open/produce",
                        {"value": "yes", "partition": "0", "csrf": admin_token,
                         "step": "confirm"}, user=ADMIN)
    assert status == 200 and "Produced to open partition 0 at offset 1." in html


def test_schema_subjects_are_shown_as_the_registry_allows(acl_broker: BrokerProcess) -> None:
    from tests.registry.rest_helpers import Rest

    rest = Rest(acl_broker.schema_registry_url, *ADMIN)
    rest.wait_ready()
    for subject in ("open-value", "closed-value"):
        status, _ = rest("POST", f"/subjects/{subject}/versions",
                         {"schema": '{"type": "string"}'})
        assert status == 200, subject
    port = acl_broker.http_port
    status, html = call(port, "GET", "/schemas", user=ALICE)
    assert status == 200 and "open-value" in html and "closed-value" not in html
    assert call(port, "GET", "/schemas/open-value", user=ALICE)[0] == 200
    assert call(port, "GET", "/schemas/closed-value", user=ALICE)[0] == 404
    assert call(port, "GET", "/schemas/closed-value", user=ADMIN)[0] == 200
