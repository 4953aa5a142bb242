"""The data pages' shell and building blocks: text is escaped by the flattener, the
headers allow no script, and the small helpers build what the pages link to."""

from __future__ import annotations

from twisted.web.server import NOT_DONE_YET
from twisted.web.template import flattenString, tags
from twisted.web.test.requesthelper import DummyRequest

from brokerd.web.markup import (
    DATA_HEADERS,
    Flattenable,
    facts,
    hidden,
    method_not_allowed,
    respond,
    table,
    topic_href,
    url,
)


def flat(tag: Flattenable) -> str:
    out: list[bytes] = []
    flattenString(None, tag).addCallback(out.append)
    return out[0].decode()


def test_respond_writes_the_escaped_page_with_the_no_script_headers() -> None:
    request = DummyRequest([b""])
    result = respond(request, 404, "Missing <t>", tags.p("<script>alert(1)</script>"))
    assert result is NOT_DONE_YET
    assert request.responseCode == 404 and request.finished
    html = b"".join(request.written).decode()
    assert html.startswith("<!doctype html><html lang=\"en\">")
    assert "<title>Missing &lt;t&gt; - brokerd</title>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    for name, value in DATA_HEADERS.items():
        assert request.responseHeaders.getRawHeaders(name) == [value]
    assert b"script-src" not in DATA_HEADERS[b"content-security-policy"]


def test_method_not_allowed_names_the_methods_served() -> None:
    request = DummyRequest([b""])
    body = method_not_allowed(request, b"GET, POST")
    assert request.responseCode == 405
    assert request.responseHeaders.getRawHeaders(b"allow") == [b"GET, POST"]
    assert body == b"Method not allowed here: GET, POST only.\n"


def test_urls_quote_names_and_arguments() -> None:
    assert topic_href("a/b c", "messages") == "/topics/a%2Fb%20c/messages"
    assert url("/x", {"q": "a&b", "n": "1"}) == "/x?q=a%26b&n=1"
    assert url("/x") == "/x"


def test_table_facts_and_hidden_fields() -> None:
    assert flat(table(["a"], [], empty="Nothing.")) == '<p class="muted">Nothing.</p>'
    html = flat(table(["name", "size"], [tags.tr(tags.td("x"), tags.td("1"))],
                      empty="-", numeric=[1]))
    assert '<th>name</th><th class="num">size</th>' in html and "<td>x</td>" in html
    assert flat(facts([("Offset", "5")])) == '<dl class="facts"><dt>Offset</dt><dd>5</dd></dl>'
    assert [flat(t) for t in hidden({"csrf": "t\"k"})] == [
        '<input type="hidden" name="csrf" value="t&quot;k" />'
    ]
