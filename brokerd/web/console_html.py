# -*- test-case-name: tests.web.test_console_html -*-
"""The console's page shell and HTML helpers, in :mod:`twisted.web.template`: the
document around a page body (inline CSS, the small live-refresh script and the headers
that go with it), table cells, links to topics and groups, and number formats. Every
text is a string in a tag tree and the flattener escapes it, so a group id's
``<script>`` or quote is inert by construction, not by remembering to escape.

The refresh script fetches the page's body again every :data:`REFRESH_SECONDS` (the same
URL with ``?fragment=1``) and swaps it in; without JavaScript the page is complete and a
``<noscript>`` refresh reloads it. No external assets: the Content-Security-Policy allows
nothing but this page's own style, its one script (by hash) and requests to its own
origin. What this module does not do: know about topics or groups (see
:mod:`brokerd.web.console_pages`).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Generic, TypeVar
from urllib.parse import quote

import attrs
from twisted.python.failure import Failure
from twisted.web.template import Flattenable, Tag, flatten, tags

from brokerd.net.twisted_state import void_elements

#: The elements Twisted's flattener closes with " />" (see brokerd.net.twisted_state).
_VOID_ELEMENTS = void_elements()
#: Seconds between two live refreshes (the sampler's interval: faster shows nothing new).
REFRESH_SECONDS = 5
#: The query argument that asks for the page body alone (the refresh script's request).
FRAGMENT_ARG = b"fragment"

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:0;color:#1b1f23;
background:#f6f8fa}
header{display:flex;gap:1.5em;align-items:baseline;padding:.6em 1.2em;background:#24292f;
color:#fff}
header a{color:#fff;text-decoration:none}header .brand{font-weight:700;font-size:1.2em}
header #status{margin-left:auto;font-size:.85em;color:#c9d1d9}
main{padding:.5em 1.2em 2em}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:.2em 1em 1em;
margin:1em 0}
h1{font-size:1.4em;margin:.6em 0 .2em}h2{font-size:1.1em;margin:.8em 0 .4em}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.25em .6em;border-bottom:1px solid #eaeef2;vertical-align:middle}
th{font-weight:600;color:#57606a;font-size:.9em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.offline td{background:#ffebe9}
.muted{color:#57606a}.stamp{color:#57606a;font-size:.85em;margin:.4em 0}
.bad{color:#cf222e;font-weight:600}.good{color:#1a7f37}
.tag{font-size:.75em;background:#ddf4ff;color:#0969da;border-radius:1em;padding:0 .5em}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dl.facts dt{color:#57606a}dl.facts dd{margin:0}
dl.settings{columns:3 24em;column-gap:2em;margin:0;font-size:.9em}
dl.settings div{break-inside:avoid;display:flex;justify-content:space-between;gap:1em;
border-bottom:1px solid #eaeef2;padding:.15em 0}
dl.settings dt{color:#57606a}dl.settings dd{margin:0;overflow-wrap:anywhere;text-align:right}
figure.chart{margin:.5em 0}ul.legend{list-style:none;padding:0;margin:.2em 0;display:flex;
gap:1em;flex-wrap:wrap;font-size:.85em}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em;border-radius:2px}
svg text{fill:#57606a;font-family:inherit}
"""

#: Swaps in a fresh body every few seconds; marks the body with how many refreshes
#: succeeded (``data-refreshes``) and says in the header whether the page is live. It
#: skips a beat while the tab is hidden or while the previous request is still out, so
#: forgotten tabs and a slow broker do not pile up requests.
SCRIPT = (
    "(function(){var main=document.getElementById('live'),"
    "status=document.getElementById('status');if(!main||!window.fetch)return;"
    "var n=0,busy=false;"
    "function done(){busy=false;}"
    "function tick(){if(busy||document.hidden)return;busy=true;"
    "var u=new URL(location.href);u.searchParams.set('fragment','1');"
    "fetch(u,{cache:'no-store'}).then(function(r){if(!r.ok)throw new Error('HTTP '+r.status);"
    "return r.text();}).then(function(t){main.innerHTML=t;n+=1;"
    "document.body.setAttribute('data-refreshes',String(n));"
    "status.textContent='live, updated '+new Date().toLocaleTimeString();})"
    ".catch(function(e){status.textContent='not updating ('+e.message+')';})"
    ".then(done,done);}"
    f"setInterval(tick,{REFRESH_SECONDS * 1000});}})();"
)
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

#: Response headers of every console page.
HEADERS: dict[bytes, bytes] = {
    b"content-type": b"text/html; charset=utf-8",
    b"cache-control": b"no-store",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    b"content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{_SCRIPT_HASH}'; connect-src 'self'; img-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ).encode(),
}


def document(title: str, body: Flattenable) -> Tag:
    """The whole page around ``body`` (a tag tree; the flattener escapes its texts)."""
    return tags.html(lang="en")(
        tags.head(
            tags.meta(charset="utf-8"),
            tags.meta(name="viewport", content="width=device-width, initial-scale=1"),
            tags.title(f"{title} - brokerd"),
            tags.noscript(
                tags.meta(**{"http-equiv": "refresh", "content": str(REFRESH_SECONDS * 2)})
            ),
            tags.style(CSS),
        ),
        tags.body(**{"data-refreshes": "0"})(
            tags.header(
                tags.a("brokerd", class_="brand", href="/"),
                tags.nav(
                    tags.a("Topics", href="/#topics"), " \u00b7 ",
                    tags.a("Groups", href="/#groups"), " \u00b7 ",
                    tags.a("Schemas", href="/schemas"), " \u00b7 ",
                    tags.a("Broker", href="/#broker"),
                ),
                tags.span(f"refreshes every {REFRESH_SECONDS} s", id="status"),
            ),
            Tag("main", attributes={"id": "live"})(body),
            tags.script(SCRIPT),
        ),
    )


def flat(tree: Flattenable) -> bytes:
    """``tree`` as UTF-8 markup, now, byte for byte what :func:`twisted.web.template.flatten`
    writes of it.

    The live pages are big (the overview of a few hundred topics is thousands of
    tags) and are rendered again every few seconds per open tab, so trees of tags, text,
    lists and tuples, which is all the console builds, take a direct walk; anything
    else (a renderer, a slot, a Deferred, a generator) goes through Twisted's flattener,
    whose trampolining made the overview of 200 topics about a fifth slower to render
    than the strings it replaced. A tree that waits on a Deferred is a bug here (the
    page is answered synchronously), and says so."""
    out: list[str] = []
    try:
        _walk(tree, out)
    except _NotPlain:
        return _flattened(tree)
    return "".join(out).encode("utf-8")


class _NotPlain(Exception):
    """The tree holds something only Twisted's flattener knows how to write."""


def _text(data: str) -> str:
    # escapeForContent's three characters, on str: encoding once at the end is cheaper.
    return data.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _walk(root: Flattenable, out: list[str]) -> None:
    if isinstance(root, str):
        out.append(_text(root))
    elif isinstance(root, Tag):
        if root.render is not None or not isinstance(root.tagName, str):
            raise _NotPlain
        name = root.tagName
        if not name:
            _walk(root.children, out)
            return
        out.append("<" + name)
        for key, value in root.attributes.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise _NotPlain
            out.append(f' {key}="{_text(value).replace(chr(34), "&quot;")}"')
        # Twisted's own list of the elements it closes with " />" (this walk must write
        # what its flattener writes; the tests compare the two).
        if root.children or name not in _VOID_ELEMENTS:
            out.append(">")
            for child in root.children:
                _walk(child, out)
            out.append(f"</{name}>")
        else:
            out.append(" />")
    elif isinstance(root, (list, tuple)):
        for child in root:
            _walk(child, out)
    else:
        raise _NotPlain


def _flattened(tree: Flattenable) -> bytes:
    out: list[bytes] = []
    done: list[object] = []
    flatten(None, tree, out.append).addBoth(done.append)
    if not done:
        raise RuntimeError("a console page's tree waited on a Deferred")
    if isinstance(done[0], Failure):
        done[0].raiseException()
    return b"".join(out)


def stamp(render: int, now: float) -> Tag:
    """The line at the top of every body: when it was rendered, and a counter that tells
    a fresh body from an old one."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    return tags.p(f"as of {when}", class_="stamp", id="snapshot", **{"data-render": str(render)})


# -- cells -----------------------------------------------------------------------------


def cell(content: Flattenable, *, num: bool = False) -> Tag:
    """A table cell of ``content`` (text or tags; the flattener escapes the text)."""
    return tags.td(content, class_="num") if num else tags.td(content)


def table(
    headers: Sequence[str],
    rows: Iterable[Tag],
    *,
    empty: str,
    numeric: Collection[int] = (),
    explained: Mapping[int, str] | None = None,
) -> Tag:
    """A table of ``rows`` (each a ``tr``), or the ``empty`` sentence when there are
    none. The headers of the ``numeric`` columns (indexes) are right-aligned like their
    figures; a header in ``explained`` (by index) carries that text as its tooltip."""
    body = list(rows)
    if not body:
        return tags.p(empty, class_="muted")
    notes = explained or {}

    def header(i: int, text: str) -> Tag:
        label: Flattenable = explain(text, notes[i]) if i in notes else text
        return tags.th(label, class_="num") if i in numeric else tags.th(label)

    head = [header(i, h) for i, h in enumerate(headers)]
    return tags.table(tags.thead(tags.tr(*head)), tags.tbody(*body))


_Row = TypeVar("_Row")


@attrs.frozen
class Column(Generic[_Row]):
    """One column of a :func:`columns_table`: its heading and each row's cell content
    (``num``: right-aligned figures, heading too)."""

    heading: str
    content: Callable[[_Row], Flattenable]
    num: bool = False


def columns_table(columns: Sequence[Column[_Row]], items: Iterable[_Row], *, empty: str) -> Tag:
    """A :func:`table` of one row per item, its cells and headings declared once per
    column."""
    return table(
        [c.heading for c in columns],
        (tags.tr(*(cell(c.content(item), num=c.num) for c in columns)) for item in items),
        empty=empty,
        numeric={i for i, c in enumerate(columns) if c.num},
    )


def explain(label: str, why: str) -> Tag:
    """``label`` with ``why`` as its tooltip (an ``abbr``, dotted underline)."""
    return tags.abbr(label, title=why)


def topic_link(name: str) -> Tag:
    return tags.a(name, href=f"/topics/{quote(name, safe='')}")


def group_link(group_id: str) -> Tag:
    return tags.a(group_id, href=f"/groups/{quote(group_id, safe='')}")


# -- figures ---------------------------------------------------------------------------


def count(value: int) -> str:
    return f"{value:,}"


def size(value: int) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 20.0 MiB."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{value} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def per_second(value: float | None) -> str:
    """A rate, or a dash while the history is too short for one."""
    if value is None:
        return "\u2013"
    if value >= 100:
        return f"{value:,.0f}/s"
    return f"{value:.1f}/s"


def duration(seconds: float) -> str:
    """3d 4h, 2h 5m, 4m 10s, 12s."""
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


__all__ = [
    "FRAGMENT_ARG",
    "HEADERS",
    "REFRESH_SECONDS",
    "SCRIPT",
    "Column",
    "cell",
    "columns_table",
    "count",
    "document",
    "duration",
    "explain",
    "flat",
    "group_link",
    "per_second",
    "size",
    "stamp",
    "table",
    "topic_link",
]
